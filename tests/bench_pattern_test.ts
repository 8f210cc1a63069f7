import { assertEquals, assertThrows } from "@std/assert";
import {
  comparePriority,
  parsePattern,
  type PeerSyntax,
  priorityKey,
  referenceMatcher,
  translatePattern,
} from "../bench/_pattern.ts";

Deno.test("parsePattern() splits literal text, plain, constrained and catch-all variables", () => {
  assertEquals(parsePattern("/files/{dir}/{name:[0-9]+}.png/{rest:*}"), [
    { kind: "literal", text: "/files/" },
    { kind: "var", name: "dir" },
    { kind: "literal", text: "/" },
    { kind: "var", name: "name", regex: "[0-9]+" },
    { kind: "literal", text: ".png/" },
    { kind: "catchall", name: "rest" },
  ]);
});

Deno.test("parsePattern() keeps balanced braces, escapes and character classes inside a regex", async (t) => {
  const cases: string[] = [
    "[0-9a-f]{8}-[0-9a-f]{4}",
    "[}{]+",
    "a\\}b",
    "(?:ab){2,3}",
  ];
  for (const regex of cases) {
    await t.step(regex, () => {
      assertEquals(parsePattern(`/u/{x:${regex}}/tail`), [
        { kind: "literal", text: "/u/" },
        { kind: "var", name: "x", regex },
        { kind: "literal", text: "/tail" },
      ]);
    });
  }
});

Deno.test("parsePattern() rejects malformed patterns with SyntaxError", async (t) => {
  const cases: [string, string][] = [
    ["users", 'Cannot parse pattern "users": it must start with "/"'],
    ["/a/{b", 'Cannot parse pattern "/a/{b": unclosed "{" at 3'],
    ["/a/b}", 'Cannot parse pattern "/a/b}": unmatched "}" at 4'],
    ["/a/{1b}", 'Cannot parse pattern "/a/{1b}": invalid name "1b" at 3'],
    ["/a/{b}{c}", 'Cannot parse pattern "/a/{b}{c}": adjacent variables at 6'],
  ];
  for (const [pattern, message] of cases) {
    await t.step(pattern, () => {
      assertThrows(() => parsePattern(pattern), SyntaxError, message);
    });
  }
});

Deno.test("translatePattern() writes each peer's syntax", async (t) => {
  const cases: [string, PeerSyntax, string, Record<string, string>][] = [
    ["/users/{id}/posts", "find-my-way", "/users/:id/posts", {}],
    ["/users/{id}/posts", "rou3", "/users/:id/posts", {}],
    ["/users/{id}/posts", "memoirist", "/users/:id/posts", {}],
    ["/users/{id}/posts", "hono", "/users/:id/posts", {}],
    ["/static/{path:*}", "find-my-way", "/static/*", { "*": "path" }],
    ["/static/{path:*}", "memoirist", "/static/*", { "*": "path" }],
    ["/static/{path:*}", "rou3", "/static/**:path", {}],
    ["/static/{path:*}", "hono", "/static/:path{.+}", {}],
    ["/n/{id:[0-9]+}", "find-my-way", "/n/:id([0-9]+)", {}],
    ["/n/{id:[0-9]+}", "rou3", "/n/:id([0-9]+)", {}],
    ["/n/{id:[0-9]+}", "hono", "/n/:id{[0-9]+}", {}],
    ["/{name}.{ext}", "find-my-way", "/:name.:ext", {}],
    ["/{name}.{ext}", "rou3", "/:name.:ext", {}],
    ["/a/{archive}_format/{ref}", "rou3", "/a/:archive\\_format/:ref", {}],
    ["/a/{x}:{y}", "rou3", "/a/:x\\::y", {}],
    ["/name:verb", "find-my-way", "/name::verb", {}],
  ];
  for (const [pattern, syntax, want, rename] of cases) {
    await t.step(`${syntax} ${pattern}`, () => {
      assertEquals(translatePattern(pattern, syntax), { ok: true, pattern: want, rename });
    });
  }
});

