/**
 * The interface every router under test is adapted to. Kept apart from
 * `_peers.ts` so that code using it needs none of the npm peers.
 *
 * @module
 */
import type { Expected } from "./_sets.ts";

/** A router built for one route set, ready to time. */
export interface Built {
  /**
   * One lookup as a JavaScript expression over `a`, `b` (the two values below)
   * and the path `p`. The timing loop is compiled from it per router, so every
   * router's call site stays monomorphic.
   */
  readonly call: string;
  /** First value the expression refers to (the router, or the lookup function). */
  readonly a: unknown;
  /** Second value the expression refers to, if any. */
  readonly b?: unknown;
  /** The same lookup, answer translated to ours (route index and context). */
  resolve(path: string): Expected;
}

/** One router under test. */
export interface Adapter {
  /** Name in tables. */
  readonly name: string;
  /** Whether this is our router (the baseline). */
  readonly ours: boolean;
  /** What the timed call does, for the notes under the tables. */
  readonly note: string;
  /**
   * Translates `patterns` (registration order) for this router, or returns
   * `{ reason }` if it cannot express one. `construct` then builds the router
   * (it throws if the router refuses a route); only `construct` is timed.
   */
  build(patterns: readonly string[]): { construct(): Built } | { readonly reason: string };
}
