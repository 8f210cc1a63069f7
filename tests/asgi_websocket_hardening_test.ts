/**
 * WebSocket defects found by a probe of the bridge (2026-11-25), each with a regression test
 * named after the behaviour, on both transports unless the defect belongs to one. Timers the
 * defects depend on are shortened through the bridge's internal knobs, so each test takes
 * about a second.
 */
import { assert, assertEquals, assertInstanceOf, assertMatch } from "@std/assert";
import {
  type AsgiApplication,
  AsgiProtocolError,
  type AsgiServer,
  type AsgiUnixAddr,
  ClientDisconnected,
  type ReceiveMessage,
  serve,
} from "../asgi.ts";
import { closeTiming } from "../_asgi/websocket.ts";
import { pingTiming } from "../_asgi/node_websocket.ts";
import {
  bytes,
  rawRequest,
  reachableScopes,
  RecordingLogger,
  sleep,
  start,
  text,
  TRANSPORTS,
} from "./fixtures/asgi_harness.ts";
import { handshake, within, WsClient } from "./fixtures/ws_client.ts";
import { RawSocket } from "./fixtures/raw_socket.ts";
import { RawClient } from "./fixtures/raw_client.ts";

/** Runs `body` with a knob set to `value`, then puts the knob back. */
async function withTiming<T extends Record<K, number>, K extends keyof T>(
  knob: T,
  key: K,
  value: number,
  body: () => Promise<void>,
): Promise<void> {
  const saved = knob[key];
  knob[key] = value as T[K];
  try {
    await body();
  } finally {
    knob[key] = saved;
  }
}

/**
 * Accepts, then records every message until the disconnect; `done` settles when it returns.
 * Given `gate`, it receives nothing until `gate` settles, as an application that lags behind.
 */
function recorder(
  gate?: Promise<void>,
): { app: AsgiApplication; received: ReceiveMessage[]; done: Promise<void> } {
  const received: ReceiveMessage[] = [];
  const done = Promise.withResolvers<void>();
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "websocket") return;
    try {
      await receive();
      await send({ type: "websocket.accept" });
      await gate;
      for (;;) {
        const message = await receive();
        received.push(message);
        if (message.type === "websocket.disconnect") return;
      }
    } finally {
      done.resolve();
    }
  };
  return { app, received, done: done.promise };
}

// Regression (WebSocket probe, 2026-11-25, point 1): once 16 messages waited for the app, node
// paused reading, so the client's pongs went unread and the pinger dropped a healthy client
// after 20-40 s (the app saw 1006 and lost the messages still unread).
Deno.test("serve() [node] keeps a client whose pongs wait unread while reading is paused", async () => {
  await withTiming(pingTiming, "intervalMs", 100, async () => {
    let count = 0;
    const ended: ReceiveMessage[] = [];
    const app: AsgiApplication = async (scope, receive, send) => {
      if (scope.type !== "websocket") return;
      await receive();
      await send({ type: "websocket.accept" });
      // Lag behind for 15 ping intervals: reading pauses at 16 queued messages.
      await sleep(1500);
      for (;;) {
        const message = await receive();
        if (message.type !== "websocket.receive") return void ended.push(message);
        if (++count === 20) await send({ type: "websocket.send", text: `got ${count}` });
      }
    };
    await using server = await start(app, "node");
    const client = await WsClient.open(`ws://127.0.0.1:${server.port}/`);
    for (let i = 0; i < 20; i++) client.socket.send(`m${i}`);
    assertEquals(await client.next(5000), "got 20");
    assertEquals(ended, []);
    client.socket.close(1000);
    // The closing handshake completes. Its code is checked on the server's side: a ping of the
    // 100 ms pinger that crosses the client's close frame makes Deno's WebSocket client report
    // 1005 instead of the 1000 echoed after it (seen on the wire; the test failed now and then).
    assert((await client.closeEvent()).wasClean, "the closing handshake completed");
    for (let i = 0; i < 100 && ended.length === 0; i++) await sleep(10);
    assertEquals(ended, [{ type: "websocket.disconnect", code: 1000, reason: "" }]);
  });
});

Deno.test("serve() [node] still drops a client that does not answer pings", async () => {
  await withTiming(pingTiming, "intervalMs", 100, async () => {
    const { app, received, done } = recorder();
    await using server = await start(app, "node");
    const client = await RawSocket.open(server.port);
    try {
      assertMatch(client.head, /^HTTP\/1\.1 101 /);
      const started = performance.now();
      await within(done, 3000, "the app to see the client dropped");
      const elapsed = performance.now() - started;
      // Dropped at the second tick after the unanswered ping: 200 ms, with room for a busy CI.
      assert(elapsed < 2000, `dropped after ${Math.round(elapsed)} ms`);
      assertEquals(received, [{ type: "websocket.disconnect", code: 1006, reason: "" }]);
    } finally {
      client.close();
    }
  });
});

