/**
 * Where a request's body ends, on both transports: the framings a proxy and the server could read
 * differently (RFC 9112 §6.1, §6.3, §7.1), which must be refused with the connection closed, so
 * that no byte of one request can become the start of the next. The cases come from the probe of
 * 2026-11-28 that sent them to both transports, to uvicorn (h11) and through nginx and HAProxy
 * (docs/asgi.md, "Behind a reverse proxy"). Raw sockets throughout: `fetch` would
 * frame the requests itself.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { type AsgiApplication, createFetchHandler } from "../asgi.ts";
import { bytes, dechunk, readBody, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { RawClient } from "./fixtures/raw_client.ts";

/** How long a test waits for bytes that should come at once: generous for a busy machine. */
const PATIENCE_MS = 2000;

/** A request the probe pipelined after the ambiguous one: reaching the app, it was smuggled. */
const SMUGGLED = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

/** Answers every request with its path and the number of body bytes it had; records the paths. */
function echoPath(seen: string[]): AsgiApplication {
  return async (scope, receive, send) => {
    if (scope.type !== "http") return;
    seen.push(scope.path);
    const length = (await readBody(receive)).reduce((n, m) => n + m.body.length, 0);
    const body = bytes(`${scope.path} ${length}`);
    await send({
      type: "http.response.start",
      status: 200,
      headers: [[bytes("content-length"), bytes(String(body.length))]],
    });
    await send({ type: "http.response.body", body });
  };
}

/** The status of a response head. */
function status(head: string): number {
  return Number(head.slice(9, 12));
}

/** A header field of a response head, or `undefined`. */
function field(head: string, name: string): string | undefined {
  const line = head.split("\r\n").find((l) => l.toLowerCase().startsWith(`${name}:`));
  return line?.slice(name.length + 1).trim();
}

/**
 * Sends `request`, reads one response, and checks that the connection then closes with nothing
 * after that response.
 */
async function expectRefusedAndClosed(port: number, request: string, expected: number) {
  using client = await RawClient.connect(port);
  await client.write(request);
  const head = await client.head();
  assertEquals(status(head), expected, head);
  await client.body(Number(field(head, "content-length") ?? 0));
  // The request after it may be refused at once or not be read at all: either way the server
  // must not answer it.
  await client.write(SMUGGLED).catch(() => {});
  assert(await client.closedWithin(PATIENCE_MS) < PATIENCE_MS, "the connection is still open");
  assertEquals(client.pending, "", "bytes after the refusal");
}

