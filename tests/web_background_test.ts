import { assert, assertEquals, assertStrictEquals } from "@std/assert";
import { delay } from "@std/async/delay";
import type { AsgiApplication } from "../asgi.ts";
import { AsgiRouter, Route } from "../router.ts";
import { App, type AppOptions, type Request, Response, type WebHandler } from "../web.ts";
import { instance, RecordingLogger, startServer, waitFor } from "./fixtures/web_helpers.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

type Handler = WebHandler<Record<never, never>>;

function appWith(
  routes: [string, Handler][],
  options: Omit<AppOptions<Record<never, never>>, "router"> = {},
) {
  const router = new AsgiRouter({
    routes: routes.map(([path, handler]) => new Route(path, { handler })),
  });
  return new App({ router, logger: new RecordingLogger(), ...options });
}

function respond(request: Request, body = "ok"): Promise<void> {
  return request.respondWith(new Response({ body }));
}

/** The lines that end task `#id`: every task must have exactly one. */
function endings(logger: RecordingLogger, id: number): string[] {
  return logger.lines
    .filter((line) => line.level !== "debug" && line.text.includes(`(#${id})`))
    .map((line) => line.text);
}

Deno.test("Request.registerBackground() runs the task after the response, cut off at its limit", async () => {
  const logger = new RecordingLogger();
  const marks: string[] = [];
  let responseSentAt = Infinity;
  let taskStartedAt = -Infinity;
  const stopped = Promise.withResolvers<unknown>();
  async function task(signal: AbortSignal): Promise<void> {
    taskStartedAt = performance.now();
    try {
      for (let n = 1; n <= 5; n++) {
        marks.push(`iteration ${n}`);
        await delay(100, { signal });
      }
      marks.push("done");
    } finally {
      stopped.resolve(signal.reason);
    }
  }
  async function index(request: Request): Promise<void> {
    await request.registerBackground(task);
    await respond(request);
  }
  const app = appWith([["/", index]], { backgroundTaskTimeLimit: 0.25, logger });
  // Notes when the last byte of the response was handed to the server.
  const recording: AsgiApplication = (scope, receive, send) =>
    app.asgi(scope, receive, async (message) => {
      await send(message);
      if (message.type === "http.response.body" && !message.more_body) {
        responseSentAt = performance.now();
      }
    });
  await using served = await startServer({ asgi: recording });
  const response = await fetch(served.base);
  assertEquals(await response.text(), "ok");
  const reason = await withTimeout(stopped.promise, BOUND_MS, "the task to see its signal abort");
  assertEquals(marks, ["iteration 1", "iteration 2", "iteration 3"]);
  assertEquals(instance(reason, DOMException).name, "TimeoutError");
  assert(responseSentAt <= taskStartedAt, "the task started before the response was sent");
  await delay(150);
  assertEquals(marks.includes("done"), false);
  assertEquals(endings(logger, 1), [
    'Background task "task" (#1) cut off at its time limit of 0.25 s: its signal was aborted ' +
    "and its result is ignored (a task that ignores its signal runs on unobserved)",
  ]);
});

Deno.test("A background task that ignores its signal is abandoned at its limit", async () => {
  const logger = new RecordingLogger();
  const finished = Promise.withResolvers<void>();
  let signalAborted = false;
  async function stubborn(signal: AbortSignal): Promise<string> {
    await delay(300); // Ignores the signal on purpose.
    signalAborted = signal.aborted;
    finished.resolve();
    return "result nobody reads";
  }
  const app = appWith([["/", async (request) => {
    await request.registerBackground(stubborn);
    await respond(request);
  }]], { backgroundTaskTimeLimit: 0.1, logger });
  await using served = await startServer(app);
  await (await fetch(served.base)).text();
  await waitFor(() => logger.at("warn").length > 0, 1000, "the cut-off warning");
  assertEquals(endings(logger, 1).length, 1);
  assert(endings(logger, 1)[0]!.includes("cut off at its time limit of 0.1 s"));
  await withTimeout(finished.promise, BOUND_MS, "the task to finish");
  assert(signalAborted, "the signal was not aborted at the limit");
  await waitFor(() => logger.at("debug").length > 0, 1000, "the debug line of the late result");
  assert(
    logger.at("debug")[0]!.startsWith('Background task "stubborn" (#1) settled'),
    logger.at("debug")[0],
  );
  // Still one ending: the late result did not add a "completed" line.
  assertEquals(endings(logger, 1).length, 1);
});