for (const transport of TRANSPORTS) {
  // Regression (WebSocket probe, 2026-11-25, point 2): on deno nothing bounded the wait for the
  // client's answer to the server's close: a client that never answered kept the app's
  // receive() pending, and its place among the open sockets, for good (node: 30 s, ws's own).
  Deno.test(
    `serve() [${transport}] gives up on a client that never answers the server's close`,
    async () => {
      await withTiming(closeTiming, "timeoutMs", 200, async () => {
        const received: ReceiveMessage[] = [];
        const done = Promise.withResolvers<void>();
        const app: AsgiApplication = async (scope, receive, send) => {
          if (scope.type !== "websocket") return;
          await receive();
          await send({ type: "websocket.accept" });
          await send({ type: "websocket.close", code: 4000, reason: "bye" });
          received.push(await receive());
          done.resolve();
        };
        await using server = await start(app, transport);
        const client = await RawSocket.open(server.port);
        try {
          assertMatch(client.head, /^HTTP\/1\.1 101 /);
          const close = await client.frame();
          assertEquals(close?.opcode, 8);
          const started = performance.now();
          await within(done.promise, 3000, "the app's receive() to end");
          const elapsed = performance.now() - started;
          assert(elapsed < 2000, `gave up after ${Math.round(elapsed)} ms`);
          // The application closed, so it hears its own code, as when shutdown drops a socket.
          assertEquals(received, [{ type: "websocket.disconnect", code: 4000, reason: "bye" }]);
          if (transport === "node") {
            // Deno has no way to reset an upgraded connection; ws does.
            assert(await client.ended(2000), "the server kept the connection");
          }
        } finally {
          client.close();
        }
      });
    },
  );

  // Regression (resource probe, 2026-11-25): on node, sends to a client that had gone (reset,
  // or its close frame in) resolved at once without a frame going out, so an application
  // sending in a loop never yielded: the server answered nothing else (a GET took 4.5 s) and
  // its memory grew by 400 MB before the loop ran out.
  Deno.test(
    `serve() [${transport}] fails the sends of an app sending in a loop once the client has gone`,
    async (t) => {
      for (const how of ["reset", "close frame"] as const) {
        await t.step(how, async () => {
          const outcome = Promise.withResolvers<{ error: unknown; mib: number }>();
          const chunk = new Uint8Array(64 * 1024);
          const app: AsgiApplication = async (scope, receive, send) => {
            if (scope.type === "http") {
              await send({ type: "http.response.start", status: 200 });
              return await send({ type: "http.response.body", body: bytes("ok") });
            }
            if (scope.type !== "websocket") return;
            await receive();
            await send({ type: "websocket.accept" });
            let sent = 0;
            try {
              // Bounded: 4 GiB would take minutes even if every send resolved at once.
              for (; sent < 65536; sent++) await send({ type: "websocket.send", bytes: chunk });
              outcome.resolve({ error: undefined, mib: sent / 16 });
            } catch (error) {
              outcome.resolve({ error, mib: sent / 16 });
            }
          };
          await using server = await start(app, transport);
          if (how === "reset") {
            const client = await RawSocket.open(server.port);
            await sleep(300);
            client.close(); // unread data in its buffer: the kernel sends a reset
          } else {
            const client = await WsClient.open(`ws://127.0.0.1:${server.port}/`);
            client.socket.close(4001, "bye");
          }
          await sleep(100);
          const started = performance.now();
          const response = await within(fetch(`http://127.0.0.1:${server.port}/`), 3000, "a GET");
          assertEquals(await response.text(), "ok");
          const took = performance.now() - started;
          assert(took < 1000, `a GET took ${Math.round(took)} ms beside the sending loop`);
          const { error, mib } = await within(outcome.promise, 3000, "the sending loop to end");
          assertInstanceOf(error, ClientDisconnected);
          assertEquals((error as ClientDisconnected).code, how === "reset" ? 1006 : 4001);
          assert(mib < 200, `the loop sent ${mib} MiB to a client that had gone`);
        });
      }
    },
  );

  // Docs regression (WebSocket probe, 2026-11-25, point 5b): docs/asgi.md said the app sees 1006
  // for a socket dropped at shutdownTimeout; it sees the 1012 the server closed with.
  Deno.test(
    `serve() [${transport}] reports 1012 for a socket dropped at shutdownTimeout`,
    async () => {
      const { app, received, done } = recorder();
      const server = await start(app, transport, { shutdownTimeout: 300 });
      const client = await RawSocket.open(server.port);
      try {
        assertMatch(client.head, /^HTTP\/1\.1 101 /);
        const stopped = server.server.shutdown();
        assertEquals((await client.frame())?.opcode, 8);
        await within(done, 3000, "the app to see the socket dropped");
        assertEquals(received, [
          { type: "websocket.disconnect", code: 1012, reason: "Service restart" },
        ]);
        client.close();
        await within(stopped, 5000, "shutdown");
      } finally {
        client.close();
      }
    },
  );

  // Regression (WebSocket probe, 2026-11-25, point 4): node let the app accept an offer `ws`
  // then refused with 400 (the app saw 1006); deno answered it 101, with "a b" among the scope's
  // subprotocols. RFC 6455, 4.1: comma-separated tokens, each offered once.
  Deno.test(
    `serve() [${transport}] refuses a malformed Sec-WebSocket-Protocol before calling the app`,
    async (t) => {
      const called: string[][] = [];
      const app: AsgiApplication = async (scope, receive, send) => {
        if (scope.type !== "websocket") return;
        called.push(scope.subprotocols.slice());
        await receive();
        await send({ type: "websocket.accept", subprotocol: text(scope.query_string) || null });
        await send({ type: "websocket.close" });
      };
      await using server = await start(app, transport);
      const offers = [
        ["a, a", "offered twice"],
        ["a\r\nSec-WebSocket-Protocol: a", "offered twice on two lines"],
        ["a b", "not a token"],
        ["a;b", "a separator in a token"],
        ["a,,b", "an empty element"],
        ["a,", "a trailing comma"],
        ["", "an empty header"],
      ];
      for (const [offer, why] of offers) {
        await t.step(`${JSON.stringify(offer)}: ${why}`, async () => {
          const raw = await rawRequest(
            server.port,
            handshake("/", `Sec-WebSocket-Protocol: ${offer}\r\n`),
          );
          assertMatch(raw, /^HTTP\/1\.1 400 [^]*Invalid Sec-WebSocket-Protocol$/);
          assertEquals(called, []);
        });
      }
      // Regression (found while writing this test): Deno.upgradeWebSocket looks for the chosen
      // subprotocol in the offer split at ", " exactly, so on deno these got 500.
      const valid = [["a,b", "b"], ["a ,\tb", "a"], ["a, b", "b"]];
      for (const [offer, pick] of valid) {
        await t.step(`${JSON.stringify(offer)} is served, "${pick}" chosen`, async () => {
          called.length = 0;
          const raw = await rawRequest(
            server.port,
            handshake(`/?${pick}`, `Sec-WebSocket-Protocol: ${offer}\r\n`),
          );
          assertMatch(
            raw,
            new RegExp(`^HTTP/1\\.1 101 [^]*\r\nsec-websocket-protocol: ${pick}\r\n`, "i"),
          );
          assertEquals(called, [["a", "b"]]);
          assertEquals(server.logger.lines("error"), []);
        });
      }
    },
  );

  // Regression (WebSocket probe, 2026-11-25, point 3): a denial's content-length went out as the
  // app gave it on node (100 declared, 5 sent: the client waited for bytes that never came) and
  // was replaced on deno; the HTTP path refuses the same mismatch with AsgiProtocolError.
  Deno.test(
    `serve() [${transport}] checks a denial's content-length against its body, as for HTTP`,
    async (t) => {
      let error: unknown = null;
      const app: AsgiApplication = async (scope, receive, send) => {
        if (scope.type !== "websocket") return;
        await receive();
        const [length, ...chunks] = text(scope.query_string).split(",");
        try {
          await send({
            type: "websocket.http.response.start",
            status: 401,
            headers: [[bytes("content-length"), bytes(length!)]],
          });
          for (const [i, chunk] of chunks.entries()) {
            await send({
              type: "websocket.http.response.body",
              body: bytes(chunk),
              more_body: i < chunks.length - 1,
            });
          }
        } catch (caught) {
          error = caught;
          throw caught;
        }
      };
      await using server = await start(app, transport);
      const cases = [
        ["100,short", "shorter than its content-length 100: 5 bytes sent"],
        ["2,short", "longer than its content-length 2: 5 bytes sent"],
        ["6,abc,defg", "longer than its content-length 6: 7 bytes sent"],
        ["x1,short", 'Invalid value "x1" for header "content-length"'],
      ];
      for (const [query, message] of cases) {
        await t.step(`${query}: ${message}`, async () => {
          error = null;
          const raw = await rawRequest(server.port, handshake(`/?${query}`));
          assertMatch(raw, /^HTTP\/1\.1 500 [^]*\r\n\r\nInternal Server Error$/);
          assertInstanceOf(error, AsgiProtocolError);
          assertMatch((error as AsgiProtocolError).message, new RegExp(message!));
        });
      }
      await t.step("a body that matches goes out as given", async () => {
        error = null;
        const raw = await rawRequest(server.port, handshake("/?7,abc,defg"));
        assertMatch(raw, /^HTTP\/1\.1 401 [^]*\r\ncontent-length: 7\r\n[^]*\r\n\r\nabcdefg$/i);
        assertEquals(error, null);
      });
    },
  );

  // Regression (WebSocket probe, 2026-11-25, point 6): node answered 501 to any Upgrade but a
  // WebSocket one (`curl --http2` on http:// offers h2c), where deno serves plain HTTP, as RFC
  // 9110 §7.8 lets a server that ignores Upgrade do.
  Deno.test(`serve() [${transport}] serves a request with another Upgrade as HTTP`, async () => {
    const app: AsgiApplication = async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await receive();
      await send({ type: "http.response.start", status: 200 });
      await send({ type: "http.response.body", body: bytes(`plain ${scope.method}`) });
    };
    await using server = await start(app, transport);
    const h2c = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    assertMatch(await rawRequest(server.port, h2c), /^HTTP\/1\.1 200 [^]*plain GET$/);
    // Review (2026-11-28): protocols that merely contain the word were taken for a WebSocket
    // offer and refused with 400 once the Upgrade check looked for "websocket" anywhere.
    for (const upgrade of ["not-websocket/1", "websocket/13", "h2c, x-websocket-tunnel"]) {
      const request = `GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n` +
        `Upgrade: ${upgrade}\r\n\r\n`;
      assertMatch(await rawRequest(server.port, request), /^HTTP\/1\.1 200 [^]*plain GET$/);
    }
  });

  // Head differential of 2026-11-29 (docs/asgi.md, "Request heads against uvicorn"): on node a
  // request pipelined behind one with an Upgrade it does not take was never answered: Deno's
  // node:http lost the bytes read behind that head, and the first answer said "keep-alive", so
  // the client waited for the close, 6 s later (keepAliveTimeout). One sent after the answer was
  // served. uvicorn (h11) answers 400 to such a request and closes.
  Deno.test(`serve() [${transport}] answers a request pipelined behind another Upgrade, or says it closes and does`, async () => {
    const app: AsgiApplication = async (scope, receive, send) => {
      if (scope.type !== "http") return;
      await receive();
      const body = bytes(`plain ${scope.path}`);
      await send({
        type: "http.response.start",
        status: 200,
        headers: [[bytes("content-length"), bytes(String(body.length))]],
      });
      await send({ type: "http.response.body", body });
    };
    await using server = await start(app, transport);
    using client = await RawClient.connect(server.port);
    await client.write(
      "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" +
        "GET /next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    );
    const first = await client.response();
    assertEquals(first.body, "plain /x");
    if (/\r\nconnection: *close/i.test(first.head)) {
      assert(
        await client.closedWithin(2000) < 2000,
        "said close, but the connection is still open",
      );
      assertEquals(client.pending, "");
    } else {
      assertEquals((await client.response({ timeoutMs: 2000 })).body, "plain /next");
    }
  });
}

