/**
 * An App handler whose request body the bridge refused for exceeding `maxBodySize` is told so:
 * `request.bytes()` rejects, and `request.signal` aborts, with a `BodyTooLargeError` naming the
 * limit, not with "The client disconnected"; the client keeps the bridge's 413, and the App adds
 * no response and no error line of its own. A client that does leave mid-upload still reads as
 * one that left.
 *
 * Regression (review of 2026-11-29, task W5): a chunked body, one of no declared length, or one
 * over HTTP/2 that grew past `maxBodySize` while being read got the bridge's 413, and its handler
 * an `AbortError`, "The client disconnected", though the client was still there reading the 413.
 */
import { assert, assertEquals, assertStrictEquals } from "@std/assert";
import {
  App,
  type AppFetchOptions,
  AsgiRouter,
  BodyTooLargeError,
  type Request,
  Response,
  Route,
  type WebHandler,
} from "../web.ts";
import { BridgeLog, instance, RecordingLogger, startServer } from "./fixtures/web_helpers.ts";
import { streamOf, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { H2cClient } from "./fixtures/h2c_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

const LIMIT = 1000;
const encoder = new TextEncoder();

/** What a handler saw of a request whose body it read. */
interface Seen {
  /** The body's length, or what `bytes()` rejected with. */
  read: number | unknown;
  /** `request.signal.reason` once the read settled. */
  reason: unknown;
  /** How the handler's own `respondWith()` after a failed read settled. */
  responded?: "resolved" | unknown;
}

/**
 * An App with `/upload`, whose handler reads the body, catches a failure and tries to answer
 * 400 itself, and `/rethrow`, whose handler lets the failure escape. Each request's `Seen` goes
 * to the next waiter of `seen`.
 */
function uploadApp(logger: RecordingLogger, fetchOptions?: AppFetchOptions) {
  const waiters: PromiseWithResolvers<Seen>[] = [];
  const next = () => {
    const waiter = Promise.withResolvers<Seen>();
    waiters.push(waiter);
    return waiter.promise;
  };
  const report = (seen: Seen) => waiters.shift()?.resolve(seen);
  const upload = async (request: Request) => {
    const signal = request.signal;
    let body: Uint8Array;
    try {
      body = await request.bytes();
    } catch (error) {
      const seen: Seen = { read: error, reason: signal.reason };
      try {
        await request.respondWith(new Response({ status: 400, body: "the handler's own 400" }));
        seen.responded = "resolved";
      } catch (failure) {
        seen.responded = failure;
      }
      report(seen);
      return;
    }
    report({ read: body.length, reason: signal.reason });
    await request.respondWith(new Response({ body: `got ${body.length}` }));
  };
  const rethrow = async (request: Request) => {
    try {
      await request.bytes();
    } catch (error) {
      report({ read: error, reason: request.signal.reason });
      throw error;
    }
    await request.respondWith(new Response({ body: "read" }));
  };
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/upload", { handler: upload, methods: ["POST"] }),
        new Route<WebHandler>("/rethrow", { handler: rethrow, methods: ["POST"] }),
      ],
    }),
    logger,
    handleSignals: false,
    ...(fetchOptions === undefined ? {} : { fetchOptions }),
  });
  return { app, next };
}

/** `n` bytes as a chunked body in chunks of at most 400 bytes, last chunk included. */
function chunked(n: number): Uint8Array {
  let framed = "";
  for (let at = 0; at < n; at += 400) {
    const size = Math.min(400, n - at);
    framed += `${size.toString(16)}\r\n${"x".repeat(size)}\r\n`;
  }
  return encoder.encode(`${framed}0\r\n\r\n`);
}

/**
 * Sends a POST with `head` fields and `body` over a new connection and reads until the server
 * closes it; a write the server refuses (it closed after its 413) is ignored. With `cut`, the
 * connection is closed right after the body is written, without reading.
 */
