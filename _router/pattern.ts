// Copyright the stellarator authors. MIT license.
/**
 * The route pattern parser: `/users/{id:[0-9]+}/files/{path:*}` into literal and variable
 * tokens. Syntax errors carry the character position, so the router can point at them.
 *
 * @module
 */

import { analyzeRegex, type RegexFacts, RegexProblem } from "./redos.ts";

/** Token kinds, ordered as the priority rules rank them (static text first). */
export const LITERAL = 0;
/** A `{name:regex}` variable. */
export const REGEX = 1;
/** A plain `{name}` variable: one non-empty segment. */
export const PLAIN = 2;
/** A `{name:*}` catch-all: the non-empty rest of the path. */
export const CATCH_ALL = 3;

/** Literal text of a pattern. */
export interface LiteralToken {
  readonly kind: typeof LITERAL;
  readonly text: string;
  /** Index of the text's first character in the pattern. */
  readonly position: number;
}

/** A variable of a pattern. */
export interface VariableToken {
  readonly kind: typeof REGEX | typeof PLAIN | typeof CATCH_ALL;
  readonly name: string;
  /** The regex source for {@linkcode REGEX}, `""` otherwise. */
  readonly regex: string;
  /** The regex analysis for {@linkcode REGEX}. */
  readonly facts: RegexFacts | undefined;
  /** Index of the opening `{` in the pattern. */
  readonly position: number;
  /** Index of the regex source's first character in the pattern. */
  readonly regexPosition: number;
}

/** A token of a parsed pattern. */
export type Token = LiteralToken | VariableToken;

/** A malformed pattern; `position` indexes the pattern. */
export class PatternError extends Error {
  /** Index of the offending character in the pattern. */
  readonly position: number;
  constructor(message: string, position: number) {
    super(message);
    this.position = position;
  }
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses a route pattern.
 *
 * @param pattern The pattern, e.g. `/users/{id:[0-9]+}`.
 * @returns Alternating literal and variable tokens; two variables are never adjacent and a
 * catch-all is always last.
 * @throws {PatternError} With the position of the first problem.
 */
export function parsePattern(pattern: string): Token[] {
  if (pattern[0] !== "/") {
    throw new PatternError('it must start with "/"', 0);
  }
  const tokens: Token[] = [];
  // Routes have few variables: an array is cheaper to make and search than a Set.
  const names: string[] = [];
  // Literal text runs from literalStart to i; it is sliced, not concatenated, because the tree
  // compares these strings on every lookup and a flat string reads faster than a rope.
  let literalStart = -1;
  const flush = (end: number) => {
    if (literalStart === -1) return false;
    tokens.push({ kind: LITERAL, text: pattern.slice(literalStart, end), position: literalStart });
    literalStart = -1;
    return true;
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === "}") {
      throw new PatternError('unbalanced "}"; remove it or open a variable with "{"', i);
    }
    if (c !== "{") {
      if (literalStart === -1) literalStart = i;
      // Skip the literal run at once: a loop per character costs a new router ~1 µs a route
      // while V8 still interprets this function.
      let next = pattern.indexOf("{", i);
      if (next === -1) next = pattern.length;
      const stray = pattern.indexOf("}", i);
      if (stray !== -1 && stray < next) {
        throw new PatternError('unbalanced "}"; remove it or open a variable with "{"', stray);
      }
      i = next;
      continue;
    }
    const open = i;
    if (!flush(open) && tokens.length > 0) {
      throw new PatternError(
        "two variables with nothing between them; separate them with literal text",
        open,
      );
    }
    let j = open + 1;
    while (j < pattern.length && pattern[j] !== ":" && pattern[j] !== "}") j++;
    if (j >= pattern.length) {
      throw new PatternError('unbalanced "{"; close the variable with "}"', open);
    }
    const name = pattern.slice(open + 1, j);
    if (name === "") {
      throw new PatternError('empty variable name; write "{name}" or "{name:regex}"', open + 1);
    }
    if (!NAME.test(name)) {
      throw new PatternError(
        `invalid variable name "${name}"; use letters, digits and "_", not starting with a digit`,
        open + 1,
      );
    }
    if (names.includes(name)) {
      throw new PatternError(
        `duplicate variable name "${name}"; give each variable its own name`,
        open + 1,
      );
    }
    names.push(name);
    if (pattern[j] === "}") {
      tokens.push({
        kind: PLAIN,
        name,
        regex: "",
        facts: undefined,
        position: open,
        regexPosition: j,
      });
      i = j + 1;
      continue;
    }
    const regexStart = j + 1;
    const close = findClose(pattern, regexStart);
    if (close === -1) {
      throw new PatternError('unbalanced "{"; close the variable with "}"', open);
    }
    const regex = pattern.slice(regexStart, close);
    i = close + 1;
    if (regex === "") {
      throw new PatternError(
        `empty regex for "${name}"; write "{${name}}" for a plain variable`,
        regexStart,
      );
    }
    if (regex === "*") {
      if (i < pattern.length) {
        throw new PatternError(
          `the catch-all "{${name}:*}" must end the pattern; move it to the end`,
          i,
        );
      }
      tokens.push({
        kind: CATCH_ALL,
        name,
        regex: "",
        facts: undefined,
        position: open,
        regexPosition: regexStart,
      });
      continue;
    }
    tokens.push({
      kind: REGEX,
      name,
      regex,
      facts: regexFacts(regex, regexStart),
      position: open,
      regexPosition: regexStart,
    });
  }
  flush(pattern.length);
  return tokens;
}

/** The index of the `}` closing a variable whose regex starts at `start`, or -1. */
function findClose(pattern: string, start: number): number {
  let depth = 0;
  let inClass = false;
  for (let k = start; k < pattern.length; k++) {
    const ch = pattern[k];
    if (ch === "\\") k++;
    else if (inClass) inClass = ch !== "]";
    else if (ch === "[") inClass = true;
    else if (ch === "{") depth++;
    else if (ch === "}") {
      if (depth === 0) return k;
      depth--;
    }
  }
  return -1;
}

function regexFacts(regex: string, position: number): RegexFacts {
  try {
    new RegExp(regex, "u");
  } catch (error) {
    throw new PatternError(
      `the regex does not compile: ${(error as Error).message}`,
      position,
    );
  }
  try {
    return analyzeRegex(regex);
  } catch (error) {
    if (error instanceof RegexProblem) {
      throw new PatternError(error.message, position + error.position);
    }
    throw error;
  }
}

/** Escapes literal text for use inside a `u`-mode regex. */
export function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}