/** A client frame (masked with a zero key) of up to 125 bytes. */
function clientFrame(fin: boolean, opcode: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(6 + payload.length);
  frame[0] = (fin ? 0x80 : 0) | opcode;
  frame[1] = 0x80 | payload.length;
  frame.set(payload, 6);
  return frame;
}

Deno.test("serve() [node] closes a message in too many fragments with 1008 and says so (regression: the app saw 1006, no log line)", async () => {
  const codes: number[] = [];
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "websocket") return;
    await receive();
    await send({ type: "websocket.accept" });
    for (;;) {
      const message = await receive();
      if (message.type === "websocket.disconnect") return void codes.push(message.code);
    }
  };
  await using server = await start(app, "node");
  const client = await RawSocket.open(server.port);
  try {
    assertMatch(client.head, /^HTTP\/1\.1 101 /);
    // One text message in 16,385 one-byte frames: one more than ws takes.
    const one = bytes("a");
    const frames = new Uint8Array(7 * 16_386);
    frames.set(clientFrame(false, 1, one), 0);
    for (let i = 1; i <= 16_384; i++) frames.set(clientFrame(false, 0, one), 7 * i);
    frames.set(clientFrame(true, 0, one), 7 * 16_385);
    await client.write(frames).catch(() => {});
    const close = await client.frame();
    assertEquals(close?.opcode, 8);
    assertEquals((close!.payload[0]! << 8) | close!.payload[1]!, 1008);
  } finally {
    client.close();
  }
  await within(
    (async () => {
      while (codes.length === 0) await sleep(10);
    })(),
    5000,
    "the app's disconnect",
  );
  assertEquals(codes, [1008]);
  assertEquals(server.logger.lines("warn"), [
    "WebSocket message refused (Too many message fragments; at most 16384 fragments): closed with 1008",
  ]);
});

