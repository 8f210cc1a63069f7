// Copyright the stellarator authors. MIT license.
// The matching rules of router.ts's module doc, one test per rule, plus the public API.
import { assert, assertEquals, assertInstanceOf, assertRejects, assertThrows } from "@std/assert";
import {
  AsgiRouter,
  type AsgiRouterOptions,
  MethodNotAllowed,
  Route,
  RouteConflict,
  type RouteMatch,
  UnknownEndpoint,
} from "../router.ts";

function noop(): void {}

/** A router of GET routes, in the order given. */
function routerOf(patterns: readonly string[], options: AsgiRouterOptions = {}): AsgiRouter {
  return new AsgiRouter({
    ...options,
    routes: patterns.map((pattern) => new Route(pattern, { handler: noop })),
  });
}

/** The matched pattern and the context as a plain object, or undefined. */
function lookup(router: AsgiRouter, path: string): [string, Record<string, string>] | undefined {
  const match = router.match(path);
  return match === undefined ? undefined : [match.routes[0]!.path, { ...match.context }];
}

Deno.test("AsgiRouter.match() [rule 1, reference semantics] reads a pattern as one anchored regex with greedy variables", async (t) => {
  const router = routerOf([
    "/files/{name}.{ext}",
    "/compare/{base}...{head}",
    "/archive/{archive}_format/{ref}",
  ]);
  const cases: [string, [string, Record<string, string>] | undefined][] = [
    ["/files/a.b.c", ["/files/{name}.{ext}", { name: "a.b", ext: "c" }]],
    ["/files/a.b", ["/files/{name}.{ext}", { name: "a", ext: "b" }]],
    ["/files/ab", undefined],
    ["/files/.b", undefined],
    ["/compare/a...b...c", ["/compare/{base}...{head}", { base: "a...b", head: "c" }]],
    ["/compare/a....b", ["/compare/{base}...{head}", { base: "a.", head: "b" }]],
    ["/archive/zip_format_format/main", [
      "/archive/{archive}_format/{ref}",
      { archive: "zip_format", ref: "main" },
    ]],
  ];
  for (const [path, expected] of cases) {
    await t.step(path, () => assertEquals(lookup(router, path), expected));
  }
});

Deno.test("AsgiRouter.match() [rule 1, reference semantics] gives regexes of variables the engine's own semantics", async (t) => {
  await t.step("a lazy quantifier keeps its lazy choice", () => {
    // Quadratic on hostile paths, so refused by default (router_redos_test.ts).
    const router = routerOf(["/{a:[a-z.]+?}.{b}"], { allowUnsafeRegex: true });
    assertEquals(lookup(router, "/x.y.z"), ["/{a:[a-z.]+?}.{b}", { a: "x", b: "y.z" }]);
  });
  await t.step("alternation order decides, not length", () => {
    const router = routerOf(["/{a:x|xy}{b:[a-z]*}/end".replace("}{", "}-{")]);
    assertEquals(lookup(router, "/xy-z/end"), ["/{a:x|xy}-{b:[a-z]*}/end", { a: "xy", b: "z" }]);
  });
  await t.step("braces, classes and groups of its own", () => {
    const router = routerOf([
      "/uid/{uid:[0-9a-f]{8}-[0-9a-f]{4}}",
      "/set/{set:[{}]+}",
      "/g/{a:(x)(y)?}.{b:(z+)}",
    ]);
    assertEquals(lookup(router, "/uid/0123abcd-ef01"), [
      "/uid/{uid:[0-9a-f]{8}-[0-9a-f]{4}}",
      { uid: "0123abcd-ef01" },
    ]);
    assertEquals(lookup(router, "/set/{}{"), ["/set/{set:[{}]+}", { set: "{}{" }]);
    assertEquals(lookup(router, "/g/xy.zz"), ["/g/{a:(x)(y)?}.{b:(z+)}", { a: "xy", b: "zz" }]);
  });
  await t.step("a regex that allows / spans segments", () => {
    const router = routerOf(["/docs/{page:.+}/edit", "/docs/{page:.+}"]);
    assertEquals(lookup(router, "/docs/a/b/edit"), ["/docs/{page:.+}/edit", { page: "a/b" }]);
    assertEquals(lookup(router, "/docs/a/b"), ["/docs/{page:.+}", { page: "a/b" }]);
  });
  await t.step("lookarounds see the whole path", () => {
    const router = routerOf(["/u/{id:(?!new$)[a-z]+}", "/u/{other}"]);
    assertEquals(lookup(router, "/u/new"), ["/u/{other}", { other: "new" }]);
    assertEquals(lookup(router, "/u/newer"), ["/u/{id:(?!new$)[a-z]+}", { id: "newer" }]);
  });
});

Deno.test("AsgiRouter.match() [rule 2, priority] prefers a static segment over a variable, whatever the order", async (t) => {
  for (const patterns of [["/users/new", "/users/{id}"], ["/users/{id}", "/users/new"]]) {
    await t.step(patterns.join(" then "), () => {
      const router = routerOf(patterns);
      assertEquals(lookup(router, "/users/new"), ["/users/new", {}]);
      assertEquals(lookup(router, "/users/newer"), ["/users/{id}", { id: "newer" }]);
      assertEquals(lookup(router, "/users/ne"), ["/users/{id}", { id: "ne" }]);
    });
  }
});

