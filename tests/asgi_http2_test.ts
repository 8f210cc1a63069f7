/**
 * HTTP/2 through the deno transport: `Deno.serve` speaks it over TLS (ALPN) and, with prior
 * knowledge, over plain TCP. Found by a TLS/HTTP/2 probe: the scope took its scheme from the
 * client's `:scheme`, had no `host`, and a reset upload reached the application as a complete
 * body. The node transport speaks HTTP/1.1 only.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import {
  createFetchHandler,
  type HttpScope,
  type ReceiveMessage,
  type ServeOptions,
} from "../asgi.ts";
import { bytes, RecordingLogger, sleep, start } from "./fixtures/asgi_harness.ts";
import { H2cClient } from "./fixtures/h2c_client.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";
import { selfSigned } from "./fixtures/tls.ts";

const tls = await selfSigned();

/** A server that records each HTTP scope and answers 200 "ok". */
async function recording(options: ServeOptions = {}) {
  const scopes: HttpScope[] = [];
  const served = await start(
    async (scope, receive, send) => {
      if (scope.type !== "http") return;
      scopes.push(scope);
      await receive();
      await send({ type: "http.response.start", status: 200 });
      await send({ type: "http.response.body", body: bytes("ok") });
    },
    "deno",
    options,
  );
  return { served, scopes };
}

/** The pseudo-header fields of a POST to /upload on a.example, then `extra`. */
function upload(...extra: [string, string][]): [string, string][] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":authority", "a.example"],
    [":path", "/upload"],
    ...extra,
  ];
}

function get(authority: string, ...extra: [string, string][]): [string, string][] {
  return [
    [":method", "GET"],
    [":scheme", "http"],
    [":authority", authority],
    [":path", "/h2"],
    ...extra,
  ];
}

function hostsOf(scope: HttpScope): string[] {
  const decoder = new TextDecoder();
  return scope.headers.filter(([name]) => decoder.decode(name) === "host").map(([, value]) =>
    decoder.decode(value)
  );
}

Deno.test("serve() [deno] over HTTP/2 takes the scheme from the listener, not the client's :scheme", async () => {
  const { served, scopes } = await recording();
  await using _ = served;
  const client = await H2cClient.connect(served.port);
  try {
    // A plain listener: a client claiming "https" once made the scope say so (redirect loops,
    // Secure cookies over cleartext).
    const fields = get("a.example");
    fields[1] = [":scheme", "https"];
    assertEquals(await client.status(await client.request(fields)), 200);
    assertEquals(scopes.map((scope) => scope.scheme), ["http"]);
  } finally {
    await client.close();
  }
});

Deno.test("serve() [deno] over HTTP/2 gives the scope :authority as its host header", async () => {
  const { served, scopes } = await recording();
  await using _ = served;
  const client = await H2cClient.connect(served.port);
  try {
    assertEquals(await client.status(await client.request(get("a.example:8080"))), 200);
    assertEquals(hostsOf(scopes[0]!), ["a.example:8080"]);
  } finally {
    await client.close();
  }
});

// Review of the Host refusals (2026-11-29): an HTTP/1.1 Host that is no host is refused, but the
// host the bridge makes from :authority was not checked, and Deno takes a userinfo in it: ":authority:
// good.example@evil.example" reached the application as the Host "good.example@evil.example",
// which a prefix allow-list takes and a link built from it sends to evil.example. RFC 9113 §8.3.1
// forbids a userinfo there.
Deno.test("serve() [deno] over HTTP/2 answers 400 to an :authority with a userinfo", async () => {
  const { served, scopes } = await recording();
  await using _ = served;
  const client = await H2cClient.connect(served.port);
  try {
    for (const authority of ["good.example@evil.example", "u:p@a.example:8080"]) {
      assertEquals(await client.status(await client.request(get(authority))), 400, authority);
    }
    assertEquals(await client.status(await client.request(get("a.example"))), 200);
    assertEquals(scopes.map(hostsOf), [["a.example"]]);
  } finally {
    await client.close();
  }
});