for (const transport of TRANSPORTS) {
  // Regression (WebSocket stall probe, 2026-11-28, point 1): a client that completed the
  // handshake and then read nothing held the application's send() for good on deno (85 s
  // measured, until the client left: Deno's ping queues behind the unsent frames) and for 40 s
  // on node, for good there too when it sent a pong every few seconds.
  Deno.test(
    `serve() [${transport}] drops a client that takes nothing while a send waits, after stallTimeout`,
    async () => {
      const outcome = Promise.withResolvers<{ error: unknown; disconnect: ReceiveMessage }>();
      const app: AsgiApplication = async (scope, receive, send) => {
        if (scope.type !== "websocket") return;
        await receive();
        await send({ type: "websocket.accept" });
        const payload = new Uint8Array(65536);
        // Bounded: the kernel's buffers on loopback hold a few MB, far below 64 MiB.
        for (let i = 0; i < 1024; i++) {
          try {
            await send({ type: "websocket.send", bytes: payload });
          } catch (error) {
            return outcome.resolve({ error, disconnect: await receive() });
          }
        }
        outcome.reject(new Error("every send went through"));
      };
      await using server = await start(app, transport, { stallTimeout: 300 });
      const client = await RawSocket.open(server.port);
      try {
        assertMatch(client.head, /^HTTP\/1\.1 101 /);
        const started = performance.now();
        const { error, disconnect } = await within(outcome.promise, 5000, "the send to give up");
        const elapsed = performance.now() - started;
        assert(elapsed < 3000, `gave up after ${Math.round(elapsed)} ms`);
        assertInstanceOf(error, ClientDisconnected);
        assertEquals((error as ClientDisconnected).code, 1006);
        assertEquals(disconnect, { type: "websocket.disconnect", code: 1006, reason: "" });
        assertEquals(server.logger.lines("warn"), [
          "WebSocket send stalled: the client took nothing for stallTimeout 300 ms; disconnected",
        ]);
        // node closes the connection; Deno cannot abort an upgraded one (docs/asgi.md).
        if (transport === "node") assert(await client.ended(5000), "the connection closed");
      } finally {
        client.close();
      }
    },
  );
}

