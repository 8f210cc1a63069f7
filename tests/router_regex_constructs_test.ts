// Copyright the stellarator authors. MIT license.
// Issue 11, part 1: no pattern registers only to match nothing.
import { assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { AsgiRouter, InvalidRoutePattern, Route } from "@stellarator/stellarator/router";

const noop = () => {};

function router(pattern: string): AsgiRouter {
  return new AsgiRouter({ routes: [new Route(pattern, { handler: noop })] });
}

function refused(pattern: string): InvalidRoutePattern {
  return assertThrows(() => router(pattern), InvalidRoutePattern) as InvalidRoutePattern;
}

Deno.test("Route() drops a ^ and $ that restate the variable's bounds (issue 11's dead routes)", async (t) => {
  const cases: [pattern: string, path: string, context: Record<string, string>][] = [
    ["/api/{version:^[a-z]{2}}/data", "/api/ab/data", { version: "ab" }],
    ["/y/{a:^\\d+$}.png", "/y/12.png", { a: "12" }],
    ["/z/{a:\\d+$}x", "/z/12x", { a: "12" }],
    ["/alt/{a:^ab$|^c$}.x", "/alt/c.x", { a: "c" }],
    ["/g/{a:(^\\d+)$}", "/g/7", { a: "7" }],
  ];
  for (const [pattern, path, context] of cases) {
    await t.step(pattern, () => assertEquals(router(pattern).match(path)?.context, context));
  }
  // Same shape as the pattern without them.
  assertEquals(router("/y/{a:^\\d+$}.png").toString(), router("/y/{a:\\d+}.png").toString());
});

Deno.test("Route() keeps $ inside a lookahead of the last variable as the end of the path", () => {
  const r = router("/u/{id:(?!new$)[a-z]+}");
  assertEquals(r.match("/u/new"), undefined);
  assertEquals(r.match("/u/newer")?.context, { id: "newer" });
});

Deno.test("Route() refuses anchors that can never hold, naming the variable and the fix", async (t) => {
  const cases: [pattern: string, position: number, text: string][] = [
    ["/a/{x:\\d+^}", 9, 'the regex of "x" has "^" where characters of the variable can come'],
    ["/a/{x:a|b^c}", 9, 'the regex of "x" has "^"'],
    ["/a/{x:(?!new$)[a-z]+}/edit", 12, 'the regex of "x" has "$" where text must follow'],
    ["/a/{x:a$b}", 7, 'the regex of "x" has "$"'],
  ];
  for (const [pattern, position, text] of cases) {
    await t.step(pattern, () => {
      const error = refused(pattern);
      assertEquals(error.position, position);
      assertStringIncludes(error.reason, text);
      assertStringIncludes(error.reason, "remove it");
    });
  }
});

Deno.test("Route() refuses \\b and \\B at a variable's edge and accepts them inside", async (t) => {
  for (
    const pattern of ["/v{n:\\b\\d+}", "/a/{x:\\w+\\b}.png", "/a/{x:\\B\\w+}", "/a/{x:(?=\\b)\\w}"]
  ) {
    await t.step(pattern, () => {
      const error = refused(pattern);
      assertStringIncludes(error.reason, "at an edge of the variable");
      assertEquals(pattern[error.position], "\\");
    });
  }
  const r = router("/a/{x:\\w+\\b-\\b\\w+}");
  assertEquals(r.match("/a/ab-cd")?.context, { x: "ab-cd" });
});

Deno.test("Route() refuses a lookbehind that looks before the variable, accepts one inside", () => {
  const error = refused("/a/{x:(?<=a/)\\d+}");
  assertEquals(error.position, 6);
  assertStringIncludes(error.reason, 'the lookbehind "(?<=a/)", which can look at text before');
  refused("/a/{x:\\d?(?<=\\d\\d)}");
  const r = router("/a/{x:\\d\\d(?<!00)}");
  assertEquals(r.match("/a/12")?.context, { x: "12" });
  assertEquals(r.match("/a/00"), undefined);
});

Deno.test("Route() refuses backreferences and named groups, naming the variable", () => {
  const backreference = refused("/a/{x:(a)\\1}");
  assertEquals(backreference.position, 9);
  assertStringIncludes(backreference.reason, 'the regex of "x" has the backreference "\\1"');
  assertStringIncludes(refused("/a/{x:(?<n>a)\\k<n>}").reason, 'the named group "(?<n>"');
});

// Review of fe16759, which cut the regex parts the ReDoS guard quotes to 120 code units: the
// refusals of a lookbehind, a named group and a backreference to one still quoted them whole,
// 5 kB for a 5 kB one.
Deno.test("Route() quotes a long lookbehind, group name or backreference cut short", async (t) => {
  const cases: [name: string, regex: string, quoted: string][] = [
    ["lookbehind", `(?<=${"b".repeat(5000)})z`, 'the lookbehind "(?<=bbb'],
    ["named group", `(?<${"n".repeat(5000)}>a)`, 'the named group "(?<nnn'],
    [
      "backreference",
      `\\k<${"n".repeat(5000)}>(?<${"n".repeat(5000)}>a)`,
      'backreference "\\k<nnn',
    ],
  ];
  for (const [name, regex, quoted] of cases) {
    await t.step(name, () => {
      const error = refused(`/a/{x:${regex}}`);
      assertEquals(error.position, 6);
      assertStringIncludes(error.reason, quoted);
      assertStringIncludes(error.reason, '…"');
      assertEquals(error.message.length < 600, true, `${error.message.length} characters`);
    });
  }
});
