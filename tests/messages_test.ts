// Copyright the stellarator authors. MIT license.
// Issue 12, point 5: every bad-argument message of the router and the ASGI layer follows one
// template, `Invalid <what> <value>[ for|in <subject>]: <fix>`, with the value described by the
// one shared helper, so a caller reads the same shape whichever function they misused.
import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertMatch,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import { AsgiRouter, Route } from "@stellarator/stellarator/router";
import { createFetchHandler, serve, textBytes } from "@stellarator/stellarator/asgi";
import { App, Response } from "@stellarator/stellarator/web";
import { describe, shorten } from "../_common/describe.ts";
import { HANDSHAKE_FIELDS } from "../_asgi/websocket.ts";

const app = async () => {};
const noop = () => {};

/** `Invalid <what> <value>`, a colon, a fix starting with a verb, and no final period. */
const TEMPLATE = /^Invalid [^\n]+: (?:use|pass|give|list|send|remove) [^\n]*[^.]$/;

/** The call, the error class, what is named, and how the value shows (`describe` by default). */
type Case = [
  name: string,
  call: () => unknown,
  errorClass: ErrorConstructor,
  what: string,
  value: unknown,
  shown?: string,
];

const endpoint = new AsgiRouter({ routes: [new Route("/", { handler: noop })] }).getRoute("/")[0];

