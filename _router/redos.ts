// Copyright the stellarator authors. MIT license.
/**
 * Static analysis of the regular expressions inside route variables (`{name:regex}`).
 *
 * The router needs four facts about a variable's regex, all decided once, when the route is
 * added: whether it can consume a `/` (then the variable may span segments), which characters it
 * can consume at all (to know whether the literal after it makes its length ambiguous), whether
 * it is prone to catastrophic backtracking (the ReDoS guard), and whether it uses a construct
 * the router refuses (backreferences and named groups, whose meaning would change once the
 * regex is embedded in a whole-route regex next to other variables).
 *
 * The parser reads the ECMAScript `u`-mode syntax only after `new RegExp(source, "u")` accepted
 * the source, so it never has to report syntax errors of its own. Character sets are
 * over-approximated where exactness would cost a Unicode table (`\p{…}`, case-insensitive
 * modifiers): an over-approximation can only make the router more careful, never wrong.
 *
 * @module
 */

/** A set of code points as a flat list of inclusive `[low, high]` pairs. */
export type Ranges = readonly number[];

const MAX_CODE_POINT = 0x10ffff;
const ANY: Ranges = [0, MAX_CODE_POINT];
const DIGIT: Ranges = [0x30, 0x39];
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
const SPACE: Ranges = [
  0x09,
  0x0d,
  0x20,
  0x20,
  0xa0,
  0xa0,
  0x1680,
  0x1680,
  0x2000,
  0x200a,
  0x2028,
  0x2029,
  0x202f,
  0x202f,
  0x205f,
  0x205f,
  0x3000,
  0x3000,
  0xfeff,
  0xfeff,
];
const LINE_TERMINATORS: Ranges = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

