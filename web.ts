/**
 * The experimental web layer: `App`, `Request` and `Response`, with request time
 * limits, background task time limits and cancellation.
 *
 * @module
 */
import { deadline } from "@std/async/deadline";
import { STATUS_CODE } from "@std/http/status";

/** The status code sent when a request handler runs out of time. */
export const REQUEST_TIMEOUT_STATUS: number = STATUS_CODE.RequestTimeout;

/**
 * Runs `promise` under a time limit in milliseconds.
 *
 * @example Usage
 * ```ts
 * import { withinLimit } from "./web.ts";
 * await withinLimit(Promise.resolve(1), 100);
 * ```
 */
export function withinLimit<T>(promise: Promise<T>, ms: number): Promise<T> {
  return deadline(promise, ms);
}
