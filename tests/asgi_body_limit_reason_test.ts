/**
 * The bridge tells an application why it ends a request whose body grew past `maxBodySize`: the
 * `http.disconnect` it then gives carries `exceeded_max_body_size`, the limit, which a client
 * that leaves never causes. ASGI applications must accept extra keys in a message, so those
 * that do not know the key are unaffected (docs/asgi.md, "Limits").
 *
 * Regression (review of 2026-11-29, task W5): the refusal reached the application as a bare
 * `http.disconnect`, so the web layer told its handler "The client disconnected" while the client
 * was still there, reading the bridge's 413.
 */
import { assertEquals, assertMatch } from "@std/assert";
import {
  type AsgiApplication,
  createFetchHandler,
  type HttpScope,
  type ReceiveMessage,
} from "../asgi.ts";
import { bytes, start, streamOf, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

const LIMIT = 1000;

/**
 * An application that reads the body to its end, then calls `receive()` once more, and hands
 * each request's messages after the first `http.request` to the next waiter.
 */
function reader() {
  const waiters: PromiseWithResolvers<{ scope: HttpScope; messages: ReceiveMessage[] }>[] = [];
  const next = () => {
    const waiter = Promise.withResolvers<{ scope: HttpScope; messages: ReceiveMessage[] }>();
    waiters.push(waiter);
    return waiter.promise;
  };
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "http") return;
    const messages: ReceiveMessage[] = [];
    for (;;) {
      const message = await receive();
      if (message.type === "http.request" && message.more_body) continue;
      if (message.type !== "http.request") messages.push(message);
      break;
    }
    messages.push(await receive());
    waiters.shift()?.resolve({ scope, messages });
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body: bytes("read") });
  };
  return { app, next };
}

for (const transport of TRANSPORTS) {
  Deno.test(`serve() gives http.disconnect with exceeded_max_body_size for a chunked body over maxBodySize (${transport}; regression)`, async (t) => {
    const { app, next } = reader();
    await using s = await start(app, transport, { maxBodySize: LIMIT });

    await t.step("the body refused: both receives say why; the scope is as before", async () => {
      const seen = next();
      using client = await RawClient.connect(s.port);
      await client.writeUntilClosed(
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
          `200\r\n${"x".repeat(512)}\r\n`.repeat(3) + "0\r\n\r\n",
      );
      const { head } = await client.response();
      assertMatch(head, /^HTTP\/1\.1 413 /);
      const { scope, messages } = await withTimeout(seen, BOUND_MS, "the application's reads");
      const refused = {
        type: "http.disconnect",
        reason: "exceeded_max_body_size",
        exceeded_max_body_size: LIMIT,
      };
      assertEquals(messages, [refused, refused]);
      assertEquals(scope.extensions, {});
    });

    await t.step("a client that leaves mid-body: a bare http.disconnect", async () => {
      const seen = next();
      const client = await RawClient.connect(s.port);
      await client.writeUntilClosed(
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200\r\nabc",
      );
      client[Symbol.dispose]();
      const { messages } = await withTimeout(seen, BOUND_MS, "the application's reads");
      assertEquals(messages, [{ type: "http.disconnect" }, { type: "http.disconnect" }]);
    });
  });
}

Deno.test("createFetchHandler() gives http.disconnect with exceeded_max_body_size for a streamed body over maxBodySize (regression)", async () => {
  const { app, next } = reader();
  const handler = createFetchHandler(app, {
    lifespan: "off",
    maxBodySize: LIMIT,
    logger: { error() {}, warn() {}, info() {} },
  });
  const seen = next();
  const body = streamOf(600, 600);
  const response = await handler.fetch(
    new Request("http://localhost/", { method: "POST", body }),
  );
  assertEquals(response.status, 413);
  await response.body?.cancel();
  const { messages } = await withTimeout(seen, BOUND_MS, "the application's reads");
  const refused = {
    type: "http.disconnect",
    reason: "exceeded_max_body_size",
    exceeded_max_body_size: LIMIT,
  };
  assertEquals(messages, [refused, refused]);
});
