/**
 * `Request.receive()` and `Request.bytes()` against a scripted bridge: a lone reader takes the
 * bridge's own promise, readers that queue up behind it are served in order, and failures reach
 * every reader. Each message of the script is released by the test, so the order of events is
 * the test's, not the scheduler's.
 */
import { assertEquals, assertRejects, assertStrictEquals } from "@std/assert";
import type { HttpScope, ReceiveMessage, SendMessage } from "../asgi.ts";
import { AsgiRouter, Route } from "../router.ts";
import { App, type Request, Response, type WebHandler } from "../web.ts";
import { httpScope, instance, RecordingLogger } from "./fixtures/web_helpers.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const scope = (method = "POST"): HttpScope => httpScope(method);

function chunk(text: string, more: boolean): ReceiveMessage {
  return { type: "http.request", body: encoder.encode(text), more_body: more };
}

/**
 * A bridge whose `receive()` calls each get the next message of the script once the test calls
 * `release()` (or its next error, for `fail()`).
 */
class ScriptedBridge {
  readonly calls: PromiseWithResolvers<ReceiveMessage>[] = [];
  readonly sent: SendMessage[] = [];
  receive = (): Promise<ReceiveMessage> => {
    const call = Promise.withResolvers<ReceiveMessage>();
    this.calls.push(call);
    return call.promise;
  };
  send = (message: SendMessage): Promise<void> => {
    this.sent.push(message);
    return Promise.resolve();
  };
  /** Answers the oldest receive() call still open. */
  release(message: ReceiveMessage): void {
    const call = this.calls.find((c) => !("done" in c));
    if (call === undefined) throw new Error("No receive() call is waiting");
    Object.assign(call, { done: true });
    call.resolve(message);
  }
  fail(error: unknown): void {
    const call = this.calls.find((c) => !("done" in c));
    if (call === undefined) throw new Error("No receive() call is waiting");
    Object.assign(call, { done: true });
    call.reject(error);
  }
}

/** Runs `handler` for one request on `bridge`; resolves once the App's call returns. */
function run(bridge: ScriptedBridge, handler: (request: Request) => Promise<void>): Promise<void> {
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [new Route<WebHandler>("/", { handler, methods: ["POST"] })],
    }),
    logger: new RecordingLogger(),
  });
  return app.asgi(scope(), bridge.receive, bridge.send);
}