Deno.test("translatePattern() gives the reason when a peer cannot express a pattern", async (t) => {
  const cases: [string, PeerSyntax, string][] = [
    ["/n/{id:[0-9]+}", "memoirist", 'memoirist has no regex constraints: "/n/{id:[0-9]+}"'],
    [
      "/{name}.{ext}",
      "memoirist",
      'memoirist takes a variable only as a whole segment: "/{name}.{ext}"',
    ],
    ["/{name}.{ext}", "hono", 'hono takes a variable only as a whole segment: "/{name}.{ext}"'],
    [
      "/a/{archive}_format/{ref}",
      "find-my-way",
      'find-my-way ends a parameter name only at "-", "." or "/": "/a/{archive}_format/{ref}"',
    ],
    [
      "/f/{rest:*}/tail",
      "rou3",
      'rou3 takes a catch-all only as a whole last segment: "/f/{rest:*}/tail"',
    ],
    ["/f/x{rest:*}", "hono", 'hono takes a catch-all only as a whole last segment: "/f/x{rest:*}"'],
    ["/a:b", "memoirist", 'memoirist would read literal "/a:b" in "/a:b" as syntax'],
    ["/a/{p:.+/x}", "rou3", 'rou3 regexes see one segment: "/a/{p:.+/x}"'],
  ];
  for (const [pattern, syntax, reason] of cases) {
    await t.step(`${syntax} ${pattern}`, () => {
      assertEquals(translatePattern(pattern, syntax), { ok: false, reason });
    });
  }
});

Deno.test("priorityKey() orders literal text, then constrained, plain and catch-all variables", () => {
  const patterns = ["/u/{rest:*}", "/u/{id}", "/u/new", "/u/{n:[0-9]+}"];
  const sorted = [...patterns].sort((a, b) => comparePriority(priorityKey(a), priorityKey(b)));
  assertEquals(sorted, ["/u/new", "/u/{n:[0-9]+}", "/u/{id}", "/u/{rest:*}"]);
});

Deno.test("referenceMatcher() prefers a static segment over a variable whatever the order", () => {
  const match = referenceMatcher(["/users/{id}", "/users/new"]);
  assertEquals(match("/users/new"), { index: 1, params: {} });
  assertEquals(match("/users/newer"), { index: 0, params: { id: "newer" } });
});

Deno.test("referenceMatcher() falls back to the next candidate (issue 3 backtracking cases)", async (t) => {
  await t.step("/text/hellos/test", () => {
    const match = referenceMatcher(["/text/hello", "/text/{e}/test", "/{c}"]);
    assertEquals(match("/text/hellos/test"), { index: 1, params: { e: "hellos" } });
  });
  await t.step("/secret/978", () => {
    const match = referenceMatcher(["/{object}/{id}", "/secret/{id}/path"]);
    assertEquals(match("/secret/978"), { index: 0, params: { object: "secret", id: "978" } });
  });
  await t.step("/files/123.png and /files/abc.png", () => {
    const match = referenceMatcher(["/files/{name:[0-9]+}.png", "/files/{other}"]);
    assertEquals(match("/files/123.png"), { index: 0, params: { name: "123" } });
    assertEquals(match("/files/abc.png"), { index: 1, params: { other: "abc.png" } });
  });
});

Deno.test("referenceMatcher() misses on a failed regex and on empty variables", () => {
  const match = referenceMatcher(["/other_handler/{name:[a-z1-9]+}", "/u/{id}/posts", "/{id}"]);
  assertEquals(match("/other_handler/Bob"), undefined);
  assertEquals(match("/u//posts"), undefined);
  assertEquals(match("/"), undefined);
});

Deno.test("referenceMatcher() ignores one trailing slash only when relaxed", () => {
  const patterns = ["/claw/", "/repos/{sha}/"];
  const strict = referenceMatcher(patterns);
  const relaxed = referenceMatcher(patterns, { trailingSlash: "relaxed" });
  assertEquals(strict("/claw"), undefined);
  assertEquals(strict("/claw/"), { index: 0, params: {} });
  assertEquals(relaxed("/claw"), { index: 0, params: {} });
  assertEquals(relaxed("/repos/abc"), { index: 1, params: { sha: "abc" } });
  assertEquals(relaxed("/repos/abc//"), undefined);
});

Deno.test("referenceMatcher() keeps a user regex's own groups out of the context", () => {
  const match = referenceMatcher(["/d/{day:(0[1-9]|[12][0-9])}/{rest}"]);
  assertEquals(match("/d/07/x"), { index: 0, params: { day: "07", rest: "x" } });
});