Deno.test("Background task errors are logged with the task's name", async (t) => {
  const cases: [string, (request: Request) => Promise<unknown>, string][] = [
    [
      "named function that rejects",
      (request) =>
        request.registerBackground(async function sendMail() {
          await delay(1);
          throw new Error("smtp down");
        }),
      'Background task "sendMail" (#1) failed after',
    ],
    [
      "arrow function named by the option, throwing synchronously",
      (request) =>
        request.registerBackground(() => {
          throw new Error("sync failure");
        }, { name: "resize images" }),
      'Background task "resize images" (#1) failed after',
    ],
    [
      "anonymous arrow function",
      (request) => request.registerBackground(() => Promise.reject(new Error("nameless"))),
      'Background task "anonymous" (#1) failed after',
    ],
    // Sweep of every error the library raises, 2026-11-29: a name built from a client's data
    // went into the line raw, so a newline in it forged a second log line.
    [
      "name with a newline and a quote, escaped",
      (request) =>
        request.registerBackground(() => Promise.reject(new Error("bounced")), {
          name: 'mail to "a"\n2026-11-29 ERROR forged',
        }),
      'Background task "mail to \\"a\\"\\n2026-11-29 ERROR forged" (#1) failed after',
    ],
  ];
  for (const [name, register, start] of cases) {
    await t.step(name, async () => {
      const logger = new RecordingLogger();
      const app = appWith([["/", async (request) => {
        await register(request);
        await respond(request);
      }]], { logger });
      await using served = await startServer(app);
      await (await fetch(served.base)).text();
      await waitFor(() => logger.at("error").length > 0, 1000, "the error line");
      assert(logger.at("error")[0]!.startsWith(start), logger.at("error")[0]);
      assert(logger.lines.find((line) => line.level === "error")?.values[0] instanceof Error);
    });
  }
});

Deno.test("Request.registerBackground() waits for room beyond backgroundTaskLimit and drops nothing", async (t) => {
  await t.step("the third registration waits until a slot frees", async () => {
    const logger = new RecordingLogger();
    const gates = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
    const ran: string[] = [];
    let thirdRegistered = false;
    const handlerDone = Promise.withResolvers<void>();
    async function index(request: Request): Promise<void> {
      await respond(request);
      for (const [i, gate] of gates.entries()) {
        await request.registerBackground(async () => {
          ran.push(`gated ${i + 1}`);
          await gate.promise;
        });
      }
      await request.registerBackground(() => {
        ran.push("third");
      });
      thirdRegistered = true;
      handlerDone.resolve();
    }
    const app = appWith([["/", index]], { backgroundTaskLimit: 2, logger });
    await using served = await startServer(app);
    assertEquals(await (await fetch(served.base)).text(), "ok");
    await waitFor(() => ran.length === 2, 1000, "the two gated tasks to start");
    await delay(100);
    assertEquals(thirdRegistered, false, "the third registration did not wait");
    assertEquals(ran, ["gated 1", "gated 2"]);
    gates[0]!.resolve();
    await withTimeout(handlerDone.promise, BOUND_MS, "the handler to finish");
    await waitFor(() => ran.length === 3, 1000, "the third task");
    gates[1]!.resolve();
    await waitFor(() => logger.at("info").length === 3, 1000, "three completions");
    assertEquals(ran, ["gated 1", "gated 2", "third"]);
  });

  await t.step("many requests: at most the limit run at once, every task completes", async () => {
    const logger = new RecordingLogger();
    let running = 0;
    let most = 0;
    let completed = 0;
    async function task(): Promise<void> {
      most = Math.max(most, ++running);
      await delay(20);
      running--;
      completed++;
    }
    const app = appWith([["/", async (request) => {
      await request.registerBackground(task);
      await request.registerBackground(task);
      await respond(request);
    }]], { backgroundTaskLimit: 2, logger });
    await using served = await startServer(app);
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => fetch(served.base).then((r) => r.text())),
    );
    assertEquals(responses, Array(10).fill("ok"));
    await waitFor(() => completed === 20, 3000, "twenty completed tasks");
    assertEquals(most, 2);
    assertEquals(logger.at("info").length, 20);
    assertEquals(logger.at("warn"), []);
  });
});

