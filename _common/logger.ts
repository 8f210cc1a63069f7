// Copyright the stellarator authors. MIT license.
/**
 * Loggers that cannot fail. Private: not exported from `deno.json`.
 *
 * The bridge and the App call their logger from places where a thrown error has nowhere good to
 * go: a timer's callback, a promise nobody awaits, the middle of a 408. A logger that throws (a
 * full disk, a closed socket, a bug) there once crashed the process, turned a 408 into a 500 and
 * left a background task's slot taken for good. So every logger given to them is wrapped once:
 * a method that throws leaves one line on the console, with the line it was given, and the
 * caller goes on.
 *
 * @module
 */

/** A logger with the given levels, each a method that takes anything. */
export type LoggerOf<Level extends string> = Record<Level, (...data: unknown[]) => void>;

/**
 * Wraps a logger so that none of its methods throws.
 *
 * @param logger The logger; its methods are looked up at each call, and called on it.
 * @param levels The methods to wrap.
 * @returns A logger with those methods, each of which calls the logger's and, should that throw,
 *   writes both the failure and the line to `console.error` (and swallows a failure of that).
 */
export function guardLogger<Level extends string>(
  logger: LoggerOf<Level>,
  levels: readonly Level[],
): LoggerOf<Level> {
  const guarded = {} as LoggerOf<Level>;
  for (const level of levels) {
    guarded[level] = (...data: unknown[]): void => {
      try {
        logger[level](...data);
      } catch (error) {
        try {
          console.error(`The logger's ${level}() threw`, error, "on the line:", ...data);
        } catch {
          // Even the console failed (stderr closed): nowhere is left to say it.
        }
      }
    };
  }
  return guarded;
}