Deno.test("AsgiRouter.match() [rule 2, priority] ranks constrained, then plain variables, then catch-alls", async (t) => {
  for (
    const patterns of [
      ["/f/{n:[0-9]+}", "/f/{name}", "/f/{rest:*}"],
      ["/f/{rest:*}", "/f/{name}", "/f/{n:[0-9]+}"],
    ]
  ) {
    await t.step(patterns.join(" then "), () => {
      const router = routerOf(patterns);
      assertEquals(lookup(router, "/f/42"), ["/f/{n:[0-9]+}", { n: "42" }]);
      assertEquals(lookup(router, "/f/x42"), ["/f/{name}", { name: "x42" }]);
      assertEquals(lookup(router, "/f/x/42"), ["/f/{rest:*}", { rest: "x/42" }]);
    });
  }
});

Deno.test("AsgiRouter.match() [rule 2, priority] prefers the constrained variable registered first at a place", () => {
  const router = routerOf(["/v/{hex:[0-9a-f]+}", "/v/{num:[0-9]+}"]);
  assertEquals(lookup(router, "/v/123"), ["/v/{hex:[0-9a-f]+}", { hex: "123" }]);
  const reversed = routerOf(["/v/{num:[0-9]+}", "/v/{hex:[0-9a-f]+}"]);
  assertEquals(lookup(reversed, "/v/123"), ["/v/{num:[0-9]+}", { num: "123" }]);
  assertEquals(lookup(reversed, "/v/12f"), ["/v/{hex:[0-9a-f]+}", { hex: "12f" }]);
});

Deno.test("AsgiRouter.match() [rule 2, priority] prefers the branch with more literal text after a variable", async (t) => {
  const hard = [
    "/c/{base}...{head}",
    "/c/{user1}:{branch1}...{user2}:{branch2}",
  ];
  for (const patterns of [hard, [...hard].reverse()]) {
    await t.step(patterns.join(" then "), () => {
      const router = routerOf(patterns);
      assertEquals(lookup(router, "/c/a:b...c:d"), [
        "/c/{user1}:{branch1}...{user2}:{branch2}",
        { user1: "a", branch1: "b", user2: "c", branch2: "d" },
      ]);
      assertEquals(lookup(router, "/c/a...c:d"), ["/c/{base}...{head}", {
        base: "a",
        head: "c:d",
      }]);
    });
  }
  await t.step("literal text beats the end of the pattern", () => {
    for (const patterns of [["/{name}", "/{name}.{ext}"], ["/{name}.{ext}", "/{name}"]]) {
      const router = routerOf(patterns);
      assertEquals(lookup(router, "/a.b"), ["/{name}.{ext}", { name: "a", ext: "b" }]);
      assertEquals(lookup(router, "/ab"), ["/{name}", { name: "ab" }]);
    }
  });
});

Deno.test("AsgiRouter.match() [rule 2, priority] weighs literal text in characters, so an emoji is one", async (t) => {
  // Found by a differential run against tests/_reference.ts: the tree weighed "😀" (two UTF-16
  // code units) as two characters, so "/{a}😀😀{b}" beat "/{a}.x.{b}", which carries three.
  const cases: [string, string[], string, Record<string, string>][] = [
    ["after a variable", ["/{a}.x.{b}", "/{a}😀😀{b}"], "/q😀😀y.x.z", { a: "q😀😀y", b: "z" }],
    ["below a shared literal", ["/{a}x.x.{b}", "/{a}x😀😀{b}"], "/qx😀😀x.x.z", {
      a: "qx😀😀",
      b: "z",
    }],
  ];
  for (const [name, patterns, path, context] of cases) {
    for (const order of [patterns, [...patterns].reverse()]) {
      await t.step(`${name}: ${order.join(" then ")}`, () => {
        assertEquals(lookup(routerOf(order), path), [patterns[0]!, context]);
      });
    }
  }
  // From the review of that fix: "😀" and "😁" share their first UTF-16 half, so the tree cuts
  // its label between the halves; the pair counts once, where its first half is. Counted as
  // code units (6) or as code points of each cut label ("\uD83D" and "\uDE00😀😀": 1 + 3),
  // the branch below the shared half outweighs ".x.y." (5); by characters it holds 4.
  await t.step("a label cut inside a surrogate pair counts the pair once", () => {
    const patterns = ["/{a}😀😀😀{b}", "/{a}😁.x.{b}", "/{a}.x.y.{b}"];
    const router = routerOf(patterns);
    assertEquals(lookup(router, "/p.x.y.😀😀😀q"), ["/{a}.x.y.{b}", { a: "p", b: "😀😀😀q" }]);
    assertEquals(lookup(router, "/p😁.x.q"), ["/{a}😁.x.{b}", { a: "p", b: "q" }]);
  });
  // Found by the order-independence property test (CI, seed 1767168662): "😁" took the weight of
  // the "😀" that shares its first half, so it beat "." with one character against one. Both
  // the tree's branches after a variable and the sort of a variable that can match "/" did so.
  // "{a:.+}" can match "/", so its routes are sorted as a list (the guard would refuse ".+."
  // before the sort is reached; the sort is what this checks).
  for (const variable of ["{a}", "{a:.+}"]) {
    await t.step(
      `an emoji is weighed alone, not with one sharing its first half: ${variable}`,
      () => {
        const patterns = [`/${variable}.{b}`, `/${variable}😀.x.{b}`, `/${variable}😁{b}`];
        const options = { allowUnsafeRegex: true };
        assertEquals(lookup(routerOf(patterns, options), "/p😁q.r")?.[0], patterns[0]);
        assertEquals(lookup(routerOf(patterns.toReversed(), options), "/p😁q.r")?.[0], patterns[2]);
      },
    );
  }
  await t.step("one emoji against one character is a tie, broken by registration order", () => {
    assertEquals(lookup(routerOf(["/{a}.{b}", "/{a}😀{b}"]), "/x😀y.z")?.[0], "/{a}.{b}");
    assertEquals(lookup(routerOf(["/{a}😀{b}", "/{a}.{b}"]), "/x😀y.z")?.[0], "/{a}😀{b}");
  });
});

