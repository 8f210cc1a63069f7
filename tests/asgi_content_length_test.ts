/**
 * The `content-length` a response declares reaches the client on every path: on the wire of our
 * own `Deno.serve` (where the bridge lets Deno write it, as Deno writes the same header itself) and
 * on the `Response` object `createFetchHandler()` returns (where nothing else would add it).
 */
import { assertEquals, assertMatch } from "@std/assert";
import { type AsgiApplication, createFetchHandler } from "../asgi.ts";
import { bytes, rawRequest, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";

/** Answers every request with `body`, declaring `length` after `content-type` and before `x-tag`. */
function fixedApp(body: string, length: string): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") throw new Error("No lifespan here");
    await send({
      type: "http.response.start",
      status: 200,
      headers: [
        [bytes("content-type"), bytes("text/plain")],
        [bytes("content-length"), bytes(length)],
        [bytes("x-tag"), bytes("t")],
      ],
    });
    await send({ type: "http.response.body", body: bytes(body) });
  };
}

// A body that ends short of its content-length is a client that left when a server read it off
// the wire (tests/asgi_http2_test.ts); a Request a program built, with headers copied beside a
// changed body, is passed on as it is (a review found the first version answering an empty 500).
Deno.test("createFetchHandler() passes on the body of a Request shorter than its content-length", async () => {
  const handler = createFetchHandler(async (scope, receive, send) => {
    if (scope.type !== "http") return;
    let body: Uint8Array = new Uint8Array(0);
    for (;;) {
      const message = await receive();
      if (message.type !== "http.request") {
        body = bytes("disconnect");
        break;
      }
      body = new Uint8Array([...body, ...message.body]);
      if (!message.more_body) break;
    }
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body });
  }, { lifespan: "off" });
  const response = await handler.fetch(
    new Request("http://localhost/", {
      method: "POST",
      headers: { "content-length": "10" },
      body: "abc",
    }),
  );
  assertEquals([response.status, await response.text()], [200, "abc"]);
});

// A review (2026-11-28): once a failed body read answered 400 on our own Deno.serve, a Request a
// program built whose body stream fails got 400 too, blaming a client for the server's fault.
Deno.test("createFetchHandler() answers 500, not 400, when a program's Request body fails", async () => {
  const seen: string[] = [];
  const handler = createFetchHandler(async (scope, receive, send) => {
    if (scope.type !== "http") return;
    for (;;) {
      const message = await receive();
      seen.push(message.type);
      if (message.type !== "http.request" || !message.more_body) break;
    }
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body: bytes("read") });
  }, { lifespan: "off" });
  let pulls = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulls++ === 0) controller.enqueue(new Uint8Array(3));
      else controller.error(new Error("upstream broke"));
    },
  });
  const response = await handler.fetch(new Request("http://localhost/", { method: "POST", body }));
  assertEquals(response.status, 500);
  await response.body?.cancel();
  assertEquals(seen.at(-1), "http.disconnect");
});

Deno.test("createFetchHandler() keeps the declared content-length on the Response", async (t) => {
  for (const body of ["hello", ""]) {
    await t.step(`body of ${body.length} bytes`, async () => {
      const handler = createFetchHandler(fixedApp(body, String(body.length)), { lifespan: "off" });
      const response = await handler.fetch(new Request("http://localhost/"));
      assertEquals(response.headers.get("content-length"), String(body.length));
      assertEquals(response.headers.get("x-tag"), "t");
      assertEquals(await response.text(), body);
    });
  }
});

for (const transport of TRANSPORTS) {
  Deno.test(`serve() [${transport}] sends the declared content-length exactly once`, async (t) => {
    const cases = [
      { name: "GET, 5 bytes", method: "GET", body: "hello", length: "5", sent: "hello" },
      { name: "GET, empty body", method: "GET", body: "", length: "0", sent: "" },
      { name: "HEAD keeps the header", method: "HEAD", body: "hello", length: "5", sent: "" },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        await using server = await start(fixedApp(c.body, c.length), transport);
        const reply = await rawRequest(
          server.port,
          `${c.method} / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`,
        );
        const [head = "", payload] = reply.split("\r\n\r\n");
        assertMatch(head, /^HTTP\/1\.1 200 /);
        const lengths = head.split("\r\n").filter((line) => /^content-length:/i.test(line));
        assertEquals(lengths.map((line) => line.toLowerCase()), [`content-length: ${c.length}`]);
        assertMatch(head, /\r\nx-tag: t(\r\n|$)/i);
        assertEquals(payload, c.sent);
      });
    }
  });
}

for (const transport of TRANSPORTS) {
  // Regression (review of the handshake fixes, 2026-11-28): the check trimmed with trim(), which
  // strips NBSP, so "5\xa0" passed and node wrote it out as the response's length.
  Deno.test(
    `serve() [${transport}] refuses a content-length padded with NBSP, which is no whitespace`,
    async () => {
      const app = (length: Uint8Array): AsgiApplication => async (scope, _receive, send) => {
        if (scope.type !== "http") return;
        await send({
          type: "http.response.start",
          status: 200,
          headers: [[bytes("content-length"), length]],
        });
        await send({ type: "http.response.body", body: bytes("hello") });
      };
      await using padded = await start(app(new Uint8Array([0x35, 0xa0])), transport);
      const request = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
      assertMatch(await rawRequest(padded.port, request), /^HTTP\/1\.1 500 /);
      assertMatch(
        padded.logger.lines("error").join("\n"),
        /Invalid value "5\\u00a0" for header "content-length": use a decimal byte count/,
      );
      await using spaced = await start(app(bytes(" 5\t")), transport);
      assertMatch(await rawRequest(spaced.port, request), /^HTTP\/1\.1 200 [^]*\r\n\r\nhello$/);
    },
  );
}