/** A client's masked text frame, as Latin-1 text for rawRequest(). */
function maskedText(message: string): string {
  const mask = [1, 2, 3, 4];
  let frame = String.fromCharCode(0x81, 0x80 | message.length, ...mask);
  for (let i = 0; i < message.length; i++) {
    frame += String.fromCharCode(message.charCodeAt(i) ^ mask[i % 4]!);
  }
  return frame;
}

/**
 * An application that accepts every WebSocket and waits, recording the type of each scope it is
 * called with: a handshake the bridge refuses must leave `called` empty.
 */
function acceptingRecorder(): { app: AsgiApplication; called: string[] } {
  const called: string[] = [];
  const app: AsgiApplication = async (scope, receive, send) => {
    called.push(scope.type);
    if (scope.type !== "websocket") return;
    await receive();
    await send({ type: "websocket.accept" });
    await receive();
  };
  return { app, called };
}

for (const transport of TRANSPORTS) {
  // Regression (hostile WebSocket client probe, 2026-11-28, point 4): on node a handshake with a
  // body was answered 101, and the body was dropped or read as WebSocket frames depending on
  // whether it came in the same TCP segment as the head (a frame sent as the body of the request
  // reached the application as a message when written 100 ms after the head). Deno.serve refuses
  // such a request with 400 before the bridge sees it.
  Deno.test(
    `serve() [${transport}] refuses a handshake that has a body without calling the app`,
    async () => {
      const { app, called } = acceptingRecorder();
      await using server = await start(app, transport);
      const frame = maskedText("smuggled");
      const cases: [string, string][] = [
        [`Content-Length: ${frame.length}\r\n`, frame],
        ["Content-Length: 0\r\n", ""],
        ["Transfer-Encoding: chunked\r\n", `${frame.length.toString(16)}\r\n${frame}\r\n0\r\n\r\n`],
      ];
      for (const [field, body] of cases) {
        const answer = await rawRequest(server.port, handshake("/", field) + body);
        assertMatch(answer, /^HTTP\/1\.1 400 /, JSON.stringify(field));
      }
      assertEquals(called, []);
      assertEquals(server.logger.lines("error"), []);
    },
  );
}

// Regression (hostile WebSocket client probe, 2026-11-28, point 2): on deno the bound on unread
// messages counted their bytes only, so empty messages never reached it. One client sending
// empty binary messages to an application that did not receive took the server from 49 to
// 1,262 MiB in 10 s (5 million messages queued).
Deno.test("serve() [deno] bounds the number of unread messages, not only their bytes", async () => {
  const go = Promise.withResolvers<void>();
  const { app, received, done } = recorder(go.promise);
  await using server = await start(app, "deno");
  const client = await WsClient.open(`ws://127.0.0.1:${server.port}/`);
  // Bounded: 20,000 empty frames are 120 KB on the wire.
  for (let i = 0; i < 20_000; i++) client.socket.send(new Uint8Array(0));
  // Deno drops a connection whose client still sends after the server's close frame, so the
  // client may see 1006 (ws) or 0 (Deno's client) rather than 1008.
  assert([1008, 1006, 0].includes((await client.closeEvent(5000)).code));
  go.resolve();
  await within(done, 5000, "the app to return");
  assertEquals(received, [{ type: "websocket.disconnect", code: 1008, reason: "" }]);
  assertEquals(server.logger.lines("warn"), [
    "WebSocket client sent over 16384 messages the application has not received: closed with 1008",
  ]);
});

