import { assertEquals } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { App, type Request, Response } from "../web.ts";

// Regression: under requestTimeLimit every request used to leave its deadline timer armed for the
// whole limit (an AbortSignal.timeout(), which nothing can cancel), so a loaded server held one
// live timer per request of the last minute: the HTTP benchmark saw the heap grow 39 -> 248 MB in
// 8 s at a 10 s limit. Now no such signal may be made per request, and the timer that replaced it
// must be cleared when the handler settles.
Deno.test("App clears a request's time-limit timer as soon as the handler settles", async () => {
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
            await request.respondWith(new Response({ body: "done" }));
          },
        }),
      ],
    }),
    requestTimeLimit: 60,
  });
  try {
    for (let i = 0; i < 3; i++) {
      const response = await app.fetch(new globalThis.Request("http://127.0.0.1/quick"));
      assertEquals(await response.text(), "done");
    }
    // The handler settles just after its response is handed over; let that run.
    await new Promise((resolve) => realSetTimeout(resolve, 10));
  } finally {
    AbortSignal.timeout = original;
    globalThis.setTimeout = realSetTimeout;
    globalThis.clearTimeout = realClearTimeout;
  }
  assertEquals(uncancellable, 0, "no AbortSignal.timeout() outlives its request");
  assertEquals(pending.size, 0, "every time-limit timer is cleared once its request is done");
});
