// Copyright the stellarator authors. MIT license.
/**
 * The `serve()` shutdowns in progress in this thread (a worker has its own), so that an `App`
 * that ends the process on a signal waits for them. A program that serves one `App` with
 * `Deno.serve(app.fetch)` (a metrics port, say) beside a `serve()` it stops on the same signal
 * once exited as soon as the `App` was done: the `serve()` server's requests in flight got no
 * response and its lifespan shutdown never ran.
 *
 * @module
 */

let running = 0;
let waiting: (() => void)[] = [];

/**
 * Counts a shutdown in until `done` settles.
 *
 * @param done The shutdown.
 * @returns `done`, as it settles.
 */
export function trackShutdown<T>(done: Promise<T>): Promise<T> {
  running++;
  const end = (): void => {
    if (--running > 0) return;
    const wake = waiting;
    waiting = [];
    for (const resolve of wake) resolve();
  };
  done.then(end, end);
  return done;
}

/**
 * Resolves once no `serve()` shutdown is in progress (at once when none is).
 *
 * @returns The promise.
 */
export function shutdownsDone(): Promise<void> {
  if (running === 0) return Promise.resolve();
  return new Promise((resolve) => waiting.push(resolve));
}