// Regression (hostile WebSocket client probe, 2026-11-28, point 4): node:http checks neither the
// Host nor the version of a request it hands over as an upgrade, so on node a handshake without a
// Host (400 over HTTP/1.1, RFC 9112 §3.2, as this server's HTTP side answers), in HTTP/1.0 (RFC
// 6455 §4.1 asks for 1.1; RFC 9110 §15.2 forbids a 1xx to a 1.0 client) or with a version line
// of "HTTP/2.0" (505 over HTTP) was answered 101 and ran the application.
Deno.test("serve() [node] refuses a handshake its HTTP side would refuse, without calling the app", async () => {
  const { app, called } = acceptingRecorder();
  await using server = await start(app, "node");
  const cases: [string, RegExp][] = [
    [handshake("/").replace("Host: 127.0.0.1\r\n", ""), /^HTTP\/1\.1 400 [^]*Missing Host$/],
    [handshake("/").replace("HTTP/1.1", "HTTP/1.0"), /^HTTP\/1\.1 400 [^]*needs HTTP\/1\.1$/],
    [handshake("/").replace("HTTP/1.1", "HTTP/2.0"), /^HTTP\/1\.1 505 /],
  ];
  for (const [request, answer] of cases) {
    assertMatch(await rawRequest(server.port, request), answer, request.split("\r\n", 2).join(" "));
  }
  assertEquals(called, []);
  assertEquals(server.logger.lines("error"), []);
});

// Regression (WebSocket hardening with fresh eyes, 2026-11-29): on deno a handshake without a Host
// was answered 101 and ran the application, where node answers 400. Deno does not say which version
// a request came over, but neither version may upgrade without one: RFC 6455 4.1 asks for
// HTTP/1.1, which requires a Host (RFC 9112 3.2).
Deno.test("serve() [deno] refuses a handshake without a Host with 400, without calling the app", async () => {
  const { app, called } = acceptingRecorder();
  await using server = await start(app, "deno");
  const answer = await rawRequest(server.port, handshake("/").replace("Host: 127.0.0.1\r\n", ""));
  assertMatch(answer, /^HTTP\/1\.1 400 [^]*Missing Host$/);
  assertEquals(called, []);
  // The same handshake with its Host is served.
  assertMatch(await rawRequest(server.port, handshake("/")), /^HTTP\/1\.1 101 /);
  assertEquals(server.logger.lines("error"), []);
});

// Regression (hostile WebSocket client probe, 2026-11-28, point 2): on node reading paused only at
// 16 unread messages whatever their size, so a client could leave 16 messages of maxMessageSize
// with an application that did not receive: three clients sending 16 MB messages took a server
// from 66 to 915 MiB, where deno closes past twice maxMessageSize. Reading now pauses at that many
// unread bytes too; a paused socket does not read the client's ping, so its pong shows it.
Deno.test("serve() [node] stops reading past twice maxMessageSize unread, not only at 16 messages", async () => {
  const go = Promise.withResolvers<void>();
  const received: ReceiveMessage[] = [];
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "websocket") return;
    await receive();
    await send({ type: "websocket.accept" });
    await go.promise;
    for (;;) {
      const message = await receive();
      received.push(message);
      if (message.type === "websocket.disconnect") return;
    }
  };
  await using server = await start(app, "node", { maxMessageSize: 65_536 });
  const client = await RawSocket.open(server.port);
  try {
    assertMatch(client.head, /^HTTP\/1\.1 101 /);
    // Three messages of 65,000 bytes are over twice maxMessageSize; then two more, so that the
    // ping is more than a socket read (64 KiB) past the point where reading pauses: `ws` still
    // parses the rest of a read it has taken.
    // A binary frame with a 16-bit length, masked with a zero key.
    const message = new Uint8Array(8 + 65_000);
    message.set([0x82, 0xfe, 65_000 >> 8, 65_000 & 0xff]);
    for (let i = 0; i < 5; i++) await client.write(message);
    await client.write(clientFrame(true, 9, bytes("p")));
    let arrived = 0;
    const pong = client.frame(5000).then((frame) => {
      arrived = performance.now();
      return frame;
    });
    await sleep(300);
    const released = performance.now();
    go.resolve();
    assertEquals((await pong)?.opcode, 10);
    assert(arrived >= released, `the pong came ${Math.round(released - arrived)} ms too early`);
    await client.writeClose(1000);
    assertEquals((await client.frame(5000))?.opcode, 8);
    client.close();
    for (let i = 0; i < 200 && received.at(-1)?.type !== "websocket.disconnect"; i++) {
      await sleep(10);
    }
    assertEquals(received.map((message) => message.type), [
      ...Array(5).fill("websocket.receive"),
      "websocket.disconnect",
    ]);
  } finally {
    client.close();
  }
});