Deno.test("Background tasks of a request that never responds do not run", async (t) => {
  const cases: [string, Handler, number, string][] = [
    [
      "request time limit",
      async (request) => {
        await request.registerBackground(() => {
          throw new Error("must not run");
        }, { name: "early" });
        await delay(200);
        // Registered after the 408: discarded at once.
        await request.registerBackground(() => {
          throw new Error("must not run");
        }, { name: "late" });
      },
      408,
      'its request "GET /" hit the request time limit of 0.1 s',
    ],
    [
      "handler failure",
      async (request) => {
        await request.registerBackground(() => {
          throw new Error("must not run");
        }, { name: "early" });
        throw new Error("handler failed");
      },
      500,
      'the handler of "GET /" failed',
    ],
    [
      "no response",
      async (request) => {
        await request.registerBackground(() => {
          throw new Error("must not run");
        }, { name: "early" });
      },
      500,
      '"GET /" never responded',
    ],
  ];
  for (const [name, handler, status, reason] of cases) {
    await t.step(name, async () => {
      const logger = new RecordingLogger();
      const app = appWith([["/", handler]], { requestTimeLimit: 0.1, logger });
      await using served = await startServer(app);
      const response = await fetch(served.base);
      await response.body?.cancel();
      assertEquals(response.status, status);
      await delay(status === 408 ? 250 : 20);
      const notRun = logger.at("warn").filter((line) => line.includes("not run"));
      assert(notRun.length >= 1, `warnings: ${logger.at("warn")}`);
      for (const line of notRun) assert(line.endsWith(`not run: ${reason}`), line);
      assertEquals(logger.at("error").filter((line) => line.includes("Background")), []);
      if (status === 408) assertEquals(notRun.length, 2);
    });
  }
});

