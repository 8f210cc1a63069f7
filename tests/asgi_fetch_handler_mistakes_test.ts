// Copyright the stellarator authors. MIT license.
// A Fetch handler where an ASGI application belongs, and the other way round. Both are functions,
// so TypeScript catches the mix-up but plain JavaScript did not: `serve(app.fetch)` was taken,
// then answered every request 500 with "Cannot read properties of undefined (reading 'indexOf')",
// and `Deno.serve(app.asgi)` rejected each request with "Cannot serve a undefined scope"
// (newcomer pass of 2026-11-29). Now the first is refused where it is written, and the second
// names the handler Deno.serve takes.
import { assertEquals, assertInstanceOf, assertRejects, assertThrows } from "@std/assert";
import {
  App,
  AsgiRouter,
  createFetchHandler,
  proxyHeaders,
  Response,
  Route,
  serve,
  type WebHandler,
} from "../web.ts";
import type { AsgiApplication } from "../asgi.ts";

function helloApp(): App {
  return new App({
    router: new AsgiRouter({
      routes: [
        new Route<WebHandler>("/", {
          handler: (request) => request.respondWith(new Response({ body: "hi" })),
        }),
      ],
    }),
    handleSignals: false,
  });
}

const asgiApp: AsgiApplication = async (scope, _receive, send) => {
  if (scope.type !== "http") return;
  await send({ type: "http.response.start", status: 204, headers: [] });
  await send({ type: "http.response.body", body: new Uint8Array() });
};

type Case = [name: string, handler: () => unknown, advice: string];

const CASES: readonly Case[] = [
  ["App.fetch", () => helloApp().fetch, "pass the App itself (serve(app)) or app.asgi"],
  [
    "createFetchHandler().fetch",
    () => createFetchHandler(asgiApp, { lifespan: "off" }).fetch,
    "pass the ASGI application given to createFetchHandler()",
  ],
];

const TAKERS: readonly [name: string, take: (app: never) => unknown][] = [
  ["serve()", (app) => serve(app, { port: 0, lifespan: "off", onListen() {} })],
  ["createFetchHandler()", (app) => createFetchHandler(app)],
  ["proxyHeaders()", (app) => proxyHeaders(app)],
];

for (const [handlerName, handler, advice] of CASES) {
  for (const [takerName, take] of TAKERS) {
    Deno.test(`${takerName} refuses ${handlerName}, a Fetch handler, saying what to pass`, () => {
      const error = assertThrows(() => take(handler() as never), TypeError);
      assertInstanceOf(error, TypeError);
      assertEquals(
        (error as Error).message,
        "Invalid application: a Fetch handler (request, info), not an ASGI application " +
          `(scope, receive, send); ${advice}`,
      );
    });
  }
}

Deno.test("serve() still takes an App, its asgi, and a plain ASGI function", async () => {
  for (const app of [helloApp(), helloApp().asgi, asgiApp]) {
    const server = serve(app, { port: 0, lifespan: "off", onListen() {} });
    const { port } = await server.addr;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    await response.body?.cancel();
    assertEquals(response.ok, true);
    await server.shutdown();
  }
});

Deno.test("App.asgi called with a Fetch Request (Deno.serve(app.asgi)) says to pass app.fetch", async () => {
  const app = helloApp();
  const call = app.asgi as unknown as (request: Request, info: unknown) => Promise<void>;
  const error = await assertRejects(() => call(new Request("http://x/"), {}), TypeError);
  assertInstanceOf(error, TypeError);
  assertEquals(
    (error as Error).message,
    "Cannot serve a Fetch Request: app.asgi is an ASGI application (scope, receive, send); " +
      "pass app.fetch to Deno.serve, or the App itself to serve()",
  );
});
