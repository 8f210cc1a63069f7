/**
 * The bridge's HTTP conformance suite: one set of tests over real sockets, run once per transport
 * (`Deno.serve` and `node:http`). Every test serves on a free port and talks to it with `fetch` or,
 * where `fetch` would normalise the request, a raw socket.
 */
import { assert, assertEquals, assertInstanceOf, assertMatch, assertRejects } from "@std/assert";
import {
  AsgiProtocolError,
  type HttpRequestMessage,
  type HttpScope,
  type Receive,
  type ReceiveMessage,
  type Scope,
  type Send,
  type SendMessage,
} from "../asgi.ts";
import {
  bytes,
  dechunk,
  joinBodies,
  rawRequest,
  readBody,
  sleep,
  start,
  text,
  TRANSPORTS,
} from "./fixtures/asgi_harness.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

/** A chunked upload of ten bytes in two pieces 30 ms apart: past a maxBodySize of 8. */
function tenBytesSlowly(): ReadableStream<Uint8Array> {
  return new ReadableStream({
    async start(controller) {
      controller.enqueue(bytes("12345"));
      await sleep(30);
      controller.enqueue(bytes("67890"));
      await sleep(30);
      controller.close();
    },
  });
}

/** Responds 200 with `body`. */
/** Responds 200 with `body`. */
async function reply(send: Send, body: string | Uint8Array, status = 200): Promise<void> {
  await send({
    type: "http.response.start",
    status,
    headers: [[bytes("content-type"), bytes("text/plain")]],
  });
  await send({ type: "http.response.body", body: typeof body === "string" ? bytes(body) : body });
}

/**
 * A promise with its resolver, for steering an app from the test. Each read of `promise` is
 * bounded: a defect that keeps the app from resolving it (a lost `http.disconnect`) fails the
 * test within seconds instead of hanging the suite.
 */
function signal<T = void>(
  what: string,
): { readonly promise: Promise<T>; resolve: (value: T) => void } {
  const { promise, resolve } = Promise.withResolvers<T>();
  return {
    get promise() {
      return withTimeout(promise, BOUND_MS, what);
    },
    resolve,
  };
}

