/**
 * An App handler whose request the bridge ended, its client still there, is told why:
 * `request.signal.reason` (and what a read rejects with) is a `TimeoutError` for a body that
 * stalled past `stallTimeout` (the client got 408), a `TypeError` for a body that could not be
 * parsed (400) or whose `Request` stream failed under `app.fetch` (500), not the `AbortError`
 * "The client disconnected"; `request.receive()` passes on the bridge's `reason`; the App adds
 * one debug line, the bridge the warning (or, for the failed stream, the error).
 *
 * Regression (fault review of 2026-11-29, task Q8): each of these told the handler "The client
 * disconnected"; a failed stream under `app.fetch` logged nothing above debug.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { App, AsgiRouter, type Request, Response, Route, type WebHandler } from "../web.ts";
import { BridgeLog, instance, RecordingLogger, startServer } from "./fixtures/web_helpers.ts";
import { TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

const PORTS = { deno: 20962, node: 20963 } as const;
const HEAD = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

/** What the handler saw once its read failed. */
interface Seen {
  read: unknown;
  reason: unknown;
  message: unknown;
}

/** An App whose `/upload` reads its body chunk by chunk and rethrows what the read fails with. */
function uploadApp(logger: RecordingLogger) {
  const firstChunk = Promise.withResolvers<void>();
  const seen = Promise.withResolvers<Seen>();
  const upload = async (request: Request) => {
    try {
      for (let i = 0; i < 100; i++) {
        const message = await request.receive();
        if (message.type !== "http.request") throw request.signal.reason;
        if (!message.more_body) break;
        firstChunk.resolve();
      }
    } catch (error) {
      seen.resolve({
        read: error,
        reason: request.signal.reason,
        message: await request.receive(),
      });
      throw error;
    }
    await request.respondWith(new Response({ body: "read" }));
  };
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [new Route<WebHandler>("/upload", { handler: upload, methods: ["POST"] })],
    }),
    logger,
    handleSignals: false,
  });
  return { app, firstChunk: firstChunk.promise, seen: seen.promise };
}

for (const transport of TRANSPORTS) {
  Deno.test(`Request.signal.reason is a TimeoutError, not "The client disconnected", for a body that stalls past stallTimeout (${transport}; regression)`, async () => {
    const log = new RecordingLogger();
    const { app, firstChunk, seen } = uploadApp(log);
    const bridge = new BridgeLog();
    await using server = await startServer(app, {
      transport,
      stallTimeout: 300,
      logger: bridge,
      port: PORTS[transport],
    });
    using client = await RawClient.connect(server.port);
    await client.write(HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    assertMatch((await client.response()).head, /^HTTP\/1\.1 408 /);
    const { read, reason, message } = await withTimeout(seen, BOUND_MS, "the handler");
    const error = instance(reason, DOMException);
    assertEquals(error.name, "TimeoutError");
    assertMatch(error.message, /stalled: nothing arrived for stallTimeout.*408/);
    assertEquals(read, reason);
    assertEquals(message, { type: "http.disconnect", reason: "body_stalled" });
    await app.shutdown();
    assertEquals(log.at("error"), []);
    assert(log.at("debug").some((line) => line.includes("stopped after its request body stalled")));
    assertEquals(bridge.lines.filter((line) => line.startsWith("error")), []);
  });

  Deno.test(`Request.signal.reason is a TypeError, not "The client disconnected", for a malformed chunked body (${transport}; regression)`, async () => {
    const log = new RecordingLogger();
    const { app, firstChunk, seen } = uploadApp(log);
    const bridge = new BridgeLog();
    await using server = await startServer(app, {
      transport,
      logger: bridge,
      port: PORTS[transport],
    });
    using client = await RawClient.connect(server.port);
    await client.write(HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.write("zz\r\nabc\r\n0\r\n\r\n");
    assertMatch((await client.response()).head, /^HTTP\/1\.1 400 /);
    const { read, reason, message } = await withTimeout(seen, BOUND_MS, "the handler");
    assertMatch(instance(reason, TypeError).message, /could not be parsed.*400/);
    assertEquals(read, reason);
    assertEquals(message, { type: "http.disconnect", reason: "body_malformed" });
    await app.shutdown();
    assertEquals(log.at("error"), []);
    assert(
      log.at("debug").some((line) => line.includes("stopped after its request body was malformed")),
    );
  });
}

Deno.test(`App.fetch() tells the handler and logs an error when the Request's body stream fails, not "The client disconnected" (regression)`, async () => {
  const log = new RecordingLogger();
  const firstChunk = Promise.withResolvers<void>();
  const seen = Promise.withResolvers<unknown>();
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/upload", {
          handler: async (request: Request) => {
            await request.receive();
            firstChunk.resolve();
            await request.receive();
            seen.resolve(request.signal.reason);
          },
          methods: ["POST"],
        }),
      ],
    }),
    logger: log,
    handleSignals: false,
  });
  const failure = new Error("the source went away");
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(10));
    },
    async pull(controller) {
      await firstChunk.promise;
      controller.error(failure);
    },
  });
  const response = await app.fetch(
    new globalThis.Request("http://localhost/upload", { method: "POST", body }),
  );
  assertEquals(response.status, 500);
  await response.body?.cancel();
  const reason = await withTimeout(seen.promise, BOUND_MS, "the handler");
  assertMatch(instance(reason, TypeError).message, /body stream .* failed/);
  await app.shutdown();
  const errors = log.lines.filter((line) => line.level === "error");
  assertEquals(errors.map((line) => [line.text, line.values]), [
    ["Request body stream failed; answered 500:", [failure]],
  ]);
});