// Claims audit (2026-11-29): once `ws` has refused a message (1009 past maxMessageSize, 1008,
// a protocol error) it stops parsing and lets the socket flow, dropping what comes until the
// close completes or closeTiming.timeoutMs passes. A client that kept sending had 20 GiB read
// in those 10 s, the server 55 → 590 MiB. Reading now stops after 16 MiB dropped.
Deno.test("serve() [node] stops reading a client that goes on sending after its 1009", async () => {
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "websocket") return;
    await receive();
    await send({ type: "websocket.accept" });
    while ((await receive()).type !== "websocket.disconnect");
  };
  await using server = await start(app, "node", { maxMessageSize: 1024 * 1024 });
  const client = await RawSocket.open(server.port);
  let written = 0;
  try {
    assertMatch(client.head, /^HTTP\/1\.1 101 /);
    // A binary message announced as 256 MiB (64-bit length), masked, then its payload.
    const header = new Uint8Array(14);
    header[0] = 0x82;
    header[1] = 0x80 | 127;
    new DataView(header.buffer).setBigUint64(2, 256n * 1024n * 1024n);
    await client.write(header);
    const piece = new Uint8Array(1024 * 1024);
    // Bounded: 256 pieces at most, and a write the server does not take within 1 s ends it.
    for (let i = 0; i < 256; i++) {
      const took = await Promise.race([
        client.write(piece).then(() => true, () => false),
        sleep(1000).then(() => false),
      ]);
      if (!took) break;
      written += piece.length;
    }
    const close = await client.frame();
    assertEquals(close?.opcode, 8);
    assertEquals((close!.payload[0]! << 8) | close!.payload[1]!, 1009);
  } finally {
    client.close();
  }
  // 16 MiB dropped, plus what the two kernels' socket buffers hold.
  assert(written < 64 * 1024 * 1024, `the server took ${written / 1024 / 1024} MiB after its 1009`);
});

// Regression (soak of 2026-11-29, vanishing WebSocket clients): Deno keeps an upgraded request and
// its closed WebSocket for 15 s, and both reached the bridge's cycle (the socket's handlers, and
// the call sites of the AbortError upgrading leaves on request.signal): 100 of 100 scopes
// reachable after the applications returned; at 5,000 clients a second, 500-700 MiB of heap.
Deno.test("serve() [deno] keeps nothing of a WebSocket whose client vanished once its application returned", async () => {
  const { count, reachable } = await reachableScopes("tests/fixtures/deno_vanished_ws_scopes.ts");
  assertEquals(count, 100);
  // None once dropped; a few allowed for a collection that misses some.
  assert(reachable <= 5, `${reachable} of ${count} vanished WebSockets' scopes still reachable`);
});

/**
 * Serves `app` on a fresh Unix socket with `stallTimeout` 300 ms, opens a WebSocket to it, reads
 * the 101 and sends a "go" text frame. Over a Unix socket the kernel buffers less than Deno holds
 * before a send waits, so bytes the client does not take stay queued in Deno. The application
 * must send nothing before "go": the read gets the 101's head alone.
 */
async function unixWebSocketGo(
  app: AsgiApplication,
): Promise<{ server: AsgiServer<AsgiUnixAddr>; logger: RecordingLogger; conn: Deno.UnixConn }> {
  const path = `${await Deno.makeTempDir()}/ws.sock`;
  const logger = new RecordingLogger();
  const server = serve(app, {
    path,
    lifespan: "off",
    logger,
    onListen() {},
    stallTimeout: 300,
    shutdownTimeout: 3000,
  });
  try {
    await server.addr;
    const conn = await Deno.connect({ transport: "unix", path });
    try {
      await conn.write(bytes(handshake("/")));
      const head = new Uint8Array(1024);
      const n = await within(conn.read(head), 3000, "the 101");
      assertMatch(text(head.subarray(0, n ?? 0)), /^HTTP\/1\.1 101 /);
      await conn.write(clientFrame(true, 0x1, bytes("go")));
      return { server, logger, conn };
    } catch (error) {
      conn.close();
      throw error;
    }
  } catch (error) {
    await server.shutdown();
    throw error;
  }
}

