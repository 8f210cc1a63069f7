/**
 * The bound on the warnings a client can cause (`_common/log_limit.ts`).
 *
 * Regression (log floods and porting footguns, task Q2): a client could make the server write
 * one warning per request. Oversized uploads wrote 9,112 lines in 25 s; a slow upload under an
 * App's requestTimeLimit wrote one "answered 408" line each. Now the first lines of each kind are
 * written in full, then one per interval that counts those held back, and the rest is told at
 * shutdown.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { createFetchHandler, textBytes } from "../asgi.ts";
import { App, type Request } from "../web.ts";
import { LOG_BURST, LOG_INTERVAL_MS, LogLimiter } from "../_common/log_limit.ts";
import {
  RecordingLogger as AsgiRecordingLogger,
  start,
  streamOf,
  TRANSPORTS,
} from "./fixtures/asgi_harness.ts";
import { RecordingLogger } from "./fixtures/web_helpers.ts";

Deno.test("LogLimiter.admit() writes the first lines of a kind in full, then one per interval with the count held back", () => {
  let now = 0;
  const limit = new LogLimiter(() => now);
  const notes: (string | null)[] = [];
  for (let i = 0; i < LOG_BURST + 5; i++) notes.push(limit.admit("413"));
  assertEquals(notes, [...Array(LOG_BURST).fill(""), ...Array(5).fill(null)]);
  // Another kind has a burst of its own.
  assertEquals(limit.admit("stall"), "");
  now = LOG_INTERVAL_MS - 1;
  assertEquals(limit.admit("413"), null);
  now = LOG_INTERVAL_MS;
  assertMatch(limit.admit("413")!, /^ \(and 6 more like it in the last 60 s, not logged: /);
  // Still going: held back again until the next interval.
  now += 1;
  assertEquals(limit.admit("413"), null);
  assertEquals(limit.summary().length, 1);
  assertMatch(limit.summary().join(), /^$/, "told once");
});

Deno.test("LogLimiter.admit() starts a new burst for a kind quiet for a whole interval", () => {
  let now = 0;
  const limit = new LogLimiter(() => now);
  for (let i = 0; i < LOG_BURST; i++) limit.admit("413");
  now = LOG_INTERVAL_MS;
  const notes: (string | null)[] = [];
  for (let i = 0; i < LOG_BURST + 1; i++) notes.push(limit.admit("413"));
  assertEquals(notes, [...Array(LOG_BURST).fill(""), null]);
});

// Review of the log limit (2026-11-29): lines held back were told only with the next line of
// their kind after the interval, or at shutdown. A flood that stopped (9,990 oversized uploads in
// 10 s, then none) left 10 lines in the log and its size untold for as long as the server ran, or
// for ever if it never shut down cleanly.
Deno.test("LogLimiter tells the lines held back once the interval has passed, with no later line of the kind", () => {
  let now = 0;
  const told: [string, string][] = [];
  const timers: { run: () => void; at: number; cancelled: boolean }[] = [];
  const schedule = (run: () => void, ms: number) => {
    const timer = { run, at: now + ms, cancelled: false };
    timers.push(timer);
    return () => void (timer.cancelled = true);
  };
  const limit = new LogLimiter(() => now, (level, line) => told.push([level, line]), schedule);
  for (let i = 0; i < LOG_BURST; i++) assertEquals(limit.admit("413"), "");
  assertEquals(timers.length, 0, "nothing held back, nothing to tell");
  now = 1_000;
  for (let i = 0; i < 3; i++) assertEquals(limit.admit("413"), null);
  assertEquals(limit.admit("slow", "debug"), "");
  assertEquals(timers.length, 1, "one timer for all that is held back");
  assertEquals(timers[0]!.at, LOG_INTERVAL_MS, "due when the next line of the kind would be");
  now = LOG_INTERVAL_MS;
  timers[0]!.run();
  assertEquals(told.length, 1);
  assertEquals(told[0]![0], "warn");
  assertMatch(told[0]![1], /^3 more lines of a kind not logged in the last 59 s \(.*\): 413$/);
  assertEquals(limit.summary(), [], "told once");
  // Still at most one line per interval: the next is held back and told an interval later.
  now += 1;
  assertEquals(limit.admit("413"), null);
  assertEquals(timers.length, 2);
  assertEquals(timers[1]!.at, 2 * LOG_INTERVAL_MS);
  // Shutdown tells it instead, and nothing is told twice.
  assertEquals(limit.summary().length, 1);
  assert(timers[1]!.cancelled, "the summary cancels the timer");
});

Deno.test("LogLimiter.summary() tells each kind's lines held back, once", () => {
  let now = 0;
  const limit = new LogLimiter(() => now);
  for (let i = 0; i < LOG_BURST + 3; i++) limit.admit("Request body exceeds maxBodySize");
  for (let i = 0; i < LOG_BURST; i++) limit.admit("Response stalled");
  now = 2_000;
  assertEquals(limit.summary().map(({ line }) => line), [
    `3 more lines of a kind not logged in the last 2 s (the first ${LOG_BURST} lines of a ` +
    "kind are logged, then one per 60 s): Request body exceeds maxBodySize",
  ]);
  assertEquals(limit.summary(), []);
});

for (const transport of TRANSPORTS) {
  Deno.test(`serve() writes at most ${LOG_BURST} lines for repeated bodies over maxBodySize, and counts the rest at shutdown (${transport}; regression)`, async () => {
    const s = await start(
      async (scope, receive, send) => {
        if (scope.type !== "http") return;
        for (;;) {
          const message = await receive();
          if (message.type !== "http.request" || !message.more_body) break;
        }
        await send({ type: "http.response.start", status: 200, headers: [] });
        await send({ type: "http.response.body", body: textBytes("ok") });
      },
      transport,
      { maxBodySize: 10 },
    );
    const uploads = LOG_BURST + 15;
    try {
      for (let i = 0; i < uploads; i++) {
        const response = await fetch(s.url, { method: "POST", body: "x".repeat(100) });
        assertEquals(response.status, 413);
        await response.body?.cancel();
      }
    } finally {
      await s.server.shutdown();
    }
    const lines = s.logger.lines("warn").filter((line) => line.includes("maxBodySize"));
    assertEquals(lines.length, LOG_BURST + 1, lines.join("\n"));
    assertEquals(
      lines.slice(0, LOG_BURST),
      Array(LOG_BURST).fill("Request body exceeds maxBodySize 10: answered 413 and disconnected"),
    );
    assertMatch(
      lines[LOG_BURST]!,
      /^15 more lines of a kind not logged .*\): Request body exceeds maxBodySize 10: answered 413 and disconnected$/,
    );
  });
}

Deno.test("createFetchHandler().shutdown() counts the warnings the log limit held back", async () => {
  const logger = new AsgiRecordingLogger();
  const handler = createFetchHandler(async (scope, receive, send) => {
    if (scope.type !== "http") return;
    await receive();
    await send({ type: "http.response.start", status: 200, headers: [] });
    await send({ type: "http.response.body", body: textBytes("ok") });
  }, { maxBodySize: 10, logger, lifespan: "off" });
  for (let i = 0; i < LOG_BURST + 2; i++) {
    const response = await handler.fetch(
      new globalThis.Request("http://localhost/", { method: "POST", body: "x".repeat(100) }),
    );
    assertEquals(response.status, 413);
    await response.body?.cancel();
  }
  await handler.shutdown();
  const lines = logger.lines("warn").filter((line) => line.includes("maxBodySize"));
  assertEquals(lines.length, LOG_BURST + 1);
  assertMatch(
    lines.at(-1)!,
    /^2 more lines of a kind not logged .*\): Request body exceeds maxBodySize 10: answered 413/,
  );
});

Deno.test(`App writes at most ${LOG_BURST} "answered 408" lines for requests over requestTimeLimit, and counts the rest at shutdown (regression)`, async () => {
  const log = new RecordingLogger();
  const app = new App({
    router: new AsgiRouter({
      routes: [
        new Route("/slow", {
          // Never responds: each request gets the App's 408 at the limit.
          handler: (request: Request) =>
            new Promise<void>((resolve) => {
              request.signal.addEventListener("abort", () => resolve(), { once: true });
            }),
        }),
      ],
    }),
    logger: log,
    handleSignals: false,
    requestTimeLimit: 0.02,
  });
  const requests = LOG_BURST + 4;
  // The App's limit timer is unref'd, and no server listens: a timer of the test's own keeps the
  // event loop running until the 408s are in.
  const alive = setTimeout(() => {}, 5000);
  try {
    const responses = await Promise.all(
      Array.from(
        { length: requests },
        () => app.fetch(new globalThis.Request("http://localhost/slow")),
      ),
    );
    for (const response of responses) {
      assertEquals(response.status, 408);
      await response.body?.cancel();
    }
  } finally {
    clearTimeout(alive);
    await app.shutdown();
  }
  const lines = log.lines.filter(({ level }) => level === "warn").map(({ text }) => text);
  const answered = lines.filter((line) => line.endsWith("; answered 408"));
  assertEquals(answered.length, LOG_BURST, lines.join("\n"));
  const told = lines.filter((line) => line.includes("not logged"));
  assertEquals(told.length, 1, lines.join("\n"));
  assertMatch(
    told[0]!,
    /^4 more lines of a kind not logged .*\): Route "\/slow" over the request time limit: answered 408$/,
  );
  assert(lines.length === LOG_BURST + 1, lines.join("\n"));
});

Deno.test(`App writes at most ${LOG_BURST} debug lines for handlers whose clients left, and counts the rest at shutdown at debug level (regression)`, async () => {
  const log = new RecordingLogger();
  const stopped: Promise<void>[] = [];
  const app = new App({
    router: new AsgiRouter({
      routes: [
        new Route("/wait", {
          handler: async (request: Request) => {
            const done = Promise.withResolvers<void>();
            stopped.push(done.promise);
            try {
              await new Promise((resolve) => {
                request.signal.addEventListener("abort", resolve, { once: true });
              });
              throw request.signal.reason;
            } finally {
              done.resolve();
            }
          },
        }),
      ],
    }),
    logger: log,
    handleSignals: false,
  });
  const requests = LOG_BURST + 3;
  try {
    for (let i = 0; i < requests; i++) {
      const left = new AbortController();
      const response = app.fetch(
        new globalThis.Request("http://localhost/wait", { signal: left.signal }),
      );
      // Once the handler waits on its signal, the client leaves.
      while (stopped.length <= i) await Promise.resolve();
      left.abort();
      await stopped[i];
      await response.catch(() => {});
    }
  } finally {
    await app.shutdown();
  }
  const debug = log.lines.filter(({ level }) => level === "debug").map(({ text }) => text);
  const left = debug.filter((line) => line.includes("stopped after the client went away"));
  assertEquals(left.length, LOG_BURST, debug.join("\n"));
  const told = debug.filter((line) => line.includes("not logged"));
  assertEquals(told.length, 1, debug.join("\n"));
  assertMatch(
    told[0]!,
    /^3 more lines of a kind not logged .*\): Handler stopped after its client left$/,
  );
  assertEquals(log.lines.filter(({ level }) => level === "warn"), []);
});

for (const transport of TRANSPORTS) {
  Deno.test(`serve() writes the first body over maxBodySize that cuts a response off, after a flood of 413s (${transport}; regression)`, async () => {
    const s = await start(
      async (scope, receive, send) => {
        if (scope.type !== "http") return;
        // On /started the response begins before the body is read: the excess cuts it off.
        if (scope.path === "/started") {
          await send({ type: "http.response.start", status: 200, headers: [] });
          await send({ type: "http.response.body", body: textBytes("a"), more_body: true });
        }
        for (;;) {
          const message = await receive();
          if (message.type !== "http.request" || !message.more_body) break;
        }
      },
      transport,
      { maxBodySize: 10 },
    );
    try {
      for (let i = 0; i < LOG_BURST + 2; i++) {
        const response = await fetch(s.url, { method: "POST", body: "x".repeat(100) });
        assertEquals(response.status, 413);
        await response.body?.cancel();
      }
      // Chunked, so that the application is called and starts its response first.
      const cut = await fetch(`${s.url}/started`, { method: "POST", body: streamOf(5, 100) });
      await cut.text().catch(() => {});
    } finally {
      await s.server.shutdown();
    }
    const lines = s.logger.lines("warn").filter((line) => line.includes("maxBodySize"));
    assertEquals(
      lines.filter((line) => line.includes("after the response started")),
      [
        "Request body exceeds maxBodySize 10 after the response started: cut the response off " +
        "(no 413) and disconnected",
      ],
      lines.join("\n"),
    );
  });
}
