// Copyright the stellarator authors. MIT license.
// The 143 GitHub API routes and the four hard routes, registered together.
import { assertEquals } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { ReferenceRouter, tokenize } from "./_reference.ts";

async function readRoutes(name: string): Promise<string[]> {
  const text = await Deno.readTextFile(new URL(`../bench/routes/${name}`, import.meta.url));
  return text.split("\n").map((line) => line.trim()).filter((line) => line !== "");
}

const github = await readRoutes("github-api-routes.txt");
const hard = await readRoutes("hard-routes.txt");

/** The pattern with every variable replaced by `value`, and the expected context. */
function example(pattern: string, value: string): [string, Record<string, string>] {
  let path = "";
  const context: Record<string, string> = {};
  for (const token of tokenize(pattern)) {
    if (token.type === "literal") path += token.text;
    else {
      path += value;
      context[token.name] = value;
    }
  }
  return [path, context];
}

Deno.test("AsgiRouter.match() routes each GitHub and hard route's own example path to it", async (t) => {
  assertEquals(github.length, 143);
  assertEquals(hard.length, 4);
  for (const order of ["hard routes first", "GitHub routes first"]) {
    const patterns = order === "hard routes first" ? [...hard, ...github] : [...github, ...hard];
    const router = new AsgiRouter({
      routes: patterns.map((pattern) => new Route(pattern, { handler: () => pattern })),
    });
    await t.step(order, () => {
      for (const pattern of patterns) {
        const [path, context] = example(pattern, "abc");
        const match = router.match(path);
        assertEquals(match?.routes[0]?.path, pattern, `path ${path}`);
        assertEquals(match?.context, context, `context of ${path}`);
      }
    });
  }
});

Deno.test("AsgiRouter.match() agrees with the reference on GitHub paths and near misses", () => {
  const patterns = [...hard, ...github];
  const router = new AsgiRouter({
    routes: patterns.map((pattern) => new Route(pattern, { handler: () => pattern })),
  });
  const reference = new ReferenceRouter(patterns);
  const values = ["abc", "a.b", "a...b", "a:b...c:d", "x_format", "y_user", "", "a/b", "🦀"];
  let checked = 0;
  for (const pattern of patterns) {
    for (const value of values) {
      const [path] = example(pattern, value);
      for (const candidate of [path, path + "/", path + "x", path.slice(0, -1)]) {
        const want = reference.match(candidate);
        const got = router.match(candidate);
        assertEquals(got?.routes.map((route) => route.path), want?.patterns, candidate);
        if (want !== undefined) assertEquals(got?.context, want.context, candidate);
        checked++;
      }
    }
  }
  assertEquals(checked, patterns.length * values.length * 4);
});

Deno.test("AsgiRouter.match() handles the hard routes' variables that share a segment", () => {
  const router = new AsgiRouter({
    routes: hard.map((pattern) => new Route(pattern, { handler: () => pattern })),
  });
  const cases: [string, string, Record<string, string>][] = [
    ["/repos/o/r/compare/main...dev", hard[0]!, {
      owner: "o",
      repo: "r",
      base: "main",
      head: "dev",
    }],
    ["/repos/o/r/compare/v1.0...v1.1", hard[0]!, {
      owner: "o",
      repo: "r",
      base: "v1.0",
      head: "v1.1",
    }],
    ["/repos/o/r/compare/a:main...b:dev", hard[1]!, {
      owner: "o",
      repo: "r",
      user1: "a",
      branch1: "main",
      user2: "b",
      branch2: "dev",
    }],
    ["/repos/o/r/tar_format/v2", hard[2]!, { owner: "o", repo: "r", archive: "tar", ref: "v2" }],
    ["/users/ada/following/bob_user", hard[3]!, { username: "ada", target: "bob" }],
    ["/users/ada/following/bob_user_user", hard[3]!, { username: "ada", target: "bob_user" }],
  ];
  for (const [path, pattern, context] of cases) {
    assertEquals(router.match(path)?.routes[0]?.path, pattern, path);
    assertEquals(router.match(path)?.context, context, path);
  }
  assertEquals(router.match("/repos/o/r/compare/main..dev"), undefined);
  assertEquals(router.match("/users/ada/following/_user"), undefined);
});
