/**
 * The node transport over TLS bounds what a connection holds unread (`_asgi/node_tls_backlog.ts`):
 * Deno's `node:https` (2.9.6) reads a TLS connection whatever the application takes, and one
 * client pushing a body at an application that did not read took a server past 1.5 GiB in 5 s.
 * The tests push bytes at an application that does not read, over HTTP and over WSS, and check
 * that the server closes the connection after some tens of MiB, says why, and tells the
 * application; and that an upload the application reads as it comes is never cut off.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import type { AsgiApplication } from "../asgi.ts";
import { start } from "./fixtures/asgi_harness.ts";
import { selfSigned } from "./fixtures/tls.ts";
import { handshake, within } from "./fixtures/ws_client.ts";

const tls = await selfSigned();
if (tls === undefined) {
  console.log("asgi_node_tls_backlog_test: skipped, no openssl on PATH (.ci/run installs it)");
}

/** The most a flooding client is let send before the test calls the connection unbounded. */
const FLOOD_BYTES = 512 * 1024 * 1024;

/** How long a flooding client sends at most, in milliseconds. */
const FLOOD_MS = 10_000;

function connect(port: number): Promise<Deno.TlsConn> {
  return Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: [tls!.cert] });
}

/**
 * Writes `head`, then `chunk` again and again until a write fails, `FLOOD_BYTES` are sent or
 * `FLOOD_MS` have passed.
 *
 * @returns The bytes of `chunk` written, and whether a write failed.
 */
async function flood(
  conn: Deno.TlsConn,
  head: Uint8Array,
  chunk: Uint8Array,
): Promise<{ sent: number; failed: boolean }> {
  const deadline = Date.now() + FLOOD_MS;
  let sent = 0;
  try {
    await conn.write(head);
    while (sent < FLOOD_BYTES && Date.now() < deadline) {
      let at = 0;
      while (at < chunk.length) at += await conn.write(chunk.subarray(at));
      sent += chunk.length;
    }
    return { sent, failed: false };
  } catch {
    return { sent, failed: true };
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the failed write already.
    }
  }
}

/** A chunk of a chunked body: 60,000 bytes of "a", framed. */
function bodyChunk(): Uint8Array {
  const size = 60_000;
  const frame = new TextEncoder().encode(`${size.toString(16)}\r\n${"a".repeat(size)}\r\n`);
  return frame;
}

/** A client's binary WebSocket frame of 60,000 zero bytes, masked with a zero key. */
function wsFrame(): Uint8Array {
  const size = 60_000;
  const frame = new Uint8Array(2 + 2 + 4 + size);
  frame[0] = 0x82; // FIN, binary
  frame[1] = 0x80 | 126; // masked, 16-bit length
  frame[2] = size >> 8;
  frame[3] = size & 0xff;
  return frame; // the mask key and the payload are zero
}

const encoder = new TextEncoder();

Deno.test({
  name:
    "serve() [node] closes a TLS connection whose body nothing reads once it holds over 16 MiB, and says why",
  ignore: tls === undefined,
  async fn() {
    const flooded = Promise.withResolvers<void>();
    const disconnected = Promise.withResolvers<string>();
    const app: AsgiApplication = async (scope, receive) => {
      if (scope.type !== "http") return;
      await receive();
      // Reads nothing more until the client is done sending: the next receive() then tells
      // whether the connection is still there.
      await flooded.promise;
      disconnected.resolve((await receive()).type);
    };
    await using server = await start(app, "node", { cert: tls!.cert, key: tls!.key });
    const conn = await connect(server.port);
    const head = encoder.encode(
      "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    const { sent, failed } = await flood(conn, head, bodyChunk());
    flooded.resolve();
    assert(failed, `the server took all ${sent} bytes the client sent`);
    assert(sent < 256 * 1024 * 1024, `the server took ${sent} bytes before it closed`);
    assertEquals(await within(disconnected.promise, 5_000, "receive()"), "http.disconnect");
    const warnings = server.logger.lines("warn");
    assertEquals(warnings.length, 1, JSON.stringify(warnings));
    assertMatch(
      warnings[0]!,
      /^A TLS client sent \d+\.\d MiB that nothing has read yet, over the limit of 16\.0 MiB: closed the connection\. Deno's node:https reads TLS connections whatever the application takes; serve such clients with the deno transport or behind a TLS-terminating proxy$/,
    );
  },
});

Deno.test({
  name: "serve() [node] never cuts off a TLS upload the application reads as it comes",
  ignore: tls === undefined,
  async fn() {
    const app: AsgiApplication = async (scope, receive, send) => {
      if (scope.type !== "http") return;
      let length = 0;
      while (true) {
        const message = await receive();
        if (message.type !== "http.request") return;
        length += message.body.length;
        if (!message.more_body) break;
      }
      await send({ type: "http.response.start", status: 200 });
      await send({ type: "http.response.body", body: encoder.encode(String(length)) });
    };
    await using server = await start(app, "node", { cert: tls!.cert, key: tls!.key });
    const client = Deno.createHttpClient({ caCerts: [tls!.cert] });
    try {
      const size = 64 * 1024 * 1024;
      const chunk = new Uint8Array(1024 * 1024);
      let left = size;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (left === 0) return controller.close();
          left -= chunk.length;
          controller.enqueue(chunk);
        },
      });
      const response = await fetch(`https://127.0.0.1:${server.port}/upload`, {
        method: "POST",
        body,
        client,
      });
      assertEquals(await response.text(), String(size));
      assertEquals(server.logger.lines("warn"), []);
    } finally {
      client.close();
    }
  },
});

Deno.test({
  name:
    "serve() [node] closes a WSS connection whose messages nothing receives once it holds over twice maxMessageSize",
  ignore: tls === undefined,
  async fn() {
    const flooded = Promise.withResolvers<void>();
    const closed = Promise.withResolvers<number>();
    const app: AsgiApplication = async (scope, receive, send) => {
      if (scope.type !== "websocket") return;
      await receive();
      await send({ type: "websocket.accept" });
      // Receives nothing until the client is done sending.
      await flooded.promise;
      while (true) {
        const message = await receive();
        if (message.type === "websocket.disconnect") return closed.resolve(message.code);
      }
    };
    await using server = await start(app, "node", {
      cert: tls!.cert,
      key: tls!.key,
      maxMessageSize: 4 * 1024 * 1024,
    });
    const conn = await connect(server.port);
    // The 101 comes back once the handshake is read; the frames follow it at once.
    const { sent, failed } = await flood(conn, encoder.encode(handshake("/")), wsFrame());
    flooded.resolve();
    assert(failed, `the server took all ${sent} bytes the client sent`);
    assert(sent < 256 * 1024 * 1024, `the server took ${sent} bytes before it closed`);
    assertEquals(await within(closed.promise, 5_000, "websocket.disconnect"), 1006);
    const warnings = server.logger.lines("warn");
    assertEquals(warnings.length, 1, JSON.stringify(warnings));
    // The limit is twice maxMessageSize, or HTTP's 16 MiB when that is more.
    assertMatch(warnings[0]!, /over the limit of 16\.0 MiB: closed the connection/);
  },
});
