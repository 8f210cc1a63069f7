// Copyright the stellarator authors. MIT license.
/**
 * The syntax tree of a route variable's regex, as the router's analyses see it: character
 * sets, sequences, alternations, repeats, assertions and lookarounds, each with its place in
 * the source so that a refusal can point at it.
 *
 * The parser reads the ECMAScript `u`-mode syntax only after `new RegExp(source, "u")` accepted
 * the source, so it never has to report syntax errors of its own. Character sets are
 * over-approximated where exactness would cost a Unicode table (`\p{…}` beyond ASCII,
 * case-insensitive modifiers): an over-approximation can only make the router more careful, never wrong, as long
 * as nothing complements it. The complement of a too-large set is a too-small one (`[^\p{L}]`
 * would match nothing, so the guard would miss every ambiguity and the tree would cut the
 * variable at a `/` it can match), so such sets carry `approximate` and a negated class holding
 * one is taken as any character.
 *
 * @module
 */

import { shorten } from "../_common/describe.ts";

/** A set of code points as a flat list of inclusive `[low, high]` pairs. */
export type Ranges = readonly number[];

const MAX_CODE_POINT = 0x10ffff;
/** Every code point. */
export const ANY: Ranges = [0, MAX_CODE_POINT];
/** What `[^/]` matches: a plain variable's characters. */
export const NOT_SLASH: Ranges = [0, 0x2e, 0x30, MAX_CODE_POINT];
const DIGIT: Ranges = [0x30, 0x39];
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
// deno-fmt-ignore
const SPACE: Ranges = [
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029,
  0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000, 0xfeff, 0xfeff,
];
const LINE_TERMINATORS: Ranges = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