Deno.test("Shutdown aborts running tasks, cancels queued ones, then runs the lifespan shutdown", async () => {
  const logger = new RecordingLogger();
  const events: string[] = [];
  const reasons: unknown[] = [];
  async function cooperative(signal: AbortSignal): Promise<void> {
    events.push("task started");
    await new Promise<void>((resolve) =>
      signal.addEventListener("abort", () => {
        reasons.push(signal.reason);
        events.push("task saw abort");
        resolve();
      })
    );
    await delay(30);
    events.push("task stopped");
  }
  function queued(): void {
    events.push("queued task ran");
  }
  // A task is queued only when a request that already holds a reservation registers beyond the
  // limit (it may, up to the limit itself): "/first" holds #1, "/second" takes the last room
  // with #2, then "/first" registers #3. Both respond, #1 and #2 run, #3 waits for a slot.
  const secondRegistered = Promise.withResolvers<void>();
  type Attributes = { open: boolean };
  const app = new App<Attributes>({
    router: new AsgiRouter({
      routes: [
        new Route("/first", {
          handler: async (request: Request<Attributes>) => {
            await request.registerBackground(cooperative);
            await secondRegistered.promise;
            await request.registerBackground(queued);
            await request.respondWith(new Response({ body: "ok" }));
          },
        }),
        new Route("/second", {
          handler: async (request: Request<Attributes>) => {
            await request.registerBackground(cooperative);
            secondRegistered.resolve();
            await request.respondWith(new Response({ body: "ok" }));
          },
        }),
      ],
    }),
    backgroundTaskLimit: 2,
    shutdownGracePeriod: 1,
    logger,
    attributes: { open: false },
    lifespan: (app, messageType) => {
      events.push(messageType);
      app.open = messageType === App.LIFESPAN_STARTUP;
    },
  }) as App<Attributes> & Attributes;
  const served = await startServer(app);
  assertStrictEquals(app.open, true);
  const first = fetch(`${served.base}/first`).then((response) => response.text());
  const second = fetch(`${served.base}/second`).then((response) => response.text());
  assertEquals(await Promise.all([first, second]), ["ok", "ok"]);
  await waitFor(
    () => events.filter((event) => event === "task started").length === 2,
    1000,
    "two tasks to start",
  );
  await served.server.shutdown();
  assertEquals(events, [
    "lifespan.startup",
    "task started",
    "task started",
    "task saw abort",
    "task saw abort",
    "task stopped",
    "task stopped",
    "lifespan.shutdown",
  ]);
  for (const reason of reasons) assertEquals(instance(reason, DOMException).name, "AbortError");
  assertStrictEquals(app.open, false);
  for (const id of [1, 2]) {
    assertEquals(endings(logger, id).length, 1);
    assert(
      endings(logger, id)[0]!.startsWith(
        `Background task "cooperative" (#${id}) cancelled at shutdown`,
      ),
    );
  }
  assertEquals(endings(logger, 3), [
    'Background task "queued" (#3) cancelled at shutdown before it started',
  ]);
});

Deno.test("Shutdown abandons a task that ignores its signal after the grace period", async () => {
  const logger = new RecordingLogger();
  const events: string[] = [];
  const finished = Promise.withResolvers<void>();
  async function stubborn(): Promise<void> {
    await delay(700);
    events.push("stubborn task finished");
    finished.resolve();
  }
  const app = appWith([["/", async (request) => {
    await request.registerBackground(stubborn);
    await respond(request);
  }]], {
    shutdownGracePeriod: 0.2,
    logger,
    lifespan: (_app, messageType) => {
      events.push(messageType);
    },
  });
  const served = await startServer(app);
  await (await fetch(served.base)).text();
  await delay(20);
  const before = performance.now();
  await served.server.shutdown();
  const took = performance.now() - before;
  assert(took >= 190 && took < 650, `shutdown took ${took} ms, expected about the 200 ms grace`);
  assertEquals(events, ["lifespan.startup", "lifespan.shutdown"]);
  assertEquals(endings(logger, 1), [
    'Background task "stubborn" (#1) cancelled at shutdown: it did not stop within the grace ' +
    "period of 0.2 s after its signal was aborted, so it was abandoned",
  ]);
  await withTimeout(finished.promise, BOUND_MS, "the abandoned task to finish");
  assertEquals(endings(logger, 1).length, 1);
});

Deno.test("Shutdown lets an in-flight request finish before the lifespan shutdown", async () => {
  const events: string[] = [];
  const inHandler = Promise.withResolvers<void>();
  const app = appWith([["/slow", async (request) => {
    inHandler.resolve();
    await delay(150);
    await respond(request, "finished");
    events.push("responded");
  }]], {
    lifespan: (_app, messageType) => {
      events.push(messageType);
    },
  });
  const served = await startServer(app);
  const pending = fetch(`${served.base}/slow`).then((response) => response.text());
  await withTimeout(inHandler.promise, BOUND_MS, "the handler to start");
  const stopping = served.server.shutdown();
  assertEquals(await withTimeout(pending, BOUND_MS, "the in-flight response"), "finished");
  await withTimeout(stopping, BOUND_MS, "shutdown to finish");
  assertEquals(events, ["lifespan.startup", "responded", "lifespan.shutdown"]);
});