// Regression (TLS/HTTP/2 probe, 2026-11-27): the host made from :authority came last, after the
// fields Deno had sorted; the ASGI spec adds it "to the start of the iterable".
Deno.test("serve() [deno] over HTTP/2 puts the host made from :authority first", async () => {
  const { served, scopes } = await recording();
  await using _ = served;
  const client = await H2cClient.connect(served.port);
  try {
    const fields = get("a.example", ["accept", "*/*"], ["x-z", "1"]);
    assertEquals(await client.status(await client.request(fields)), 200);
    const names = scopes[0]!.headers.map(([name]) => new TextDecoder().decode(name));
    assertEquals(names, ["host", "accept", "x-z"]);
  } finally {
    await client.close();
  }
});

// A host field beside :authority that names the same host goes on as sent, whatever its case or
// default port (RFC 9113 §8.3.1 asks for RFC 3986 §6.2.3's normalisation before comparing). A
// first version refused any that differed as a string; one that names another host is refused
// since 2026-11-29, as an HTTP/1.1 absolute-form target is (tests/asgi_host_field_test.ts).
Deno.test("serve() [deno] over HTTP/2 passes a host field beside :authority on as sent", async (t) => {
  const { served, scopes } = await recording();
  await using _ = served;
  await t.step("b.example: another host, refused", async () => {
    const client = await H2cClient.connect(served.port);
    try {
      assertEquals(
        await client.status(await client.request(get("a.example", ["host", "b.example"]))),
        400,
      );
    } finally {
      await client.close();
    }
  });
  for (const host of ["A.Example:80", "a.example"]) {
    await t.step(host, async () => {
      const client = await H2cClient.connect(served.port);
      try {
        assertEquals(
          await client.status(await client.request(get("a.example", ["host", host]))),
          200,
        );
        assertEquals(hostsOf(scopes.at(-1)!), [host]);
      } finally {
        await client.close();
      }
    });
  }
});

for (const declared of [30_000, 1_000_000]) {
  Deno.test(
    `serve() [deno] gives http.disconnect for an HTTP/2 upload the client resets (content-length ${declared})`,
    async () => {
      const messages = Promise.withResolvers<ReceiveMessage[]>();
      const served = await start(async (scope, receive, send) => {
        if (scope.type !== "http") return;
        const seen: ReceiveMessage[] = [];
        for (;;) {
          const message = await receive();
          seen.push(message);
          if (message.type !== "http.request" || !message.more_body) break;
        }
        messages.resolve(seen);
        await send({ type: "http.response.start", status: 200 });
        await send({ type: "http.response.body", body: bytes("stored") });
      }, "deno");
      await using _ = served;
      const client = await H2cClient.connect(served.port);
      try {
        const stream = await client.request(
          upload(["content-length", String(declared)]),
          false,
        );
        await client.data(stream, new Uint8Array(16_000).fill(0x61));
        await client.reset(stream);
        const seen = await withTimeout(messages.promise, BOUND_MS, "the application's reads");
        // Once: 16,000 bytes and more_body false, a cut-off upload stored as a whole one.
        assertEquals(seen.at(-1)!.type, "http.disconnect");
        const received = seen.reduce(
          (n, m) => n + (m.type === "http.request" ? m.body.length : 0),
          0,
        );
        assert(received <= 16_000, `received ${received} bytes`);
      } finally {
        await client.close();
      }
    },
  );
}

/** A Fetch handler whose application answers "ok" and keeps each HTTP scope it is given. */
function recordingHandler(): {
  scopes: HttpScope[];
  handler: ReturnType<typeof createFetchHandler>;
} {
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(async (scope, receive, send) => {
    if (scope.type !== "http") return;
    scopes.push(scope);
    await receive();
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body: bytes("ok") });
  }, { lifespan: "off", logger: new RecordingLogger() });
  return { scopes, handler };
}