Deno.test("AsgiRouter.match() [rule 2, priority] breaks a literal tie by registration order", () => {
  // "-" and "." carry one literal character each after {a}, and "/x-y.z" matches both.
  const dashFirst = routerOf(["/{a}-{b}", "/{a}.{b}"]);
  assertEquals(lookup(dashFirst, "/x-y.z"), ["/{a}-{b}", { a: "x", b: "y.z" }]);
  const dotFirst = routerOf(["/{a}.{b}", "/{a}-{b}"]);
  assertEquals(lookup(dotFirst, "/x-y.z"), ["/{a}.{b}", { a: "x-y", b: "z" }]);
});

Deno.test("AsgiRouter.match() [rule 3, backtracking] goes on to the next candidate when a deeper branch fails", async (t) => {
  await t.step("/text/hellos/test", () => {
    const router = routerOf(["/text/hello", "/text/{e}/test", "/{c}"]);
    assertEquals(lookup(router, "/text/hellos/test"), ["/text/{e}/test", { e: "hellos" }]);
    assertEquals(lookup(router, "/text/hello"), ["/text/hello", {}]);
    assertEquals(lookup(router, "/text"), ["/{c}", { c: "text" }]);
  });
  await t.step("/secret/978", () => {
    const router = routerOf(["/{object}/{id}", "/secret/{id}/path"]);
    assertEquals(lookup(router, "/secret/978"), ["/{object}/{id}", {
      object: "secret",
      id: "978",
    }]);
    assertEquals(lookup(router, "/secret/978/path"), ["/secret/{id}/path", { id: "978" }]);
  });
  await t.step("/files/123.png", () => {
    const router = routerOf(["/files/{name:[0-9]+}.png", "/files/{other}"]);
    assertEquals(lookup(router, "/files/123.png"), ["/files/{name:[0-9]+}.png", { name: "123" }]);
    assertEquals(lookup(router, "/files/abc.png"), ["/files/{other}", { other: "abc.png" }]);
  });
});

Deno.test("AsgiRouter.getRoute() [rule 4, failed regex] treats a regex failure as an unknown endpoint", () => {
  const router = routerOf(["/other_handler/{name:[a-z1-9]+}"]);
  assertEquals(lookup(router, "/other_handler/bob1"), [
    "/other_handler/{name:[a-z1-9]+}",
    { name: "bob1" },
  ]);
  const error = assertThrows(
    () => router.getRoute("/other_handler/Bob"),
    UnknownEndpoint,
    'No route matches "/other_handler/Bob"',
  ) as UnknownEndpoint;
  assertEquals(error.path, "/other_handler/Bob");
  assertEquals(error.reason, "no-route");
});

Deno.test("AsgiRouter.match() [rule 5, empty variables] never matches an empty variable unless its regex allows it", () => {
  const router = routerOf(["/u/{id}/posts", "/{id}", "/opt/{x:[a-z]*}/end"]);
  assertEquals(lookup(router, "/u//posts"), undefined);
  assertEquals(lookup(router, "/"), undefined);
  assertEquals(lookup(router, "/opt//end"), ["/opt/{x:[a-z]*}/end", { x: "" }]);
  assertEquals(routerOf(["/files/{rest:*}"]).match("/files/"), undefined);
});

Deno.test("AsgiRouter.match() [rule 6, trailing slash] ignores one trailing slash when relaxed, not when strict", async (t) => {
  await t.step("relaxed", () => {
    const router = routerOf(["/", "/claw/", "/paw", "/v/{id}/"]);
    assertEquals(lookup(router, "/claw"), ["/claw/", {}]);
    assertEquals(lookup(router, "/claw/"), ["/claw/", {}]);
    assertEquals(lookup(router, "/paw/"), ["/paw", {}]);
    assertEquals(lookup(router, "/v/1"), ["/v/{id}/", { id: "1" }]);
    assertEquals(lookup(router, "/v/1/"), ["/v/{id}/", { id: "1" }]);
    assertEquals(lookup(router, "/"), ["/", {}]);
    assertEquals(lookup(router, "/paw//"), undefined);
  });
  await t.step("strict", () => {
    const router = routerOf(["/", "/claw/", "/paw"], { trailingSlash: "strict" });
    assertEquals(lookup(router, "/claw"), undefined);
    assertEquals(lookup(router, "/claw/"), ["/claw/", {}]);
    assertEquals(lookup(router, "/paw/"), undefined);
    assertEquals(lookup(router, "/"), ["/", {}]);
    routerOf(["/claw/", "/claw"], { trailingSlash: "strict" });
  });
});

Deno.test("AsgiRouter.match() [rule 7, no decoding] matches the string it is given", () => {
  const router = routerOf(["/café/{name}", "/emoji/{e:.}"]);
  assertEquals(lookup(router, "/café/zoë"), ["/café/{name}", { name: "zoë" }]);
  assertEquals(lookup(router, "/caf%C3%A9/zoe"), undefined);
  assertEquals(lookup(router, "/café/a%2Fb"), ["/café/{name}", { name: "a%2Fb" }]);
  // The regexes use the u flag: "." is one code point, not one UTF-16 unit.
  assertEquals(lookup(router, "/emoji/🦀"), ["/emoji/{e:.}", { e: "🦀" }]);
});