// Issue 10: with the grace period's deadline removed, shutdown waited forever for a request that
// never ends, and every test still passed.
Deno.test("Shutdown gives up on a request that never ends once the grace period is over", async () => {
  const logger = new RecordingLogger();
  const inHandler = Promise.withResolvers<void>();
  const app = appWith([["/hang", async () => {
    inHandler.resolve();
    // Deaf to its signal and to http.disconnect alike.
    await new Promise(() => {});
  }]], { shutdownGracePeriod: 0.2, logger });
  const served = await startServer(app, { shutdownTimeout: 100 });
  const answered = fetch(`${served.base}/hang`).then(
    (response) => response.body?.cancel(),
    () => {},
  );
  await withTimeout(inHandler.promise, BOUND_MS, "the handler to start");
  const before = performance.now();
  await withTimeout(served.server.shutdown(), BOUND_MS, "shutdown to give up on the request");
  const took = performance.now() - before;
  // The bridge's 0.1 s and the App's 0.2 s, with room for a busy machine.
  assert(took < 100 + 200 + 700, `shutdown took ${took} ms`);
  await withTimeout(answered, BOUND_MS, "the client to get an answer or a close");
});

// Regression (issue 10, point 4): registrations waiting for room kept their handlers in flight,
// so `server.shutdown()` waited the bridge's whole shutdownTimeout (30 s) before the App's grace
// period even began, and running tasks were left 0 s to stop. Now the server's call ends with the
// response, the waiting registrations are released as the App's shutdown starts, and running tasks
// get the whole grace period.
Deno.test("Shutdown releases registrations waiting for room at once and gives running tasks the grace period", async () => {
  const logger = new RecordingLogger();
  let attempted = 0;
  let stopped = 0;
  async function slowToStop(signal: AbortSignal): Promise<void> {
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    await delay(300);
    stopped++;
  }
  const app = appWith([["/", async (request) => {
    await respond(request);
    for (let i = 0; i < 5; i++) {
      attempted++;
      await request.registerBackground(slowToStop);
    }
  }]], { backgroundTaskLimit: 2, shutdownGracePeriod: 1, logger });
  // A shorter shutdownTimeout than the default 30 s, so that the defect fails in seconds.
  const served = await startServer(app, { shutdownTimeout: 3000 });
  const bodies = await Promise.all(
    Array.from({ length: 3 }, () => fetch(served.base).then((response) => response.text())),
  );
  assertEquals(bodies, ["ok", "ok", "ok"]);
  // Two tasks run; each request then waits with one registration: 2 + 3 attempts.
  await waitFor(() => attempted === 5, 1000, "a registration of each request to wait");
  const before = performance.now();
  await served.server.shutdown();
  const took = performance.now() - before;
  // 300 ms for the running tasks to stop; the bound is the 1 s grace period plus a tolerant
  // margin for a busy machine, far below the bridge's 30 s shutdownTimeout.
  assert(took < 2000, `shutdown took ${Math.round(took)} ms`);
  assertEquals(stopped, 2, "both running tasks stopped within the grace period");
  const lines = logger.lines.filter((line) => line.level !== "debug").map((line) => line.text);
  const cancelled = lines.filter((line) =>
    line.includes("cancelled at shutdown: it stopped after")
  );
  const released = lines.filter((line) => line.endsWith("not run: the app is shutting down"));
  assertEquals(cancelled.length, 2, lines.join("\n"));
  assertEquals(cancelled.length + released.length, attempted, "every task ends logged");
  assertEquals(lines.filter((line) => line.includes("grace period of 0 s")), []);
});