// Regression (TLS/HTTP/2 probe, 2026-11-27): the :authority became the host header only under
// serve(). Under Deno.serve(handler.fetch), and so Deno.serve(app.fetch) and `deno serve`, every
// HTTP/2 request (each browser's, over TLS) reached the application without a host, against the
// ASGI spec. A request that came without a Host still gets none: Deno's made-up
// "localhost:<port>" is not passed on as if the client had sent it.
Deno.test("createFetchHandler() under Deno.serve gives an HTTP/2 request its :authority as host", async (t) => {
  const { scopes, handler } = recordingHandler();
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    handler.fetch,
  );
  await t.step("HTTP/2", async () => {
    const client = await H2cClient.connect(server.addr.port);
    try {
      assertEquals(await client.status(await client.request(get("a.example:8443"))), 200);
      assertEquals(hostsOf(scopes.at(-1)!), ["a.example:8443"]);
    } finally {
      await client.close();
    }
  });
  await t.step("HTTP/1.0 without a Host", async () => {
    const client = await RawClient.connect(server.addr.port);
    try {
      await client.write("GET /h HTTP/1.0\r\n\r\n");
      assertMatch((await client.response()).head, /^HTTP\/1\.[01] 200 /);
      assertEquals(hostsOf(scopes.at(-1)!), []);
    } finally {
      client.close();
    }
  });
  await t.step("a Request made by hand", async () => {
    assertEquals((await handler.fetch(new Request("http://b.example/x"))).status, 200);
    assertEquals(hostsOf(scopes.at(-1)!), ["b.example"]);
  });
});

const hasCurl = await new Deno.Command("curl", { args: ["--version"], stdout: "null" }).output()
  .then((output) => output.success, () => false);

/** The response to `head`, written as it is over a TLS connection to 127.0.0.1 (ALPN http/1.1). */
async function overTls11(port: number, head: string): Promise<string> {
  const conn = await Deno.connectTls({
    hostname: "127.0.0.1",
    port,
    caCerts: [tls!.cert],
    alpnProtocols: ["http/1.1"],
  });
  try {
    await conn.write(new TextEncoder().encode(head));
    // HTTP/1.0 without keep-alive: the server closes after its answer.
    return await new Response(conn.readable).text();
  } catch (error) {
    conn.close();
    throw error;
  }
}

// Regression (TLS review, 2026-11-29): Deno makes up a URL authority for an HTTP/1.x request
// without a Host from the listener's address ("localhost:<port>" on 127.0.0.1), and the bridge
// drops it; an HTTP/2 request whose :authority was that very text lost its host too. That is
// every browser's request in development (https://localhost:8443/ negotiates h2): curl --http2
// and headless Chromium both reached the application with no host, and frameworks build
// absolute URLs, CSRF origin checks and virtual hosts from it. Over TLS the authority is now the
// client's, unless a field that HTTP/2 refuses shows the request came over HTTP/1.x.
/** GETs `/` over HTTP/2 on TLS with `authority`, and checks that the app saw it as its host. */
async function getOverH2(port: number, authority: string, scopes: HttpScope[]): Promise<void> {
  const client = await H2cClient.connectTls(port, tls!.cert);
  try {
    const fields = get(authority);
    fields[1] = [":scheme", "https"];
    assertEquals(await client.status(await client.request(fields)), 200);
    assertEquals(hostsOf(scopes.at(-1)!), [authority]);
  } finally {
    await client.close();
  }
}

Deno.test({
  name:
    "serve() [deno] with TLS gives an HTTP/2 request to localhost:<port> its :authority as host",
  ignore: tls === undefined,
  async fn(t) {
    const { served, scopes } = await recording({ cert: tls!.cert, key: tls!.key });
    await using _ = served;
    const authority = `localhost:${served.port}`;
    await t.step("HTTP/2 (ALPN h2)", () => getOverH2(served.port, authority, scopes));
    await t.step({
      name: "curl --http2",
      ignore: !hasCurl,
      async fn() {
        const output = await new Deno.Command("curl", {
          args: [
            "-sk",
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            `https://${authority}/`,
          ],
          stdout: "piped",
          stderr: "null",
        }).output();
        assertEquals(new TextDecoder().decode(output.stdout), "2");
        assertEquals(hostsOf(scopes.at(-1)!), [authority]);
      },
    });
    await t.step("HTTP/1.0 without a Host, with a field HTTP/2 refuses", async () => {
      const response = await overTls11(served.port, "GET /h HTTP/1.0\r\nConnection: close\r\n\r\n");
      assertMatch(response, /^HTTP\/1\.[01] 200 /);
      assertEquals(hostsOf(scopes.at(-1)!), []);
    });
    // The trade-off (docs/asgi.md, "Limits"): Deno tells nothing else apart from HTTP/2.
    await t.step("HTTP/1.0 without a Host or any other field: taken as the client's", async () => {
      const response = await overTls11(served.port, "GET /h HTTP/1.0\r\n\r\n");
      assertMatch(response, /^HTTP\/1\.[01] 200 /);
      assertEquals(hostsOf(scopes.at(-1)!), [authority]);
    });
  },
});