for (const transport of TRANSPORTS) {
  const name = (behaviour: string) => `serve() [${transport}] ${behaviour}`;

  Deno.test(
    name("fills every scope key for an encoded path, a query and odd headers"),
    async () => {
      let seen = undefined as HttpScope | undefined;
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        seen = scope;
        await readBody(receive);
        await reply(send, "ok");
      }, transport);
      const response = await rawRequest(
        s.port,
        "GET /a%2Fb/caf%C3%A9?x=1&y=%20%zz HTTP/1.1\r\n" +
          "Host: example.test:81\r\n" +
          "X-Dup: one\r\n" +
          "x-dup: two\r\n" +
          "Set-Cookie: a=1\r\n" +
          "Set-Cookie: b=2\r\n" +
          "X-Latin: caf\xe9\r\n" +
          "X-Empty: \r\n" +
          "Connection: close\r\n\r\n",
      );
      assertMatch(response, /^HTTP\/1\.1 200 /);
      if (seen === undefined) throw new Error("The app never saw the request");
      assertEquals(Object.keys(seen).sort(), [
        "asgi",
        "client",
        "extensions",
        "headers",
        "http_version",
        "method",
        "path",
        "query_string",
        "raw_path",
        "root_path",
        "scheme",
        "server",
        "state",
        "type",
      ]);
      assertEquals(seen.type, "http");
      assertEquals(seen.asgi, { version: "3.0", spec_version: "2.1" });
      assertEquals(seen.http_version, "1.1");
      assertEquals(seen.method, "GET");
      assertEquals(seen.scheme, "http");
      assertEquals(seen.path, "/a/b/café");
      assertEquals(seen.raw_path, bytes("/a%2Fb/caf%C3%A9"));
      assertInstanceOf(seen.raw_path, Uint8Array);
      assertEquals(seen.query_string, bytes("x=1&y=%20%zz"));
      assertEquals(seen.root_path, "");
      assertEquals(seen.client?.[0], "127.0.0.1");
      assert(Number.isInteger(seen.client?.[1]) && seen.client![1] > 0);
      assertEquals(seen.server, ["127.0.0.1", s.port]);
      assertEquals(seen.state, {});
      assertEquals(seen.extensions, {});
      const headers = seen.headers.map(([k, v]) => [text(k), String.fromCharCode(...v)]);
      for (const [k] of headers) assertEquals(k, k!.toLowerCase());
      if (transport === "deno") {
        // Deno.serve merges repeated fields (but not set-cookie) and sorts names.
        assertEquals(headers, [
          ["connection", "close"],
          ["host", "example.test:81"],
          ["set-cookie", "a=1"],
          ["set-cookie", "b=2"],
          ["x-dup", "one, two"],
          ["x-empty", ""],
          ["x-latin", "caf\xe9"],
        ]);
      } else {
        // node:http keeps the fields as sent.
        assertEquals(headers, [
          ["host", "example.test:81"],
          ["x-dup", "one"],
          ["x-dup", "two"],
          ["set-cookie", "a=1"],
          ["set-cookie", "b=2"],
          ["x-latin", "caf\xe9"],
          ["x-empty", ""],
          ["connection", "close"],
        ]);
      }
    },
  );

  Deno.test(name("keeps raw_path exactly as sent and decodes path tolerantly"), async (t) => {
    const seen: HttpScope[] = [];
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      seen.push(scope);
      await readBody(receive);
      await reply(send, "ok");
    }, transport);
    const cases: [target: string, path: string, raw: string, query: string][] = [
      ["/%zz/%E0%A4%A", "/%zz/\ufffd%A", "/%zz/%E0%A4%A", ""],
      ["/a/../b/%7e/./c?q=%7e", "/a/../b/~/./c", "/a/../b/%7e/./c", "q=%7e"],
      ["//double//slash?", "//double//slash", "//double//slash", ""],
      ["/100%", "/100%", "/100%", ""],
      ["/%C3%28%FF", "/\ufffd(\ufffd", "/%C3%28%FF", ""],
    ];
    for (const [target, path, raw, query] of cases) {
      await t.step(`${target} → ${JSON.stringify(path)}`, async () => {
        const response = await rawRequest(
          s.port,
          `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
        );
        assertMatch(response, /^HTTP\/1\.1 200 /);
        const scope = seen.at(-1)!;
        assertEquals(scope.path, path);
        assertEquals(scope.raw_path, bytes(raw));
        assertEquals(scope.query_string, bytes(query));
      });
    }
  });

  Deno.test(name("prefixes path and raw_path with rootPath, as uvicorn does"), async () => {
    let seen = undefined as HttpScope | undefined;
    await using s = await start(
      async (scope, receive, send) => {
        if (scope.type !== "http") return;
        seen = scope;
        await readBody(receive);
        await reply(send, "ok");
      },
      transport,
      { rootPath: "/api" },
    );
    await (await fetch(`${s.url}/x%20y?z`)).text();
    assertEquals(seen?.root_path, "/api");
    assertEquals(seen?.path, "/api/x y");
    assertEquals(seen?.raw_path, bytes("/api/x%20y"));
  });

  Deno.test(name("delivers an empty body as one message with more_body false"), async () => {
    const all: ReceiveMessage[][] = [];
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      all.push(await readBody(receive));
      await reply(send, "ok");
    }, transport);
    await (await fetch(s.url)).text();
    await (await fetch(s.url, { method: "POST", body: "" })).text();
    // Neither content-length nor transfer-encoding: no body (RFC 9112 §6.3). Deno yields an
    // empty chunk for it, which once came as a message of its own with more_body true.
    await rawRequest(s.port, "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assertEquals(all, [
      [{ type: "http.request", body: new Uint8Array(), more_body: false }],
      [{ type: "http.request", body: new Uint8Array(), more_body: false }],
      [{ type: "http.request", body: new Uint8Array(), more_body: false }],
    ]);
  });

  Deno.test(name("delivers a chunked upload as several http.request messages"), async () => {
    let messages: HttpRequestMessage[] = [];
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      messages = await readBody(receive);
      await reply(send, joinBodies(messages));
    }, transport);
    const parts = ["first,", "second,", "third"];
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        for (const part of parts) {
          controller.enqueue(bytes(part));
          await sleep(40);
        }
        controller.close();
      },
    });
    const response = await fetch(s.url, { method: "POST", body });
    assertEquals(await response.text(), parts.join(""));
    assert(messages.length >= 3, `expected one message per chunk, got ${messages.length}`);
    assertEquals(messages.slice(0, -1).map((m) => m.more_body), messages.slice(1).map(() => true));
    assertEquals(messages.at(-1)!.more_body, false);
    assertEquals(text(joinBodies(messages)), parts.join(""));
  });

  Deno.test(name("ends a content-length body with more_body false on its last bytes"), async () => {
    let messages: HttpRequestMessage[] = [];
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      messages = await readBody(receive);
      await reply(send, "ok");
    }, transport);
    const payload = "x".repeat(200_000);
    await (await fetch(s.url, { method: "PUT", body: payload })).text();
    assertEquals(text(joinBodies(messages)), payload);
    assertEquals(messages.at(-1)!.more_body, false);
    assert(
      messages.at(-1)!.body.length > 0,
      "the last chunk carries data when the length is known",
    );
    assert(messages.slice(0, -1).every((m) => m.more_body));
  });

  Deno.test(
    name("returns http.disconnect after the body until the response completes"),
    async () => {
      const events: string[] = [];
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        await readBody(receive);
        // Starlette-style disconnect listener running alongside the response.
        const listener = receive().then((m) => events.push(`listener: ${m.type}`));
        await sleep(30);
        events.push("sending");
        await reply(send, "ok");
        await listener;
        events.push(`after: ${(await receive()).type}`);
      }, transport);
      assertEquals(await (await fetch(s.url)).text(), "ok");
      await sleep(20);
      assertEquals(events, ["sending", "listener: http.disconnect", "after: http.disconnect"]);
    },
  );

  Deno.test(
    name("answers a pending receive() with http.disconnect when the client aborts"),
    async () => {
      const waiting = signal("the app to read the body");
      const outcome = signal<{ message: string; sendResult: string }>(
        "the app to see http.disconnect and try to send",
      );
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        if (scope.path === "/next") return await reply(send, "next");
        await readBody(receive);
        waiting.resolve();
        const message = await receive();
        let sendResult = "resolved";
        try {
          await reply(send, "too late");
        } catch (error) {
          sendResult = String(error);
        }
        outcome.resolve({ message: message.type, sendResult });
      }, transport);
      const controller = new AbortController();
      const request = fetch(`${s.url}/slow`, { signal: controller.signal });
      await waiting.promise;
      controller.abort();
      await assertRejects(() => request);
      assertEquals(await outcome.promise, { message: "http.disconnect", sendResult: "resolved" });
      assertEquals(await (await fetch(`${s.url}/next`)).text(), "next");
      assertEquals(s.logger.lines("error"), []);
    },
  );

  Deno.test(
    name("answers receive() with http.disconnect when the client aborts mid-upload"),
    async () => {
      const received = signal("the app to receive the first bytes");
      const outcome = signal<string[]>("the app to see http.disconnect mid-upload");
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        if (scope.path === "/next") return await reply(send, "next");
        const types: string[] = [];
        for (;;) {
          const message = await receive();
          types.push(message.type);
          if (message.type === "http.request" && message.body.length > 0) received.resolve();
          if (message.type !== "http.request" || !message.more_body) break;
        }
        outcome.resolve(types);
      }, transport);
      const controller = new AbortController();
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          c.enqueue(bytes("partial"));
          await new Promise((resolve) => setTimeout(resolve, 10_000, undefined)).catch(() => {});
        },
      });
      const request = fetch(`${s.url}/upload`, {
        method: "POST",
        body,
        signal: controller.signal,
      }).catch((error) => error);
      await received.promise;
      controller.abort();
      await request;
      const types = await outcome.promise;
      assertEquals(types.at(-1), "http.disconnect");
      assertEquals(types.filter((t) => t === "http.disconnect").length, 1);
      assertEquals(await (await fetch(`${s.url}/next`)).text(), "next");
    },
  );

  Deno.test(name("streams a response of several chunks in order, chunked"), async () => {
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await readBody(receive);
      await send({ type: "http.response.start", status: 201, headers: [] });
      for (const part of ["one ", "two ", "three"]) {
        await send({ type: "http.response.body", body: bytes(part), more_body: true });
        await sleep(20);
      }
      await send({ type: "http.response.body" });
    }, transport);
    const raw = await rawRequest(s.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assertMatch(raw, /^HTTP\/1\.1 201 /);
    assertMatch(raw, /\r\ntransfer-encoding: chunked\r\n/i);
    assert(!/\r\ncontent-length:/i.test(raw));
    const response = await fetch(s.url);
    const reader = response.body!.getReader();
    const chunks: string[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(text(value));
    }
    assertEquals(chunks.join(""), "one two three");
    assert(chunks.length >= 2, "chunks arrive as they are sent");
  });

  Deno.test(name("holds send() back until the client takes the chunks"), async () => {
    let sent = 0;
    const total = 400;
    const chunk = new Uint8Array(64 * 1024);
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await readBody(receive);
      await send({ type: "http.response.start", status: 200 });
      for (let i = 0; i < total; i++) {
        await send({ type: "http.response.body", body: chunk, more_body: true });
        sent++;
      }
      await send({ type: "http.response.body" });
    }, transport);
    const response = await fetch(s.url);
    await sleep(300);
    const sentBeforeReading = sent;
    const body = new Uint8Array(await response.arrayBuffer());
    assertEquals(body.length, total * chunk.length);
    assertEquals(sent, total);
    // 400 × 64 KiB = 25 MiB; only what socket buffers hold may be accepted before the client reads.
    assert(sentBeforeReading < total / 2, `send() accepted ${sentBeforeReading} unread chunks`);
  });

  Deno.test(
    name("resolves body sends made without awaiting the one before (regression: the first hung)"),
    async (t) => {
      // asyncio.gather(send(a), send(b)) in Python; 1 MiB chunks fill node's socket buffer.
      for (const size of [10, 1024 * 1024]) {
        await t.step(`${size} B chunks`, async () => {
          const sends = signal<number>("both concurrent sends to resolve");
          await using s = await start(async (scope, receive, send) => {
            if (scope.type !== "http") return;
            await readBody(receive);
            await send({ type: "http.response.start", status: 200 });
            const chunk = (fill: number) => new Uint8Array(size).fill(fill);
            await Promise.all([
              send({ type: "http.response.body", body: chunk(97), more_body: true }),
              send({ type: "http.response.body", body: chunk(98), more_body: true }),
            ]);
            sends.resolve(2);
            await send({ type: "http.response.body", body: bytes("END") });
          }, transport);
          const response = fetch(s.url).then((response) => response.arrayBuffer());
          assertEquals(await sends.promise, 2);
          const body = new Uint8Array(await withTimeout(response, BOUND_MS, "the response"));
          assertEquals(body.length, 2 * size + 3);
          assertEquals([body[0], body[size], text(body.subarray(2 * size))], [97, 98, "END"]);
        });
      }
    },
  );

  Deno.test(
    name("tells a streaming app the client cancelled, and send() becomes a no-op"),
    async () => {
      const outcome = signal<{ message: string; sendsAfter: number }>(
        "the streaming app to see http.disconnect",
      );
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        await readBody(receive);
        await send({ type: "http.response.start", status: 200 });
        await send({ type: "http.response.body", body: bytes("first"), more_body: true });
        const message = await receive();
        let sendsAfter = 0;
        for (let i = 0; i < 3; i++) {
          await send({ type: "http.response.body", body: bytes("more"), more_body: true });
          sendsAfter++;
        }
        await send({ type: "http.response.body" });
        outcome.resolve({ message: message.type, sendsAfter });
      }, transport);
      const response = await fetch(s.url);
      const reader = response.body!.getReader();
      assertEquals(text((await reader.read()).value!), "first");
      await reader.cancel();
      assertEquals(await outcome.promise, { message: "http.disconnect", sendsAfter: 3 });
      assertEquals(s.logger.lines("error"), []);
    },
  );

  Deno.test(
    name("answers 500 when the app raises before starting, and logs the stack"),
    async () => {
      await using s = await start(async (scope) => {
        if (scope.type !== "http") return;
        if (scope.path === "/ok") throw new Error("unreachable");
        await Promise.resolve();
        throw new Error("boom before start");
      }, transport);
      const response = await fetch(s.url);
      assertEquals(response.status, 500);
      assertEquals(response.headers.get("content-type"), "text/plain; charset=utf-8");
      assertEquals(await response.text(), "Internal Server Error");
      const [line, ...rest] = s.logger.lines("error");
      assertEquals(rest, []);
      assertMatch(line!, /^Exception in ASGI application\n Error: boom before start\n\s+at /);
    },
  );

  Deno.test(name("answers 500 when the app returns without starting a response"), async () => {
    await using s = await start(async (scope, receive) => {
      if (scope.type !== "http") return;
      await receive();
    }, transport);
    const response = await fetch(s.url);
    assertEquals([response.status, await response.text()], [500, "Internal Server Error"]);
    assertEquals(s.logger.lines("error"), ["ASGI callable returned without starting response"]);
  });

  Deno.test(name("closes the connection when the app raises after starting"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      if (scope.path === "/next") return await reply(send, "next");
      await send({ type: "http.response.start", status: 200 });
      await send({ type: "http.response.body", body: bytes("partial"), more_body: true });
      await sleep(20);
      throw new Error("boom after start");
    }, transport);
    const failed = await fetch(s.url).then((r) => r.text()).then(() => "read", (e) => e.name);
    assertEquals(failed, "TypeError", "the client must see a broken body, not a complete response");
    const raw = await rawRequest(s.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 2000);
    assertMatch(raw, /^HTTP\/1\.1 200 /);
    assert(!raw.includes("500"), "no 500 is injected after the start");
    assert(!raw.endsWith("0\r\n\r\n"), "the chunked body never ends properly");
    assertEquals(await (await fetch(`${s.url}/next`)).text(), "next");
    const errors = s.logger.lines("error");
    assertEquals(errors.length, 2);
    for (const line of errors) {
      assertMatch(line, /^Exception in ASGI application\n Error: boom after start/);
    }
  });

  Deno.test(
    name(
      "drops quietly what a task sends after the app raised mid-response (regression: logged as a protocol error)",
    ),
    async () => {
      const late = signal<string>("the late send to settle");
      await using s = await start(async (scope, _receive, send) => {
        if (scope.type !== "http") return;
        await send({ type: "http.response.start", status: 200 });
        await send({ type: "http.response.body", body: bytes("partial"), more_body: true });
        // Middleware or a task of the app still holds send() after the app failed.
        setTimeout(() => {
          send({ type: "http.response.body", body: bytes("late"), more_body: true })
            .then(() => late.resolve("resolved"), (error) => late.resolve(String(error)));
        }, 50);
        throw new Error("boom mid-response");
      }, transport);
      const failed = await fetch(s.url).then((r) => r.text()).then(() => "read", (e) => e.name);
      assertEquals(failed, "TypeError");
      assertEquals(await late.promise, "resolved");
      const errors = s.logger.lines("error");
      assertEquals(errors.length, 1);
      assertMatch(errors[0]!, /^Exception in ASGI application\n Error: boom mid-response/);
    },
  );

  Deno.test(name("closes the connection when the app returns mid-response"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      await send({ type: "http.response.start", status: 200 });
      await send({ type: "http.response.body", body: bytes("partial"), more_body: true });
    }, transport);
    const failed = await fetch(s.url).then((r) => r.text()).then(() => "read", (e) => e.name);
    assertEquals(failed, "TypeError");
    assertEquals(s.logger.lines("error"), ["ASGI callable returned without completing response"]);
  });

  Deno.test(name("closes the connection when the app raises between start and body"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      await send({ type: "http.response.start", status: 202 });
      throw new Error("boom between");
    }, transport);
    const outcome = await fetch(s.url).then(
      async (r) => `${r.status} ${await r.text().then(() => "read", (e) => e.name)}`,
      (e) => e.name,
    );
    assert(outcome === "202 TypeError" || outcome === "TypeError", outcome);
    assertEquals(s.logger.lines("error").length, 1);
  });

  Deno.test(name("rejects protocol errors from send() by name and logs them"), async (t) => {
    const cases: [string, SendMessage[], string][] = [
      [
        "body before start",
        [{ type: "http.response.body", body: bytes("x") }],
        'Cannot send "http.response.body" before "http.response.start": start the response first',
      ],
      [
        "second start",
        [
          { type: "http.response.start", status: 200 },
          { type: "http.response.start", status: 200 },
        ],
        'Cannot send "http.response.start" twice: the response has already started',
      ],
      [
        "anything after the final body",
        [
          { type: "http.response.start", status: 200 },
          { type: "http.response.body", body: bytes("done") },
          { type: "http.response.body", body: bytes("more") },
        ],
        'Cannot send "http.response.body" after the response completed: the last body message had "more_body" false',
      ],
      [
        "a string status",
        [{ type: "http.response.start", status: "200" as unknown as number }],
        'Invalid "status" "200" in "http.response.start": use an integer from 200 to 599',
      ],
      [
        "a status out of range",
        [{ type: "http.response.start", status: 99 }],
        'Invalid "status" 99 in "http.response.start": use an integer from 200 to 599',
      ],
      [
        "string headers",
        [{
          type: "http.response.start",
          status: 200,
          headers: [["content-type", "text/plain"]] as unknown as [Uint8Array, Uint8Array][],
        }],
        // Named "an array" once, quoting nothing (HTTP review of 2026-11-29).
        'Invalid header ["content-type", "text/plain"] in "http.response.start": each header is a [Uint8Array, Uint8Array] pair; encode text with textBytes()',
      ],
      [
        "a header of three byte strings",
        [{
          type: "http.response.start",
          status: 200,
          headers: [[bytes("a"), bytes("b"), bytes("c")]] as unknown as [Uint8Array, Uint8Array][],
        }],
        'Invalid header [a Uint8Array, a Uint8Array, a Uint8Array] in "http.response.start": each header is a [Uint8Array, Uint8Array] pair',
      ],
      [
        "a header given as one string",
        [{
          type: "http.response.start",
          status: 200,
          headers: ["x-a: 1"] as unknown as [Uint8Array, Uint8Array][],
        }],
        'Invalid header "x-a: 1" in "http.response.start": each header is a [Uint8Array, Uint8Array] pair',
      ],
      [
        "headers that are not iterable",
        [{
          type: "http.response.start",
          status: 200,
          headers: 5 as unknown as [Uint8Array, Uint8Array][],
        }],
        'Invalid "headers" 5 in "http.response.start": use an array of [Uint8Array, Uint8Array] pairs',
      ],
      [
        "CR LF in a header value",
        [{
          type: "http.response.start",
          status: 200,
          headers: [[bytes("x-a"), bytes("1\r\nset-cookie: evil=1")]],
        }],
        'Invalid value for header "x-a": byte 0x0d is a control character; a header value holds tab, space, visible ASCII and bytes 0x80-0xff only (CR and LF would split the response): percent-encode the text',
      ],
      // Regression (review, 2026-11-25): a control byte other than CR, LF and NUL passed, and
      // Deno's response writer panicked on it, ending the whole process.
      [
        "a control byte in a header value",
        [{
          type: "http.response.start",
          status: 200,
          headers: [[bytes("content-disposition"), bytes("attachment; filename=a\x01b")]],
        }],
        'Invalid value for header "content-disposition": byte 0x01 is a control character; a header value holds tab, space, visible ASCII and bytes 0x80-0xff only (CR and LF would split the response): percent-encode the text',
      ],
      // Regression (review, 2026-11-25): the last of two differing lengths won, and node wrote
      // both (a proxy reading the other goes out of step with the connection).
      [
        "two differing content-lengths",
        [{
          type: "http.response.start",
          status: 200,
          headers: [[bytes("content-length"), bytes("50")], [bytes("content-length"), bytes("2")]],
        }],
        'Invalid header "content-length: 2" in "http.response.start": an earlier content-length says 50; send one length',
      ],
      [
        "LF in a header name",
        [{
          type: "http.response.start",
          status: 200,
          headers: [[bytes("x-a\nx-b"), bytes("1")]],
        }],
        'Invalid header name "x-a\\nx-b": byte 0xa is not allowed in a header name; use letters, ' +
        "digits and !#$%&'*+-.^_`|~ only",
      ],
      [
        "a string body",
        [
          { type: "http.response.start", status: 200 },
          { type: "http.response.body", body: "text" as unknown as Uint8Array },
        ],
        'Invalid "body" "text" in "http.response.body": use a Uint8Array; encode text with ' +
        "textBytes()",
      ],
      [
        "a string more_body",
        [
          { type: "http.response.start", status: 200 },
          { type: "http.response.body", more_body: "yes" as unknown as boolean },
        ],
        'Invalid "more_body" "yes" in "http.response.body": use true or false',
      ],
      [
        "trailers",
        [{ type: "http.response.start", status: 200, trailers: true }],
        'Invalid "trailers" true in "http.response.start": response trailers are not supported, leave the key out',
      ],
      [
        "an unknown message type",
        [{ type: "websocket.accept" } as unknown as SendMessage],
        'Cannot send "websocket.accept" on an HTTP connection: expected "http.response.start"',
      ],
      [
        "a message that is not an object",
        ["http.response.start" as unknown as SendMessage],
        'Invalid message "http.response.start": send an object with a "type" key',
      ],
      [
        "a body longer than content-length",
        [
          {
            type: "http.response.start",
            status: 200,
            headers: [[bytes("content-length"), bytes("3")]],
          },
          { type: "http.response.body", body: bytes("four") },
        ],
        "Response body is longer than its content-length 3: 4 bytes sent, fix the header or the body",
      ],
    ];
    let current: SendMessage[] = [];
    let caught: unknown;
    let loggedAtCatch: unknown[][] = [];
    await using s = await start(async (scope: Scope, _receive: Receive, send: Send) => {
      if (scope.type !== "http") return;
      caught = undefined;
      for (const message of current) {
        try {
          await send(message);
        } catch (error) {
          caught = error;
          loggedAtCatch = s.logger.entries.map((entry) => entry.data);
          break;
        }
      }
      // A well-behaved ending where the protocol still allows one.
      try {
        await send({ type: "http.response.start", status: 299 });
      } catch { /* already started */ }
      try {
        await send({ type: "http.response.body", body: bytes("end") });
      } catch { /* already complete */ }
    }, transport);
    for (const [label, messages, message] of cases) {
      await t.step(label, async () => {
        current = messages;
        s.logger.entries.length = 0;
        await (await fetch(s.url)).arrayBuffer();
        const error = caught;
        assertInstanceOf(error, AsgiProtocolError);
        if (!(error instanceof AsgiProtocolError)) return;
        assertEquals(error.name, "AsgiProtocolError");
        assertEquals(error.message, message);
        assertEquals(loggedAtCatch, [[caught]]);
      });
    }
  });

  Deno.test(name("logs a protocol error once when the app lets it escape"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      await send({ type: "http.response.body", body: bytes("x") });
    }, transport);
    const response = await fetch(s.url);
    assertEquals([response.status, await response.text()], [500, "Internal Server Error"]);
    const errors = s.logger.entries.filter((e) => e.level === "error");
    assertEquals(errors.length, 1);
    assertInstanceOf(errors[0]!.data[0], AsgiProtocolError);
  });

  Deno.test(name("drops the body of a HEAD response and keeps its headers"), async () => {
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await readBody(receive);
      await send({
        type: "http.response.start",
        status: 200,
        headers: [[bytes("content-length"), bytes("5")], [bytes("x-kept"), bytes("yes")]],
      });
      await send({ type: "http.response.body", body: bytes("hello") });
    }, transport);
    const response = await fetch(s.url, { method: "HEAD" });
    assertEquals(response.headers.get("x-kept"), "yes");
    assertEquals(response.headers.get("content-length"), "5");
    assertEquals(await response.text(), "");
    const raw = await rawRequest(
      s.port,
      "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    // The body of the GET follows the HEAD's head directly: no body bytes came in between.
    assertMatch(raw, /^HTTP\/1\.1 200 [^]*?\r\n\r\nHTTP\/1\.1 200 [^]*\r\n\r\nhello$/);
  });

  Deno.test(
    name(
      "says http.disconnect to a streamed HEAD or 204 response once its head is out, and logs nothing when the app then stops",
    ),
    async (t) => {
      // An endless stream (server-sent events) must learn that its response is over, or it runs
      // on, and holds shutdown, for good: a review found a change doing that, and then that a
      // receive() made after the first body message still waited for good. It stops without the
      // last body message, which leaves nothing unfinished on the wire.
      const cases: [string, string, number, boolean][] = [
        ["HEAD, receive() before the first body message", "HEAD", 200, true],
        ["HEAD, receive() after it", "HEAD", 200, false],
        ["GET 204, receive() after it", "GET", 204, false],
      ];
      for (const [label, method, status, early] of cases) {
        await t.step(label, async () => {
          const seen = signal<string>("the app to stop");
          await using s = await start(async (scope, receive, send) => {
            if (scope.type !== "http") return;
            await readBody(receive);
            await send({ type: "http.response.start", status });
            const before = early ? receive() : undefined;
            await send({ type: "http.response.body", body: bytes("event\n"), more_body: true });
            const ended = before ?? receive();
            seen.resolve((await withTimeout(ended, BOUND_MS, "http.disconnect")).type);
          }, transport);
          const response = await fetch(s.url, { method });
          assertEquals([response.status, await response.text()], [status, ""]);
          assertEquals(await seen.promise, "http.disconnect");
          await sleep(20);
          assertEquals(s.logger.lines(), []);
        });
      }
    },
  );

  Deno.test(name("drops the body of a 204 response"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      await send({ type: "http.response.start", status: 204 });
      await send({ type: "http.response.body", body: bytes("ignored") });
    }, transport);
    const response = await fetch(s.url);
    assertEquals([response.status, await response.text()], [204, ""]);
    assertEquals(s.logger.lines(), []);
  });

  Deno.test(name("sends repeated response headers and Latin-1 bytes as given"), async () => {
    await using s = await start(async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      await send({
        type: "http.response.start",
        status: 200,
        headers: [
          [bytes("set-cookie"), bytes("a=1")],
          [bytes("Set-Cookie"), bytes("b=2")],
          [bytes("x-latin"), Uint8Array.of(0x63, 0x61, 0x66, 0xe9)],
        ],
      });
      await send({ type: "http.response.body", body: bytes("ok") });
    }, transport);
    const response = await fetch(s.url);
    await response.text();
    assertEquals(response.headers.getSetCookie(), ["a=1", "b=2"]);
    const raw = await rawRequest(s.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assertMatch(raw, /\r\nx-latin: caf\xe9\r\n/i);
  });

  // Regression (attack on the HTTP bridge, 2026-11-28): on node, a head the server wrote itself
  // when the application raised or returned mid-response went out through flushHeaders(), which
  // Deno's node:http writes as UTF-8: "caf\xe9" reached the wire as "caf\xc3\xa9".
  Deno.test(
    name("sends Latin-1 header bytes as given in a head it writes for a failed app"),
    async (t) => {
      const cases: [string, string, number, boolean][] = [
        ["a 200 whose application raised after the start", "GET", 200, true],
        ["a HEAD response whose application raised after the start", "HEAD", 200, true],
        ["a 304 whose application returned after the start", "GET", 304, false],
      ];
      for (const [label, method, status, raise] of cases) {
        await t.step(label, async () => {
          await using s = await start(async (scope, _receive, send) => {
            if (scope.type !== "http") return;
            await send({
              type: "http.response.start",
              status,
              headers: [[bytes("x-latin"), Uint8Array.of(0x63, 0x61, 0x66, 0xe9)]],
            });
            if (raise) throw new Error("boom");
          }, transport);
          const raw = await rawRequest(s.port, `${method} / HTTP/1.1\r\nHost: x\r\n\r\n`);
          assertMatch(raw, new RegExp(`^HTTP/1\\.1 ${status} `));
          assertMatch(raw, /\r\nx-latin: caf\xe9\r\n/i);
        });
      }
    },
  );

  Deno.test(name("sends body bytes as given and adds no content-type of its own"), async (t) => {
    const cases: [string, Uint8Array, [Uint8Array, Uint8Array][], string | null][] = [
      ["binary bytes", Uint8Array.of(0, 0xff, 0x80, 0x0a, 0xe9), [], null],
      ["ASCII without content-type", bytes("plain ascii"), [], null],
      [
        "ASCII with content-type",
        bytes('{"a":1}'),
        [[bytes("content-type"), bytes("application/json")]],
        "application/json",
      ],
      ["a large body", new Uint8Array(300_000).fill(0x61), [], null],
    ];
    let current = cases[0]!;
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await readBody(receive);
      await send({ type: "http.response.start", status: 200, headers: current[2] });
      await send({ type: "http.response.body", body: current[1] });
    }, transport);
    for (const entry of cases) {
      await t.step(entry[0], async () => {
        current = entry;
        const response = await fetch(s.url);
        assertEquals(new Uint8Array(await response.arrayBuffer()), entry[1]);
        assertEquals(response.headers.get("content-type"), entry[3]);
        assertEquals(response.headers.get("content-length"), String(entry[1].length));
      });
    }
  });

  Deno.test(name("keeps the bytes of a scope intact while later requests are served"), async () => {
    const scopes: HttpScope[] = [];
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      scopes.push(scope);
      await readBody(receive);
      await reply(send, "ok");
    }, transport);
    // Enough header bytes to go through several of the shared buffers scope bytes are cut from.
    for (let i = 0; i < 120; i++) {
      const response = await fetch(`${s.url}/r${i}?q=${i}`, {
        headers: { "x-index": String(i), "x-padding": "p".repeat(400) },
      });
      await response.arrayBuffer();
    }
    scopes.forEach((scope, i) => {
      assertEquals(text(scope.raw_path), `/r${i}`);
      assertEquals(text(scope.query_string), `q=${i}`);
      const index = scope.headers.find(([k]) => text(k) === "x-index");
      assertEquals(index && text(index[1]), String(i));
    });
  });

  Deno.test(
    name("answers 413 without calling the app when content-length exceeds maxBodySize"),
    async (t) => {
      let calls = 0;
      await using s = await start(
        async (scope, receive, send) => {
          if (scope.type !== "http") return;
          calls++;
          await readBody(receive);
          await reply(send, "ok");
        },
        transport,
        { maxBodySize: 10 },
      );
      const small = await fetch(s.url, { method: "POST", body: "0123456789" });
      assertEquals([small.status, await small.text()], [200, "ok"]);
      const large = await fetch(s.url, { method: "POST", body: "0123456789!" });
      assertEquals([large.status, await large.text()], [413, "Content Too Large"]);
      assertEquals(calls, 1);
      // HTTP review of 2026-11-29: a length past 2^53 - 1, which both parsers take (up to
      // 2^64 - 1), read as no stated length at all: the application was called, and read the body.
      for (const length of ["9007199254740992", "1152921504606846976", "18446744073709551615"]) {
        await t.step(`content-length ${length}, past 2^53 - 1`, async () => {
          const answer = await rawRequest(
            s.port,
            `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\nabc`,
          );
          assertEquals(answer.slice(0, 13), "HTTP/1.1 413 ", answer);
          assertEquals(calls, 1);
        });
      }
    },
  );

  // HTTP review of 2026-11-29: node:http wrote both fields, and Node.js clients (node:http,
  // fetch) refused the response: "Parse Error: Duplicate Content-Length". uvicorn sends one.
  Deno.test(name("sends one content-length for two equal ones, whole or streamed"), async (t) => {
    // One constant list, as an application keeps it: the second response reuses its conversion.
    const headers: [Uint8Array, Uint8Array][] = [
      [bytes("content-length"), bytes("3")],
      [bytes("Content-Length"), bytes("3")],
    ];
    for (const [i, streamed] of [false, true, false].entries()) {
      await t.step(`${streamed ? "streamed" : "whole"}, response ${i + 1}`, async () => {
        await using s = await start(async (scope, _receive, send) => {
          if (scope.type !== "http") return;
          await send({ type: "http.response.start", status: 200, headers });
          if (streamed) {
            await send({ type: "http.response.body", body: bytes("a"), more_body: true });
          }
          await send({ type: "http.response.body", body: bytes(streamed ? "bc" : "abc") });
        }, transport);
        const answer = await rawRequest(
          s.port,
          "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assertEquals(answer.match(/^content-length: 3\r$/gim)?.length, 1, answer);
        assert(answer.endsWith("\r\n\r\nabc"), answer);
      });
    }
  });

  Deno.test(
    name("answers 413 and disconnects the app when a chunked body exceeds maxBodySize"),
    async () => {
      const seen = signal<string[]>("the app to see the 413 end its body");
      await using s = await start(
        async (scope, receive, send) => {
          if (scope.type !== "http") return;
          const types: string[] = [];
          for (;;) {
            const message = await receive();
            types.push(message.type);
            if (message.type !== "http.request" || !message.more_body) break;
          }
          await reply(send, "too late");
          seen.resolve(types);
        },
        transport,
        { maxBodySize: 8 },
      );
      const outcome = await fetch(s.url, { method: "POST", body: tenBytesSlowly() }).then(
        async (r) => `${r.status} ${await r.text()}`,
        (e) => e.name,
      );
      // The 413 may race the rest of the upload; either way the app never saw the excess.
      assert(outcome === "413 Content Too Large" || outcome === "TypeError", outcome);
      assertEquals(await seen.promise, ["http.request", "http.disconnect"]);
    },
  );

  // Brief C, point 2 (2026-11-28): once the response had started no 413 went out (the response
  // is cut off instead), yet the log said "answered 413 and disconnected" in every case.
  const CUT_OFF = "8 after the response started: cut the response off (no 413) and disconnected";
  Deno.test(
    name("logs what it did when a chunked body exceeds maxBodySize, 413 or cut-off response"),
    async (t) => {
      const cases = [
        ["before any response", 0, "8: answered 413 and disconnected"],
        ["after http.response.start", 1, CUT_OFF],
        ["after a first body chunk", 2, CUT_OFF],
      ] as const;
      for (const [label, sent, logged] of cases) {
        await t.step(label, async () => {
          const seen = signal<string>("the app to see http.disconnect");
          await using s = await start(
            async (scope, receive, send) => {
              if (scope.type !== "http") return;
              if (sent > 0) await send({ type: "http.response.start", status: 200 });
              if (sent > 1) {
                await send({ type: "http.response.body", body: bytes("begun"), more_body: true });
              }
              for (;;) {
                const message = await receive();
                if (message.type !== "http.request" || !message.more_body) {
                  return seen.resolve(message.type);
                }
              }
            },
            transport,
            { maxBodySize: 8 },
          );
          await fetch(s.url, { method: "POST", body: tenBytesSlowly() }).then((r) => r.text())
            .catch(() => {});
          assertEquals(await seen.promise, "http.disconnect");
          assertEquals(s.logger.lines("warn"), [`Request body exceeds maxBodySize ${logged}`]);
        });
      }
    },
  );

  Deno.test(name("keeps serving other requests while one is slow"), async () => {
    const release = signal("the test to release the slow request");
    await using s = await start(async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await readBody(receive);
      if (scope.path === "/slow") await release.promise;
      await reply(send, scope.path);
    }, transport);
    const slow = fetch(`${s.url}/slow`).then((r) => r.text());
    assertEquals(await (await fetch(`${s.url}/fast`)).text(), "/fast");
    release.resolve();
    assertEquals(await slow, "/slow");
  });

  // HTTP differential of responses (2026-11-28): an application's transfer-encoding wins over its
  // content-length, which both transports drop, but the core still held the body to that length:
  // "content-length: 1" beside "transfer-encoding: chunked" and a 3-byte body ended in a protocol
  // error and a truncated chunked response (uvicorn sends it whole). To an HTTP/1.0 client node
  // dropped the coding but kept the length, so the body outran its framing.
  Deno.test(
    name("sends the whole body when a transfer-encoding comes with a content-length it outgrows"),
    async (t) => {
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        await readBody(receive);
        await send({
          type: "http.response.start",
          status: 200,
          headers: [
            [bytes("content-length"), bytes("1")],
            [bytes("transfer-encoding"), bytes("chunked")],
          ],
        });
        if (scope.path === "/stream") {
          await send({ type: "http.response.body", body: bytes("abc"), more_body: true });
          await send({ type: "http.response.body", body: bytes("de") });
        } else {
          await send({ type: "http.response.body", body: bytes("abc") });
        }
      }, transport);
      const cases: [string, string, string, string][] = [
        ["a whole body, HTTP/1.1", "/", "1.1", "3\r\nabc\r\n0\r\n\r\n"],
        ["a streamed body, HTTP/1.1", "/stream", "1.1", "abcde"],
        ["a whole body, HTTP/1.0: to the close", "/", "1.0", "abc"],
        ["a streamed body, HTTP/1.0: to the close", "/stream", "1.0", "abcde"],
      ];
      for (const [what, path, version, body] of cases) {
        await t.step(what, async () => {
          const raw = await rawRequest(
            s.port,
            `GET ${path} HTTP/${version}\r\nHost: x\r\nConnection: close\r\n\r\n`,
          );
          const [head, rest] = [
            raw.slice(0, raw.indexOf("\r\n\r\n")),
            raw.slice(raw.indexOf("\r\n\r\n") + 4),
          ];
          assertMatch(head, /^HTTP\/1\.[01] 200 /);
          if (version === "1.0") {
            assert(!/\r\ntransfer-encoding:/i.test(head), head);
            assertEquals(rest, body);
            // The application's length is dropped; the true one may be stated (deno does).
            const stated = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
            if (stated !== undefined) assertEquals(Number(stated), body.length);
          } else {
            assert(!/\r\ncontent-length:/i.test(head), head);
            assertMatch(head, /\r\ntransfer-encoding: chunked(\r\n|$)/i);
            // Chunk sizes as each transport cuts them: compare the bytes they frame.
            assertEquals(dechunk(rest), body.includes("\r\n") ? "abc" : body);
          }
          assertEquals(s.logger.lines("error"), []);
        });
      }
    },
  );

  // HTTP differential of responses (2026-11-28): node:http throws on a "trailer" field in a
  // response it does not send chunked (a whole body, a 204, any HTTP/1.0 answer), and the client
  // got no response at all, the connection closed. deno and uvicorn send the field as given.
  Deno.test(
    name("answers with a trailer field the application sends, whatever the framing"),
    async (t) => {
      await using s = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        await readBody(receive);
        const status = scope.path === "/204" ? 204 : 200;
        await send({
          type: "http.response.start",
          status,
          headers: [[bytes("trailer"), bytes("x-checksum")]],
        });
        if (scope.path === "/stream") {
          await send({ type: "http.response.body", body: bytes("ab"), more_body: true });
          await send({ type: "http.response.body", body: bytes("cd") });
        } else {
          await send({ type: "http.response.body", body: bytes(status === 204 ? "" : "abcd") });
        }
      }, transport);
      const cases: [string, string, string, string, string][] = [
        ["a whole body", "GET", "/", "1.1", "200"],
        ["a 204", "GET", "/204", "1.1", "204"],
        ["HEAD", "HEAD", "/", "1.1", "200"],
        ["a streamed body", "GET", "/stream", "1.1", "200"],
        ["a streamed body, HTTP/1.0", "GET", "/stream", "1.0", "200"],
        ["a whole body, HTTP/1.0", "GET", "/", "1.0", "200"],
      ];
      for (const [what, method, path, version, status] of cases) {
        await t.step(what, async () => {
          const raw = await rawRequest(
            s.port,
            `${method} ${path} HTTP/${version}\r\nHost: x\r\nConnection: close\r\n\r\n`,
          );
          assertMatch(raw, new RegExp(`^HTTP/1\\.[01] ${status} `));
          const rest = raw.slice(raw.indexOf("\r\n\r\n") + 4);
          if (method === "GET" && status === "200") {
            assertEquals(
              /\r\ntransfer-encoding: chunked\r\n/i.test(raw) ? dechunk(rest) : rest,
              "abcd",
            );
          } else {
            assertEquals(rest, "");
          }
          assertEquals(s.logger.lines("error"), []);
        });
      }
    },
  );

  // HTTP differential of responses against uvicorn (2026-11-28): on node an application's own
  // "connection" field without "close" (keep-alive, or a list of hop-by-hop fields) made
  // node:http keep a connection the client had asked to close (its "Connection: close", or
  // HTTP/1.0 without keep-alive), against RFC 9112 §9.6: the client waited for the close that
  // ends the exchange until keepAliveTimeout. deno and uvicorn add their own "connection: close".
  Deno.test(
    name("closes a connection the client asked to close, whatever connection field the app sends"),
    async (t) => {
      const cases: [string, string, string][] = [
        ["HTTP/1.1 and Connection: close, the app says keep-alive", "1.1", "keep-alive"],
        ["HTTP/1.1 and Connection: close, the app names a field", "1.1", "x-trace"],
        ["HTTP/1.0, the app says keep-alive", "1.0", "keep-alive"],
        ["HTTP/1.0, the app sends an empty field", "1.0", ""],
      ];
      for (const [what, version, connection] of cases) {
        await t.step(what, async () => {
          await using s = await start(async (scope, receive, send) => {
            if (scope.type !== "http") return;
            await readBody(receive);
            await send({
              type: "http.response.start",
              status: 200,
              headers: [[bytes("content-length"), bytes("2")], [
                bytes("connection"),
                bytes(connection),
              ]],
            });
            await send({ type: "http.response.body", body: bytes("ok") });
          }, transport);
          using client = await RawClient.connect(s.port);
          await client.write(
            `GET / HTTP/${version}\r\nHost: x\r\n${
              version === "1.1" ? "Connection: close\r\n" : ""
            }\r\n`,
          );
          const { head, body } = await client.response();
          assertEquals(body, "ok");
          // HTTP/1.0 closes unless kept alive: a "close" is only needed where 1.1 would keep it.
          if (version === "1.1") assertMatch(head, /\r\nconnection: *close(\r\n|$)/im);
          const ms = await client.closedWithin(1000);
          assert(ms < 1000, `the connection is still open after 1 s: ${head}`);
        });
      }
    },
  );

  Deno.test(name("answers in-flight requests with 500 when shutdownTimeout runs out"), async () => {
    const waiting = signal("the app to read the body");
    const seen = signal<string>("the app to see http.disconnect at shutdownTimeout");
    await using s = await start(
      async (scope, receive, send) => {
        if (scope.type !== "http") return;
        await readBody(receive);
        waiting.resolve();
        const message = await receive();
        seen.resolve(message.type);
        await reply(send, "ignored");
      },
      transport,
      { shutdownTimeout: 100 },
    );
    const request = fetch(s.url).then(
      async (r) => `${r.status} ${await r.text()}`,
      (e) => `${e.name}: the connection was dropped instead`,
    );
    await waiting.promise;
    const started = performance.now();
    await s.server.shutdown();
    const took = performance.now() - started;
    assert(took >= 90 && took < 3000, `shutdown took ${took} ms`);
    assertEquals(await seen.promise, "http.disconnect");
    // The client must get the 500 itself: a dropped connection tells it nothing.
    assertMatch(await withTimeout(request, BOUND_MS, "the 500"), /^500 /);
    assertMatch(s.logger.lines("warn").join("\n"), /shutdownTimeout 100 ms/);
  });
}