// Regression (same review, found while verifying the above): under `Deno.serve(app.fetch)` the
// client of a malformed chunked body got 500 while its handler was told the server answered 400.
Deno.test("App.fetch() under Deno.serve answers 400 to a malformed chunked body, as serve() does (regression)", async () => {
  const log = new RecordingLogger();
  const { app, firstChunk, seen } = uploadApp(log);
  const server = Deno.serve({ port: 20964, hostname: "127.0.0.1", onListen() {} }, app.fetch);
  try {
    using client = await RawClient.connect(20964);
    await client.write(HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.write("zz\r\nabc\r\n0\r\n\r\n");
    assertMatch((await client.response()).head, /^HTTP\/1\.1 400 /);
    const { reason } = await withTimeout(seen, BOUND_MS, "the handler");
    assertMatch(instance(reason, TypeError).message, /could not be parsed.*400/);
  } finally {
    await server.shutdown();
    await app.shutdown();
  }
});

// Newcomer's docs pass of 2026-11-29: docs/web.md says a client that takes none of a streamed
// response for stallTimeout is given up as gone, with the AbortError of a client that left, since
// the bridge gives that ending no reason (docs/asgi.md, "Why a request ended"). Pinned here.
for (const transport of TRANSPORTS) {
  Deno.test(`Request.signal.reason is the AbortError of a client that left when the client takes none of a streamed response for stallTimeout (${transport})`, async () => {
    const log = new RecordingLogger();
    const aborted = Promise.withResolvers<unknown>();
    const chunk = new Uint8Array(256 * 1024);
    const stream = async (request: Request) => {
      request.signal.addEventListener("abort", () => aborted.resolve(request.signal.reason));
      await request.respondWith(
        new Response({
          body: (async function* () {
            // 64 MiB at most: past what the kernel buffers for a client that reads nothing.
            for (let i = 0; i < 256 && !request.signal.aborted; i++) yield chunk;
          })(),
        }),
      );
    };
    const app = new App({
      router: new AsgiRouter<WebHandler>({
        routes: [new Route<WebHandler>("/stream", { handler: stream })],
      }),
      logger: log,
      handleSignals: false,
    });
    await using server = await startServer(app, {
      transport,
      stallTimeout: 300,
      logger: new BridgeLog(),
      port: transport === "deno" ? 21110 : 21111,
    });
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    try {
      await conn.write(new TextEncoder().encode("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
      const error = instance(
        await withTimeout(aborted.promise, BOUND_MS, "the abort"),
        DOMException,
      );
      assertEquals([error.name, error.message], ["AbortError", "The client disconnected"]);
    } finally {
      conn.close();
    }
    await app.shutdown();
  });
}
