// Copyright the stellarator authors. MIT license.
/**
 * The longest delay a timer can wait, shared by every layer that takes a duration. Private: not
 * exported from `deno.json`.
 *
 * @module
 */

/**
 * The longest delay a timer takes in milliseconds. `setTimeout` and `AbortSignal.timeout` treat a
 * larger delay as an overflow and fire at once (Deno prints a `TimeoutOverflowWarning` and waits
 * 1 ms), which would turn a generous limit into an instant one, so larger values are refused.
 */
export const MAX_TIMER_MS: number = 2 ** 31 - 1;