// Regression (issue 10, point 5): requestTimeLimit covered the whole handler, so tasks registered
// after a complete response, while waiting for room, were dropped once the limit passed ("not
// run: ... hit the request time limit"; 42,818 of 50,000 in one run).
Deno.test("Request.registerBackground() after a complete response runs though the request time limit passes", async () => {
  const logger = new RecordingLogger();
  const gate = Promise.withResolvers<void>();
  const ran: string[] = [];
  const app = appWith([
    ["/block", async (request) => {
      await respond(request);
      await request.registerBackground(() => gate.promise, { name: "blocker" });
    }],
    ["/late", async (request) => {
      await respond(request);
      // Waits for the blocker's slot, past the 0.1 s request time limit.
      await request.registerBackground(() => {
        ran.push("late");
      }, { name: "late" });
    }],
  ], { backgroundTaskLimit: 1, requestTimeLimit: 0.1, logger });
  await using served = await startServer(app);
  assertEquals(await (await fetch(`${served.base}/block`)).text(), "ok");
  assertEquals(await (await fetch(`${served.base}/late`)).text(), "ok");
  await delay(300);
  assertEquals(ran, []);
  gate.resolve();
  await waitFor(() => ran.length === 1, 1000, "the late task to run");
  await waitFor(() => logger.at("info").length === 2, 1000, "two completions");
  assertEquals(logger.at("warn"), []);
});

// Regression (issue 10, point 6): a request that already held a reservation never waited, so one
// request registered 50,000 tasks in 163 ms against a limit of 1,000 (RSS 255 MiB).
Deno.test("Request.registerBackground() lets no request hold more than backgroundTaskLimit tasks", async (t) => {
  await t.step("before responding, registration beyond the limit is a RangeError", async () => {
    const logger = new RecordingLogger();
    const refused = Promise.withResolvers<unknown>();
    const app = appWith([["/", async (request) => {
      for (let i = 0; i < 3; i++) await request.registerBackground(() => {});
      try {
        await request.registerBackground(() => {});
        refused.resolve(undefined);
      } catch (error) {
        refused.resolve(error);
      }
      await respond(request);
    }]], { backgroundTaskLimit: 3, logger });
    await using served = await startServer(app);
    assertEquals(await (await fetch(served.base)).text(), "ok");
    const error = instance(await refused.promise, RangeError);
    assertEquals(
      error.message,
      'Cannot register another background task for "GET /" before it responds: it already ' +
        "holds 3, the backgroundTaskLimit; respond first, or raise backgroundTaskLimit",
    );
    await waitFor(() => logger.at("info").length === 3, 1000, "the three tasks");
  });

  await t.step(
    "after responding, 5,000 registrations wait for room: at most the limit exist",
    async () => {
      const logger = new RecordingLogger();
      let live = 0;
      let most = 0;
      let completed = 0;
      const app = appWith([["/", async (request) => {
        await respond(request);
        for (let i = 0; i < 5000; i++) {
          // A task exists from its registration until it ends.
          most = Math.max(most, ++live);
          await request.registerBackground(async () => {
            await delay(0);
            live--;
            completed++;
          });
        }
      }]], { backgroundTaskLimit: 10, logger });
      await using served = await startServer(app);
      assertEquals(await (await fetch(served.base)).text(), "ok");
      await waitFor(() => completed === 5000, 20_000, "5,000 tasks");
      assert(most <= 11, `${most} tasks existed at once against a limit of 10`);
    },
  );
});