/** Sorts and merges ranges so that complement and membership are simple scans. */
export function normalize(ranges: Ranges): number[] {
  const pairs: [number, number][] = [];
  for (let i = 0; i < ranges.length; i += 2) pairs.push([ranges[i]!, ranges[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [lo, hi] of pairs) {
    const last = out.length - 1;
    if (last > 0 && lo <= out[last]! + 1) out[last] = Math.max(out[last]!, hi);
    else out.push(lo, hi);
  }
  return out;
}

/** The code points not in `ranges`. */
export function complement(ranges: Ranges): number[] {
  const sorted = normalize(ranges);
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < sorted.length; i += 2) {
    if (sorted[i]! > next) out.push(next, sorted[i]! - 1);
    next = sorted[i + 1]! + 1;
  }
  if (next <= MAX_CODE_POINT) out.push(next, MAX_CODE_POINT);
  return out;
}

/** Whether `code` is in `ranges`. */
export function hasCode(ranges: Ranges, code: number): boolean {
  for (let i = 0; i < ranges.length; i += 2) {
    if (ranges[i]! <= code && code <= ranges[i + 1]!) return true;
  }
  return false;
}

/** Where a node sits in the source: `source.slice(start, end)` is its text. */
interface Span {
  readonly start: number;
  readonly end: number;
}

/** A parsed regex. Positions index the source, shifted by the parser's offset. */
export type RegexNode =
  /**
   * Characters: `ranges` holds every code point the set matches; `approximate` says it may
   * hold more, so it must never be complemented or intersected (the result could miss some).
   */
  | Span & { readonly type: "set"; readonly ranges: Ranges; readonly approximate?: boolean }
  | Span & { readonly type: "seq"; readonly items: readonly RegexNode[] }
  | Span & { readonly type: "alt"; readonly alts: readonly RegexNode[] }
  | Span & {
    readonly type: "quant";
    readonly body: RegexNode;
    readonly min: number;
    readonly max: number;
  }
  /** `^`, `$`, `\b`, `\B`: they test the neighbouring characters and consume none. */
  | Span & { readonly type: "assert"; readonly kind: "^" | "$" | "\\b" | "\\B" }
  | Span & {
    readonly type: "look";
    readonly behind: boolean;
    readonly body: RegexNode;
  };

/** A construct the router refuses, at `position` (shifted like the tree's positions). */
export class RegexProblem extends Error {
  /** Index of the construct. */
  readonly position: number;
  /** Whether the problem is a backtracking risk, which `allowUnsafeRegex` may waive. */
  readonly unsafe: boolean;
  constructor(message: string, position: number, unsafe: boolean) {
    super(message);
    this.position = position;
    this.unsafe = unsafe;
  }
}

const HEX = /^[0-9a-fA-F]+$/;

/**
 * Longest quote of a regex part in a refusal, in UTF-16 code units: enough to recognise it, where
 * a whole quote made a message as long as the regex (5 kB for a 5 kB group name).
 */
export const QUOTE_MAX = 120;

/**
 * Most groups and lookarounds a regex may nest, one inside another. The parser and every
 * analysis of the tree recurse once a level (up to three nodes a group, as in `(?:b|(?:…))?`):
 * in a fresh process, where V8 still interprets them and their frames are large, the guard's
 * automaton overflowed the stack from 1,080 nested `(?:…)?` and the parser from 1,420 nested
 * `(?:…)`, and the RangeError escaped `new Route()` or `addRoute()`. Route regexes nest a few
 * levels; 64 leaves them far behind and the stack over ten times the room.
 */
export const MAX_REGEX_DEPTH = 64;

/**
 * Parses a regex that `new RegExp(source, "u")` accepts.
 *
 * @param source The regex source.
 * @param offset Added to every position, so that the tree can point into a route pattern.
 * @throws {RegexProblem} For backreferences and named groups, whose meaning would change once
 * the regex is embedded next to other variables, and for groups nested more than
 * {@linkcode MAX_REGEX_DEPTH} deep.
 */
export function parseRegex(source: string, offset = 0): RegexNode {
  return new Parser(source, offset).parse();
}

class Parser {
  #src: string;
  #i = 0;
  #offset: number;
  /** Whether `.` matches line terminators here: inside an `(?s:…)` group. */
  #dotAll = false;
  /** Groups and lookarounds open around the parser's position. */
  #depth = 0;
  constructor(src: string, offset: number) {
    this.#src = src;
    this.#offset = offset;
  }

  parse(): RegexNode {
    return this.#alternation();
  }

  #span(start: number): Span {
    return { start: start + this.#offset, end: this.#i + this.#offset };
  }

  #alternation(): RegexNode {
    const start = this.#i;
    const alts = [this.#sequence()];
    while (this.#src[this.#i] === "|") {
      this.#i++;
      alts.push(this.#sequence());
    }
    return alts.length === 1 ? alts[0]! : { type: "alt", alts, ...this.#span(start) };
  }

  #sequence(): RegexNode {
    const start = this.#i;
    const items: RegexNode[] = [];
    while (this.#i < this.#src.length) {
      const c = this.#src[this.#i];
      if (c === "|" || c === ")") break;
      const atomStart = this.#i;
      items.push(this.#quantifier(this.#atom(), atomStart));
    }
    return items.length === 1 ? items[0]! : { type: "seq", items, ...this.#span(start) };
  }

  #quantifier(atom: RegexNode, start: number): RegexNode {
    const src = this.#src;
    let min: number;
    let max: number;
    const c = src[this.#i];
    if (c === "*") [min, max] = [0, Infinity];
    else if (c === "+") [min, max] = [1, Infinity];
    else if (c === "?") [min, max] = [0, 1];
    else if (c === "{") {
      const close = src.indexOf("}", this.#i);
      const [lo, hi] = src.slice(this.#i + 1, close).split(",");
      min = Number(lo);
      max = hi === undefined ? min : hi === "" ? Infinity : Number(hi);
      this.#i = close;
    } else return atom;
    this.#i++;
    if (src[this.#i] === "?") this.#i++; // lazy: same paths, tried in another order
    return { type: "quant", body: atom, min, max, ...this.#span(start) };
  }

  #atom(): RegexNode {
    const src = this.#src;
    const start = this.#i;
    const c = src[this.#i]!;
    if (c === "(") return this.#group();
    if (c === "[") return this.#class();
    this.#i++;
    if (c === ".") {
      const ranges = this.#dotAll ? ANY : complement(LINE_TERMINATORS);
      return { type: "set", ranges, ...this.#span(start) };
    }
    if (c === "^" || c === "$") return { type: "assert", kind: c, ...this.#span(start) };
    if (c === "\\") return this.#escape(false);
    return this.#literal(c, start);
  }

  #literal(c: string, start: number): RegexNode {
    // A surrogate pair is one code point in u-mode.
    let code = c.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdbff) {
      const full = this.#src.codePointAt(this.#i - 1)!;
      if (full > 0xffff) {
        this.#i++;
        code = full;
      }
    }
    return { type: "set", ranges: [code, code], ...this.#span(start) };
  }

  #group(): RegexNode {
    const src = this.#src;
    const start = this.#i;
    if (this.#depth === MAX_REGEX_DEPTH) {
      throw new RegexProblem(
        `nests groups and lookarounds more than ${MAX_REGEX_DEPTH} deep, deeper than the ` +
          `router can analyse; remove groups that only wrap another (as "(?:(?:a))" is "a"), ` +
          `or split the regex across several variables`,
        start + this.#offset,
        false,
      );
    }
    let look: "ahead" | "behind" | undefined;
    let caseless = false;
    const dotAll = this.#dotAll;
    if (src.startsWith("(?:", start)) this.#i += 3;
    else if (src.startsWith("(?=", start) || src.startsWith("(?!", start)) {
      this.#i += 3;
      look = "ahead";
    } else if (src.startsWith("(?<=", start) || src.startsWith("(?<!", start)) {
      this.#i += 4;
      look = "behind";
    } else if (src.startsWith("(?<", start)) {
      const name = shorten(src.slice(start, src.indexOf(">", start) + 1), QUOTE_MAX);
      throw new RegexProblem(
        `has the named group "${name}", whose name could clash with another variable's ` +
          `once the router embeds the regex in a larger one; use an unnamed group "(" or "(?:"`,
        start + this.#offset,
        false,
      );
    } else if (src.startsWith("(?", start)) {
      // Modifiers such as (?i:...), (?s-i:...). Each changes which characters the body matches,
      // so one the analyses do not model would make them reason about another regex.
      const colon = src.indexOf(":", start);
      const [on = "", off = ""] = src.slice(start + 2, colon).split("-");
      // Turning "m" off changes nothing: the router never sets it.
      const unknown = [...on + off.replace("m", "")].find((flag) => flag !== "i" && flag !== "s");
      if (unknown !== undefined) {
        throw new RegexProblem(
          `has the modifier "${unknown}" in "${src.slice(start, colon + 1)}", which the router ` +
            `does not support` + (unknown === "m"
              ? ` ("^" and "$" already mean the start and the end of the variable); remove it`
              : `; remove it`),
          start + this.#offset,
          false,
        );
      }
      // Case folding is over-approximated below; "s" is exact: it only widens ".".
      caseless = on.includes("i");
      if (on.includes("s")) this.#dotAll = true;
      else if (off.includes("s")) this.#dotAll = false;
      this.#i = colon + 1;
    } else this.#i++;
    this.#depth++;
    const body = this.#alternation();
    this.#depth--;
    this.#dotAll = dotAll;
    this.#i++; // ")"
    const span = this.#span(start);
    if (look !== undefined) return { type: "look", behind: look === "behind", body, ...span };
    return { type: "seq", items: [caseless ? widen(body) : body], ...span };
  }

  #class(): RegexNode {
    const src = this.#src;
    const start = this.#i;
    this.#i++;
    let negate = false;
    if (src[this.#i] === "^") {
      negate = true;
      this.#i++;
    }
    const ranges: number[] = [];
    // The members known exactly: a negated class excludes at least these.
    const exact: number[] = [];
    let approximate = false;
    while (src[this.#i] !== "]") {
      const lo = this.#classAtom();
      if (typeof lo === "number" && src[this.#i] === "-" && src[this.#i + 1] !== "]") {
        this.#i++;
        const hi = this.#classAtom() as number;
        ranges.push(lo, hi);
        exact.push(lo, hi);
      } else if (typeof lo === "number") {
        ranges.push(lo, lo);
        exact.push(lo, lo);
      } else {
        ranges.push(...lo.ranges);
        if (lo.approximate) approximate = true;
        else exact.push(...lo.ranges);
      }
    }
    this.#i++;
    // The complement of an over-approximation is an under-approximation: [^\p{L}] would become
    // the empty set. Without the Unicode tables, the safe answer is the complement of the
    // members known exactly: [^\p{L}/] cannot match "/", [^\p{L}] may match anything.
    const set = negate ? complement(approximate ? exact : ranges) : normalize(ranges);
    return { type: "set", ranges: set, approximate, ...this.#span(start) };
  }

  /** One class member: a code point, or a set for class escapes like `\d`. */
  #classAtom(): number | { ranges: Ranges; approximate: boolean } {
    const src = this.#src;
    const c = src[this.#i]!;
    if (c !== "\\") {
      const code = src.codePointAt(this.#i)!;
      this.#i += code > 0xffff ? 2 : 1;
      return code;
    }
    this.#i++;
    const node = this.#escape(true);
    if (node.type !== "set") return { ranges: ANY, approximate: true };
    const r = node.ranges;
    const approximate = node.approximate ?? false;
    return r.length === 2 && r[0] === r[1] && !approximate ? r[0]! : { ranges: r, approximate };
  }

  /** Reads the escape after a backslash (already consumed). */
  #escape(inClass: boolean): RegexNode {
    const src = this.#src;
    const start = this.#i - 1;
    const c = src[this.#i++]!;
    const set = (ranges: Ranges): RegexNode => ({ type: "set", ranges, ...this.#span(start) });
    const one = (code: number): RegexNode => set([code, code]);
    const unknown = (): RegexNode => ({
      type: "set",
      ranges: ANY,
      approximate: true,
      ...this.#span(start),
    });
    switch (c) {
      case "d":
        return set(DIGIT);
      case "D":
        return set(complement(DIGIT));
      case "w":
        return set(WORD);
      case "W":
        return set(complement(WORD));
      case "s":
        return set(SPACE);
      case "S":
        return set(complement(SPACE));
      case "p":
      case "P": {
        this.#i = src.indexOf("}", this.#i) + 1;
        const ranges = propertyRanges(src.slice(start, this.#i));
        return { type: "set", ranges, approximate: true, ...this.#span(start) };
      }
      case "b":
      case "B":
        if (inClass) return one(0x08);
        return { type: "assert", kind: c === "b" ? "\\b" : "\\B", ...this.#span(start) };
      case "n":
        return one(0x0a);
      case "r":
        return one(0x0d);
      case "t":
        return one(0x09);
      case "v":
        return one(0x0b);
      case "f":
        return one(0x0c);
      case "0":
        return one(0);
      case "c":
        return one(src.charCodeAt(this.#i++) % 32);
      case "x": {
        const code = parseInt(src.slice(this.#i, this.#i + 2), 16);
        this.#i += 2;
        return one(code);
      }
      case "u": {
        if (src[this.#i] === "{") {
          const close = src.indexOf("}", this.#i);
          const code = parseInt(src.slice(this.#i + 1, close), 16);
          this.#i = close + 1;
          return one(code);
        }
        const hex = src.slice(this.#i, this.#i + 4);
        this.#i += 4;
        if (!HEX.test(hex)) return unknown();
        const code = parseInt(hex, 16);
        // In u-mode an escaped pair (\uD83D\uDE00) is one code point (U+1F600), in a class too:
        // read as two characters, (?:\uD83D\uDE00|😀)+ would look unambiguous.
        const trail = src.slice(this.#i + 2, this.#i + 6);
        if (
          code >= 0xd800 && code <= 0xdbff && src.startsWith("\\u", this.#i) &&
          trail.length === 4 &&
          HEX.test(trail)
        ) {
          const low = parseInt(trail, 16);
          if (low >= 0xdc00 && low <= 0xdfff) {
            this.#i += 6;
            return one(0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00));
          }
        }
        return one(code);
      }
      case "k":
      default: {
        if (c !== "k" && !(c >= "1" && c <= "9")) return one(c.codePointAt(0)!);
        let end = this.#i;
        if (c === "k") end = src.indexOf(">", end) + 1;
        else while (src[end]! >= "0" && src[end]! <= "9") end++;
        throw new RegexProblem(
          `has the backreference "${
            shorten(src.slice(start, end), QUOTE_MAX)
          }", whose group number would ` +
            `change once the router embeds the regex in a larger one; repeat the group's ` +
            `regex instead`,
          start + this.#offset,
          false,
        );
      }
    }
  }
}

/**
 * What a property escape (`\p{L}`, `\P{Script=Greek}`) matches, over-approximated: exactly on
 * ASCII, which the engine itself answers in 128 tests, and any character beyond, where exactness
 * would cost a Unicode table. Taken as any character, `/` included, `\p{L}+` could end anywhere:
 * the tree ran the rest of its route as one regex, and the guard refused
 * `/c/{city:\p{L}+}/s/{street:\p{L}+}` as ambiguous.
 */
function propertyRanges(escape: string): Ranges {
  let ranges = PROPERTY_RANGES.get(escape);
  if (ranges === undefined) {
    const regex = new RegExp(escape, "u");
    const out: number[] = [];
    for (let code = 0; code < 0x80; code++) {
      if (regex.test(String.fromCharCode(code))) out.push(code, code);
    }
    out.push(0x80, MAX_CODE_POINT);
    ranges = normalize(out);
    if (PROPERTY_RANGES.size >= 1024) PROPERTY_RANGES.clear();
    PROPERTY_RANGES.set(escape, ranges);
  }
  return ranges;
}

/** {@linkcode propertyRanges} by escape: routes repeat a few properties. Bounded. */
const PROPERTY_RANGES = new Map<string, Ranges>();

/**
 * Case-insensitive parts: a set of ASCII characters is folded exactly (the other case of its
 * letters, and the two non-ASCII characters that fold to ASCII ones); any other set is assumed to
 * match any character. Widening every set made ordinary routes such as `(?i:[a-z0-9]+(?:-[a-z0-9]+)*)`
 * look like `.+(?:..+)*` to the guard, which refused them.
 */
function widen(node: RegexNode): RegexNode {
  switch (node.type) {
    case "set": {
      const folded = node.approximate ? undefined : foldAscii(node.ranges);
      if (folded !== undefined) return { ...node, ranges: folded };
      return { ...node, ranges: ANY, approximate: true };
    }
    case "seq":
      return { ...node, items: node.items.map(widen) };
    case "alt":
      return { ...node, alts: node.alts.map(widen) };
    case "quant":
      return { ...node, body: widen(node.body) };
    case "assert":
      return node;
    case "look":
      return { ...node, body: widen(node.body) };
  }
}

const KELVIN = 0x212a;
const LONG_S = 0x17f;

/**
 * What a set of ASCII characters matches under flag `i` with flag `u`: itself, the other case of
 * its letters, U+017F (long s) with "s" and U+212A (Kelvin) with "k" (checked against the engine
 * over every code point: no other character folds to an ASCII one). `undefined` when the set holds
 * a non-ASCII character. For a negated class this folds its complement, which holds at least what
 * the class matches under `i`: an over-approximation, as the guard needs.
 */
function foldAscii(ranges: Ranges): Ranges | undefined {
  const out = [...ranges];
  for (let i = 0; i < ranges.length; i += 2) {
    const hi = ranges[i + 1]!;
    if (hi > 0x7f) return undefined;
    for (let code = ranges[i]!; code <= hi; code++) {
      const lower = code | 0x20;
      if (lower < 0x61 || lower > 0x7a) continue;
      out.push(lower, lower, lower - 0x20, lower - 0x20);
      if (lower === 0x73) out.push(LONG_S, LONG_S);
      if (lower === 0x6b) out.push(KELVIN, KELVIN);
    }
  }
  return normalize(out);
}

/** The shortest and longest text `node` can match (`Infinity` when unbounded). */
export function lengths(node: RegexNode): [number, number] {
  switch (node.type) {
    case "set":
      return [1, 1];
    case "assert":
    case "look":
      return [0, 0];
    case "seq": {
      let lo = 0;
      let hi = 0;
      for (const item of node.items) {
        const [a, b] = lengths(item);
        lo += a;
        hi += b;
      }
      return [lo, hi];
    }
    case "alt": {
      let lo = Infinity;
      let hi = 0;
      for (const alt of node.alts) {
        const [a, b] = lengths(alt);
        lo = Math.min(lo, a);
        hi = Math.max(hi, b);
      }
      return [lo, hi];
    }
    case "quant": {
      const [a, b] = lengths(node.body);
      return [node.min * a, b === 0 || node.max === 0 ? 0 : node.max * b];
    }
  }
}

/** Every character a match of `node` can consume; lookarounds consume none. */
export function consumed(node: RegexNode): number[] {
  switch (node.type) {
    case "set":
      return [...node.ranges];
    case "assert":
    case "look":
      return [];
    case "quant":
      return node.max === 0 ? [] : consumed(node.body);
    case "alt":
      return node.alts.flatMap(consumed);
    case "seq":
      return node.items.flatMap(consumed);
  }
}

/** What surrounds a point of the regex inside the variable's match. */
export interface Context {
  /** Fewest and most characters the variable can have matched before the point. */
  readonly before: readonly [number, number];
  /** Fewest and most characters the variable can match after the point. */
  readonly after: readonly [number, number];
  /** Set inside a lookaround's body. */
  readonly look: "ahead" | "behind" | undefined;
}

const TOP: Context = { before: [0, 0], after: [0, 0], look: undefined };

/** Calls `visit` on `node` and every node below it, with the context of each. */
export function visitInContext(
  node: RegexNode,
  visit: (node: RegexNode, context: Context) => void,
  context: Context = TOP,
): void {
  visit(node, context);
  const { before, after, look } = context;
  switch (node.type) {
    case "seq": {
      const lens = node.items.map(lengths);
      // Sums of the items' lengths after each item (subtracting would give Infinity - Infinity).
      const restLo = lens.map(() => 0);
      const restHi = lens.map(() => 0);
      for (let i = lens.length - 2; i >= 0; i--) {
        restLo[i] = restLo[i + 1]! + lens[i + 1]![0];
        restHi[i] = restHi[i + 1]! + lens[i + 1]![1];
      }
      let lo = 0;
      let hi = 0;
      node.items.forEach((item, i) => {
        visitInContext(item, visit, {
          before: [before[0] + lo, before[1] + hi],
          after: [after[0] + restLo[i]!, after[1] + restHi[i]!],
          look,
        });
        lo += lens[i]![0];
        hi += lens[i]![1];
      });
      return;
    }
    case "alt":
      for (const alt of node.alts) visitInContext(alt, visit, context);
      return;
    case "quant": {
      const [, b] = lengths(node.body);
      const more = b === 0 || node.max <= 1 ? 0 : (node.max - 1) * b;
      visitInContext(node.body, visit, {
        before: [before[0], before[1] + more],
        after: [after[0], after[1] + more],
        look,
      });
      return;
    }
    case "look":
      visitInContext(node.body, visit, {
        before: node.behind ? [0, Infinity] : before,
        after: node.behind ? after : [0, Infinity],
        look: node.behind ? "behind" : "ahead",
      });
      return;
  }
}
