// Copyright the stellarator authors. MIT license.
/**
 * Matchers for the rest of a route below a variable that can end at several places (literal
 * text follows it in its segment, or its regex can span `/`): the tree cannot pick the end by
 * one `indexOf`, so the routes below such a variable are tried one by one, each with one of
 * these linear-time matchers.
 *
 * @module
 */

import { CATCH_ALL, escapeRegex, LITERAL, PLAIN, type Token } from "./pattern.ts";

/** Matches the rest of one route from the start of its first variable. */
export interface SuffixMatcher {
  /** Whether the suffix matches `path` from `pos` to the end; writes its capture slots. */
  run(path: string, pos: number, caps: Int32Array): boolean;
}

const UNKNOWN = -2;

/**
 * Matches a suffix made of plain variables, catch-alls and literal text, exactly as the
 * backtracking regex `([^/]+)L0([^/]+)L1…$` would (each variable greedy), in linear time.
 *
 * A plain variable never contains `/`, so the segment each variable starts in is fixed by the
 * slashes of the literal text before it. Whether the rest matches from an end `e` of variable
 * `j` does not depend on where `j` started, so the greedy choice for `j` is one number per
 * lookup: the largest valid end in its segment (`best[j]`), found by scanning the occurrences
 * of the following literal from the right and computed at most once. The regex engine instead
 * re-explores the same ends for every start and takes seconds on crafted 2 KB paths.
 */
export class GreedyMatcher implements SuffixMatcher {
  /** Literal text after each variable; `""` only after the last. */
  readonly #literals: string[];
  readonly #catchAll: boolean;
  /** Capture slot of the first variable. */
  readonly #slot: number;
  /** Per lookup: the greedy end of each variable in its segment, -1 for none. */
  readonly #best: Int32Array;
  /**
   * Per lookup: the segment last looked at, from its first character (-1 until needed) to the
   * "/" that ends it or the path's end (-1 before the first). Variables sharing a segment find
   * its bounds once: found again for each, 500 variables on a path of 8,000 dots took 1.2 ms.
   */
  #segStart = -1;
  #segEnd = -1;

  constructor(suffix: readonly Token[], slot: number) {
    const literals: string[] = [];
    for (let i = 0; i < suffix.length; i++) {
      if (suffix[i]!.kind === LITERAL) continue;
      const next = suffix[i + 1];
      literals.push(next !== undefined && next.kind === LITERAL ? next.text : "");
    }
    this.#literals = literals;
    this.#catchAll = suffix[suffix.length - 1]!.kind === CATCH_ALL;
    this.#slot = slot;
    this.#best = new Int32Array(literals.length);
  }

  run(path: string, pos: number, caps: Int32Array): boolean {
    const best = this.#best;
    // A loop, not best.fill(): a builtin call costs more than the two or three stores.
    for (let j = 0; j < best.length; j++) best[j] = UNKNOWN;
    this.#segStart = this.#segEnd = -1;
    if (this.#end(0, pos, path) <= pos) return false;
    const literals = this.#literals;
    let start = pos;
    let slot = this.#slot << 1;
    for (let j = 0; j < literals.length; j++) {
      caps[slot++] = start;
      caps[slot++] = best[j]!;
      start = best[j]! + literals[j]!.length;
    }
    return true;
  }

  /** The greedy end of variable `j`, given any start `q` in its segment; -1 if none. */
  #end(j: number, q: number, path: string): number {
    const best = this.#best;
    if (best[j] !== UNKNOWN) return best[j]!;
    const n = path.length;
    const literals = this.#literals;
    const literal = literals[j]!;
    const last = j === literals.length - 1;
    let result = -1;
    if (last && this.#catchAll) result = n;
    else {
      // A later variable starts in the segment of the one before it or in a later one.
      let segEnd = this.#segEnd;
      if (q > segEnd) {
        segEnd = path.indexOf("/", q);
        if (segEnd === -1) segEnd = n;
        this.#segEnd = segEnd;
        this.#segStart = -1;
      }
      if (last) {
        const e = n - literal.length;
        if (literal === "") result = segEnd === n ? n : -1;
        else if (e >= 0 && e <= segEnd && path.startsWith(literal, e)) result = e;
      } else {
        let e = path.lastIndexOf(literal, segEnd);
        // Misses mostly end here: the literal is nowhere before the segment's end.
        let segStart = this.#segStart;
        if (e !== -1 && segStart === -1) {
          segStart = this.#segStart = path.lastIndexOf("/", q - 1) + 1;
        }
        if (e > segStart) {
          // Every occurrence here starts variable j + 1 in the same segment, so its greedy end
          // is one number: an occurrence works when that end leaves the next variable a
          // character. The last such occurrence is one search away; trying them one by one from
          // the right made this quadratic (500 variables on a path of dots: 5 ms a lookup).
          const limit = this.#end(j + 1, e + literal.length, path) - literal.length - 1;
          if (e > limit) e = limit > segStart ? path.lastIndexOf(literal, limit) : -1;
          if (e > segStart) result = e;
        }
      }
    }
    best[j] = result;
    return result;
  }
}

/**
 * The regex (flags `dyu`) {@linkcode RegexMatcher} runs for `suffix`, and the group of each of
 * its variables.
 */
export function suffixSource(suffix: readonly Token[]): { source: string; groups: number[] } {
  let source = "";
  let group = 1;
  const groups: number[] = [];
  for (const token of suffix) {
    if (token.kind === LITERAL) {
      source += escapeRegex(token.text);
      continue;
    }
    groups.push(group);
    if (token.kind === PLAIN) source += "([^/]+)";
    else if (token.kind === CATCH_ALL) source += "([^]+)";
    else {
      source += `(${token.regex})`;
      group += token.facts!.groups;
    }
    group++;
  }
  return { source: source + "$", groups };
}

/**
 * Matches a suffix containing a constrained variable with the regex engine itself (sticky,
 * `d` flag for positions): exactly the reference semantics. The ReDoS guard admits only
 * suffixes with at most one variable of ambiguous length.
 */
export class RegexMatcher implements SuffixMatcher {
  readonly #regex: RegExp;
  readonly #groups: number[];
  readonly #slot: number;

  constructor(suffix: readonly Token[], slot: number) {
    const { source, groups } = suffixSource(suffix);
    this.#regex = new RegExp(source, "dyu");
    this.#groups = groups;
    this.#slot = slot;
  }

  run(path: string, pos: number, caps: Int32Array): boolean {
    const regex = this.#regex;
    regex.lastIndex = pos;
    const match = regex.exec(path);
    if (match === null) return false;
    const indices = match.indices!;
    const groups = this.#groups;
    let slot = this.#slot << 1;
    for (let i = 0; i < groups.length; i++) {
      const span = indices[groups[i]!]!;
      caps[slot++] = span[0];
      caps[slot++] = span[1];
    }
    return true;
  }
}
