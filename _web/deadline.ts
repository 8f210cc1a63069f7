/**
 * `deadline()` from `@std/async` with a timer that can be cleared.
 *
 * `deadline(p, ms)` arms an `AbortSignal.timeout(ms)`, which nothing can cancel: the timer stays
 * armed for the whole limit even when `p` settles at once. One such timer per request or task is
 * a live object per request of the last `ms` on a loaded server (the HTTP benchmark saw the heap
 * grow 39 -> 248 MB in 8 s at a 10 s limit). So `deadline()` gets no time of its own here; the
 * limit is a signal of ours, driven by a `setTimeout` that {@linkcode LimitedPromise.clear}
 * cancels.
 *
 * @module
 */
import { deadline } from "@std/async/deadline";

/** A promise under a time limit, and the way to disarm the limit once it no longer matters. */
export interface LimitedPromise<T> {
  /** Settles as the given promise, or rejects with a `TimeoutError` at the limit. */
  promise: Promise<T>;
  /** Cancels the limit's timer; call it once the promise has settled. */
  clear(): void;
}

/**
 * Runs `promise` under `deadline()` with a limit of `ms` milliseconds whose timer can be
 * cleared. The timer starts now, before the caller starts the work, so the limit is never later
 * than promised and, at a tie, fires before any timer the work sets.
 *
 * @param promise The promise to limit.
 * @param ms The limit in milliseconds.
 * @returns The limited promise and its `clear()`.
 */
export function clearableDeadline<T>(promise: Promise<T>, ms: number): LimitedPromise<T> {
  const clock = new AbortController();
  const timer = setTimeout(
    () => clock.abort(new DOMException("The time limit was reached", "TimeoutError")),
    ms,
  );
  return {
    promise: deadline(promise, Number.MAX_SAFE_INTEGER, { signal: clock.signal }),
    clear: () => clearTimeout(timer),
  };
}
