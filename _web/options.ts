/**
 * Validation of the web layer's options. Private: not exported from `deno.json`.
 *
 * @module
 */

import { describe } from "../_common/describe.ts";
import { MAX_TIMER_MS } from "../_common/timers.ts";

/**
 * Reads a time limit given in seconds and returns it in milliseconds.
 *
 * @param option The option's name, for error messages.
 * @param value The option's value; `undefined` means "no limit", or the default.
 * @param fallbackSeconds The default, which messages name; leave it out for a limit whose
 *   default is none.
 * @returns The limit in milliseconds: the default's when the value is left out, or `undefined`
 *   when there is no default.
 * @throws {TypeError} When the value is not a number.
 * @throws {RangeError} When it is negative, NaN, infinite or longer than a timer can wait.
 */
export function secondsOption(option: string, value: unknown): number | undefined;
export function secondsOption(option: string, value: unknown, fallbackSeconds: number): number;
export function secondsOption(
  option: string,
  value: unknown,
  fallbackSeconds?: number,
): number | undefined {
  if (value === undefined) {
    return fallbackSeconds === undefined ? undefined : fallbackSeconds * 1000;
  }
  // "Leave it out" must say what leaving it out gives: no limit, or the default.
  const leaveOut = fallbackSeconds === undefined
    ? "or leave it out for no limit"
    : `or leave it out for the default of ${fallbackSeconds} s`;
  if (typeof value !== "number") {
    throw new TypeError(
      `Invalid ${option} ${describe(value)}: use a number of seconds, such as 1 or 0.5, ` +
        leaveOut,
    );
  }
  const ms = value * 1000;
  if (!Number.isFinite(value) || value < 0 || ms > MAX_TIMER_MS) {
    throw new RangeError(
      `Invalid ${option} ${describe(value)}: use a finite number of seconds from 0 to ` +
        `${MAX_TIMER_MS / 1000}, ${leaveOut}`,
    );
  }
  return ms;
}

/**
 * Reads a time limit that cuts work off, in seconds, as {@linkcode secondsOption} does, but
 * refuses `0`: the bridge's timeouts (`headersTimeout`, `stallTimeout`...) take `0` for "no
 * limit", as uvicorn's do, while here it cut off every request or task at its first await (all
 * clients got 408), which no one asking for `0` meant.
 *
 * @param option The option's name, for error messages.
 * @param value The option's value; `undefined` means "no limit".
 * @returns The limit in milliseconds, or `undefined` for none.
 * @throws {TypeError} When the value is not a number.
 * @throws {RangeError} When it is 0, negative, NaN, infinite or longer than a timer can wait.
 */
export function limitOption(option: string, value: unknown): number | undefined {
  // Every number refused here gets this message: secondsOption's says "from 0", which is wrong
  // for these limits.
  if (
    typeof value === "number" &&
    (value <= 0 || !Number.isFinite(value) || value * 1000 > MAX_TIMER_MS)
  ) {
    throw new RangeError(
      `Invalid ${option} ${describe(value)}: use a positive number of seconds up to ` +
        `${MAX_TIMER_MS / 1000}, such as 1 or 0.5, or leave it out for no limit` +
        (value === 0
          ? " (0 would cut off everything at its first await: only the bridge's timeouts " +
            "take 0 for no limit)"
          : ""),
    );
  }
  return secondsOption(option, value);
}

/**
 * Reads an option that counts something: a positive safe integer.
 *
 * @param option The option's name, for error messages.
 * @param value The option's value; `undefined` means `fallback`.
 * @param fallback The default.
 * @returns The count.
 * @throws {TypeError} When the value is not a number.
 * @throws {RangeError} When it is not a whole number from 1 to `Number.MAX_SAFE_INTEGER`.
 */
export function countOption(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") {
    throw new TypeError(
      `Invalid ${option} ${describe(value)}: use a whole number, such as 100`,
    );
  }
  if (!Number.isSafeInteger(value) || value < 1) {
    // 1e300 is whole and at least 1: past the safe integers the message must say so.
    throw new RangeError(
      `Invalid ${option} ${describe(value)}: use a whole number of at least 1` +
        (value > Number.MAX_SAFE_INTEGER ? ` and at most ${Number.MAX_SAFE_INTEGER}` : ""),
    );
  }
  return value;
}

/**
 * The warning for a time in seconds that reads like milliseconds: a whole number of thousands,
 * from 1000 on (`requestTimeLimit: 5000` is 83 minutes, and was silently taken so). The bridge's
 * times are milliseconds, and so are most JavaScript timeouts; an App's are seconds, as uvicorn's
 * are. A round hour (3600) or day (86400) is not a thousand's multiple, and is not warned of.
 *
 * @param option The option's name.
 * @param value Its value, already checked.
 * @returns The warning, or `null` for a value that reads as seconds.
 */
export function likelyMilliseconds(option: string, value: unknown): string | null {
  if (typeof value !== "number" || value < 1000 || value % 1000 !== 0) return null;
  return `${option} is in seconds: ${value} means ${value} s (${Math.round(value / 60)} min). For ${
    value / 1000
  } seconds write ${option}: ${
    value / 1000
  } (an App's time limits are seconds; the bridge's times, such as shutdownTimeout, milliseconds)`;
}

/**
 * Formats milliseconds as seconds for log lines and messages, without float noise.
 *
 * @param ms Milliseconds.
 * @returns E.g. `"1 s"`, `"0.3 s"`, `"2.051 s"`.
 */
export function seconds(ms: number): string {
  return `${Math.round(ms) / 1000} s`;
}