Deno.test("AsgiRouter.match() [rule 8, length cap] ignores paths longer than maxPathLength", async (t) => {
  const router = routerOf(["/{a}/{b:.+}", "/c/{x}...{y}", "/d/{x}:{y}...{z}:{w}"]);
  await t.step("a 100 KB path returns undefined promptly", () => {
    const start = performance.now();
    assertEquals(router.match("/" + "a/".repeat(50_000)), undefined);
    assert(performance.now() - start < 50, "took too long");
  });
  await t.step("getRoute() says why", () => {
    const path = "/x".repeat(5000);
    const error = assertThrows(() => router.getRoute(path), UnknownEndpoint) as UnknownEndpoint;
    assertEquals(error.reason, "path-too-long");
    assertEquals(
      error.message,
      "Path of 10000 characters is longer than maxPathLength (8192), so no route matches it; " +
        "raise maxPathLength if such paths are legitimate",
    );
  });
  await t.step("the limit is an option", () => {
    const small = routerOf(["/{a}"], { maxPathLength: 4 });
    assertEquals(lookup(small, "/abc"), ["/{a}", { a: "abc" }]);
    assertEquals(small.match("/abcd"), undefined);
  });
});

Deno.test("AsgiRouter.match() [rule 8, length cap] stays fast on hostile paths of maximal length", async (t) => {
  const router = routerOf([
    "/repos/{owner}/{repo}/compare/{base}...{head}",
    "/repos/{owner}/{repo}/compare/{user1}:{branch1}...{user2}:{branch2}",
    "/n/{a}.{b}.{c}.{d}",
    "/r/{file:[a-z.]+}.{ext}",
    "/s/{file:.+}.{ext}",
  ], { allowUnsafeRegex: true }); // the last two are the quadratic ones the guard refuses
  // Near misses of about 8 KiB: the whole-route regexes of the first two routes take seconds
  // on 2 KB of ":..." (the engine retries every split); the tree's matchers stay linear, and
  // routes handed to the engine (a constrained variable followed by text) stay quadratic.
  const n = 8150;
  const hostile = [
    "/repos/o/r/compare/" + ":...".repeat(n / 4) + "/x",
    "/repos/o/r/compare/" + "a:".repeat(n / 2 - 100) + "...".repeat(60) + "x/",
    "/n/" + ".".repeat(n) + "/x",
    "/r/" + ".".repeat(n) + "/x",
    "/s/" + ".".repeat(n) + "/x",
  ];
  for (const path of hostile) {
    await t.step(`${path.slice(0, 24)}… (${path.length} characters)`, () => {
      const start = performance.now();
      router.match(path);
      const elapsed = performance.now() - start;
      assert(elapsed < 500, `took ${elapsed} ms`);
    });
  }
});

Deno.test("AsgiRouter.match() [rule 9, context objects] builds contexts where any variable name is a plain key", async (t) => {
  const check = (router: AsgiRouter) => {
    const context = router.match("/p/a/b/c")!.context;
    assertEquals(Object.getPrototypeOf(context), Object.prototype);
    assertEquals(Object.keys(context), ["__proto__", "constructor", "toString"]);
    assertEquals(Object.getOwnPropertyDescriptor(context, "__proto__")?.value, "a");
    assertEquals(context.constructor, "b");
    assertEquals(JSON.stringify(context), '{"__proto__":"a","constructor":"b","toString":"c"}');
    assertEquals(context, { ["__proto__"]: "a", constructor: "b", toString: "c" });
    assertEquals(router.match("/q/x")!.context.hasOwnProperty, "x");
    assertEquals(router.match("/")!.context, {});
    assertEquals(Object.hasOwn(router.match("/")!.context, "constructor"), false);
  };
  const patterns = ["/p/{__proto__}/{constructor}/{toString}", "/q/{hasOwnProperty}", "/"];
  await t.step("with generated builders", () => check(routerOf(patterns)));
  // Deno has no Object.prototype.__proto__ accessor, so this step cannot tell defineProperty
  // from plain assignment; in Node and browsers only defineProperty keeps "__proto__" a key.
  await t.step("where new Function is forbidden", () => {
    const original = globalThis.Function;
    globalThis.Function = function () {
      throw new EvalError("code generation from strings disallowed for this context");
    } as unknown as FunctionConstructor;
    let router: AsgiRouter;
    try {
      router = routerOf(patterns);
    } finally {
      globalThis.Function = original;
    }
    check(router);
  });
});

Deno.test("AsgiRouter.match() [rule 9, context objects] returns a fresh context per lookup", () => {
  const router = routerOf(["/u/{id}", "/"]);
  const first = router.match("/u/1")!;
  first.context.id = "changed";
  assertEquals(router.match("/u/1")!.context, { id: "1" });
  router.match("/")!.context.extra = "x";
  assertEquals(router.match("/")!.context, {});
});

Deno.test("AsgiRouter.match() gives every route of a shape, their methods and routeFor()", () => {
  const get = new Route("/items/{id}", { handler: () => "get" });
  const write = new Route("/items/{id}", { handler: () => "write", methods: ["put", "PATCH"] });
  const router = new AsgiRouter({ routes: [get, write] });
  const match: RouteMatch = router.match("/items/7")!;
  assertEquals(match.routes, [get, write]);
  assertEquals(match.allowed, ["GET", "PATCH", "PUT"]);
  assertEquals(match.routeFor("PUT"), write);
  assertEquals(match.routeFor("GET"), get);
  assertEquals(match.routeFor("DELETE"), undefined);
  assertEquals(match.routeFor("put"), undefined);
});

