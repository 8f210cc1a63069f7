/**
 * The bridge tells an application why it ended a request whose client did not leave: the
 * `http.disconnect` it then gives carries `reason` (a key the ASGI spec does not define, which
 * applications that do not know it ignore): `"body_stalled"` when the body stalled for
 * `stallTimeout` and the bridge answered 408, `"body_malformed"` when the body could not be
 * parsed (a bad chunk size) and the client got 400, `"body_failed"` when the body stream of a
 * `Request` given to `createFetchHandler` failed. A client that leaves still causes a bare
 * `http.disconnect` (tests/asgi_body_limit_reason_test.ts).
 *
 * Regression (fault review of 2026-11-29, task Q8): each of these reached the application as a
 * bare `http.disconnect`, so the web layer told its handler "The client disconnected" while the
 * client was still there, reading the 408 or 400.
 */
import { assertEquals, assertMatch } from "@std/assert";
import { type AsgiApplication, createFetchHandler, type ReceiveMessage } from "../asgi.ts";
import { bytes, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { H2cClient } from "./fixtures/h2c_client.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

const STALL_MS = 300;
const PORTS = { deno: 20960, node: 20961 } as const;

/**
 * An application that reads the body until a message other than a chunk with more to come, then
 * calls `receive()` once more. `firstChunk` settles when the first chunk arrived; `messages` with
 * what came after the chunks.
 */
function reader() {
  const firstChunk = Promise.withResolvers<void>();
  const messages = Promise.withResolvers<ReceiveMessage[]>();
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "http") return;
    const seen: ReceiveMessage[] = [];
    for (;;) {
      const message = await receive();
      if (message.type === "http.request" && message.more_body) {
        firstChunk.resolve();
        continue;
      }
      seen.push(message);
      break;
    }
    seen.push(await receive());
    messages.resolve(seen);
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body: bytes("read") });
  };
  return { app, firstChunk: firstChunk.promise, messages: messages.promise };
}

const HEAD = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

for (const transport of TRANSPORTS) {
  Deno.test(`serve() gives http.disconnect with reason "body_stalled" for a body that stalls past stallTimeout (${transport}; regression)`, async () => {
    const { app, firstChunk, messages } = reader();
    await using s = await start(app, transport, { stallTimeout: STALL_MS, port: PORTS[transport] });
    using client = await RawClient.connect(s.port);
    await client.write(HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    const { head } = await client.response();
    assertMatch(head, /^HTTP\/1\.1 408 /);
    const stalled = { type: "http.disconnect", reason: "body_stalled" };
    assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [stalled, stalled]);
  });

  Deno.test(`serve() gives http.disconnect with reason "body_malformed" for a bad chunk size (${transport}; regression)`, async () => {
    const { app, firstChunk, messages } = reader();
    await using s = await start(app, transport, { port: PORTS[transport] });
    using client = await RawClient.connect(s.port);
    await client.write(HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.write("zz\r\nabc\r\n0\r\n\r\n");
    const { head } = await client.response();
    assertMatch(head, /^HTTP\/1\.1 400 /);
    const malformed = { type: "http.disconnect", reason: "body_malformed" };
    assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [malformed, malformed]);
    assertEquals(
      s.logger.lines("warn").filter((line) => line.includes("malformed")),
      ["Request body malformed: it could not be read; the request ends and the connection closes"],
    );
  });
}

Deno.test(`createFetchHandler() gives http.disconnect with reason "body_failed" and logs the error when the Request's body stream fails (regression)`, async () => {
  const { app, firstChunk, messages } = reader();
  const errors: unknown[][] = [];
  const handler = createFetchHandler(app, {
    lifespan: "off",
    logger: { error: (...data) => errors.push(data), warn() {}, info() {} },
  });
  const failure = new Error("the source went away");
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(10));
    },
    async pull(controller) {
      await firstChunk;
      controller.error(failure);
    },
  });
  const response = await handler.fetch(
    new Request("http://localhost/", { method: "POST", body }),
  );
  assertEquals(response.status, 500);
  await response.body?.cancel();
  const failed = { type: "http.disconnect", reason: "body_failed" };
  assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [failed, failed]);
  assertEquals(errors, [["Request body stream failed; answered 500:", failure]]);
});

/**
 * A client that sends the head and part of a body to `port`, then, once told on its stdin,
 * resets the connection (`SO_LINGER` 0): Deno (2.9.6) fails the body read with an `Http` error,
 * "unexpected EOF while reading HTTP/1 body", where a plain close fails it with `BadResource`.
 * `Deno.Conn` cannot reset a connection, hence Python.
 */
