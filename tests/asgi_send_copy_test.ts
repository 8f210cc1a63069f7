/**
 * The HTTP & WebSocket spec asks a server to have flushed the data given to `send` into its send
 * buffer before `send` returns. Python's `bytes` cannot change after that; a `Uint8Array` can, and
 * an application that reads a file into one reused buffer (`file.read(buffer)`) changes it as soon
 * as `send` resolves. Both transports once held the application's array itself until the client
 * took it: a streamed body of 64 chunks from one reused buffer reached the client with 64 (deno)
 * or 48 (node) chunks overwritten by later ones, and on node an 8 MiB body sent whole came out
 * half changed for a client that read it late (ASGI spec audit, 2026-11-28).
 */
import { assertEquals } from "@std/assert";
import type { AsgiApplication } from "../asgi.ts";
import { bytes, sleep, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";

const CHUNK = 16 * 1024;
const CHUNKS = 64;
const WHOLE = 8 * 1024 * 1024;

/** Streams CHUNKS chunks of one reused buffer, chunk i filled with the letter "A" + i % 26. */
const streamFromOneBuffer: AsgiApplication = async (scope, _receive, send) => {
  if (scope.type !== "http") return;
  const buffer = new Uint8Array(CHUNK);
  await send({
    type: "http.response.start",
    status: 200,
    headers: [[bytes("content-length"), bytes(String(CHUNK * CHUNKS))]],
  });
  for (let i = 0; i < CHUNKS; i++) {
    buffer.fill(65 + i % 26);
    await send({ type: "http.response.body", body: buffer, more_body: i < CHUNKS - 1 });
  }
  buffer.fill(33); // "!": after the last send, too
};

/** Sends WHOLE bytes of "A" in one message, then overwrites them with "!". */
const wholeThenOverwrite: AsgiApplication = async (scope, _receive, send) => {
  if (scope.type !== "http") return;
  const body = new Uint8Array(WHOLE).fill(65);
  await send({ type: "http.response.start", status: 200 });
  await send({ type: "http.response.body", body });
  body.fill(33);
};

/** Indexes of the chunks of `body` that are not what chunk i should hold. */
function wrongChunks(body: Uint8Array): number[] {
  const wrong: number[] = [];
  for (let i = 0; i < CHUNKS; i++) {
    const chunk = body.subarray(i * CHUNK, (i + 1) * CHUNK);
    if (chunk.length !== CHUNK || chunk.some((byte) => byte !== 65 + i % 26)) wrong.push(i);
  }
  return wrong;
}

/** The body of a GET read over a raw connection, starting only after `delayMs`. */
async function readLate(port: number, delayMs: number): Promise<Uint8Array> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(bytes("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    await sleep(delayMs);
    const parts: Uint8Array[] = [];
    const buffer = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      parts.push(buffer.slice(0, n));
    }
    const all = new Uint8Array(parts.reduce((size, part) => size + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      all.set(part, offset);
      offset += part.length;
    }
    for (let i = 0; i + 3 < all.length; i++) {
      if (all[i] === 13 && all[i + 1] === 10 && all[i + 2] === 13 && all[i + 3] === 10) {
        return all.subarray(i + 4);
      }
    }
    throw new Error("No end of head in the response");
  } finally {
    conn.close();
  }
}

for (const transport of TRANSPORTS) {
  Deno.test(`serve() [${transport}] sends a streamed chunk as it was when send() resolved`, async () => {
    await using server = await start(streamFromOneBuffer, transport);
    const response = await fetch(server.url);
    const body = new Uint8Array(await response.arrayBuffer());
    assertEquals(body.length, CHUNK * CHUNKS);
    assertEquals(wrongChunks(body), []);
  });

  Deno.test(`serve() [${transport}] sends a whole body as it was when send() resolved`, async () => {
    await using server = await start(wholeThenOverwrite, transport);
    const body = await readLate(server.port, 500);
    assertEquals(body.length, WHOLE);
    assertEquals(body.indexOf(33), -1);
  });
}

/**
 * Sends `body()` whole, or as two chunks when `streamed`, with a content-type (below 1 KiB the
 * deno transport sends such a body as a string) or without.
 */
function sendsBytesOf(
  body: () => Uint8Array,
  streamed: boolean,
  contentType: boolean,
): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    const headers: [Uint8Array, Uint8Array][] = contentType
      ? [[bytes("content-type"), bytes("text/plain")]]
      : [];
    await send({ type: "http.response.start", status: 200, headers });
    if (streamed) await send({ type: "http.response.body", body: body(), more_body: true });
    await send({ type: "http.response.body", body: body() });
  };
}

/** A view of a SharedArrayBuffer (as threaded WebAssembly's memory is) of `length` "a"s. */
function sharedBytes(length: number): Uint8Array {
  return new Uint8Array(new SharedArrayBuffer(length)).fill(97);
}

/** A view whose ArrayBuffer was transferred away (to a worker, say): it reads as empty. */
function detachedBytes(): Uint8Array {
  const view = new Uint8Array(new ArrayBuffer(4)).fill(97);
  view.buffer.transfer();
  return view;
}

for (const transport of TRANSPORTS) {
  // Review of 2026-11-29: on deno a whole body of a SharedArrayBuffer, over 1 KiB or without a
  // content-type, made `Response` throw ("a view on a SharedArrayBuffer"): an empty 500, and a
  // TypeError for send(). On node a detached view (length 0) threw in the copy of a whole body,
  // and the client got no answer at all, the connection closed.
  Deno.test(`serve() [${transport}] sends a body held in a SharedArrayBuffer or a detached view`, async (t) => {
    const cases: [string, AsgiApplication, string][] = [];
    for (const length of [4, 2000]) {
      for (const streamed of [false, true]) {
        for (const contentType of [true, false]) {
          cases.push([
            `${length} shared bytes, ${streamed ? "streamed" : "whole"}, ${
              contentType ? "with" : "without"
            } content-type`,
            sendsBytesOf(() => sharedBytes(length), streamed, contentType),
            "a".repeat(streamed ? 2 * length : length),
          ]);
        }
      }
    }
    cases.push(["a detached view, whole", sendsBytesOf(detachedBytes, false, true), ""]);
    cases.push(["a detached view, streamed", sendsBytesOf(detachedBytes, true, true), ""]);
    for (const [name, app, expected] of cases) {
      await t.step(name, async () => {
        await using server = await start(app, transport);
        const response = await fetch(server.url);
        assertEquals([response.status, await response.text()], [200, expected]);
        assertEquals(server.logger.entries, []);
      });
    }
  });
}
