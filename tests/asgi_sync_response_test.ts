/**
 * An application that sends its whole response before its first await (a sync function, or the
 * web layer's handlers that respond at once) has its `Response` handed to `Deno.serve` as it is,
 * without a promise around it. These tests pin down both paths of `handleFetch` and that every
 * such response still reaches a real client, keep-alive included.
 */
import { assertEquals, assertInstanceOf } from "@std/assert";
import { type AsgiApplication, createFetchHandler, type HttpScope } from "../asgi.ts";
import { handleFetch } from "../_asgi/deno_transport.ts";
import { Core } from "../_asgi/core.ts";
import { App, Response as WebResponse } from "../web.ts";
import { AsgiRouter, Route } from "../router.ts";
import type { WebHandler } from "../web.ts";
import { bytes, RecordingLogger, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";

const HEADERS: [Uint8Array, Uint8Array][] = [[bytes("content-type"), bytes("text/plain")]];

/** Sends "hi" from the call itself, before any await. */
const syncApp: AsgiApplication = (scope, _receive, send) => {
  if (scope.type === "http") {
    send({ type: "http.response.start", status: 200, headers: HEADERS });
    send({ type: "http.response.body", body: bytes(`hi ${(scope as HttpScope).path}`) });
  }
  return Promise.resolve();
};

/** `result`, which must be a Response rather than a promise of one. */
function immediate(result: Response | Promise<Response>): Response {
  assertInstanceOf(result, Response);
  return result as Response;
}

/** Sends "hi" after one await. */
const asyncApp: AsgiApplication = async (scope, _receive, send) => {
  if (scope.type !== "http") return;
  await send({ type: "http.response.start", status: 200, headers: HEADERS });
  await send({ type: "http.response.body", body: bytes(`hi ${(scope as HttpScope).path}`) });
};

function core(app: AsgiApplication, logger = new RecordingLogger()): Core {
  return new Core(app, { lifespan: "off", rootPath: "", maxBodySize: Infinity, logger });
}

Deno.test("handleFetch() returns the Response itself when the app sent it before its first await", async () => {
  const result = handleFetch(core(syncApp), new Request("http://localhost/a"), undefined, null);
  assertEquals(await immediate(result).text(), "hi /a");
});

Deno.test("handleFetch() returns a promise of the Response when the app awaits first", async () => {
  const result = handleFetch(core(asyncApp), new Request("http://localhost/b"), undefined, null);
  assertInstanceOf(result, Promise);
  assertEquals(await (await result).text(), "hi /b");
});

Deno.test("handleFetch() answers 500 at once when the app throws before its first await", async () => {
  const logger = new RecordingLogger();
  const throwing: AsgiApplication = () => {
    throw new Error("boom");
  };
  const response = immediate(
    handleFetch(core(throwing, logger), new Request("http://localhost/"), undefined, null),
  );
  assertEquals(response.status, 500);
  assertEquals(await response.text(), "Internal Server Error");
  assertEquals(logger.entries.length, 1);
});

Deno.test("createFetchHandler().fetch() returns a promise even when the app responded at once", async () => {
  const handler = createFetchHandler(syncApp, { lifespan: "off" });
  const result = handler.fetch(new Request("http://localhost/c"));
  assertInstanceOf(result, Promise);
  assertEquals(await (await result).text(), "hi /c");
});

/** The web layer's App whose handler responds in its first turn. */
function webApp(): App {
  return new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/w/{name}", {
          handler: async (request) => {
            await request.respondWith(new WebResponse({ body: `web ${request.context.name}` }));
          },
        }),
      ],
    }),
  });
}

for (const transport of TRANSPORTS) {
  Deno.test(`serve() on ${transport} answers apps that respond at once, many per connection`, async () => {
    const cases: [string, AsgiApplication, (i: number) => string, (i: number) => string][] = [
      ["sync", syncApp, (i) => `/s${i}`, (i) => `hi /s${i}`],
      ["async", asyncApp, (i) => `/a${i}`, (i) => `hi /a${i}`],
      ["App", webApp().asgi, (i) => `/w/n${i}`, (i) => `web n${i}`],
    ];
    for (const [name, app, path, expected] of cases) {
      await using server = await start(app, transport);
      // fetch() keeps one connection alive between these requests.
      for (let i = 0; i < 20; i++) {
        const response = await fetch(`${server.url}${path(i)}`);
        assertEquals(response.status, 200, name);
        assertEquals(await response.text(), expected(i), name);
      }
      assertEquals(server.logger.entries, [], name);
    }
  });
}