const cases: Case[] = [
  // router.ts
  [
    "new Route() path",
    () => new Route(42 as never, { handler: noop }),
    TypeError,
    "route pattern",
    42,
  ],
  [
    "new Route() options",
    () => new Route("/a", undefined as never),
    TypeError,
    "options",
    undefined,
  ],
  [
    "new Route() handler",
    () => new Route("/a", { handler: "index" as never }),
    TypeError,
    "handler",
    "index",
  ],
  [
    "new Route() methods",
    () => new Route("/a", { handler: noop, methods: "GET" as never }),
    TypeError,
    "methods",
    "GET",
  ],
  [
    "new Route() method with a look-alike letter",
    () => new Route("/a", { handler: noop, methods: ["poſt"] }),
    TypeError,
    "method",
    "poſt",
  ],
  [
    "new Route() empty methods",
    () => new Route("/a", { handler: noop, methods: [] }),
    TypeError,
    "methods",
    [],
    "[]",
  ],
  [
    "new Route() unknown method",
    () => new Route("/a", { handler: noop, methods: ["FETCH"] }),
    TypeError,
    "method",
    "FETCH",
  ],
  ["new AsgiRouter() options", () => new AsgiRouter(null as never), TypeError, "options", null],
  [
    "new AsgiRouter() trailingSlash",
    () => new AsgiRouter({ trailingSlash: "loose" as never }),
    RangeError,
    "trailingSlash",
    "loose",
  ],
  [
    "new AsgiRouter() maxPathLength",
    () => new AsgiRouter({ maxPathLength: 0 }),
    RangeError,
    "maxPathLength",
    0,
  ],
  [
    "AsgiRouter.addRoute() route",
    () => new AsgiRouter().addRoute({ path: "/a" } as never),
    TypeError,
    "route",
    {},
  ],
  [
    "new AsgiRouter() allowUnsafeRegex",
    () => new AsgiRouter({ allowUnsafeRegex: "no" as never }),
    TypeError,
    "allowUnsafeRegex",
    "no",
  ],
  [
    "new AsgiRouter() routes",
    () => new AsgiRouter({ routes: null as never }),
    TypeError,
    "routes",
    null,
  ],
  [
    "new AsgiRouter() routes element",
    () => new AsgiRouter({ routes: ["/a" as never] }),
    TypeError,
    "routes[0]",
    "/a",
  ],
  [
    "new AsgiRouter() unknown option",
    () => new AsgiRouter({ trailingslash: "strict" } as never),
    TypeError,
    "option",
    "trailingslash",
  ],
  [
    "new Route() unknown option",
    () => new Route("/a", { handler: noop, metods: ["GET"] } as never),
    TypeError,
    "option",
    "metods",
  ],
  ["AsgiRouter.match() path", () => endpointRouter().match(5 as never), TypeError, "path", 5],
  [
    "AsgiRouter.getRoute() path",
    () => endpointRouter().getRoute(undefined as never),
    TypeError,
    "path",
    undefined,
  ],
  // asgi.ts
  ["textBytes() text", () => textBytes(42 as never), TypeError, "text", 42],
  ["serve() application", () => serve(42 as never), TypeError, "application", 42],
  [
    "createFetchHandler() application",
    () => createFetchHandler(42 as never),
    TypeError,
    "application",
    42,
  ],
  ["serve() options", () => serve(app, 5 as never), TypeError, "options", 5],
  [
    "serve() lifespan",
    () => serve(app, { lifespan: "yes" as never }),
    TypeError,
    "lifespan",
    "yes",
  ],
  ["serve() rootPath type", () => serve(app, { rootPath: 5 as never }), TypeError, "rootPath", 5],
  ["serve() rootPath shape", () => serve(app, { rootPath: "api" }), RangeError, "rootPath", "api"],
  ["serve() logger", () => serve(app, { logger: {} as never }), TypeError, "logger", {}],
  ["serve() maxBodySize", () => serve(app, { maxBodySize: -1 }), RangeError, "maxBodySize", -1],
  [
    "serve() maxMessageSize",
    () => serve(app, { maxMessageSize: "1" as never }),
    TypeError,
    "maxMessageSize",
    "1",
  ],
  [
    "serve() shutdownTimeout",
    () => serve(app, { shutdownTimeout: "5s" as never }),
    TypeError,
    "shutdownTimeout",
    "5s",
  ],
  [
    "serve() headersTimeout",
    () => serve(app, { headersTimeout: -1 }),
    RangeError,
    "headersTimeout",
    -1,
  ],
  [
    "serve() keepAliveTimeout",
    () => serve(app, { keepAliveTimeout: -1 }),
    RangeError,
    "keepAliveTimeout",
    -1,
  ],
  ["serve() port", () => serve(app, { port: 70000 }), RangeError, "port", 70000],
  ["serve() hostname", () => serve(app, { hostname: 5 as never }), TypeError, "hostname", 5],
  [
    "serve() transport",
    () => serve(app, { transport: "bun" as never }),
    TypeError,
    "transport",
    "bun",
  ],
  [
    "serve() maxConnections",
    () => serve(app, { maxConnections: 0.5 }),
    RangeError,
    "maxConnections",
    0.5,
  ],
  ["serve() onListen", () => serve(app, { onListen: 5 as never }), TypeError, "onListen", 5],
  ["serve() signal", () => serve(app, { signal: 5 as never }), TypeError, "signal", 5],
  [
    "serve() cert without key",
    () => serve(app, { cert: "PEM" } as never),
    TypeError,
    "TLS options",
    undefined,
    "(cert a string, key undefined)",
  ],
  [
    "serve() cert given as a file name",
    () => serve(app, { cert: "certs/cert.pem", key: "certs/key.pem" }),
    TypeError,
    "TLS cert",
    "certs/cert.pem",
  ],
  // web.ts
  ["new App() options", () => new App(undefined as never), TypeError, "options", undefined],
  ["new App() router", () => new App({ router: {} as never }), TypeError, "router", {}],
  [
    "new App() lifespan",
    () => new App({ router: endpointRouter(), lifespan: "yes" as never }),
    TypeError,
    "lifespan",
    "yes",
  ],
  [
    "new App() handleSignals",
    () => new App({ router: endpointRouter(), handleSignals: "no" as never }),
    TypeError,
    "handleSignals",
    "no",
  ],
  [
    "new App() attributes",
    () => new App({ router: endpointRouter(), attributes: 5 as never }),
    TypeError,
    "attributes",
    5,
  ],
  [
    "new App() requestTimeLimit as text",
    () => new App({ router: endpointRouter(), requestTimeLimit: "1" as never }),
    TypeError,
    "requestTimeLimit",
    "1",
  ],
  [
    "new App() negative shutdownGracePeriod",
    () => new App({ router: endpointRouter(), shutdownGracePeriod: -1 }),
    RangeError,
    "shutdownGracePeriod",
    -1,
  ],
  [
    "new App() backgroundTaskLimit 0",
    () => new App({ router: endpointRouter(), backgroundTaskLimit: 0 }),
    RangeError,
    "backgroundTaskLimit",
    0,
  ],
  ["new Response() status", () => new Response({ status: 101 }), RangeError, "status", 101],
  ["new Response() body", () => new Response({ body: 42 as never }), TypeError, "body", 42],
  [
    "new Response() header name",
    () => new Response({ headers: { "x y": "1" } }),
    TypeError,
    "header name",
    "x y",
  ],
  // Unknown option keys (regression: a misspelt option was ignored, so its limit never applied).
  [
    "new App() misspelt option",
    () => new App({ router: endpointRouter(), requestTimeLimt: 1 } as never),
    TypeError,
    "option",
    "requestTimeLimt",
  ],
  [
    "serve() misspelt option",
    () => serve(app, { maxBodysize: 10 } as never),
    TypeError,
    "option",
    "maxBodysize",
  ],
  [
    "serve() a Deno.serve option it does not take",
    () => serve(app, { reusePort: true } as never),
    TypeError,
    "option",
    "reusePort",
  ],
  [
    "createFetchHandler() a serve() option",
    () => createFetchHandler(app, { port: 8000 } as never),
    TypeError,
    "option",
    "port",
  ],
  [
    "new Response() contentType",
    () => new Response({ contentType: 5 as never }),
    TypeError,
    "contentType",
    5,
  ],
];