// The same rule under Deno.serve(handler.fetch), where the listener is unknown and the URL's
// scheme stands for TLS (regression, TLS review of 2026-11-29: "localhost:<port>" was dropped).
Deno.test({
  name:
    "createFetchHandler() under Deno.serve with TLS gives an HTTP/2 request to localhost its :authority as host",
  ignore: tls === undefined,
  async fn(t) {
    const { scopes, handler } = recordingHandler();
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert: tls!.cert, key: tls!.key, onListen() {} },
      handler.fetch,
    );
    const authority = `localhost:${server.addr.port}`;
    await t.step("HTTP/2 (ALPN h2)", () => getOverH2(server.addr.port, authority, scopes));
    await t.step("HTTP/1.0 without a Host, with a field HTTP/2 refuses", async () => {
      const response = await overTls11(
        server.addr.port,
        "GET /h HTTP/1.0\r\nConnection: close\r\n\r\n",
      );
      assertMatch(response, /^HTTP\/1\.[01] 200 /);
      assertEquals(hostsOf(scopes.at(-1)!), []);
    });
    await t.step("Requests made by hand", async () => {
      assertEquals((await handler.fetch(new Request("https://localhost/x"))).status, 200);
      assertEquals(hostsOf(scopes.at(-1)!), ["localhost"]);
      // Cleartext: still taken for the one Deno makes up (no browser speaks HTTP/2 there).
      assertEquals((await handler.fetch(new Request("http://localhost:8000/x"))).status, 200);
      assertEquals(hostsOf(scopes.at(-1)!), []);
    });
  },
});

/** The frames of `stream` once one ends it, or all there are after `timeoutMs`. */
async function framesUntilEnd(client: H2cClient, stream: number, timeoutMs = BOUND_MS) {
  const until = performance.now() + timeoutMs;
  const ofStream = () => client.frames.filter((f) => f.stream === stream);
  while (!ofStream().some((f) => f.flags & 0x1) && performance.now() < until) await sleep(5);
  return ofStream();
}

// Regression (TLS/HTTP/2 probe, 2026-11-27): Deno (2.9.6) writes a Response's body even to a
// HEAD request when it speaks HTTP/2, and the bridge handed it the body of a HEAD response so that
// Deno would state its length. curl (exit 92) and nghttp2 take DATA on a HEAD response as a
// protocol error: every HEAD over HTTP/2 (TLS) to an application that answers with a body failed.
Deno.test("serve() [deno] over HTTP/2 sends a HEAD response no body, and states its length", async (t) => {
  const served = await start(async (scope, receive, send) => {
    if (scope.type !== "http") return;
    await receive();
    const streamed = scope.path === "/streamed";
    await send({ type: "http.response.start", status: 200 });
    await send({ type: "http.response.body", body: bytes("hello"), more_body: streamed });
    if (streamed) await send({ type: "http.response.body", body: bytes(" world") });
  }, "deno");
  await using _ = served;
  // The last: the transport's own 400 for a host holding "/".
  const cases: [string, string?][] = [["/whole"], ["/streamed"], ["/whole", "a.example/admin?"]];
  for (const [path, host] of cases) {
    await t.step(host === undefined ? path : `${path}, host "${host}"`, async () => {
      const client = await H2cClient.connect(served.port);
      try {
        const stream = await client.request([
          [":method", "HEAD"],
          [":scheme", "http"],
          [":authority", "a.example"],
          [":path", path],
          ...(host === undefined ? [] : [["host", host] as [string, string]]),
        ]);
        assertEquals(await client.status(stream), host === undefined ? 200 : 400);
        const frames = await framesUntilEnd(client, stream);
        assert(frames.some((f) => f.flags & 0x1), "the stream never ended");
        const data = frames.filter((f) => f.type === 0x0);
        assertEquals(data.map((f) => f.payload.length).filter((n) => n > 0), []);
      } finally {
        await client.close();
      }
    });
  }
  await t.step("the length a GET would get", async () => {
    const client = Deno.createHttpClient({ http2: true, http1: false });
    try {
      const response = await fetch(`http://127.0.0.1:${served.port}/whole`, {
        method: "HEAD",
        client,
      });
      await response.body?.cancel();
      assertEquals(response.headers.get("content-length"), "5");
    } finally {
      client.close();
    }
  });
});