/** Sorts and merges ranges so that complement and membership are simple scans. */
function normalize(ranges: Ranges): number[] {
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

/** Whether two sets share a code point. */
export function intersects(a: Ranges, b: Ranges): boolean {
  for (let i = 0; i < a.length; i += 2) {
    for (let j = 0; j < b.length; j += 2) {
      if (a[i]! <= b[j + 1]! && b[j]! <= a[i + 1]!) return true;
    }
  }
  return false;
}

/** A parsed regex, reduced to what the analyses need. */
export type RegexNode =
  | { readonly type: "set"; readonly ranges: Ranges }
  | { readonly type: "seq"; readonly items: readonly RegexNode[] }
  | { readonly type: "alt"; readonly alts: readonly RegexNode[]; readonly position: number }
  | {
    readonly type: "quant";
    readonly body: RegexNode;
    readonly min: number;
    readonly max: number;
    readonly position: number;
  }
  // Lookarounds and anchors: they test, but consume nothing.
  | { readonly type: "look"; readonly body: RegexNode | undefined };

/** A construct the router refuses or a ReDoS risk, at `position` inside the regex source. */
export class RegexProblem extends Error {
  /** Index into the regex source. */
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

class Parser {
  #src: string;
  #i = 0;
  constructor(src: string) {
    this.#src = src;
  }

  parse(): RegexNode {
    const node = this.#alternation();
    return node;
  }

  #alternation(): RegexNode {
    const start = this.#i;
    const alts = [this.#sequence()];
    while (this.#src[this.#i] === "|") {
      this.#i++;
      alts.push(this.#sequence());
    }
    return alts.length === 1 ? alts[0]! : { type: "alt", alts, position: start };
  }

  #sequence(): RegexNode {
    const items: RegexNode[] = [];
    while (this.#i < this.#src.length) {
      const c = this.#src[this.#i];
      if (c === "|" || c === ")") break;
      const start = this.#i;
      items.push(this.#quantifier(this.#atom(), start));
    }
    return items.length === 1 ? items[0]! : { type: "seq", items };
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
    if (src[this.#i] === "?") this.#i++; // lazy: same language, same backtracking risk
    return { type: "quant", body: atom, min, max, position: start };
  }

  #atom(): RegexNode {
    const src = this.#src;
    const c = src[this.#i]!;
    if (c === "(") return this.#group();
    if (c === "[") return this.#class();
    this.#i++;
    if (c === ".") return { type: "set", ranges: complement(LINE_TERMINATORS) };
    if (c === "^" || c === "$") return { type: "look", body: undefined };
    if (c === "\\") return this.#escape(false);
    return this.#literal(c);
  }

  #literal(c: string): RegexNode {
    // A surrogate pair is one code point in u-mode.
    const code = c.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdbff) {
      const full = this.#src.codePointAt(this.#i - 1)!;
      if (full > 0xffff) {
        this.#i++;
        return { type: "set", ranges: [full, full] };
      }
    }
    return { type: "set", ranges: [code, code] };
  }

  #group(): RegexNode {
    const src = this.#src;
    const start = this.#i;
    let look = false;
    let caseless = false;
    if (src.startsWith("(?:", start)) this.#i += 3;
    else if (src.startsWith("(?=", start) || src.startsWith("(?!", start)) {
      this.#i += 3;
      look = true;
    } else if (src.startsWith("(?<=", start) || src.startsWith("(?<!", start)) {
      this.#i += 4;
      look = true;
    } else if (src.startsWith("(?<", start)) {
      throw new RegexProblem(
        "named groups are not supported; use an unnamed group (...) or (?:...)",
        start,
        false,
      );
    } else if (src.startsWith("(?", start)) {
      // Modifiers such as (?i:...) or (?-i:...).
      const colon = src.indexOf(":", start);
      const flags = src.slice(start + 2, colon);
      caseless = flags.split("-")[0]!.includes("i");
      this.#i = colon + 1;
    } else this.#i++;
    const body = this.#alternation();
    this.#i++; // ")"
    if (look) return { type: "look", body };
    return caseless ? widen(body) : body;
  }

  #class(): RegexNode {
    const src = this.#src;
    this.#i++;
    let negate = false;
    if (src[this.#i] === "^") {
      negate = true;
      this.#i++;
    }
    const ranges: number[] = [];
    while (src[this.#i] !== "]") {
      const lo = this.#classAtom();
      if (typeof lo === "number" && src[this.#i] === "-" && src[this.#i + 1] !== "]") {
        this.#i++;
        const hi = this.#classAtom() as number;
        ranges.push(lo, hi);
      } else if (typeof lo === "number") ranges.push(lo, lo);
      else ranges.push(...lo);
    }
    this.#i++;
    return { type: "set", ranges: negate ? complement(ranges) : normalize(ranges) };
  }

  /** One class member: a code point, or a set for class escapes like `\d`. */
  #classAtom(): number | Ranges {
    const src = this.#src;
    const c = src[this.#i]!;
    if (c !== "\\") {
      const code = src.codePointAt(this.#i)!;
      this.#i += code > 0xffff ? 2 : 1;
      return code;
    }
    this.#i++;
    const node = this.#escape(true);
    if (node.type !== "set") return ANY;
    const r = node.ranges;
    return r.length === 2 && r[0] === r[1] ? r[0]! : r;
  }

  /** Reads the escape after a backslash (already consumed). */
  #escape(inClass: boolean): RegexNode {
    const src = this.#src;
    const start = this.#i - 1;
    const c = src[this.#i++]!;
    const set = (ranges: Ranges): RegexNode => ({ type: "set", ranges });
    const one = (code: number): RegexNode => set([code, code]);
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
      case "P":
        this.#i = src.indexOf("}", this.#i) + 1;
        return set(ANY);
      case "b":
        return inClass ? one(0x08) : { type: "look", body: undefined };
      case "B":
        return { type: "look", body: undefined };
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
        return HEX.test(hex) ? one(parseInt(hex, 16)) : set(ANY);
      }
      case "k":
        throw new RegexProblem(
          "backreferences are not supported; the router embeds the regex in a larger one",
          start,
          false,
        );
      default:
        if (c >= "1" && c <= "9") {
          throw new RegexProblem(
            "backreferences are not supported; the router embeds the regex in a larger one",
            start,
            false,
          );
        }
        return one(c.codePointAt(0)!);
    }
  }
}

/** Case-insensitive parts: rather than fold cases, assume any character. */
function widen(node: RegexNode): RegexNode {
  switch (node.type) {
    case "set":
      return { type: "set", ranges: ANY };
    case "seq":
      return { type: "seq", items: node.items.map(widen) };
    case "alt":
      return { type: "alt", alts: node.alts.map(widen), position: node.position };
    case "quant":
      return { ...node, body: widen(node.body) };
    case "look":
      return node;
  }
}

/** The characters a match of `node` can start with, and whether it can match empty. */
function first(node: RegexNode): { ranges: number[]; nullable: boolean } {
  switch (node.type) {
    case "set":
      return { ranges: [...node.ranges], nullable: false };
    case "look":
      return { ranges: [], nullable: true };
    case "quant": {
      const f = first(node.body);
      return { ranges: f.ranges, nullable: f.nullable || node.min === 0 };
    }
    case "alt": {
      const ranges: number[] = [];
      let nullable = false;
      for (const alt of node.alts) {
        const f = first(alt);
        ranges.push(...f.ranges);
        nullable ||= f.nullable;
      }
      return { ranges, nullable };
    }
    case "seq": {
      const ranges: number[] = [];
      for (const item of node.items) {
        const f = first(item);
        ranges.push(...f.ranges);
        if (!f.nullable) return { ranges, nullable: false };
      }
      return { ranges, nullable: true };
    }
  }
}

/** Every character a match of `node` can consume; lookarounds consume none. */
function consumed(node: RegexNode): number[] {
  switch (node.type) {
    case "set":
      return [...node.ranges];
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

function isUnbounded(node: RegexNode): node is Extract<RegexNode, { type: "quant" }> {
  return node.type === "quant" && node.max === Infinity;
}

/** Calls `visit` on `node` and its descendants, skipping lookaround bodies. */
function walk(node: RegexNode, visit: (node: RegexNode) => void): void {
  visit(node);
  if (node.type === "seq") { for (const item of node.items) walk(item, visit); }
  else if (node.type === "alt") { for (const alt of node.alts) walk(alt, visit); }
  else if (node.type === "quant") walk(node.body, visit);
}

/**
 * Finds the first construct that can make a backtracking engine run for a time exponential (or
 * polynomial of degree three or more) in the input length:
 *
 * 1. an unbounded quantifier inside an unbounded quantifier, where the inner one can consume a
 *    character that can also start the outer body (`(a+)+`, `(.*)*`, `(\w+\s?)+`); the
 *    separator in `(?:-[a-z]+)*` is what keeps that common shape safe;
 * 2. alternatives that can start with the same character under an unbounded quantifier
 *    (`(?:a|a)*`, `(a|ab)+`);
 * 3. three unbounded quantifiers in one sequence over a shared character, with nothing forcing
 *    a boundary between them (`.*.*.*`, `\d+\d*\d+`).
 */
function findRisk(root: RegexNode): RegexProblem | undefined {
  let risk: RegexProblem | undefined;
  walk(root, (node) => {
    if (risk !== undefined) return;
    if (node.type === "quant" && isUnbounded(node)) {
      const start = first(node.body).ranges;
      walk(node.body, (inner) => {
        if (risk !== undefined) return;
        if (isUnbounded(inner) && intersects(consumed(inner.body), start)) {
          risk = new RegexProblem(
            "nested unbounded quantifiers can backtrack exponentially on hostile paths",
            inner.position,
            true,
          );
        } else if (inner.type === "alt") {
          const firsts = inner.alts.map((alt) => first(alt).ranges);
          for (let a = 0; a < firsts.length && risk === undefined; a++) {
            for (let b = a + 1; b < firsts.length; b++) {
              if (intersects(firsts[a]!, firsts[b]!)) {
                risk = new RegexProblem(
                  "alternatives that can start with the same character, under an unbounded " +
                    "quantifier, can backtrack exponentially on hostile paths",
                  inner.position,
                  true,
                );
                break;
              }
            }
          }
        }
      });
    } else if (node.type === "seq") {
      risk = chainRisk(node.items);
    }
  });
  return risk;
}

/** Rule 3 of {@linkcode findRisk}, for the items of one sequence. */
function chainRisk(items: readonly RegexNode[]): RegexProblem | undefined {
  let chain: Extract<RegexNode, { type: "quant" }>[] = [];
  for (const item of items) {
    if (isUnbounded(item)) {
      const sets = consumed(item.body);
      const last = chain[chain.length - 1];
      if (last !== undefined && !chain.every((q) => intersects(consumed(q.body), sets))) {
        chain = [];
      }
      chain.push(item);
      if (chain.length >= 3) {
        return new RegexProblem(
          "three unbounded quantifiers over the same characters can backtrack for a very " +
            "long time on hostile paths",
          item.position,
          true,
        );
      }
      continue;
    }
    const last = chain[chain.length - 1];
    if (last === undefined) continue;
    // A required item the chain cannot consume pins where the previous quantifier ends.
    const f = first(item);
    if (!f.nullable && !intersects(f.ranges, consumed(last.body))) chain = [];
  }
  return undefined;
}

/** What the router needs to know about a variable's regex. */
export interface RegexFacts {
  /** Whether a match can contain `/`, so the variable can span path segments. */
  readonly canMatchSlash: boolean;
  /** Every code point a match can contain. */
  readonly consumes: Ranges;
  /** Whether the regex has an unbounded quantifier (`*`, `+`, `{n,}`). */
  readonly unbounded: boolean;
  /** Number of capturing groups of its own. */
  readonly groups: number;
  /** A backtracking risk found by the ReDoS rules, if any. */
  readonly risk: RegexProblem | undefined;
}

/**
 * Analyses a variable's regex source.
 *
 * @param source A regex that `new RegExp(source, "u")` accepts.
 * @returns The facts the router uses.
 * @throws {RegexProblem} For constructs the router refuses (backreferences, named groups).
 */
export function analyzeRegex(source: string): RegexFacts {
  const root = new Parser(source).parse();
  const consumes = normalize(consumed(root));
  let unbounded = false;
  walk(root, (node) => {
    unbounded ||= isUnbounded(node);
  });
  // An empty alternative in front makes the regex match "", which yields all its groups.
  const groups = new RegExp("|" + source, "u").exec("")!.length - 1;
  return {
    canMatchSlash: hasCode(consumes, 0x2f),
    consumes,
    unbounded,
    groups,
    risk: findRisk(root),
  };
}