// Regression (review, 2026-11-25): registrations made without awaiting each (Promise.all) all
// saw a request holding nothing, so each waited for room that only the request's own tasks could
// free: the request hung (or got its 408), where the limit promises a RangeError.
Deno.test("Request.registerBackground() counts registrations made without awaiting each", async (t) => {
  await t.step("within the limit they are all held and run after the response", async () => {
    const logger = new RecordingLogger();
    const ran: string[] = [];
    const app = appWith([["/", async (request) => {
      await Promise.all(["a", "b", "c"].map((name) =>
        request.registerBackground(() => {
          ran.push(name);
        }, { name })
      ));
      await respond(request);
    }]], { backgroundTaskLimit: 3, logger });
    await using served = await startServer(app);
    const response = await withTimeout(fetch(served.base), BOUND_MS, "the response");
    assertEquals([response.status, await response.text()], [200, "ok"]);
    await waitFor(() => ran.length === 3, 1000, "three tasks");
    assertEquals(ran, ["a", "b", "c"]);
  });

  await t.step("beyond the limit, the one too many is a RangeError", async () => {
    const logger = new RecordingLogger();
    const ran: string[] = [];
    const outcome = Promise.withResolvers<PromiseSettledResult<boolean>[]>();
    const app = appWith([["/", async (request) => {
      outcome.resolve(
        await Promise.allSettled(["a", "b"].map((name) =>
          request.registerBackground(() => {
            ran.push(name);
          }, { name })
        )),
      );
      await respond(request);
    }]], { backgroundTaskLimit: 1, logger });
    await using served = await startServer(app);
    const response = await withTimeout(fetch(served.base), BOUND_MS, "the response");
    assertEquals([response.status, await response.text()], [200, "ok"]);
    const [first, second] = await outcome.promise;
    assertEquals(first?.status, "fulfilled");
    assertEquals(second?.status, "rejected");
    instance((second as PromiseRejectedResult).reason, RangeError);
    await waitFor(() => ran.length === 1, 1000, "the task within the limit");
    assertEquals(ran, ["a"]);
  });
});

// Regression (review, 2026-11-25): a logger that threw while the runner logged a task's end
// rejected a promise nobody awaited (the process died), and `discard` logged before it gave the
// reservation back, so a throwing warn() kept the slot taken for good.
Deno.test("Background tasks end, and give their slots back, when the logger throws", async () => {
  const thrown: string[] = [];
  const failing = {
    debug: () => {},
    info: (text: string) => {
      thrown.push(text);
      throw new Error("logger down");
    },
    warn: (text: string) => {
      thrown.push(text);
      throw new Error("logger down");
    },
    error: () => {},
  };
  const ran: string[] = [];
  const app = appWith([
    ["/task", async (request) => {
      await request.registerBackground(() => {
        ran.push("task");
      }, { name: "task" });
      await respond(request);
    }],
    // Its task is discarded at the limit (a warning that throws), before the 408 goes out.
    ["/slow", async (request) => {
      await request.registerBackground(() => {
        ran.push("never");
      }, { name: "never" });
      await delay(2000, { signal: request.signal }).catch(() => {});
    }],
  ], { backgroundTaskLimit: 1, requestTimeLimit: 0.1, logger: failing });
  // The console line each failure leaves is expected here.
  const consoleError = console.error;
  const consoleLines: unknown[][] = [];
  console.error = (...data: unknown[]) => consoleLines.push(data);
  try {
    await using served = await startServer(app);
    const slow = await withTimeout(fetch(`${served.base}/slow`), BOUND_MS, "the 408");
    assertEquals([slow.status, await slow.text()], [408, "Request time limit exceeded"]);
    for (let i = 0; i < 3; i++) {
      // With backgroundTaskLimit 1, a slot kept by the discarded task would hang these.
      const response = await withTimeout(fetch(`${served.base}/task`), BOUND_MS, "a response");
      assertEquals(await response.text(), "ok");
      await waitFor(() => ran.length === i + 1, 1000, "the task");
    }
  } finally {
    console.error = consoleError;
  }
  assertEquals(ran, ["task", "task", "task"]);
  // The discarded task, the 408, and the three tasks that ran.
  assertEquals(thrown.length, 5, thrown.join("\n"));
  assert(thrown[0]!.includes('"never" (#1) not run'), thrown[0]);
  assert(thrown[1]!.endsWith("answered 408"), thrown[1]);
  assertEquals(consoleLines.length, 5);
  assertEquals(consoleLines[0]![0], "The logger's warn() threw");
});

