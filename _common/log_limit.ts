// Copyright the stellarator authors. MIT license.
/**
 * A bound on the log lines a client can cause. Private: not exported from `deno.json`.
 *
 * Some warnings are written once per request or connection, for what a client did: a body over
 * `maxBodySize`, a stalled upload, a WebSocket message too big, a handler that the client's slow
 * upload kept past `requestTimeLimit`. One client repeating it wrote one line each time: 9,112
 * lines in 25 s of oversized uploads (probe of 2026-11-29), enough to fill a disk or bury every
 * other line. Each such line has a kind, and `LogLimiter` lets through the first
 * `LOG_BURST` lines of a kind in full, then at most one line of that kind per
 * `LOG_INTERVAL_MS`, which says how many were held back since the last. Lines held back that no
 * later line of their kind tells are told on their own once the interval has passed (a flood that
 * stopped was otherwise untold for as long as the server ran), and `summary()` gives what is not
 * yet told, for the server to say at shutdown. Nothing is lost but the repeated text: the first
 * occurrence of every kind is written in full, and every one is counted. A kind that has been
 * quiet for a whole interval starts a new burst.
 *
 * Application errors (an exception in the application, a message it got wrong) are not limited:
 * they are the application's bugs, each with its own stack, as uvicorn writes every one.
 *
 * @module
 */

/** How many lines of a kind are written in full before the limit applies. */
export const LOG_BURST = 10;

/** Past the burst, the least time between two lines of a kind, in milliseconds. */
export const LOG_INTERVAL_MS = 60_000;

/** A level of the loggers that lines of a kind are written at. */
export type LogLevel = "debug" | "warn";

/** What a kind has written and held back. */
interface KindState {
  /** The level its lines are written at, for the summary. */
  level: LogLevel;
  /** Lines written in the current burst. */
  written: number;
  /** When the last line of the kind was written. */
  last: number;
  /** Lines held back since the last one written. */
  held: number;
  /** When the first of those held back came. */
  heldSince: number;
}

/**
 * Decides which lines of each kind are written.
 *
 * @example The first lines in full, then one a minute with a count
 * ```ts ignore
 * let now = 0;
 * const limit = new LogLimiter(() => now);
 * for (let i = 0; i < 15; i++) limit.admit("413"); // 10 × "", then 5 × null
 * now = 60_000;
 * limit.admit("413"); // " (and 5 more like it in the last 60 s, not logged: …)"
 * ```
 */
export class LogLimiter {
  readonly #now: () => number;
  readonly #tell: ((level: LogLevel, line: string) => void) | undefined;
  readonly #schedule: Schedule;
  /** Cancels the timer that tells lines held back (see `#tellDue`), while one is set. */
  #cancel: (() => void) | null = null;
  readonly #kinds = new Map<string, KindState>();
  readonly #said = new Set<string>();

  /**
   * @param now The clock, in milliseconds; `performance.now` unless told (tests pass their own).
   * @param tell Where lines held back are told once their interval has passed with no later line
   *   of their kind to tell them; without it, only `admit()` and `summary()` tell them.
   * @param schedule Runs a function after some milliseconds without keeping the process alive,
   *   and returns what cancels it (tests pass their own).
   */
  constructor(
    now: () => number = () => performance.now(),
    tell?: (level: LogLevel, line: string) => void,
    schedule: Schedule = unrefTimeout,
  ) {
    this.#now = now;
    this.#tell = tell;
    this.#schedule = schedule;
  }