Deno.test("AsgiRouter.match() [rule 9, context objects] fills a shared shape's context under every route's names", () => {
  const router = new AsgiRouter({
    routes: [
      new Route("/x/{a}/{b}", { handler: noop }),
      new Route("/x/{c}/{b}", { handler: noop, methods: ["POST"] }),
    ],
  });
  assertEquals(router.match("/x/1/2")!.context, { a: "1", b: "2", c: "1" });
  // A name in another place would need two values in one context: refused when added (it used
  // to give "/x/{b}/{c}" the first route's "b"; tests/router_guard_regressions_test.ts).
  assertThrows(
    () => router.addRoute(new Route("/x/{b}/{d}", { handler: noop, methods: ["PUT"] })),
    RouteConflict,
    'puts the variable "b" in another place',
  );
});

Deno.test("AsgiRouter.match() sees routes added after earlier lookups", () => {
  const router = routerOf(["/{id}"]);
  assertEquals(lookup(router, "/new"), ["/{id}", { id: "new" }]);
  router.addRoute(new Route("/new", { handler: noop }));
  router.addRoute(new Route("/{id}.json", { handler: noop }));
  assertEquals(lookup(router, "/new"), ["/new", {}]);
  assertEquals(lookup(router, "/a.json"), ["/{id}.json", { id: "a" }]);
});

Deno.test("AsgiRouter.match() keeps routers apart when their lookups alternate", () => {
  // Same tree shapes, different label text: a lookup reading the other router's labels fails.
  const a = routerOf(["/alpha/{x}/items", "/beta", "/{n}.{e}"]);
  const b = routerOf(["/omega/{y}/parts", "/zeta", "/{m}-{f}"]);
  for (let round = 0; round < 3; round++) {
    assertEquals(lookup(a, "/alpha/1/items"), ["/alpha/{x}/items", { x: "1" }]);
    assertEquals(lookup(b, "/omega/2/parts"), ["/omega/{y}/parts", { y: "2" }]);
    assertEquals(lookup(a, "/beta"), ["/beta", {}]);
    assertEquals(lookup(b, "/zeta"), ["/zeta", {}]);
    assertEquals(lookup(a, "/omega/2/parts"), undefined);
    assertEquals(lookup(b, "/alpha/1/items"), undefined);
    assertEquals(lookup(a, "/x.y"), ["/{n}.{e}", { n: "x", e: "y" }]);
    assertEquals(lookup(b, "/x-y"), ["/{m}-{f}", { m: "x", f: "y" }]);
  }
});

Deno.test("AsgiRouter.match() builds the same contexts where new Function is forbidden", () => {
  const patterns = ["/users/{id}", "/users/{id}/posts/{post}", "/f/{n:[0-9]+}", "/{a}.{b}"];
  const paths = ["/users/7", "/users/7/posts/9", "/f/12", "/a.b", "/x.y.z"];
  const expected = paths.map((path) => lookup(routerOf(patterns), path));
  const original = globalThis.Function;
  globalThis.Function = function () {
    throw new EvalError("code generation from strings disallowed for this context");
  } as unknown as FunctionConstructor;
  try {
    // Key sets no other test uses, so no builder made earlier is reused.
    const router = routerOf(patterns.map((p) => p.replaceAll("{", "{csp_")));
    const renamed = expected.map((answer) =>
      answer === undefined ? undefined : [
        answer[0].replaceAll("{", "{csp_"),
        Object.fromEntries(Object.entries(answer[1]).map(([k, v]) => [`csp_${k}`, v])),
      ]
    );
    assertEquals(paths.map((path) => lookup(router, path)), renamed);
  } finally {
    globalThis.Function = original;
  }
});

Deno.test("AsgiRouter.match() finds a static child among many siblings, whatever their codes", async (t) => {
  // Wide nodes keep their children in a range table (close codes) or a list of pairs (codes
  // far apart, non-ASCII): both, with codes just outside the table's range.
  const groups: Record<string, string[]> = {
    letters: [..."abcdefghijklmnopqrstuvwxyz"].map((c) => `/l/${c}x`),
    "far apart": ["/p/!x", "/p/Ax", "/p/~x"],
    "non-ASCII": ["/u/ax", "/u/éx", "/u/中x", "/u/😀x", "/u/ÿx"],
    "few close": ["/c/bx", "/c/cx", "/c/dx"],
  };
  const misses = ["/l/`x", "/l/{x", "/l/ay", '/p/"x', "/p/}x", "/u/😁x", "/u/x", "/c/ax"];
  const patterns = Object.values(groups).flat();
  const router = routerOf([...patterns, "/l/{other}/{id}"]);
  for (const [name, group] of Object.entries(groups)) {
    await t.step(name, () => {
      for (const pattern of group) assertEquals(lookup(router, pattern), [pattern, {}]);
    });
  }
  await t.step("misses", () => {
    for (const path of misses) assertEquals(lookup(router, path), undefined, path);
    assertEquals(lookup(router, "/l/ax/7"), ["/l/{other}/{id}", { other: "ax", id: "7" }]);
  });
});
Deno.test("AsgiRouter.routes lists routes in registration order", () => {
  const routes = ["/b", "/a", "/{x}"].map((path) => new Route(path, { handler: noop }));
  const router = new AsgiRouter({ routes });
  assertEquals(router.routes, routes);
  assert(Object.isFrozen(router.routes));
  const extra = new Route("/c", { handler: noop });
  router.addRoute(extra);
  assertEquals(router.routes, [...routes, extra]);
});