function resettingClient(port: number, sent: string) {
  const script = [
    "import socket, struct, sys",
    `s = socket.create_connection(("127.0.0.1", ${port}))`,
    `s.sendall(${JSON.stringify(sent)}.encode())`,
    "sys.stdin.readline()",
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))",
    "s.close()",
  ].join("\n");
  const child = new Deno.Command("/usr/bin/python3", {
    args: ["-c", script],
    stdin: "piped",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const stdin = child.stdin.getWriter();
  return {
    /** Resets the connection and waits for the client to exit. */
    async reset(): Promise<void> {
      await stdin.write(bytes("\n"));
      await stdin.close();
      await child.status;
    },
  };
}

// Regression (review of the reasons, task V15): on deno a client that reset its connection
// mid-body was reported as "body_malformed", with a warning blaming its body: every reason but
// BadResource counted as a body Deno could not parse.
const RESET_PORTS = { deno: 21060, node: 21061 } as const;
for (const transport of TRANSPORTS) {
  Deno.test(`serve() gives a bare http.disconnect, and logs nothing, for a client that resets its connection mid-body (${transport}; regression)`, async () => {
    const { app, firstChunk, messages } = reader();
    await using s = await start(app, transport, { port: RESET_PORTS[transport] });
    const client = resettingClient(s.port, HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.reset();
    const left = { type: "http.disconnect" };
    assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [left, left]);
    assertEquals(s.logger.entries, []);
  });
}

// Regression (same review): behind `Deno.serve(handler.fetch)` the same reset was taken for the
// failed stream of a Request a program built: an error line per client that resets, outside the
// log limit ("Request body stream failed; answered 500").
Deno.test("createFetchHandler() under Deno.serve gives a bare http.disconnect, and logs no error, for a client that resets its connection mid-body (regression)", async () => {
  const { app, firstChunk, messages } = reader();
  const errors: unknown[][] = [];
  const handler = createFetchHandler(app, {
    lifespan: "off",
    logger: { error: (...data) => errors.push(data), warn() {}, info() {} },
  });
  const server = Deno.serve({ port: 21062, hostname: "127.0.0.1", onListen() {} }, handler.fetch);
  try {
    const client = resettingClient(21062, HEAD + "5\r\nabcde\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.reset();
    const left = { type: "http.disconnect" };
    assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [left, left]);
    assertEquals(errors, []);
  } finally {
    await server.shutdown();
  }
});

// Regression (same review): on node a chunk that took the body past maxBodySize, followed in the
// same packet by a malformed chunk, got node's 400 for the parse error, while the application
// was told "exceeded_max_body_size" and the log said "answered 413". Whichever the client gets,
// the reason names it.
const BOTH_PORTS = { deno: 21063, node: 21064 } as const;
for (const transport of TRANSPORTS) {
  Deno.test(`serve() gives the reason of the answer the client got for a body over maxBodySize that is also malformed (${transport}; regression)`, async () => {
    const { app, firstChunk, messages } = reader();
    await using s = await start(app, transport, { maxBodySize: 8, port: BOTH_PORTS[transport] });
    using client = await RawClient.connect(s.port);
    await client.write(HEAD + "3\r\nabc\r\n");
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.write("10\r\n" + "a".repeat(16) + "\r\nzz\r\nabc\r\n");
    const status = (await client.response()).head.slice(9, 12);
    const reason = { "413": "exceeded_max_body_size", "400": "body_malformed" }[status];
    const [first] = await withTimeout(messages, BOUND_MS, "the reads");
    assertEquals([status, (first as { reason?: string }).reason], [status, reason]);
    const warnings = s.logger.lines("warn");
    assertEquals(warnings.length, 1);
    assertMatch(warnings[0]!, status === "413" ? /answered 413/ : /malformed/);
  });
}

// Regression (same review): over HTTP/2 Deno fails the body of a stream that ends short of its
// content-length with the `Http` error of a broken connection ("error reading a body from
// connection") and resets the stream (a length above 64 KiB, so that the body is read chunk by
// chunk); it was reported as "body_malformed", with a warning, to a
// client that got no 400.
Deno.test(`serve() [deno] over HTTP/2 gives a bare http.disconnect, and logs nothing, for a stream that ends short of its content-length (regression)`, async () => {
  const { app, firstChunk, messages } = reader();
  await using s = await start(app, "deno", { port: 21065 });
  const client = await H2cClient.connect(s.port);
  try {
    const stream = await client.request([
      [":method", "POST"],
      [":scheme", "http"],
      [":authority", "x"],
      [":path", "/"],
      ["content-length", "100000"],
    ], false);
    await client.data(stream, bytes("abcde"));
    await withTimeout(firstChunk, BOUND_MS, "the first chunk");
    await client.data(stream, bytes("xyz"), true);
    const left = { type: "http.disconnect" };
    assertEquals(await withTimeout(messages, BOUND_MS, "the reads"), [left, left]);
    assertEquals(s.logger.entries, []);
  } finally {
    await client.close();
  }
});