/** Lets every pending callback run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("Request.bytes() returns a body of one or several messages, the same array each time", async (t) => {
  const cases: [string, ReceiveMessage[], string][] = [
    ["one message", [chunk("abc", false)], "abc"],
    ["an empty body", [chunk("", false)], ""],
    ["three messages", [chunk("ab", true), chunk("", true), chunk("cd", false)], "abcd"],
  ];
  for (const [name, script, expected] of cases) {
    await t.step(name, async () => {
      const bridge = new ScriptedBridge();
      let first: Uint8Array | undefined;
      let second: Uint8Array | undefined;
      const done = run(bridge, async (request) => {
        first = await request.bytes();
        second = await request.bytes();
        await request.respondWith(new Response({ body: "ok" }));
      });
      for (const message of script) {
        await settle();
        bridge.release(message);
      }
      await done;
      assertEquals(decoder.decode(first), expected);
      assertStrictEquals(second, first);
      assertEquals(bridge.calls.length, script.length);
    });
  }
});

Deno.test("Request.bytes() rejects with an AbortError when the client goes mid-body", async () => {
  const bridge = new ScriptedBridge();
  let error: unknown;
  const done = run(bridge, async (request) => {
    error = await request.bytes().then(() => undefined, (reason) => reason);
  });
  await settle();
  bridge.release(chunk("ab", true));
  await settle();
  bridge.release({ type: "http.disconnect" });
  await done;
  assertEquals(instance(error, DOMException).name, "AbortError");
});

Deno.test("Request.bytes() after receive() took part or all of the body says to keep the chunks (regression: after part, it returned the rest as the body)", async (t) => {
  for (
    const [name, first] of [["all", chunk("abc", false)], ["part", chunk("ab", true)]] as const
  ) {
    await t.step(name, async () => {
      const bridge = new ScriptedBridge();
      let message: unknown;
      const done = run(bridge, async (request) => {
        message = await request.receive();
        await assertRejects(
          () => request.bytes(),
          TypeError,
          "with bytes() or text(): it was consumed with receive(); keep the chunks or call " +
            "bytes() or text() instead of receive()",
        );
        // text() reads through bytes(): its message names it too (it once said only bytes()).
        await assertRejects(() => request.text(), TypeError, "with bytes() or text()");
        await request.respondWith(new Response({ body: "ok" }));
      });
      await settle();
      bridge.release(first);
      await done;
      assertEquals(message, first);
    });
  }
});

Deno.test("Request.bytes() called again while the first call reads gets the same body (regression: overlapping bytes() calls split the body and one hung)", async (t) => {
  const cases: [string, ReceiveMessage[], string][] = [
    ["one message", [chunk("abc", false)], "abc"],
    ["three messages", [chunk("ab", true), chunk("c", true), chunk("d", false)], "abcd"],
  ];
  for (const [name, script, expected] of cases) {
    await t.step(name, async () => {
      const bridge = new ScriptedBridge();
      let bodies: string[] = [];
      const done = run(bridge, async (request) => {
        bodies = (await Promise.all([request.text(), request.text(), request.bytes()]))
          .map((body) => typeof body === "string" ? body : decoder.decode(body));
        await request.respondWith(new Response({ body: "ok" }));
      });
      for (const message of script) {
        await settle();
        bridge.release(message);
      }
      await done;
      assertEquals(bodies, [expected, expected, expected]);
      assertEquals(bridge.calls.length, script.length);
    });
  }
});

Deno.test("Request.bytes() after request.signal read the body ahead returns it", async () => {
  const bridge = new ScriptedBridge();
  let body = "";
  const done = run(bridge, async (request) => {
    request.signal;
    await settle();
    body = decoder.decode(await request.bytes());
    await request.respondWith(new Response({ body: "ok" }));
  });
  await settle();
  bridge.release(chunk("abc", false));
  await settle();
  bridge.release({ type: "http.disconnect" });
  await done;
  assertEquals(body, "abc");
});

Deno.test("Request.receive() while bytes() reads waits for the body, then gets what follows it", async () => {
  const bridge = new ScriptedBridge();
  let body = "";
  let next: Promise<ReceiveMessage> | undefined;
  const done = run(bridge, async (request) => {
    const reading = request.bytes();
    next = request.receive();
    body = decoder.decode(await reading);
    await request.respondWith(new Response({ body: "ok" }));
  });
  await settle();
  bridge.release(chunk("ab", true));
  await settle();
  bridge.release(chunk("cd", false));
  await settle();
  bridge.release({ type: "http.disconnect" });
  await done;
  assertEquals(body, "abcd");
  assertEquals(await next, { type: "http.disconnect" });
});

Deno.test("Request.receive() serves readers that queue behind a pending one, in order", async () => {
  const bridge = new ScriptedBridge();
  const got: string[] = [];
  const done = run(bridge, async (request) => {
    const reads = [request.receive(), request.receive(), request.receive()];
    for (const message of await Promise.all(reads)) {
      got.push(
        message.type === "http.request"
          ? `${decoder.decode(message.body)}${message.more_body ? "+" : ""}`
          : message.type,
      );
    }
    await request.respondWith(new Response({ body: "ok" }));
  });
  await settle();
  // One call reaches the bridge at a time, however many readers wait.
  assertEquals(bridge.calls.length, 1);
  bridge.release(chunk("a", true));
  await settle();
  assertEquals(bridge.calls.length, 2);
  bridge.release(chunk("b", false));
  await settle();
  // The body is complete: the third reader waits for the end of the exchange.
  bridge.release({ type: "http.disconnect" });
  await done;
  assertEquals(got, ["a+", "b", "http.disconnect"]);
});

Deno.test("Request.receive() passes a failing bridge's error to every waiting reader", async () => {
  const bridge = new ScriptedBridge();
  const failure = new Error("bridge broke");
  const outcomes: unknown[] = [];
  const done = run(bridge, async (request) => {
    const reads = [request.receive(), request.receive()];
    for (const read of reads) outcomes.push(await read.then(() => "resolved", (error) => error));
    await request.respondWith(new Response({ body: "ok" }));
  });
  await settle();
  bridge.fail(failure);
  await done;
  assertStrictEquals(outcomes[0], failure);
  assertStrictEquals(outcomes[1], failure);
});

Deno.test("Request.receive() refuses a message an HTTP scope cannot carry", async (t) => {
  // The second row: sweep of every error the library raises, 2026-11-29 (a server's type went
  // into the message raw, and the message did not say what was expected).
  const rows: [unknown, string][] = [
    [
      "websocket.connect",
      'Unexpected "websocket.connect" message in an HTTP scope: expected "http.request" or ' +
      '"http.disconnect"',
    ],
    [
      "x\ny",
      'Unexpected "x\\ny" message in an HTTP scope: expected "http.request" or "http.disconnect"',
    ],
  ];
  for (const [type, message] of rows) {
    await t.step(String(type), async () => {
      const bridge = new ScriptedBridge();
      let error: unknown;
      const done = run(bridge, async (request) => {
        error = await request.receive().then(() => undefined, (reason) => reason);
        await request.respondWith(new Response({ body: "ok" }));
      });
      await settle();
      bridge.release({ type } as ReceiveMessage);
      await done;
      assertEquals(instance(error, TypeError).message, message);
    });
  }
});

// Regression, found by tests/web_chaos_property_test.ts (node, 2026-11-28): a handler whose
// stream failed after the head had its stream cut off by the App, and the http.disconnect the
// bridge then reports for that close aborted request.signal with "The client disconnected",
// though the client never left (docs/web.md: the signal aborts when the client goes away).
Deno.test("Request.signal stays unaborted when the App cuts off the stream of a handler that failed", async () => {
  const bridge = new ScriptedBridge();
  let signal: AbortSignal | undefined;
  const done = run(bridge, async (request) => {
    signal = request.signal;
    await request.bytes();
    await request.respondWith(
      new Response({
        body: (async function* () {
          yield "a";
          throw new Error("planned failure after the head");
        })(),
      }),
    );
  });
  await settle();
  bridge.release(chunk("", false));
  const failed = await done.then(() => undefined, (error) => error);
  assertEquals(instance(failed, Error).message.includes("the response is cut off"), true);
  // The bridge closes the connection to cut the stream off, and reports it to the pending read.
  bridge.release({ type: "http.disconnect" });
  await settle();
  assertEquals(signal?.aborted, false);
});

// Fresh-eyes web probe (2026-11-29): a handler that responded first and read the body after got
// an AbortError, "The client disconnected", from a client still connected: the bridge ends the
// request with its response, and the error blamed the client for it.
Deno.test("Request.bytes() after the response is complete says to read the body before responding (regression: blamed the client)", async () => {
  const read = Promise.withResolvers<unknown>();
  const aborted = Promise.withResolvers<boolean>();
  const app = new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/upload", {
          handler: async (request) => {
            await request.respondWith(new Response({ status: 202, body: "accepted" }));
            read.resolve(await request.text().then(() => "read", (error) => error));
            aborted.resolve(request.signal.aborted);
          },
          methods: ["POST"],
        }),
      ],
    }),
    logger: new RecordingLogger(),
  });
  const response = await app.fetch(
    new globalThis.Request("http://localhost/upload", { method: "POST", body: "payload" }),
  );
  assertEquals([response.status, await response.text()], [202, "accepted"]);
  const error = instance(await read.promise, TypeError);
  assertEquals(
    error.message,
    'Cannot read the body of "POST /upload" after its response: the request ended with the ' +
      "response; read the body with bytes() or text() before responding",
  );
  // Nothing happened to the client, and the signal says so.
  assertEquals(await aborted.promise, false);
  await app.shutdown();
});

// Fresh-eyes web probe (2026-11-29), the receive side of "Request.respondWith() rejects, not
// throws, when the send it goes through throws": a middleware receive that threw made bytes(),
// receive() and even reading request.signal throw on the spot, and left the exchange pulling for
// good, so the next receive() never settled; one that returned a message instead of a promise
// threw a TypeError about `.then`.
Deno.test("Request.receive() and bytes() reject, not throw, when the receive they go through throws or returns no promise (regression)", async (t) => {
  const { BOUND_MS, withTimeout } = await import("./fixtures/timeout.ts");
  /** How a call went: "rejected <message>", "threw <message>" or "resolved <body or type>". */
  async function outcome(call: () => Promise<unknown>): Promise<string> {
    let promise: Promise<unknown>;
    try {
      promise = call();
    } catch (error) {
      return `threw ${(error as Error).message}`;
    }
    return await withTimeout(promise, BOUND_MS, "the call to settle").then(
      (value) =>
        `resolved ${
          value instanceof Uint8Array ? decoder.decode(value) : (value as { type: string }).type
        }`,
      (error: Error) => `rejected ${error.message}`,
    );
  }
  const cases: [string, () => unknown, string[]][] = [
    ["a receive that throws", () => {
      throw new Error("middleware bug");
    }, ["rejected middleware bug", "rejected middleware bug", "rejected middleware bug"]],
    ["a receive that returns a message", () => chunk("body", false), [
      "resolved body",
      "resolved http.request",
      "resolved http.request",
    ]],
  ];
  for (const [name, receive, expected] of cases) {
    await t.step(name, async () => {
      const outcomes: string[] = [];
      const app = new App({
        router: new AsgiRouter<WebHandler>({
          routes: [
            new Route<WebHandler>("/", {
              handler: async (request) => {
                outcomes.push(await outcome(() => request.bytes()));
                outcomes.push(await outcome(() => request.receive()));
                outcomes.push(await outcome(() => request.receive()));
                await request.respondWith(new Response({ body: "ok" }));
              },
              methods: ["POST"],
            }),
          ],
        }),
        logger: new RecordingLogger(),
      });
      await app.asgi(scope(), receive as () => Promise<ReceiveMessage>, () => Promise.resolve());
      assertEquals(outcomes, expected);
    });
  }
  await t.step("reading request.signal with a receive that throws", async () => {
    let read = "";
    const app = new App({
      router: new AsgiRouter<WebHandler>({
        routes: [
          new Route<WebHandler>("/", {
            handler: async (request) => {
              try {
                read = `aborted: ${request.signal.aborted}`;
              } catch (error) {
                read = `threw ${(error as Error).message}`;
              }
              await request.respondWith(new Response({ body: "ok" }));
            },
            methods: ["POST"],
          }),
        ],
      }),
      logger: new RecordingLogger(),
    });
    await app.asgi(scope(), () => {
      throw new Error("middleware bug");
    }, () => Promise.resolve());
    assertEquals(read, "aborted: false");
  });
});