Deno.test("AsgiRouter.getRoute() handles the seed's example routes", async (t) => {
  const calls: unknown[][] = [];
  const router = new AsgiRouter({
    routes: [
      new Route("/", { handler: (...args: unknown[]) => calls.push(["root", ...args]) }),
      new Route("/other_handler/{name:[a-z1-9]+}", {
        handler: (...args: unknown[]) => calls.push(["other", ...args]),
        methods: ["POST"],
      }),
    ],
  });
  const scope = { type: "http", method: "POST", path: "/other_handler/bob" };
  await t.step("the root has an empty context", async () => {
    const [handler, context] = router.getRoute("/");
    assertEquals(context, {});
    await handler(context, { ...scope, method: "GET" }, noop, noop, { method: "GET" });
    assertEquals(calls.pop()?.[0], "root");
  });
  await t.step("a variable route gets its context and the method", async () => {
    const [handler, context] = router.getRoute("/other_handler/bob");
    assertEquals(context, { name: "bob" });
    await handler(context, scope, noop, noop, { method: "POST" });
    assertEquals(calls.pop(), ["other", context, scope, noop, noop, { method: "POST" }]);
  });
  await t.step("the wrong method rejects with MethodNotAllowed", async () => {
    const [handler, context] = router.getRoute("/other_handler/bob");
    const error = await assertRejects(
      () => handler(context, scope, noop, noop, { method: "GET" }),
      MethodNotAllowed,
      'Method "GET" is not allowed on route "/other_handler/{name:[a-z1-9]+}"; use one of POST',
    ) as MethodNotAllowed;
    assertEquals(error.method, "GET");
    assertEquals(error.allowed, ["POST"]);
    const [root] = router.getRoute("/");
    await assertRejects(
      () => root({}, scope, noop, noop, { method: scope.method }),
      MethodNotAllowed,
    );
  });
  await t.step("a capital letter is an unknown endpoint", () => {
    assertThrows(() => router.getRoute("/other_handler/Bob"), UnknownEndpoint);
  });
});

Deno.test("AsgiRouter.getRoute() endpoint handlers take the method from their last argument", async (t) => {
  const seen: string[] = [];
  const router = new AsgiRouter({
    routes: ["GET", "POST", "PUT"].map((method) =>
      new Route("/", { handler: () => seen.push(method), methods: [method] })
    ),
  });
  const [handler] = router.getRoute("/");
  const call = handler as (...args: unknown[]) => Promise<unknown>;
  const cases: [string, unknown[], string][] = [
    ["after the ASGI arguments", [{}, { method: "PUT" }, noop, noop, { method: "POST" }], "POST"],
    ["alone", [{ method: "PUT" }], "PUT"],
    ["after a request object", [new Date(), { method: "POST" }], "POST"],
    ["with a null prototype", [1, Object.assign(Object.create(null), { method: "PUT" })], "PUT"],
  ];
  for (const [name, args, method] of cases) {
    await t.step(name, async () => {
      await call(...args);
      assertEquals(seen.pop(), method);
    });
  }
  // The router no longer reads an ASGI scope's method or falls back to "GET" (issue 12, point 9).
  const missing: [string, unknown[], string][] = [
    ["nothing", [], "undefined"],
    ["an ASGI call without options", [{}, { method: "PUT" }, noop, noop], "a function"],
    ["options without a method", [{}, { method: "PUT" }, { other: 1 }], "an object"],
    ["a class instance last", [{}, new Date()], "an object"],
  ];
  for (const [name, args, got] of missing) {
    await t.step(`rejects ${name} with TypeError`, async () => {
      await assertRejects(
        () => call(...args),
        TypeError,
        `Invalid last argument ${got} for the handler of route "/": pass the request method ` +
          `as { method }, e.g. handler(context, scope, receive, send, { method: scope.method })`,
      );
      assertEquals(seen, []);
    });
  }
});

Deno.test("AsgiRouter.getRoute() endpoint handlers settle like the route handler", async () => {
  const router = new AsgiRouter<() => unknown>({
    routes: [
      new Route("/sync", { handler: () => 1 }),
      new Route("/async", { handler: () => Promise.resolve(2) }),
      new Route("/throws", {
        handler: () => {
          throw new RangeError("boom");
        },
      }),
    ],
  });
  const get = { method: "GET" };
  assertEquals(await router.getRoute("/sync")[0](get), 1);
  assertEquals(await router.getRoute("/async")[0](get), 2);
  // A throwing handler becomes a rejection, never a synchronous throw.
  const pending = router.getRoute("/throws")[0](get);
  assertInstanceOf(pending, Promise);
  await assertRejects(() => pending, RangeError, "boom");
});