function endpointRouter() {
  return new AsgiRouter({ routes: [new Route("/", { handler: noop })] });
}

Deno.test("bad-argument messages follow one template: Invalid <what> <value>: <fix>", async (t) => {
  for (const [name, call, errorClass, what, value, shown] of cases) {
    await t.step(name, () => {
      let caught: unknown;
      try {
        call();
      } catch (error) {
        caught = error;
      }
      assertInstanceOf(caught, errorClass);
      const message = (caught as Error).message;
      assertMatch(message, TEMPLATE);
      assertStringIncludes(message, `Invalid ${what} ${shown ?? describe(value)}`);
    });
  }
});

Deno.test("bad-argument messages name the route and the known methods for a bad method", () => {
  let caught: unknown;
  try {
    new Route("/a", { handler: noop, methods: [1 as never] });
  } catch (error) {
    caught = error;
  }
  assertInstanceOf(caught, TypeError);
  assertMatch(
    (caught as Error).message,
    /^Invalid method 1 for route "\/a": use one of [A-Z]+(?:, [A-Z]+)+$/,
  );
});

Deno.test("bad-argument messages: an endpoint handler without the method names it", async () => {
  const handler = endpoint as (...args: unknown[]) => Promise<unknown>;
  let caught: unknown;
  try {
    await handler({}, { method: "GET" }, noop, noop);
  } catch (error) {
    caught = error;
  }
  assertInstanceOf(caught, TypeError);
  assertMatch((caught as Error).message, TEMPLATE);
  assertStringIncludes(
    (caught as Error).message,
    "Invalid last argument a function for the handler",
  );
});

Deno.test('describe() quotes strings only, so 200 and "200" read differently', () => {
  assert(describe(200) === "200");
  assert(describe("200") === '"200"');
  assert(describe(null) === "null" && describe(undefined) === "undefined");
  assert(describe([]) === "an array" && describe(noop) === "a function");
  assert(describe(new Uint8Array(1)) === "a Uint8Array" && describe({}) === "an object");
  assert(describe("x".repeat(300)).endsWith('…"'));
});

Deno.test("describe() shows control characters as escapes (regression: a header value with LF broke the message in two)", () => {
  assertEquals(describe("a\nb"), '"a\\nb"');
  assertEquals(describe("x\r"), '"x\\r"');
  assertEquals(describe("\u0000\t\u007f"), '"\\u0000\\t\\u007f"');
  // Review (2026-11-28): a refused "5\u00a0" read "5 " in the message, as a valid value does.
  assertEquals(describe("5\u00a0\u0085"), '"5\\u00a0\\u0085"');
  assertEquals(describe("é ü"), '"é ü"');
  // A line separator split a quoted value in two in some log viewers, as LF does (log_text.ts).
  assertEquals(describe("a\u2028b\u2029"), '"a\\u2028b\\u2029"');
  // Router review of 2026-11-29: bidi controls reorder what a terminal shows.
  assertEquals(describe("a\u202eb\u2066c\u200f"), '"a\\u202eb\\u2066c\\u200f"');
  // Backslashes and quotes stay as written: a quoted regex reads as in the source.
  assertEquals(describe('{id:\\d+}"'), '"{id:\\d+}""');
  const error = assertThrows(() => new Response({ headers: { "x-a": "a\nb" } }), TypeError);
  assertEquals((error as Error).message.includes("\n"), false, (error as Error).message);
});

Deno.test("unknown options name the closest known one, or list them all", () => {
  const cases: [() => unknown, string][] = [
    [
      () => new App({ router: endpointRouter(), requestTimeLimt: 1 } as never),
      'Invalid option "requestTimeLimt" for new App(): use requestTimeLimit',
    ],
    [
      () => serve(app, { maxBodysize: 10 } as never),
      'Invalid option "maxBodysize" for serve(): use maxBodySize',
    ],
    [
      () => createFetchHandler(app, { port: 8000 } as never),
      'Invalid option "port" for createFetchHandler(): remove it, or use one of lifespan, rootPath, ' +
      "maxBodySize, logger, maxMessageSize",
    ],
  ];
  for (const [call, message] of cases) {
    let caught: unknown;
    try {
      call();
    } catch (error) {
      caught = error;
    }
    assertInstanceOf(caught, TypeError);
    assertEquals((caught as Error).message, message);
  }
});

