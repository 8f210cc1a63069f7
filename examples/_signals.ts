/**
 * How the examples stop on a signal. The first SIGINT or SIGTERM starts a graceful shutdown; a
 * later one exits at once, with 128 + its number (130 for SIGINT, 143 for SIGTERM), as a second
 * Ctrl-C does in uvicorn and in an `App` that handles its own signals (`Deno.serve(app.fetch)`).
 * Before, a second Ctrl-C did nothing: with a slow upload in flight, `deno task example:asgi`
 * went on waiting for its `shutdownTimeout`, 30 s, however often it was pressed (2026-11-29).
 *
 * A second signal within {@linkcode REPEAT_WINDOW_MS} of the first is taken as the same one: a
 * signal sent to a process group reaches a wrapper (`deno task`'s JSR mirror, npm) and the
 * example both, and the wrapper may pass its copy on, milliseconds later.
 *
 * @module
 */

/** A second signal within this many milliseconds of the first is the same one, delivered twice. */
export const REPEAT_WINDOW_MS = 500;

const NUMBERS: Partial<Record<Deno.Signal, number>> = { SIGINT: 2, SIGTERM: 15 };

/** What {@linkcode stopOnSignals} needs from the outside world; tests replace parts of it. */
export interface StopOnSignalsOptions {
  /** Where its two lines go. @default {console.log} */
  log?: (line: string) => void;
  /** Ends the process. @default {Deno.exit} */
  exit?: (code: number) => void;
  /** The time in milliseconds. @default {performance.now} */
  now?: () => number;
  /** The signals. @default {SIGINT and SIGTERM; SIGINT alone on Windows} */
  signals?: readonly Deno.Signal[];
  /** Adds a listener. @default {Deno.addSignalListener} */
  addSignalListener?: (signal: Deno.Signal, handler: () => void) => void;
  /** Removes a listener. @default {Deno.removeSignalListener} */
  removeSignalListener?: (signal: Deno.Signal, handler: () => void) => void;
}

/**
 * Calls `stop` on the first SIGINT or SIGTERM, and exits at once on a later one (see the module
 * documentation).
 *
 * @example A Ctrl-C, its copy from a wrapper, and a second Ctrl-C
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { stopOnSignals } from "./_signals.ts";
 *
 * let time = 0;
 * const calls: string[] = [];
 * const listeners = new Map<Deno.Signal, () => void>();
 * stopOnSignals(() => calls.push("stop"), {
 *   log: (line) => calls.push(line),
 *   exit: (code) => calls.push(`exit ${code}`),
 *   now: () => time,
 *   signals: ["SIGINT", "SIGTERM"],
 *   addSignalListener: (signal, listener) => listeners.set(signal, listener),
 * });
 * listeners.get("SIGINT")!();
 * time = 10; // the same signal, passed on by a wrapper: ignored
 * listeners.get("SIGINT")!();
 * time = 2000;
 * listeners.get("SIGINT")!();
 * assertEquals(calls, [
 *   "Received SIGINT: shutting down (a second signal exits at once)",
 *   "stop",
 *   "Received SIGINT again: exiting without waiting",
 *   "exit 130",
 * ]);
 * ```
 *
 * @param stop Starts the graceful shutdown.
 * @param options The log, and what tests replace.
 * @returns A function that removes the listeners.
 */
export function stopOnSignals(
  stop: () => void,
  options: StopOnSignalsOptions = {},
): () => void {
  const {
    log = console.log,
    exit = Deno.exit,
    now = () => performance.now(),
    signals = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"],
    addSignalListener = Deno.addSignalListener,
    removeSignalListener = Deno.removeSignalListener,
  } = options;
  let firstAt: number | undefined;
  const listeners = signals.map((signal): [Deno.Signal, () => void] => [signal, () => {
    if (firstAt === undefined) {
      firstAt = now();
      log(`Received ${signal}: shutting down (a second signal exits at once)`);
      stop();
    } else if (now() - firstAt >= REPEAT_WINDOW_MS) {
      log(`Received ${signal} again: exiting without waiting`);
      exit(128 + (NUMBERS[signal] ?? 0));
    }
  }]);
  for (const [signal, listener] of listeners) addSignalListener(signal, listener);
  return () => {
    for (const [signal, listener] of listeners) removeSignalListener(signal, listener);
  };
}