for (const transport of TRANSPORTS) {
  // Probe of 2026-11-28, case "TE in HTTP/1.0": node:http decoded the chunked body of an
  // HTTP/1.0 request that asked for keep-alive and served the next request on the connection.
  // RFC 9112 §6.1: such a message MUST be treated as if its framing were faulty, and the
  // connection closed; an HTTP/1.0 proxy before the server knows no chunked coding and reads its
  // body another way. Deno.serve refused it with 400; uvicorn decoded it and closed.
  Deno.test(`serve() [${transport}] answers 400 to a transfer-encoding in an HTTP/1.0 request and closes`, async (t) => {
    const seen: string[] = [];
    await using s = await start(echoPath(seen), transport);
    for (
      const [label, fields, body] of [
        ["chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"],
        ["another coding", "Transfer-Encoding: gzip\r\n", ""],
        [
          "chunked beside a content-length",
          "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
          "0\r\n\r\n",
        ],
      ]
    ) {
      await t.step(label!, () =>
        expectRefusedAndClosed(
          s.port,
          `POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n${fields}\r\n${body}`,
          400,
        ));
    }
    await t.step("an HTTP/1.0 request with a content-length still reaches the app", async () => {
      using client = await RawClient.connect(s.port);
      await client.write("POST /b HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
      const head = await client.head();
      assertMatch(head, /^HTTP\/1\.[01] 200 /);
      assertEquals(await client.body(Number(field(head, "content-length"))), "/b 5");
    });
    assertEquals(seen, ["/b"]);
  });
}

for (const transport of TRANSPORTS) {
  // Probe of 2026-11-28, case "TE [xchunked]": the node transport answered 501, as to a coding it
  // does not know. RFC 9112 §6.3 (4): when chunked is not the final coding of a request, its
  // length cannot be known, and the server MUST answer 400 and close, as Deno.serve and uvicorn
  // do. A known final chunked after an unknown coding ("gzip, chunked") stays a 501 (§6.1).
  Deno.test(`serve() [${transport}] answers 400 to a transfer-encoding whose final coding is not chunked`, async (t) => {
    const seen: string[] = [];
    await using s = await start(echoPath(seen), transport);
    for (
      const [label, fields] of [
        ["xchunked", "Transfer-Encoding: xchunked\r\n"],
        ["gzip alone", "Transfer-Encoding: gzip\r\n"],
        [
          "chunked, then gzip in a second field",
          "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        ],
      ]
    ) {
      await t.step(label!, () =>
        expectRefusedAndClosed(
          s.port,
          `POST /a HTTP/1.1\r\nHost: x\r\n${fields}\r\n5\r\nhello\r\n0\r\n\r\n`,
          400,
        ));
    }
    assertEquals(seen, []);
  });
}

for (const transport of TRANSPORTS) {
  // Probe of 2026-11-28: each of these reads as two different requests to two parsers. Deno.serve
  // and node:http refuse them themselves (the bridge never sees them); this pins that, so that a
  // Deno upgrade that starts taking one shows here. uvicorn 0.17.6 (h11 0.14) took the first two,
  // by the chunked framing, and kept the connection open (RFC 9112 §6.3 (3) asks it to close).
  Deno.test(`serve() [${transport}] answers 400 to a request framed two ways and closes`, async (t) => {
    const seen: string[] = [];
    await using s = await start(echoPath(seen), transport);
    const chunkedThenSmuggled = `0\r\n\r\n${SMUGGLED}`;
    const both = `Content-Length: ${chunkedThenSmuggled.length}\r\n`;
    for (
      const [label, fields, body] of [
        ["content-length, then transfer-encoding", `${both}Transfer-Encoding: chunked\r\n`],
        ["transfer-encoding, then content-length", `Transfer-Encoding: chunked\r\n${both}`],
        [
          "a transfer-encoding folded onto a second line",
          `${both}Transfer-Encoding:\r\n chunked\r\n`,
        ],
        ["a space before the colon", `Transfer-Encoding : chunked\r\n${both}`],
        ["two different content-lengths", "Content-Length: 5\r\nContent-Length: 40\r\n", "hello"],
        ["a content-length with a sign", "Content-Length: +5\r\n", "hello"],
        ["a content-length list", "Content-Length: 5, 5\r\n", "hello"],
        ["a content-length past 2^64", "Content-Length: 18446744073709551621\r\n", "hello"],
      ]
    ) {
      await t.step(label!, () =>
        expectRefusedAndClosed(
          s.port,
          `POST /a HTTP/1.1\r\nHost: x\r\n${fields}\r\n${body ?? chunkedThenSmuggled}`,
          400,
        ));
    }
    assertEquals(seen, []);
  });
}

/** The body of a response read until the close: chunked on deno, whose last chunk never comes. */
function bodyUntilClose(head: string, rest: string): string {
  return /\r\ntransfer-encoding: chunked(\r\n|$)/i.test(head) ? dechunk(rest) : rest;
}

/**
 * Sends a CONNECT to `port` with, after its head, its body by `content-length` or bytes for the
 * tunnel, and checks that the 501 is the only answer and the connection then closes.
 */
async function expectConnectRefusedAndClosed(t: Deno.TestContext, port: number): Promise<void> {
  for (
    const [label, fields] of [
      ["its body, by content-length", `Content-Length: ${SMUGGLED.length}\r\n`],
      ["bytes for the tunnel", ""],
    ]
  ) {
    await t.step(label!, async () => {
      using client = await RawClient.connect(port);
      await client.write(
        `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n${fields}\r\n${SMUGGLED}`,
      );
      const head = await client.head();
      assertEquals(status(head), 501, head);
      await client.write(SMUGGLED).catch(() => {});
      assert(
        await client.closedWithin(PATIENCE_MS) < PATIENCE_MS,
        "the connection is still open",
      );
      assertEquals(bodyUntilClose(head, client.pending), "Not Implemented");
    });
  }
}

for (const transport of TRANSPORTS) {
  // Head differential of 2026-11-29 (docs/asgi.md, "Request heads against uvicorn"): Deno.serve
  // gives a CONNECT request no body whatever its content-length, and kept the connection after
  // the bridge's 501 though that said "connection: close", so the bytes after the head, the body
  // a proxy in front forwarded as such, were served as the next request: "/smuggled" reached the
  // application. node and uvicorn close the connection after a CONNECT they do not tunnel.
  Deno.test(`serve() [${transport}] answers 501 to CONNECT and closes, serving nothing sent after its head`, async (t) => {
    const seen: string[] = [];
    await using s = await start(echoPath(seen), transport);
    await expectConnectRefusedAndClosed(t, s.port);
    assertEquals(seen, []);
  });
}

// Review of 9c10a2c (2026-11-29): the close after a CONNECT was made for serve() only, but a
// handler from createFetchHandler is meant for Deno.serve(handler.fetch) and `deno serve` (and
// web's App for Deno.serve(app.fetch)): there the plain 501 kept the connection, and "/smuggled"
// reached the application as before. A CONNECT can only come from a server: Fetch's Request
// refuses the method.
Deno.test("createFetchHandler() under Deno.serve answers 501 to CONNECT and closes, serving nothing sent after its head", async (t) => {
  const seen: string[] = [];
  const handler = createFetchHandler(echoPath(seen), { lifespan: "off" });
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler.fetch);
  await expectConnectRefusedAndClosed(t, server.addr.port);
  assertEquals(seen, []);
});

for (const transport of TRANSPORTS) {
  // Malformed-request differential against uvicorn (2026-11-29): Deno.serve takes two equal
  // Content-Length fields and its Headers join them, so the application read "content-length:
  // 5, 5", a value no parser of a length takes (node:http refuses the request, h11 keeps one
  // field). RFC 9110 §8.6 lets a server refuse it or keep one value; refused as on node, so the
  // two transports agree and no application meets a list where a number must be. The two agree
  // on where the body ends, so deno serves the request after it (node closes).
  Deno.test(`serve() [${transport}] answers 400 to two equal content-length fields`, async (t) => {
    const seen: string[] = [];
    await using s = await start(echoPath(seen), transport);
    for (const method of ["POST", "GET"]) {
      await t.step(method, async () => {
        using client = await RawClient.connect(s.port);
        await client.write(
          `${method} /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n` +
            `hello${SMUGGLED}`,
        );
        const head = await client.head();
        assertEquals(status(head), 400, head);
        await client.body(Number(field(head, "content-length") ?? 0));
        if (transport === "node") {
          assert(await client.closedWithin(PATIENCE_MS) < PATIENCE_MS, "still open");
        } else {
          assertEquals(
            await client.body(Number(field(await client.head(), "content-length"))),
            "/smuggled 0",
          );
        }
      });
    }
    assertEquals(seen, transport === "node" ? [] : ["/smuggled", "/smuggled"]);
  });
}