Deno.test("unknown options: a key that begins exactly one option's name suggests that option", () => {
  // Regression (newcomer walk-through, 2026-11-29): serve(app, { host }) said "use port", the
  // nearer by edit distance, where "hostname" was meant.
  const cases: [() => unknown, string][] = [
    [
      () => serve(app, { host: "0.0.0.0" } as never),
      'Invalid option "host" for serve(): use hostname',
    ],
    [
      () => new App({ router: endpointRouter(), backgroundTask: 1 } as never),
      'Invalid option "backgroundTask" for new App(): remove it, or use one of router, ' +
      "requestTimeLimit, backgroundTaskTimeLimit, backgroundTaskLimit, shutdownGracePeriod, " +
      "lifespanShutdownTimeLimit, lifespan, attributes, logger, handleSignals, fetchOptions",
    ],
  ];
  for (const [call, message] of cases) {
    assertEquals((assertThrows(call, TypeError) as Error).message, message);
  }
});

// Found by the router review (2026-11-28): a long value cut at 200 code units could end in the
// first half of an emoji, which a message shows as U+FFFD.
Deno.test("shorten() never cuts a surrogate pair in two (regression: a long path ended in half an emoji)", () => {
  const cut = shorten("a".repeat(199) + "😀" + "b");
  assertEquals(cut, "a".repeat(199) + "…");
  assertEquals(shorten("a".repeat(198) + "😀" + "b"), "a".repeat(198) + "😀…");
  assertEquals(shorten("a".repeat(200)), "a".repeat(200));
  assertEquals(shorten("a".repeat(201)), "a".repeat(200) + "…");
});

// A review (2026-11-28): the reasons for refusing the handshake's own fields in an accept, shown
// by accept() and by the bridge, broke the template (no fix named, only why).
Deno.test("bad-argument messages: every handshake field refused in an accept names the fix", () => {
  for (const [name, why] of HANDSHAKE_FIELDS) {
    assertMatch(`Invalid header "${name}" for accept(): ${why}`, TEMPLATE);
  }
});

// Sweep of every error the library raises, 2026-11-29: the domain error classes, one row each,
// as every public face exports them.
Deno.test("every error class is exported by each face, named after itself, and an Error", async (t) => {
  const router = await import("../router.ts");
  const asgi = await import("../asgi.ts");
  const web = await import("../web.ts");
  const mod = await import("../mod.ts");
  const route = new router.Route("/a", { handler: noop });
  const cause = new Error("underlying");
  const rows: [string, Error, Record<string, unknown>][] = [
    ["RouterError", new router.RouterError("x"), {}],
    ["UnknownEndpoint", new router.UnknownEndpoint("/x"), { path: "/x", reason: "no-route" }],
    ["MethodNotAllowed", new router.MethodNotAllowed("PUT", ["GET"]), { method: "PUT" }],
    ["RouteConflict", new router.RouteConflict(route, route, ["GET"]), { conflictsWith: route }],
    ["InvalidRoutePattern", new router.InvalidRoutePattern("/a{", 2, "why"), { position: 2 }],
    ["AsgiProtocolError", new asgi.AsgiProtocolError("x"), {}],
    ["ResponseCutOffError", new asgi.ResponseCutOffError("x", { cause }), { cause }],
    ["LifespanError", new asgi.LifespanError("startup", "x", { cause }), {
      phase: "startup",
      cause,
    }],
    ["ClientDisconnected", new asgi.ClientDisconnected(1006), { code: 1006 }],
  ];
  for (const [name, error, fields] of rows) {
    await t.step(name, () => {
      assertEquals(error.name, name);
      assertInstanceOf(error, Error);
      assert(String(error).startsWith(`${name}: `), String(error));
      for (const [key, value] of Object.entries(fields)) {
        assertEquals((error as unknown as Record<string, unknown>)[key], value, key);
      }
      for (const face of [web, mod, name in router ? router : asgi]) {
        const exported = (face as Record<string, unknown>)[name] as ErrorConstructor;
        assertInstanceOf(error, exported);
      }
      if (name !== "RouterError" && name in router) assertInstanceOf(error, router.RouterError);
    });
  }
});
