import { assert, assertEquals } from "@std/assert";
import { DeadlineQueue } from "../_web/deadline.ts";

Deno.test("DeadlineQueue fires live deadlines in arrival order, never before their time", async () => {
  const queue = new DeadlineQueue(60);
  const fired: [number, number][] = [];
  const armedAt: number[] = [];
  const deadlines = Array.from({ length: 6 }, (_, i) => {
    armedAt.push(performance.now());
    return queue.arm(() => fired.push([i, performance.now()]));
  });
  deadlines[1]!.clear();
  deadlines[4]!.clear();
  deadlines[4]!.clear();
  assertEquals(queue.live, 4);
  await new Promise((resolve) => setTimeout(resolve, 200));
  assertEquals(fired.map(([i]) => i), [0, 2, 3, 5]);
  for (const [i, at] of fired) {
    assert(at - armedAt[i]! >= 60, `deadline ${i} fired after ${at - armedAt[i]!} ms`);
  }
  assertEquals(queue.live, 0);
});

Deno.test("DeadlineQueue arms one timer for any number of deadlines", () => {
  const { setTimeout: realSetTimeout } = globalThis;
  let timers = 0;
  globalThis.setTimeout = ((callback: () => void, ms?: number) => {
    timers++;
    return realSetTimeout(callback, ms);
  }) as typeof setTimeout;
  try {
    const queue = new DeadlineQueue(10_000);
    for (let i = 0; i < 1000; i++) queue.arm(() => {}).clear();
    const kept = Array.from({ length: 1000 }, () => queue.arm(() => {}));
    assertEquals(timers, 1);
    for (const deadline of kept) deadline.clear();
    assertEquals(queue.live, 0);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
});