  /**
   * Whether a line of `kind` is written now.
   *
   * @param kind What the line is about, in words: summaries at shutdown name it.
   * @param level The level its lines are written at, for the summary: a debug line's stays a
   *   debug line.
   * @returns `null` to hold the line back (it is counted); else the text to end it with: `""`,
   *   or the count of lines of its kind held back since the last one written.
   */
  admit(kind: string, level: LogLevel = "warn"): string | null {
    const now = this.#now();
    let state = this.#kinds.get(kind);
    if (state === undefined) {
      this.#kinds.set(kind, state = { level, written: 0, last: now, held: 0, heldSince: now });
    } else if (now - state.last >= LOG_INTERVAL_MS) {
      const held = state.held;
      state.last = now;
      // Quiet for an interval: a new burst.
      if (held === 0) {
        state.written = 1;
        return "";
      }
      // Still going: this line, and how many were held back since the last.
      state.held = 0;
      return ` (and ${held} more like it in the last ${seconds(now - state.heldSince)}, not ` +
        `logged: ${POLICY})`;
    } else if (state.written >= LOG_BURST) {
      if (state.held++ === 0) state.heldSince = now;
      if (this.#cancel === null && this.#tell !== undefined) {
        this.#cancel = this.#schedule(() => this.#tellDue(), state.last + LOG_INTERVAL_MS - now);
      }
      return null;
    }
    state.written++;
    state.last = now;
    return "";
  }

  /**
   * Whether a line said once per server is yet to be said: `true` the first time for `key`.
   *
   * @param key What the line is about.
   * @returns `true` once per key.
   */
  once(key: string): boolean {
    if (this.#said.has(key)) return false;
    this.#said.add(key);
    return true;
  }

  /**
   * The lines held back and not yet told, kind by kind; each is then counted as told.
   *
   * @returns One line per kind with lines held back, at the level of its kind, e.g. `12 more
   *   lines of a kind not logged in the last 3 s (…): Request body exceeds maxBodySize…`.
   */
  summary(): { level: LogLevel; line: string }[] {
    this.#cancel?.();
    this.#cancel = null;
    const lines: { level: LogLevel; line: string }[] = [];
    const now = this.#now();
    for (const [kind, state] of this.#kinds) {
      if (state.held === 0) continue;
      lines.push({ level: state.level, line: heldLine(kind, state, now) });
      state.held = 0;
    }
    return lines;
  }

  /**
   * Tells the lines held back of each kind whose interval has passed, as the line that would
   * have told them; that counts as the kind's line of the interval. Then waits for the next due.
   */
  #tellDue(): void {
    this.#cancel = null;
    const now = this.#now();
    let next = Infinity;
    for (const [kind, state] of this.#kinds) {
      if (state.held === 0) continue;
      const due = state.last + LOG_INTERVAL_MS;
      if (now < due) {
        next = Math.min(next, due);
        continue;
      }
      this.#tell!(state.level, heldLine(kind, state, now));
      state.held = 0;
      state.last = now;
    }
    if (next !== Infinity) this.#cancel = this.#schedule(() => this.#tellDue(), next - now);
  }
}

/** Runs a function after `ms` milliseconds; returns what cancels it. */
type Schedule = (run: () => void, ms: number) => () => void;

/** A timer that does not keep the process alive: lines held back are no reason to stay up. */
function unrefTimeout(run: () => void, ms: number): () => void {
  const timer = setTimeout(run, Math.max(0, ms));
  if (typeof timer === "number") Deno.unrefTimer(timer);
  else (timer as { unref?: () => void }).unref?.();
  return () => clearTimeout(timer);
}

/** The line that tells of the lines of `kind` held back. */
function heldLine(kind: string, state: KindState, now: number): string {
  // The kind last, unquoted: it may quote a route itself.
  return `${state.held} more ${state.held === 1 ? "line" : "lines"} of a kind not logged ` +
    `in the last ${seconds(now - state.heldSince)} (${POLICY}): ${kind}`;
}

/** The rule, for the lines that tell of lines held back. */
const POLICY = `the first ${LOG_BURST} lines of a kind are logged, then one per ${
  LOG_INTERVAL_MS / 1000
} s`;

function seconds(ms: number): string {
  return `${Math.max(1, Math.round(ms / 1000))} s`;
}