Deno.test("AsgiRouter.toString() draws the tree with route markers", () => {
  const router = new AsgiRouter({
    routes: [
      new Route("/", { handler: noop }),
      new Route("/users", { handler: noop }),
      new Route("/users/new", { handler: noop }),
      new Route("/users/{id}", { handler: noop, methods: ["GET", "DELETE"] }),
      new Route("/users/{id}/posts", { handler: noop }),
      new Route("/files/{name}.{ext}", { handler: noop }),
      new Route("/static/{path:*}", { handler: noop }),
    ],
  });
  assertEquals(
    router.toString(),
    [
      "/ ● GET",
      "├── users ● GET",
      "│   └── /",
      "│       ├── new ● GET",
      "│       └── {id} ● DELETE, GET",
      "│           └── /posts ● GET",
      "├── files/",
      "│   └── {name} ↺",
      "│       └── .",
      "│           └── {ext} ● GET",
      "└── static/",
      "    └── {path:*} ● GET",
    ].join("\n"),
  );
  assertEquals(new AsgiRouter().toString(), "/");
});

Deno.test("AsgiRouter.toString() draws whole characters where the tree cuts a UTF-16 pair", () => {
  // "😀" and "😁" share their first UTF-16 half, so the tree cuts its labels between the halves;
  // the drawing showed each half alone on a line (a lone surrogate, printed as "�"). Found by the
  // review of the fix that ranks such characters one by one after a variable.
  const router = routerOf(["/😀", "/😁", "/x😀y", "/x😁", "/{a}😀.{b}", "/{a}😁"]);
  const drawing = router.toString();
  assertEquals(drawing.isWellFormed(), true, drawing);
  assertEquals(
    drawing,
    [
      "/",
      "├── 😀 ● GET",
      "├── 😁 ● GET",
      "├── x",
      "│   ├── 😀y ● GET",
      "│   └── 😁 ● GET",
      "└── {a} ↺",
      "    ├── 😀.",
      "    │   └── {b} ● GET",
      "    └── 😁 ● GET",
    ].join("\n"),
  );
});

Deno.test("AsgiRouter.toString() draws a label holding a control character on one line, escaped", () => {
  // Fresh-eyes attack on the router (2026-11-29): a pattern may hold a newline (a path holds one
  // once "%0A" is decoded), and the drawing, one node a line, split that node's line in two, as
  // error messages did before they escaped the patterns they quote.
  const router = routerOf(["/a\nb", "/x/{v:a\nb|\n}", "/t\tu\u0085", "/z\u202ey"]);
  const drawing = router.toString();
  assertEquals(
    drawing,
    [
      "/",
      "├── a\\nb ● GET",
      "├── x/",
      "│   └── {v:a\\nb|\\n} ● GET",
      "├── t\\tu\\u0085 ● GET",
      "└── z\\u202ey ● GET",
    ].join("\n"),
  );
  assertEquals(router.match("/a\nb")?.routes[0]?.path, "/a\nb");
});

Deno.test("AsgiRouter.match() [rule 6, trailing slash] normalizes a doubled trailing slash once, in patterns and paths", () => {
  // Found by the property tests: "/b//" is stored as "/b/", which the path "/b/" (looked up as
  // "/b") must not reach.
  const router = routerOf(["/b//", "/"]);
  assertEquals(lookup(router, "/b/"), undefined);
  assertEquals(lookup(router, "/b//"), ["/b//", {}]);
  assertEquals(lookup(router, "//"), ["/", {}]);
});

Deno.test("AsgiRouter.match() [rule 9, context objects] gives every name of one shape's routes in the context", () => {
  const router = new AsgiRouter({
    routes: [
      new Route("/x/{a}", { handler: () => "get" }),
      new Route("/x/{b}", { handler: () => "post", methods: ["POST"] }),
    ],
  });
  const match = router.match("/x/1");
  assertEquals(match?.context, { a: "1", b: "1" });
  assertEquals(match?.routeFor("GET")?.path, "/x/{a}");
  assertEquals(match?.routeFor("POST")?.path, "/x/{b}");
});

Deno.test("router.ts module doc states each rule once, tested here and summarised in the README in the same order", async () => {
  // The rules' one home is router.ts's module doc (issue 12, point 6); this keeps the README
  // summary and these test names from drifting from it.
  const heading = /^ \* (\d+)\. \*\*([^*]+?)\.\*\*/gm;
  const moduleDoc = (await Deno.readTextFile(new URL("../router.ts", import.meta.url))).split(
    " * @module",
  )[0]!;
  const rules = [...moduleDoc.matchAll(heading)].map(([, n, name]) => `${n}. ${name}`);
  assertEquals(rules.length, 9);
  rules.forEach((rule, i) => assert(rule.startsWith(`${i + 1}. `), rule));
  const tests = await Deno.readTextFile(new URL(import.meta.url));
  for (const rule of rules) {
    const [n, name] = rule.split(". ");
    assert(tests.includes(`[rule ${n}, ${name!.toLowerCase()}]`), `no test named for ${rule}`);
  }
  const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
  const rulesAt = readme.indexOf("### Rules");
  const section = readme.slice(rulesAt, readme.indexOf("\n#", rulesAt + 1));
  const summary = [...section.matchAll(/^(\d+)\. \*\*([^*]+?)\*\*/gm)].map(([, n, name]) =>
    `${n}. ${name}`
  );
  assertEquals(summary, rules);
});