// Regression (review of the HEAD-over-HTTP/2 change, 2026-11-27): the bridge's own 500 (an
// application that raised or returned without a response) already states "content-length: 21",
// and the HEAD path added a second one. Over HTTP/2 Deno sent both fields, which nghttp2 and curl
// (exit 92) refuse as a protocol error, so the client saw no response at all; under
// createFetchHandler the Response said "content-length: 21, 21".
Deno.test("serve() [deno] over HTTP/2 answers HEAD with one content-length when the app fails", async () => {
  const logger = new RecordingLogger();
  const boom = () => Promise.reject(new Error("boom"));
  await using served = await start(
    (scope) => scope.type === "http" && scope.path === "/raise" ? boom() : Promise.resolve(),
    "deno",
    { logger },
  );
  const client = Deno.createHttpClient({ http2: true, http1: false });
  try {
    for (const path of ["/raise", "/returned"]) {
      const response = await fetch(`http://127.0.0.1:${served.port}${path}`, {
        method: "HEAD",
        client,
      });
      await response.body?.cancel();
      assertEquals(response.status, 500, path);
      assertEquals(response.headers.get("content-length"), "21", path);
    }
  } finally {
    client.close();
  }
  const handler = createFetchHandler(boom, { lifespan: "off", logger });
  const response = await handler.fetch(new Request("http://a.example/", { method: "HEAD" }));
  assertEquals(response.status, 500);
  assertEquals(response.headers.get("content-length"), "21");
  assertEquals(response.body, null);
});

// Regression (HTTP/2 attack probe, 2026-11-29): an application that answered an upload without
// reading it (a 401) left the bridge reading the small body to its end, for HTTP/1.1 keep-alive.
// Over HTTP/2 that read held the stream open for as long as the client sent nothing: 2,000 such
// streams on 10 connections held some 29 MiB for as long as their clients stayed, with no
// timeout, where a bare Deno.serve resets each stream (NO_ERROR) as soon as its answer is out.
Deno.test("serve() [deno] over HTTP/2 resets the stream of an upload the application did not read", async (t) => {
  await using served = await start(async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    await send({ type: "http.response.start", status: 401 });
    await send({ type: "http.response.body", body: bytes("no") });
  }, "deno");
  // Without a content-length the bridge claimed the body to drop it, with the same effect.
  for (const length of [["content-length", "100"] as [string, string], undefined]) {
    await t.step(length === undefined ? "no content-length" : "content-length 100", async () => {
      const client = await H2cClient.connect(served.port);
      try {
        const stream = await client.request(
          length === undefined ? upload() : upload(length),
          false,
        );
        await client.data(stream, new Uint8Array(10).fill(0x61));
        const reset = await client.frame(stream, 0x3, BOUND_MS);
        if (reset === undefined) {
          throw new Error("The stream was never reset: its body is still being read");
        }
        // NO_ERROR: the answer is complete, the client need not send the rest (RFC 9113 §8.1).
        assertEquals(new DataView(reset.payload.buffer).getUint32(0), 0);
      } finally {
        await client.close();
      }
    });
  }
});