async function post(
  port: number,
  path: string,
  fields: string,
  body: Uint8Array,
  cut = false,
): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const head = encoder.encode(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n${fields}\r\n`,
  );
  const written = (async () => {
    try {
      await conn.write(head);
      for (let at = 0; at < body.length;) at += await conn.write(body.subarray(at));
    } catch {
      // The server answered 413 and closed while the client was still sending.
    }
  })();
  if (cut) {
    await written;
    conn.close();
    return "";
  }
  let text = "";
  const buffer = new Uint8Array(65536);
  try {
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      text += new TextDecoder("latin1").decode(buffer.subarray(0, n));
    }
  } catch {
    // A reset after the whole answer arrived.
  }
  await written;
  try {
    conn.close();
  } catch {
    // Closed already.
  }
  return text;
}

/** The status codes of every response in `raw`, and the last body. */
function responses(raw: string): { statuses: number[]; body: string } {
  const statuses = [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  return { statuses, body: raw.slice(raw.indexOf("\r\n\r\n") + 4) };
}

function assertRefused(seen: Seen, label: string): BodyTooLargeError {
  const error = instance(seen.read, BodyTooLargeError);
  assertEquals(error.name, "BodyTooLargeError", label);
  assertEquals(error.maxBodySize, LIMIT, label);
  assert(error.message.includes(`exceeds maxBodySize ${LIMIT}`), error.message);
  assert(error.message.includes("raise maxBodySize"), error.message);
  assertStrictEquals(seen.reason, error, `${label}: request.signal.reason is the same error`);
  return error;
}

for (const transport of TRANSPORTS) {
  Deno.test(`Request.bytes() rejects with BodyTooLargeError, not "The client disconnected", for a body over maxBodySize (${transport}; regression)`, async (t) => {
    const appLog = new RecordingLogger();
    const bridgeLog = new BridgeLog();
    const { app, next } = uploadApp(appLog);
    const server = await startServer(app, { transport, maxBodySize: LIMIT, logger: bridgeLog });
    try {
      await t.step("a chunked body up to the limit reaches the handler whole", async () => {
        for (const n of [LIMIT - 1, LIMIT]) {
          const seen = next();
          const { statuses, body } = responses(
            await post(server.port, "/upload", "transfer-encoding: chunked\r\n", chunked(n)),
          );
          assertEquals([statuses, body], [[200], `got ${n}`]);
          assertEquals((await seen).read, n);
        }
      });

      await t.step(
        "a chunked body over it: the handler learns why, the client keeps the 413",
        async () => {
          for (const n of [LIMIT + 1, 100_000]) {
            const seen = next();
            const raw = await post(
              server.port,
              "/upload",
              "transfer-encoding: chunked\r\n",
              chunked(n),
            );
            const outcome = await withTimeout(seen, BOUND_MS, "the handler's read");
            assertRefused(outcome, `${n} bytes`);
            // The handler's own answer comes after the bridge's: dropped, not a second response.
            assertEquals(outcome.responded, "resolved");
            assertEquals(responses(raw), { statuses: [413], body: "Content Too Large" });
          }
        },
      );

      await t.step(
        "a handler that lets the error escape gets no 500 and no error line",
        async () => {
          const seen = next();
          const raw = await post(
            server.port,
            "/rethrow",
            "transfer-encoding: chunked\r\n",
            chunked(LIMIT + 1),
          );
          assertRefused(await withTimeout(seen, BOUND_MS, "the handler's read"), "rethrown");
          assertEquals(responses(raw), { statuses: [413], body: "Content Too Large" });
        },
      );

      await t.step(
        "a declared content-length over the limit never reaches the handler",
        async () => {
          const raw = await post(
            server.port,
            "/upload",
            `content-length: ${LIMIT * 5}\r\n`,
            new Uint8Array(LIMIT * 5),
          );
          assertEquals(responses(raw), { statuses: [413], body: "Content Too Large" });
        },
      );

      await t.step(
        'a client that leaves mid-upload still reads "The client disconnected"',
        async () => {
          const seen = next();
          // Half a chunk: the body can only end by the client going away.
          await post(
            server.port,
            "/upload",
            "transfer-encoding: chunked\r\n",
            encoder.encode(`${(LIMIT / 2).toString(16)}\r\nabc`),
            true,
          );
          const outcome = await withTimeout(seen, BOUND_MS, "the handler's read");
          const error = instance(outcome.read, DOMException);
          assertEquals([error.name, error.message], ["AbortError", "The client disconnected"]);
          assertStrictEquals(outcome.reason, error);
        },
      );
    } finally {
      await server.server.shutdown();
      await app.shutdown();
    }
    // One warning per refused body, from the bridge; nothing from the App above debug.
    const refused =
      `warn: Request body exceeds maxBodySize ${LIMIT}: answered 413 and disconnected`;
    assertEquals(bridgeLog.lines, [refused, refused, refused, refused]);
    assertEquals(appLog.lines.filter((line) => line.level !== "debug"), []);
    // The handler that let the error escape: one debug line that says why it stopped.
    const debug = appLog.at("debug");
    assertEquals(debug.filter((line) => line.includes("client went away")), [], debug.join("\n"));
    assertEquals(
      debug.filter((line) => line.includes(`exceeded maxBodySize ${LIMIT}`)).length,
      1,
      debug.join("\n"),
    );
  });
}

Deno.test("Request.bytes() rejects with BodyTooLargeError for an HTTP/2 body over maxBodySize (deno; regression)", async () => {
  const appLog = new RecordingLogger();
  const { app, next } = uploadApp(appLog);
  const server = await startServer(app, {
    transport: "deno",
    maxBodySize: LIMIT,
    logger: new BridgeLog(),
  });
  const client = await H2cClient.connect(server.port);
  try {
    const seen = next();
    const stream = await client.request([
      [":method", "POST"],
      [":scheme", "http"],
      [":authority", "127.0.0.1"],
      [":path", "/upload"],
    ], false);
    await client.data(stream, new Uint8Array(LIMIT + 500).fill(0x61), true);
    assertEquals(await client.status(stream), 413);
    assertRefused(await withTimeout(seen, BOUND_MS, "the handler's read"), "HTTP/2");
  } finally {
    await client.close();
    await server.server.shutdown();
    await app.shutdown();
  }
  assertEquals(appLog.lines.filter((line) => line.level !== "debug"), []);
});

Deno.test("Request.bytes() rejects with BodyTooLargeError under app.fetch for a streamed body over fetchOptions.maxBodySize (regression)", async () => {
  const appLog = new RecordingLogger();
  const { app, next } = uploadApp(appLog, { maxBodySize: LIMIT });
  try {
    const seen = next();
    const body = streamOf(600, 600);
    const response = await app.fetch(
      new globalThis.Request("http://localhost/upload", { method: "POST", body }),
    );
    assertEquals([response.status, await response.text()], [413, "Content Too Large"]);
    assertRefused(await withTimeout(seen, BOUND_MS, "the handler's read"), "app.fetch");
  } finally {
    await app.shutdown();
  }
  // app.fetch's bridge logs to the App's logger: its one warning, nothing from the App.
  assertEquals(appLog.lines.filter((line) => line.level !== "debug").map((line) => line.text), [
    `Request body exceeds maxBodySize ${LIMIT}: answered 413 and disconnected`,
  ]);
});

Deno.test("Request.signal aborts with a BodyTooLargeError saying the response was cut off when the body outgrows maxBodySize mid-stream (regression)", async () => {
  const appLog = new RecordingLogger();
  const caught = Promise.withResolvers<{ error: unknown; reason: unknown }>();
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/echo", {
          handler: async (request) => {
            // The response starts before the body is read: too late for the bridge's 413.
            const body = (async function* () {
              yield "started ";
              yield `${(await request.bytes()).length}`;
            })();
            try {
              await request.respondWith(new Response({ body }));
            } catch (error) {
              caught.resolve({ error, reason: request.signal.reason });
            }
          },
          methods: ["POST"],
        }),
      ],
    }),
    logger: appLog,
    handleSignals: false,
    fetchOptions: { maxBodySize: LIMIT },
  });
  try {
    const upload = streamOf(600, 600);
    const response = await app.fetch(
      new globalThis.Request("http://localhost/echo", { method: "POST", body: upload }),
    );
    assertEquals(response.status, 200);
    // Cut off: the client cannot take what it got for a whole body.
    const read = await response.text().then((text) => text, (error) => error);
    assert(read instanceof Error, `the body was read whole: ${Deno.inspect(read)}`);
    const { error, reason } = await withTimeout(caught.promise, BOUND_MS, "the handler's catch");
    const refused = instance(error, BodyTooLargeError);
    assertStrictEquals(reason, refused);
    assertEquals(refused.maxBodySize, LIMIT);
    assert(refused.message.includes("the server cut the response off"), refused.message);
    assert(refused.message.includes("raise maxBodySize"), refused.message);
  } finally {
    await app.shutdown();
  }
  assertEquals(appLog.lines.filter((line) => line.level !== "debug").map((line) => line.text), [
    `Request body exceeds maxBodySize ${LIMIT} after the response started: cut the response off ` +
    "(no 413) and disconnected",
  ]);
});

// Regression (fresh-eyes review of 2026-11-29, task V9): `request.receive()` gave a handler that
// reads the body itself a bare `{ type: "http.disconnect" }`, the App's own frozen message,
// dropping the bridge's `exceeded_max_body_size`: only its signal told the refusal from a
// client that left.
for (const transport of [...TRANSPORTS, "app.fetch"] as const) {
  Deno.test(`Request.receive() passes on exceeded_max_body_size when the bridge refuses a body over maxBodySize (${transport}; regression)`, async () => {
    const got = Promise.withResolvers<{ first: unknown; again: unknown; reason: unknown }>();
    const app = new App({
      router: new AsgiRouter<WebHandler>({
        routes: [
          new Route<WebHandler>("/chunks", {
            handler: async (request) => {
              let message = await request.receive();
              // Bounded: the body is at most 2 000 bytes, 1 at the least per message.
              for (let i = 0; i < 3000 && message.type === "http.request"; i++) {
                message = await request.receive();
              }
              got.resolve({
                first: message,
                again: await request.receive(),
                reason: request.signal.reason,
              });
            },
            methods: ["POST"],
          }),
        ],
      }),
      logger: new RecordingLogger(),
      handleSignals: false,
      ...(transport === "app.fetch" ? { fetchOptions: { maxBodySize: LIMIT } } : {}),
    });
    const server = transport === "app.fetch"
      ? undefined
      : await startServer(app, { transport, maxBodySize: LIMIT, logger: new BridgeLog() });
    try {
      if (server === undefined) {
        const body = streamOf(600, 600);
        const response = await app.fetch(
          new globalThis.Request("http://localhost/chunks", { method: "POST", body }),
        );
        assertEquals([response.status, await response.text()], [413, "Content Too Large"]);
      } else {
        const raw = await post(
          server.port,
          "/chunks",
          "transfer-encoding: chunked\r\n",
          chunked(LIMIT * 2),
        );
        assertEquals(responses(raw), { statuses: [413], body: "Content Too Large" });
      }
      const { first, again, reason } = await withTimeout(got.promise, BOUND_MS, "the handler");
      const refused = {
        type: "http.disconnect",
        reason: "exceeded_max_body_size",
        exceeded_max_body_size: LIMIT,
      };
      assertEquals(first, refused, "the message that ends the body");
      assertEquals(again, refused, "a receive() after it");
      assertEquals(instance(reason, BodyTooLargeError).maxBodySize, LIMIT);
    } finally {
      await server?.server.shutdown();
      await app.shutdown();
    }
  });
}

// Regression (fresh-eyes review of 2026-11-29, task V9): a handler that caught the refusal and
// responded after requestTimeLimit had its response ignored with the debug line "...; the client
// got 408", though the client had the bridge's 413 and no 408 was ever sent.
Deno.test("Request.respondWith() after requestTimeLimit says the client got the bridge's 413, not a 408, for a body refused over maxBodySize (regression)", async () => {
  const appLog = new RecordingLogger();
  const responded = Promise.withResolvers<void>();
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/upload", {
          handler: async (request) => {
            await request.bytes().catch(() => {});
            // Past the time limit: its timer, set at the request's start for 50 ms, fires before
            // this one, set later for longer (timers fire in order of their due time).
            await new Promise((resolve) => setTimeout(resolve, 150));
            await request.respondWith(new Response({ body: "late" }));
            responded.resolve();
          },
          methods: ["POST"],
        }),
      ],
    }),
    logger: appLog,
    handleSignals: false,
    requestTimeLimit: 0.05,
    fetchOptions: { maxBodySize: LIMIT },
  });
  try {
    const body = streamOf(600, 600);
    const response = await app.fetch(
      new globalThis.Request("http://localhost/upload", { method: "POST", body }),
    );
    assertEquals([response.status, await response.text()], [413, "Content Too Large"]);
    await withTimeout(responded.promise, BOUND_MS, "the handler's late response");
  } finally {
    await app.shutdown();
  }
  const ignored = appLog.at("debug").filter((line) => line.startsWith("Ignored the response"));
  assertEquals(ignored, [
    'Ignored the response of route "/upload" to "POST /upload": it came after the request time ' +
    `limit of 0.05 s; the client got 413 (its body exceeded maxBodySize ${LIMIT})`,
  ]);
});
