import { assert, assertEquals } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { App, type Request, Response } from "../web.ts";

// Regression: under requestTimeLimit and backgroundTaskTimeLimit every request and every task
// used to leave its deadline timer (an AbortSignal.timeout(), which nothing can cancel) armed for
// the whole limit, so a loaded server held one live timer per request of the last minute: the HTTP
// benchmark saw the heap grow 39 -> 248 MB in 8 s at a 10 s limit. Now no such signal may be made,
// and the requests and tasks of one limit share one timer.
Deno.test("App keeps one time-limit timer per limit, not one per request or task", async () => {
  const original = AbortSignal.timeout;
  let uncancellable = 0;
  AbortSignal.timeout = (ms: number) => {
    uncancellable++;
    return original.call(AbortSignal, ms);
  };
  const { setTimeout: realSetTimeout, clearTimeout: realClearTimeout } = globalThis;
  const pending = new Set<unknown>();
  globalThis.setTimeout = ((callback: () => void, ms?: number) => {
    const id = realSetTimeout(() => {
      pending.delete(id);
      callback();
    }, ms);
    pending.add(id);
    return id;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((id?: number) => {
    if (id !== undefined) pending.delete(id);
    realClearTimeout(id);
  }) as typeof clearTimeout;
  const app = new App({
    router: new AsgiRouter({
      routes: [
        new Route("/quick", {
          handler: async (request: Request) => {
            await request.registerBackground(() => {
              tasksRun++;
            });
            await request.respondWith(new Response({ body: "done" }));
          },
        }),
      ],
    }),
    requestTimeLimit: 60,
    backgroundTaskTimeLimit: 60,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  let tasksRun = 0;
  try {
    for (let i = 0; i < 3; i++) {
      const response = await app.fetch(new globalThis.Request("http://127.0.0.1/quick"));
      assertEquals(await response.text(), "done");
    }
    // The handler settles just after its response is handed over, and its task runs after that.
    await new Promise((resolve) => realSetTimeout(resolve, 10));
  } finally {
    AbortSignal.timeout = original;
    globalThis.setTimeout = realSetTimeout;
    globalThis.clearTimeout = realClearTimeout;
  }
  assertEquals(uncancellable, 0, "no AbortSignal.timeout() outlives its request");
  assertEquals(tasksRun, 3);
  // One timer per limit serves every request and task (a FIFO of deadlines, _web/deadline.ts):
  // at most one per limit may still be pending, never one per request.
  assert(pending.size <= 2, `${pending.size} time-limit timers pending after three requests`);
});