// Found by a fault probe (2026-11-27): with every slot taken by tasks that await the registration
// of another, none can go on. A fix that let running tasks skip the wait (known through an
// AsyncLocalStorage) starved later requests behind self-registering tasks and deadlocked one
// registration past its allowance, so it was reverted and the way out documented: a task
// registers without awaiting, and its child waits its turn in the queue.
Deno.test("Request.registerBackground() unawaited in tasks that hold every slot queues the children in turn", async () => {
  const logger = new RecordingLogger();
  const ran: string[] = [];
  const parentsAt = Promise.withResolvers<void>();
  let started = 0;
  const app = appWith([["/", async (request) => {
    await respond(request);
    for (const name of ["a", "b"]) {
      await request.registerBackground(async () => {
        // Both parents hold their slots before either registers: the limit is reached.
        if (++started === 2) parentsAt.resolve();
        await parentsAt.promise;
        void request.registerBackground(() => {
          ran.push(`child of ${name}`);
        }, { name: `child-${name}` });
        ran.push(`parent ${name} registered`);
      }, { name: `parent-${name}` });
    }
  }], ["/later", async (request) => {
    // A request registering before it responds is not starved by the children.
    await request.registerBackground(() => {
      ran.push("later");
    });
    await respond(request);
  }]], { backgroundTaskLimit: 2, logger, requestTimeLimit: 5 });
  await using served = await startServer(app);
  assertEquals(
    await (await withTimeout(fetch(served.base), BOUND_MS, "the response")).text(),
    "ok",
  );
  await waitFor(() => ran.length === 4, BOUND_MS, "both parents and both children");
  assertEquals(ran.toSorted(), [
    "child of a",
    "child of b",
    "parent a registered",
    "parent b registered",
  ]);
  const later = await withTimeout(fetch(`${served.base}/later`), BOUND_MS, "the later response");
  assertEquals([later.status, await later.text()], [200, "ok"]);
  await waitFor(() => ran.includes("later"), BOUND_MS, "the later request's task");
  await waitFor(
    () => logger.lines.filter((line) => line.text.includes("completed")).length === 5,
    BOUND_MS,
    "five completions",
  );
});

// Regression (hostile-client probe of the web layer, 2026-11-29): a registration waiting for room
// went on waiting after its request's 408, so the abandoned handler, its request and its task
// stayed in memory until a slot freed: with two tasks holding the slots for 10 minutes, 20,000
// timed-out requests took the server's heap from 7 to 161 MB after GC.
Deno.test("Request.registerBackground() waiting for room returns at the request time limit", async () => {
  const logger = new RecordingLogger();
  const gate = Promise.withResolvers<void>();
  let running = 0;
  const returned = Promise.withResolvers<number>();
  const app = appWith([
    ["/hold", async (request) => {
      await respond(request);
      await request.registerBackground(async () => {
        running++;
        await gate.promise;
      }, { name: "holder" });
    }],
    ["/wait", async (request) => {
      await request.registerBackground(() => {
        throw new Error("must not run");
      }, { name: "waiter" });
      returned.resolve(performance.now());
    }],
  ], { backgroundTaskLimit: 1, requestTimeLimit: 0.1, logger });
  await using served = await startServer(app);
  try {
    assertEquals(await (await fetch(`${served.base}/hold`)).text(), "ok");
    await waitFor(() => running === 1, 1000, "the task holding the only slot to run");
    const response = await fetch(`${served.base}/wait`);
    await response.body?.cancel();
    assertEquals(response.status, 408);
    const answered = performance.now();
    const at = await withTimeout(returned.promise, BOUND_MS, "the waiting registration to return");
    // The slot is still held: only the time limit can have ended the wait.
    assertEquals(running, 1);
    assert(at - answered < 1000, `the registration returned ${Math.round(at - answered)} ms late`);
    assertEquals(
      logger.at("warn").filter((line) => line.includes('"waiter"')),
      [
        'Background task "waiter" (#2) not run: its request "GET /wait" hit the request time ' +
        "limit of 0.1 s",
      ],
    );
  } finally {
    gate.resolve();
  }
});