// Regression (WebSocket hardening with fresh eyes, 2026-11-29): on deno, a client that took none
// of what the application's sends had left queued in Deno (sends that had all resolved) held the
// application in receive() until the client left (40 s measured, stallTimeout 3 s): the stall
// clock ran only while a send waited, Deno's ping queues behind the unsent bytes, and its answer
// to a client's close frame waits behind them too, so no "close" event came. node's pings and its
// close timer bound it (40 s, 10 s).
Deno.test("serve() [deno] gives up after stallTimeout a client that takes nothing of what resolved sends left queued", async (t) => {
  for (const closes of [false, true]) {
    const how = closes ? "sends its close frame" : "sends nothing more";
    await t.step(`a client that reads nothing and ${how}`, async () => {
      const queued = Promise.withResolvers<void>();
      const ended = Promise.withResolvers<ReceiveMessage>();
      const app: AsgiApplication = async (scope, receive, send) => {
        if (scope.type !== "websocket") return;
        await receive();
        await send({ type: "websocket.accept" });
        await receive(); // The client's "go": it has read its 101, and reads nothing more.
        // What Deno may hold before a send waits (256 KiB), so the send resolves at once. Over
        // a Unix socket the kernel takes less (its default send buffer is 208 KiB): Deno keeps
        // the message, of which the client takes nothing.
        await send({ type: "websocket.send", bytes: new Uint8Array(256 * 1024) });
        queued.resolve();
        ended.resolve(await receive());
      };
      const { server, logger, conn } = await unixWebSocketGo(app);
      await using _server = server;
      try {
        await within(queued.promise, 3000, "the send to resolve");
        if (closes) await conn.write(clientFrame(true, 0x8, new Uint8Array([0x03, 0xe8])));
        const started = performance.now();
        const disconnect = await within(ended.promise, 3000, "the application's disconnect");
        const elapsed = performance.now() - started;
        assert(elapsed < 2500, `given up after ${Math.round(elapsed)} ms`);
        assertEquals(disconnect, { type: "websocket.disconnect", code: 1006, reason: "" });
        assertEquals(logger.lines("warn"), [
          "WebSocket send stalled: the client took nothing for stallTimeout 300 ms; disconnected",
        ]);
      } finally {
        conn.close();
      }
    });
  }
});

// Regression (WebSocket hardening with fresh eyes, 2026-11-29): `ws` reads a `maxPayload` of 0 as
// no limit, so with `maxMessageSize: 0` the node transport buffered a client's message whole
// before the bridge closed it with 1009 (a 200 MiB message: RSS 54 -> 663 MiB), where any other
// limit refuses it from the length its frame declares.
Deno.test("serve() [node] refuses a message over maxMessageSize 0 from its declared length, before its payload", async () => {
  const disconnect = Promise.withResolvers<ReceiveMessage>();
  const app: AsgiApplication = async (scope, receive, send) => {
    if (scope.type !== "websocket") return;
    await receive();
    await send({ type: "websocket.accept" });
    disconnect.resolve(await receive());
  };
  await using server = await start(app, "node", { maxMessageSize: 0 });
  const client = await RawSocket.open(server.port);
  try {
    // A binary frame that declares 1 MiB (masked, zero key), and 10 bytes of it: nothing more.
    const head = new Uint8Array([0x82, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0]);
    await client.write(head);
    await client.write(new Uint8Array(10));
    const frame = await client.frame(3000);
    assertEquals(frame?.opcode, 0x8, "a close frame before the payload came");
    assertEquals([frame!.payload[0], frame!.payload[1]], [0x03, 0xf1]); // 1009
    assertEquals(
      await within(disconnect.promise, 3000, "the application's disconnect"),
      { type: "websocket.disconnect", code: 1009, reason: "" },
    );
  } finally {
    client.close();
  }
});

// Regression (review of the deno queued-bytes stall clock, 2026-11-29): the clock took a message
// sent during its period for one taken, so an application that sent a small message at least
// once per `stallTimeout` (a ticker, a heartbeat) kept a client that took nothing at all, until
// Deno held 256 KiB and a send waited: hours at one small message a second. It now counts what
// Deno has written out, the bytes handed to it less those it still holds.
Deno.test("serve() [deno] gives up a client that takes nothing while the application keeps sending small messages", async (t) => {
  for (const kind of ["bytes", "text"] as const) {
    await t.step(`${kind} messages`, async () => {
      const queued = Promise.withResolvers<void>();
      const ended = Promise.withResolvers<ReceiveMessage>();
      let stopped = false;
      const app: AsgiApplication = async (scope, receive, send) => {
        if (scope.type !== "websocket") return;
        await receive();
        await send({ type: "websocket.accept" });
        await receive(); // "go"
        // More than a Unix socket's kernel buffer takes (208 KiB), less than what makes a send
        // wait (256 KiB): Deno keeps the rest, and every send resolves at once.
        for (let i = 0; i < 3; i++) {
          await send({ type: "websocket.send", bytes: new Uint8Array(100 * 1024) });
        }
        queued.resolve();
        void receive().then((message) => ended.resolve(message));
        // A ticker: a small message every 100 ms, three times per stallTimeout.
        for (let i = 0; i < 60 && !stopped; i++) {
          try {
            if (kind === "bytes") {
              await send({ type: "websocket.send", bytes: new Uint8Array(10) });
            } else await send({ type: "websocket.send", text: "tick ✓ 😀" });
          } catch {
            return;
          }
          await sleep(100);
        }
      };
      const { server, logger, conn } = await unixWebSocketGo(app);
      await using _server = server;
      try {
        await within(queued.promise, 3000, "the sends to resolve");
        const disconnect = await within(ended.promise, 3000, "the application's disconnect");
        assertEquals(disconnect, { type: "websocket.disconnect", code: 1006, reason: "" });
        assertEquals(logger.lines("warn"), [
          "WebSocket send stalled: the client took nothing for stallTimeout 300 ms; disconnected",
        ]);
      } finally {
        stopped = true;
        conn.close();
      }
    });
  }
});