// Fresh-eyes review of 2026-11-29: the rule tests above check each rule by its own cases; this
// table checks the module doc's own examples, word for word, so that the doc cannot drift from
// the router. One row per example: the routes (in order), the path, then the route that wins
// (undefined: no match) and the context it gives.
Deno.test("router.ts module doc's worked examples hold as written", async (t) => {
  type Row = [
    example: string,
    routes: string[],
    path: string,
    wins: string | undefined,
    context?: Record<string, string>,
    options?: { trailingSlash: "strict" },
  ];
  const rows: Row[] = [
    ["{uid:[0-9a-f]{8}}", ["/u/{uid:[0-9a-f]{8}}"], "/u/0badc0de", "/u/{uid:[0-9a-f]{8}}", {
      uid: "0badc0de",
    }],
    ["{path:.+} spans /", ["/f/{path:.+}"], "/f/a/b", "/f/{path:.+}", { path: "a/b" }],
    ["{x:*} takes the rest", ["/s/{p:*}"], "/s/a/b.txt", "/s/{p:*}", { p: "a/b.txt" }],
    ["{x:*} is non-empty", ["/s/{p:*}"], "/s/", undefined],
    ["^ and $ restate the variable", ["/y/{a:^\\d+$}.png"], "/y/12.png", "/y/{a:^\\d+$}.png", {
      a: "12",
    }],
    ["rule 1: /{name}.{ext}", ["/{name}.{ext}"], "/a.b.c", "/{name}.{ext}", {
      name: "a.b",
      ext: "c",
    }],
    [
      "rule 2: more literal text wins",
      ["/{base}...{head}", "/{user1}:{branch1}...{user2}:{branch2}"],
      "/a:b...c:d",
      "/{user1}:{branch1}...{user2}:{branch2}",
      { user1: "a", branch1: "b", user2: "c", branch2: "d" },
    ],
    ["rule 2: /{name}.{ext} beats /{name}", ["/{name}", "/{name}.{ext}"], "/a.b", "/{name}.{ext}"],
    ["rule 2: /users/new", ["/users/{id}", "/users/new"], "/users/new", "/users/new", {}],
    ["rule 2: /users/newer", ["/users/{id}", "/users/new"], "/users/newer", "/users/{id}", {
      id: "newer",
    }],
    [
      "rule 3: /text/hellos/test",
      ["/text/hello", "/text/{e}/test", "/{c}"],
      "/text/hellos/test",
      "/text/{e}/test",
      { e: "hellos" },
    ],
    [
      "rule 3: /secret/978",
      ["/{object}/{id}", "/secret/{id}/path"],
      "/secret/978",
      "/{object}/{id}",
      {
        object: "secret",
        id: "978",
      },
    ],
    [
      "rule 4: /other_handler/Bob",
      ["/other_handler/{name:[a-z1-9]+}"],
      "/other_handler/Bob",
      undefined,
    ],
    ["rule 5: /u//posts", ["/u/{id}/posts"], "/u//posts", undefined],
    ["rule 5: / and /{id}", ["/{id}"], "/", undefined],
    ["rule 6: /claw/ reaches /claw", ["/claw"], "/claw/", "/claw", {}],
    ["rule 6: /claw reaches /claw/", ["/claw/"], "/claw", "/claw/", {}],
    ["rule 6: strict keeps them apart", ["/claw"], "/claw/", undefined, undefined, {
      trailingSlash: "strict",
    }],
    ["rule 7: no decoding", ["/a b"], "/a%20b", undefined],
    ["rule 7: dot segments kept", ["/files/{p:*}"], "/files/../secret", "/files/{p:*}", {
      p: "../secret",
    }],
    // JSON.parse makes "__proto__" an own key, as the router does; a literal would set the prototype.
    [
      "rule 9: __proto__ is an own key",
      ["/p/{__proto__}"],
      "/p/x",
      "/p/{__proto__}",
      JSON.parse(
        '{"__proto__":"x"}',
      ),
    ],
  ];
  for (const [example, routes, path, wins, context, options] of rows) {
    await t.step(example, () => {
      const router = new AsgiRouter({
        ...options,
        routes: routes.map((route) => new Route(route, { handler: noop })),
      });
      const match = router.match(path);
      assertEquals(match?.routes[0]?.path, wins, `${path} among ${routes.join(", ")}`);
      if (context !== undefined) {
        assertEquals({ ...match!.context }, { ...context }, `context of ${path}`);
        assertEquals(Object.keys(match!.context), Object.keys(context));
      }
    });
  }
  await t.step("rule 8: a path past maxPathLength matches nothing", () => {
    const router = new AsgiRouter({ routes: [new Route("/{x:*}", { handler: noop })] });
    assertEquals(router.match("/" + "a".repeat(8191))?.routes[0]?.path, "/{x:*}");
    assertEquals(router.match("/" + "a".repeat(8192)), undefined);
  });
  await t.step("rule 9: one shape, two names, both in the context", () => {
    const router = new AsgiRouter({
      routes: [
        new Route("/x/{a}", { handler: noop }),
        new Route("/x/{b}", { handler: noop, methods: ["POST"] }),
      ],
    });
    assertEquals({ ...router.match("/x/1")!.context }, { a: "1", b: "1" });
  });
});

// Probe of the router's input checks, defect 3: match(undefined) threw "Cannot read properties
// of undefined" from inside the lookup, while the docs said it never throws.
Deno.test("AsgiRouter.match() and getRoute() throw TypeError for a path that is not a string", async (t) => {
  const router = routerOf(["/a", "/{x}"]);
  for (const path of [undefined, null, 5, ["/a"], new String("/a")]) {
    await t.step(String(path), () => {
      for (
        const lookup of [() => router.match(path as never), () => router.getRoute(path as never)]
      ) {
        const error = assertThrows(lookup, TypeError) as Error;
        assertEquals(error.message.startsWith("Invalid path "), true, error.message);
        assertEquals(error.message.endsWith(': pass a string such as "/users/42"'), true);
      }
    });
  }
});