// Review of 9c10a2c (2026-11-29): the 501 to a CONNECT became a body that fails, so that Deno
// closes an HTTP/1.1 connection after it; over HTTP/2 the failure reset the stream at once, and
// the reset went out alone: no 501, no text, RST_STREAM INTERNAL_ERROR. Deno tells the bridge
// neither the version nor, for a CONNECT, anything that differs from an HTTP/1.1 one without a
// Host, so the 501 goes out first and the reset follows (over TLS with ALPN h2 alike).
Deno.test("serve() [deno] over HTTP/2 answers 501 to CONNECT before it resets the stream", async () => {
  const { served, scopes } = await recording();
  await using _ = served;
  const client = await H2cClient.connect(served.port);
  try {
    const connect = await client.request(
      [[":method", "CONNECT"], [":authority", "example.com:443"]],
      false,
    );
    assertEquals(await client.status(connect, 2000), 501);
    const data = await client.frame(connect, 0x0);
    assertEquals(new TextDecoder().decode(data?.payload), "Not Implemented");
    // Only the stream ends: the connection serves on.
    assertEquals(await client.status(await client.request(get("a.example"))), 200);
    assertEquals(scopes.length, 1);
  } finally {
    await client.close();
  }
});

// Regression (TLS/HTTP/2 probe, 2026-11-29): Deno (2.9.6) tells of an HTTP/2 stream the client
// resets, or a connection it closes, only to a request.signal read before that happened; read
// later, the signal stays quiet for good (HTTP/1.1 says it at any time). The bridge read it only
// once the application waited after the body, so an application that did something else first (a
// query, a long poll) and then waited for the end never saw http.disconnect: it waited until
// shutdown. With curl --http2 -m 0.2 to https://localhost:<port>, every such request hung.
Deno.test("serve() [deno] gives http.disconnect to an HTTP/2 request reset before the application waited", async (t) => {
  const cases = [
    { over: "cleartext, authority a.example", tls: false, made: false },
    // The authority Deno makes up for a request without a Host: taken for HTTP/2 over TLS (a
    // browser's in development), not over cleartext, where an HTTP/1.0 request without a Host
    // looks the same. Either way the signal is read from the start.
    { over: "TLS, authority localhost:<port>", tls: true, made: true },
    { over: "cleartext, authority localhost:<port>", tls: false, made: true },
  ];
  for (const { over, tls: secure, made } of cases) {
    await t.step({
      name: over,
      ignore: secure && tls === undefined,
      async fn() {
        const first = Promise.withResolvers<void>();
        const proceed = Promise.withResolvers<void>();
        const later = Promise.withResolvers<ReceiveMessage>();
        await using served = await start(
          async (scope, receive, send) => {
            if (scope.type !== "http") return;
            if (scope.path === "/next") {
              await send({ type: "http.response.start", status: 200 });
              return await send({ type: "http.response.body", body: bytes("next") });
            }
            await receive();
            first.resolve();
            await proceed.promise;
            later.resolve(await receive());
          },
          "deno",
          secure ? { cert: tls!.cert, key: tls!.key } : {},
        );
        const client = secure
          ? await H2cClient.connectTls(served.port, tls!.cert)
          : await H2cClient.connect(served.port);
        try {
          const authority = made ? `localhost:${served.port}` : "a.example";
          const stream = await client.request([
            [":method", "GET"],
            [":scheme", secure ? "https" : "http"],
            [":authority", authority],
            [":path", "/poll"],
          ]);
          await withTimeout(first.promise, BOUND_MS, "the application's first receive()");
          await client.reset(stream);
          // Answered once the server has read the reset.
          // Deno notices the reset in the stream's own task, after the frames that followed it
          // were read (a PING's answer came first over TLS): a request on a new stream, answered,
          // comes after that task has run.
          const next = await client.request([
            [":method", "GET"],
            [":scheme", secure ? "https" : "http"],
            [":authority", authority],
            [":path", "/next"],
          ]);
          assertEquals(await client.status(next, BOUND_MS), 200);
          proceed.resolve();
          const message = await withTimeout(later.promise, BOUND_MS, "http.disconnect");
          assertEquals(message.type, "http.disconnect");
        } finally {
          proceed.resolve();
          await client.close();
        }
      },
    });
  }
});
