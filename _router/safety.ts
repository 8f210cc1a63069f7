// Copyright the stellarator authors. MIT license.
/**
 * The route-level half of the ReDoS guard: whether a parsed route would let a hostile path keep
 * the regex engine busy. The regex-level half (nested or overlapping quantifiers) is
 * `./redos.ts`; this file adds the one risk only the whole route shows, two variables of
 * ambiguous length in a suffix handed to the regex engine.
 *
 * @module
 */

import { describe } from "../_common/describe.ts";
import { hasCode } from "./redos.ts";
import { lengths, type RegexNode } from "./regex_syntax.ts";
import {
  CATCH_ALL,
  LITERAL,
  PLAIN,
  REGEX,
  suffixRisk,
  type Token,
  type VariableToken,
} from "./pattern.ts";

const SLASH = 0x2f;

/** Why a route is refused, and where in its pattern. */
export interface RouteRisk {
  /** Index of the offending character in the pattern. */
  readonly position: number;
  /** The problem and its fix, for the `InvalidRoutePattern` message. */
  readonly reason: string;
}

/**
 * The first ReDoS risk of a route (see `allowUnsafeRegex`), or undefined if it is safe.
 *
 * @param path The route's pattern, for the suffix check's messages.
 * @param tokens The route's normalized tokens.
 * @returns The risk, or undefined.
 */
export function redosRisk(path: string, tokens: readonly Token[]): RouteRisk | undefined {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === REGEX && token.facts!.risk !== undefined) {
      const risk = token.facts!.risk;
      return {
        position: risk.position,
        reason: `${risk.message}; or pass allowUnsafeRegex: true if you trust the regex`,
      };
    }
  }
  // Routes handed to the regex engine (see RegexMatcher): at most one ambiguous variable.
  const from = firstAmbiguousVariable(tokens);
  if (from === -1 || !tokens.slice(from).some((token) => token.kind === REGEX)) return undefined;
  let seen: VariableToken | undefined;
  for (let i = from; i < tokens.length; i++) {
    const token = tokens[i]!;
    const next = tokens[i + 1];
    if (token.kind === LITERAL || next === undefined || next.kind !== LITERAL) continue;
    const code = next.text.codePointAt(0)!;
    // A variable ends in few places when its regex's length is bounded (a date, \d{4}-\d{2}: one;
    // the suffix measure below counts what the rest makes of them), and in one when it cannot
    // match "/" and the text after it holds a "/": that "/" is the first one after the
    // variable's start ("/{repo}.git/{path:.+}/blame").
    const pinned = (token.kind === REGEX && boundedLength(token.facts!.tree)) ||
      (next.text.includes("/") &&
        (token.kind === PLAIN || (token.kind === REGEX && !token.facts!.canMatchSlash)));
    const ambiguous = !pinned &&
      (token.kind === PLAIN
        ? code !== SLASH
        : token.kind === REGEX && hasCode(token.facts!.consumes, code));
    if (!ambiguous) continue;
    if (seen !== undefined) {
      // The example names the character that follows, escaped where a class needs it.
      const char = String.fromCodePoint(code);
      const member = /[\\\]]/.test(char) ? `\\${char}` : char;
      return {
        position: token.position,
        reason: `variables "${seen.name}" and "${token.name}" can both end in several places, ` +
          `and with a regex variable in the route the regex engine would have to try every ` +
          `combination on hostile paths; exclude the following text from one of them (e.g. ` +
          `[^${member}]+ before ${describe(char)}) or pass allowUnsafeRegex: true`,
      };
    }
    seen = token;
  }
  const suffix = suffixRisk(path, tokens);
  if (suffix === undefined) return undefined;
  return {
    position: suffix.position,
    reason: `${suffix.message}; or pass allowUnsafeRegex: true if you trust the route`,
  };
}

/** Whether the text `tree` matches has a longest length. */
function boundedLength(tree: RegexNode): boolean {
  return lengths(tree)[1] !== Infinity;
}

/**
 * The index of the first variable whose end is not fixed by the next "/" (literal text other
 * than "/" follows it in its segment, or its regex can match "/"), or -1.
 */
function firstAmbiguousVariable(tokens: readonly Token[]): number {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === LITERAL || token.kind === CATCH_ALL) continue;
    if (token.kind === REGEX && token.facts!.canMatchSlash) return i;
    const next = tokens[i + 1];
    if (next !== undefined && next.kind === LITERAL && next.text.charCodeAt(0) !== SLASH) return i;
  }
  return -1;
}
