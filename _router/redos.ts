// Copyright the stellarator authors. MIT license.
/**
 * The ReDoS guard: a bound on the work a backtracking regex engine can do per character of
 * input, computed from the regex's automaton when a route is added.
 *
 * ## Why the bound holds
 *
 * A backtracking engine (V8's Irregexp) running a sticky regex from one position explores a
 * tree whose nodes are the paths of the regex's automaton over a prefix of the input: every
 * way the regex can match the first `i` characters is visited once before the engine gives up
 * (Weideman, van der Merwe, Berglund, Watson, "Analyzing matching time behavior of
 * backtracking regular expression matchers by using ambiguity of NFA", CIAA 2016). So the work
 * on an input of `n` characters is at most `n + 1` times the largest number of steps the engine
 * can take for one character: the paths alive after some prefix, times the ways each can try
 * to go on. Exponential ambiguity (`(a+)+`) and polynomial ambiguity (`.*.*z`, whose paths grow
 * with the input) make that number grow without limit; a finitely ambiguous regex keeps it
 * bounded, but the bound can still be huge (`(a?){25}a{25}` has millions of paths).
 *
 * The guard computes the number itself. It builds the position automaton (Glushkov) with
 * multiplicities: each transition counts the distinct empty paths between two characters, so
 * `(?:|a)` and `(a|a)` count twice, as the engine tries both. Counted repeats are unrolled as
 * the engine runs them (the first `min` iterations may be empty, later ones may not), and
 * repeats too large to unroll are widened to unbounded ones, which only adds paths. Then it
 * walks the automaton's "counting subset construction": a state is the vector of how many
 * paths end at each position after some input, one successor per class of equivalent
 * characters. A regex is accepted when every reachable vector stays within
 * {@linkcode MAX_STEPS_PER_CHAR} steps; growing ambiguity of any degree fails that test,
 * because its vectors grow. So the engine's work on a path of `n` characters is at most
 * `(n + 1) × MAX_STEPS_PER_CHAR` steps, whatever the path.
 *
 * Lookarounds are run by the engine as separate matches: their bodies must pass the same test,
 * and an unbounded body is accepted only where the lookaround can be reached at one position
 * (the start of the variable), since otherwise each of `n` positions may scan `n` characters.
 *
 * @module
 */

import {
  hasCode,
  lengths,
  parseRegex,
  type Ranges,
  type RegexNode,
  RegexProblem,
  visitInContext,
} from "./regex_syntax.ts";

/**
 * The most steps the engine may take per character of input. A step is a path of the automaton
 * reaching a position, or trying to leave it. Route regexes take 2 to 6; bounded rewrites such
 * as `.{0,16}.{0,16}z` about 50. At the ~3 ns a step measured on V8 (`bench/redos_bench.ts`),
 * 128 steps a character over 8192 characters is about 3.5 ms.
 */
export const MAX_STEPS_PER_CHAR = 128;
/** Positions an unrolled regex may have; larger counted repeats are widened to unbounded. */
const MAX_POSITIONS = 4000;
/** Vectors the walk may visit before the regex is declared too complex to prove safe. */
const MAX_VECTORS = 2000;
/** Counts saturate here; anything past MAX_STEPS_PER_CHAR fails anyway. */
const CAP = 2 ** 40;

type Weights = Map<number, number>;

/** A regex part in the automaton: where it starts, where it ends, and its empty paths. */
interface Fragment {
  /** Positions a match can start with, with the number of empty paths reaching each. */
  readonly first: Weights;
  /** Positions a match can end with, with the number of empty paths from each to the end. */
  readonly last: Weights;
  /** The number of empty paths through the part. */
  readonly empty: number;
}

const EPSILON: Fragment = { first: new Map(), last: new Map(), empty: 1 };

function add(map: Weights, key: number, weight: number): void {
  map.set(key, Math.min(CAP, (map.get(key) ?? 0) + weight));
}

function scaled(map: Weights, factor: number, into: Weights = new Map()): Weights {
  if (factor === 0) return into;
  for (const [key, weight] of map) add(into, key, Math.min(CAP, weight * factor));
  return into;
}

/** A repeat whose unrolled automaton would exceed {@linkcode MAX_POSITIONS}. */
class TooLarge extends Error {
  constructor(readonly node: RegexNode) {
    super("too large");
  }
}

/** The position automaton with multiplicities. */
class Automaton {
  /** The character set of each position (shared between unrolled copies). */
  readonly sets: Ranges[] = [];
  /** For each position, the positions that can follow it, with their multiplicities. */
  readonly follow: Weights[] = [];

  build(node: RegexNode): Fragment {
    switch (node.type) {
      case "set": {
        const p = this.sets.push(node.ranges) - 1;
        this.follow.push(new Map());
        return { first: new Map([[p, 1]]), last: new Map([[p, 1]]), empty: 0 };
      }
      case "assert":
      case "look":
        // Tests that consume nothing: counted as always passing, which only adds paths.
        return EPSILON;
      case "seq":
        return node.items.reduce((acc, item) => this.#then(acc, this.build(item)), EPSILON);
      case "alt": {
        const first: Weights = new Map();
        const last: Weights = new Map();
        let empty = 0;
        for (const alt of node.alts) {
          const f = this.build(alt);
          scaled(f.first, 1, first);
          scaled(f.last, 1, last);
          empty = Math.min(CAP, empty + f.empty);
        }
        return { first, last, empty };
      }
      case "quant":
        return this.#repeat(node);
    }
  }

  #then(a: Fragment, b: Fragment): Fragment {
    for (const [p, wp] of a.last) {
      const follow = this.follow[p]!;
      for (const [q, wq] of b.first) add(follow, q, Math.min(CAP, wp * wq));
    }
    return {
      first: scaled(b.first, a.empty, scaled(a.first, 1)),
      last: scaled(a.last, b.empty, scaled(b.last, 1)),
      empty: Math.min(CAP, a.empty * b.empty),
    };
  }

  #repeat(node: Extract<RegexNode, { type: "quant" }>): Fragment {
    const size = unrolledSize(node.body);
    const room = MAX_POSITIONS - this.sets.length;
    let min = node.min;
    let max = node.max;
    // Widening {min,max} to {min,} keeps every path the engine can take: sound.
    if (max !== Infinity && size * max > room) max = Infinity;
    if (size * (min + 1) > room) {
      // Fewer mandatory iterations keep every path only when none can be empty.
      if (this.#empty(node.body)) throw new TooLarge(node);
      min = Math.min(min, 1);
    }
    let result = EPSILON;
    for (let i = 0; i < min; i++) result = this.#then(result, this.build(node.body));
    // Iterations past min that match nothing are rejected by the engine, so they lead nowhere;
    // but it walks each of their empty paths first. They are counted as paths that go on
    // (times 1 + empty), which only adds paths.
    if (max === Infinity) {
      const loop = this.build(node.body);
      this.#then({ ...loop, empty: 0 }, { ...loop, empty: 0 });
      const tries = Math.min(CAP, 1 + loop.empty);
      const star = { first: loop.first, last: scaled(loop.last, tries), empty: tries };
      return this.#then(result, star);
    }
    let rest = EPSILON;
    for (let i = min; i < max; i++) {
      const copy = this.build(node.body);
      const both = this.#then({ ...copy, empty: 0 }, rest);
      rest = { first: both.first, last: both.last, empty: Math.min(CAP, 1 + copy.empty) };
    }
    return this.#then(result, rest);
  }

  #empty(node: RegexNode): boolean {
    return lengths(node)[0] === 0;
  }
}

/** The positions `node` unrolls to, before widening. */
function unrolledSize(node: RegexNode): number {
  switch (node.type) {
    case "set":
      return 1;
    case "assert":
    case "look":
      return 0;
    case "seq":
      return node.items.reduce((sum, item) => sum + unrolledSize(item), 0);
    case "alt":
      return node.alts.reduce((sum, alt) => sum + unrolledSize(alt), 0);
    case "quant":
      return unrolledSize(node.body) * (node.max === Infinity ? node.min + 1 : node.max);
  }
}

/** The outcome of measuring one regex. */
type Measure =
  | { readonly kind: "ok"; readonly steps: number }
  | { readonly kind: "ambiguous"; readonly steps: number }
  | { readonly kind: "complex" }
  | { readonly kind: "large"; readonly node: RegexNode };

/** A class of characters that no position tells apart. */
interface CharClass {
  /** Whether the class is in the set of each distinct set id. */
  readonly member: boolean[];
  /** One character of the class, preferably printable, for crafting inputs. */
  readonly sample: number;
}

/** The classes of characters the automaton's sets tell apart. */
function characterClasses(
  sets: readonly Ranges[],
): { ids: number[]; classes: CharClass[]; distinct: Ranges[] } {
  const distinct: Ranges[] = [];
  const ids = sets.map((set) => {
    let id = distinct.indexOf(set);
    if (id === -1) id = distinct.push(set) - 1;
    return id;
  });
  const points = new Set<number>([0, 0x21, 0x30, 0x41, 0x61]);
  for (const set of distinct) {
    for (let i = 0; i < set.length; i += 2) {
      points.add(set[i]!);
      points.add(set[i + 1]! + 1);
    }
  }
  const seen = new Map<string, CharClass>();
  for (const point of [...points].sort((a, b) => a - b)) {
    const member = distinct.map((set) => hasCode(set, point));
    if (!member.includes(true)) continue;
    const key = member.map(Number).join("");
    const known = seen.get(key);
    // Printable ASCII other than "/" makes readable paths that stay in one segment.
    const printable = point > 0x20 && point < 0x7f && point !== 0x2f;
    if (known === undefined || (printable && !isPrintable(known.sample))) {
      seen.set(key, { member, sample: point });
    }
  }
  return { ids, classes: [...seen.values()], distinct };
}

function isPrintable(code: number): boolean {
  return code > 0x20 && code < 0x7f && code !== 0x2f;
}

/** The automaton of a regex, ready to walk. */
class Walk {
  readonly classes: CharClass[];
  readonly #distinct: Ranges[];
  readonly #ids: number[];
  readonly #follow: Weights[];
  readonly #outs: number[];
  readonly #first: Weights;
  /** Steps the engine takes before reading a character. */
  readonly start: number;

  constructor(automaton: Automaton, root: Fragment) {
    const { ids, classes, distinct } = characterClasses(automaton.sets);
    this.classes = classes;
    this.#distinct = distinct;
    this.#ids = ids;
    this.#follow = automaton.follow;
    this.#first = root.first;
    this.#outs = automaton.follow.map((map, p) => {
      let out = 1 + (root.last.get(p) ?? 0);
      for (const weight of map.values()) out += weight;
      return out;
    });
    let start = 1 + root.empty;
    for (const weight of root.first.values()) start += weight;
    this.start = start;
  }

  /** The class of `code`, or undefined when no position can read it. */
  classOf(code: number): CharClass | undefined {
    const member = this.#distinct.map((set) => hasCode(set, code));
    return this.classes.find((c) => c.member.every((m, i) => m === member[i]));
  }

  /** The paths after reading one character of `charClass` from `vector` (undefined: start). */
  next(vector: Weights | undefined, charClass: CharClass): Weights {
    const ids = this.#ids;
    const member = charClass.member;
    const into: Weights = new Map();
    if (vector === undefined) {
      for (const [q, w] of this.#first) if (member[ids[q]!]) add(into, q, w);
      return into;
    }
    const follow = this.#follow;
    for (const [p, count] of vector) {
      for (const [q, w] of follow[p]!) if (member[ids[q]!]) add(into, q, Math.min(CAP, count * w));
    }
    return into;
  }

  /** The engine's steps for the next character with `vector` alive. */
  steps(vector: Weights): number {
    let steps = 0;
    for (const [p, count] of vector) steps += Math.min(CAP, count * this.#outs[p]!);
    return steps;
  }
}

function walkOf(node: RegexNode): Walk | RegexNode {
  const automaton = new Automaton();
  try {
    return new Walk(automaton, automaton.build(node));
  } catch (error) {
    if (error instanceof TooLarge) return error.node;
    throw error;
  }
}

/**
 * The most steps per character the engine can take on `node`, by the walk described in the
 * module documentation, stopping as soon as it passes {@linkcode MAX_STEPS_PER_CHAR}.
 */
export function measure(node: RegexNode): Measure {
  const walk = walkOf(node);
  if (!(walk instanceof Walk)) return { kind: "large", node: walk };
  let most = walk.start;
  if (most > MAX_STEPS_PER_CHAR) return { kind: "ambiguous", steps: most };
  const seen = new Set<string>();
  // Best first: a vector with more paths is expanded before others, so that growing
  // ambiguity passes the limit long before the walk has seen every small vector.
  const queue = new Heap();
  let vector: Weights | undefined;
  while (true) {
    for (const charClass of walk.classes) {
      const next = walk.next(vector, charClass);
      if (next.size === 0) continue;
      const steps = walk.steps(next);
      if (steps > MAX_STEPS_PER_CHAR) return { kind: "ambiguous", steps };
      most = Math.max(most, steps);
      const key = [...next].sort((a, b) => a[0] - b[0]).join(";");
      if (seen.has(key)) continue;
      if (seen.size >= MAX_VECTORS) return { kind: "complex" };
      seen.add(key);
      queue.push(steps, next);
    }
    if (queue.size === 0) return { kind: "ok", steps: most };
    vector = queue.pop();
  }
}

/**
 * Inputs of `length` characters meant to make the engine work hardest on `node`: each follows
 * the character class that keeps the most paths alive, then ends with a character that kills
 * them (or none), so that the engine explores every path before failing. For benchmarks.
 */
export function hostileInputs(node: RegexNode, length: number): string[] {
  const walk = walkOf(node);
  if (!(walk instanceof Walk)) return [];
  const codes: number[] = [];
  let vector: Weights | undefined;
  for (let i = 0; i < length - 1; i++) {
    let best: Weights | undefined;
    let bestSteps = -1;
    let bestCode = 0;
    for (const charClass of walk.classes) {
      const next = walk.next(vector, charClass);
      const steps = next.size === 0 ? -1 : walk.steps(next);
      if (steps > bestSteps) [best, bestSteps, bestCode] = [next, steps, charClass.sample];
    }
    if (best === undefined) break;
    vector = best;
    codes.push(bestCode);
  }
  const body = String.fromCodePoint(...codes);
  // Then one or two characters, no "/" (which the lookahead after the variable accepts), after
  // which no path is alive: the engine has to try every path before it fails.
  const alphabet = walk.classes.map((c) => c.sample);
  for (const code of [0x21, 0x0a, 0x20, 0x7e, 0x00, 0xffff]) {
    if (!alphabet.includes(code)) alphabet.push(code);
  }
  const lastVector = vector;
  const killers: string[] = [];
  const slashed: string[] = [];
  const dies = (word: number[]) => {
    let vector: Weights | undefined = codes.length === 0 ? undefined : lastVector;
    for (const code of word) {
      const charClass = walk.classOf(code);
      if (charClass === undefined) return true;
      vector = walk.next(vector, charClass);
      if (vector.size === 0) return true;
    }
    return false;
  };
  // A killer with "/" fails only a regex the router runs to the end of the path (a suffix
  // with a variable that spans segments); after a segment's variable the lookahead accepts it.
  for (const a of [...alphabet, 0x2f]) {
    for (const word of [[a], ...alphabet.map((b) => [a, b])]) {
      if (word.length === 2 && dies([a])) continue;
      if (!dies(word)) continue;
      (word.includes(0x2f) ? slashed : killers).push(String.fromCodePoint(...word));
    }
  }
  const endings = ["", "/", ...killers.slice(0, 8), ...slashed.slice(0, 4)];
  return [...new Set(endings)].map((end) => (body + end).slice(-length));
}

/** A max-heap of vectors by their steps. */
class Heap {
  #keys: number[] = [];
  #items: Weights[] = [];
  get size(): number {
    return this.#keys.length;
  }
  push(key: number, item: Weights): void {
    const keys = this.#keys;
    const items = this.#items;
    let i = keys.push(key) - 1;
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent]! >= key) break;
      keys[i] = keys[parent]!;
      items[i] = items[parent]!;
      i = parent;
    }
    keys[i] = key;
    items[i] = item;
  }
  pop(): Weights {
    const keys = this.#keys;
    const items = this.#items;
    const top = items[0]!;
    const key = keys.pop()!;
    const item = items.pop()!;
    const n = keys.length;
    if (n === 0) return top;
    let i = 0;
    while (true) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && keys[child + 1]! > keys[child]!) child++;
      if (keys[child]! <= key) break;
      keys[i] = keys[child]!;
      items[i] = items[child]!;
      i = child;
    }
    keys[i] = key;
    items[i] = item;
    return top;
  }
}

function fails(node: RegexNode): boolean {
  return measure(node).kind !== "ok";
}

/** The smallest part of `node` (which fails {@linkcode measure}) that fails on its own. */
function culprit(node: RegexNode): RegexNode {
  switch (node.type) {
    case "quant":
      return fails(node.body) ? culprit(node.body) : node;
    case "alt": {
      const alt = node.alts.find(fails);
      return alt === undefined ? node : culprit(alt);
    }
    case "seq": {
      const items = node.items;
      for (let size = 1; size < items.length; size++) {
        for (let i = 0; i + size <= items.length; i++) {
          const window = items.slice(i, i + size);
          const part: RegexNode = size === 1 ? window[0]! : {
            type: "seq",
            items: window,
            start: window[0]!.start,
            end: window[size - 1]!.end,
          };
          if (fails(part)) return size === 1 ? culprit(part) : part;
        }
      }
      return node;
    }
    default:
      return node;
  }
}

/** `text` (a regex source) with each unbounded repeat bounded to `bound` more iterations. */
function boundRepeats(node: RegexNode, text: string, offset: number, bound: number): string {
  const edits: [number, number, string][] = [];
  visitInContext(node, (inner) => {
    if (inner.type !== "quant" || inner.max !== Infinity) return;
    const lazy = text[inner.end - 1 - offset] === "?" &&
        inner.end - inner.body.end > 1
      ? "?"
      : "";
    const most = inner.min <= 1 ? bound : inner.min + bound;
    edits.push([inner.body.end, inner.end, `{${inner.min},${most}}${lazy}`]);
  });
  let out = text.slice(node.start - offset, node.end - offset);
  for (const [start, end, replacement] of edits.sort((a, b) => b[0] - a[0])) {
    out = out.slice(0, start - node.start) + replacement + out.slice(end - node.start);
  }
  return out;
}

/**
 * A rewrite of `part` with bounded repeats that passes the guard within `root`, if one is
 * found: what the refusal suggests.
 */
function boundedRewrite(
  part: RegexNode,
  root: RegexNode,
  source: string,
  offset: number,
): string | undefined {
  const before = source.slice(root.start - offset, part.start - offset);
  const after = source.slice(part.end - offset, root.end - offset);
  for (const bound of [64, 16]) {
    const text = boundRepeats(part, source, offset, bound);
    if (text === source.slice(part.start - offset, part.end - offset)) return undefined;
    try {
      if (!fails(parseRegex(before + text + after))) return text;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

function describe(part: RegexNode, source: string, offset: number): string {
  return JSON.stringify(source.slice(part.start - offset, part.end - offset));
}

/** `a?a?aa` as `a{2,4}`: a run of one atom, repeated or not, as one counted repeat. */
function mergedRepeat(part: RegexNode, source: string, offset: number): string | undefined {
  if (part.type !== "seq" || part.items.length < 2) return undefined;
  let atom: string | undefined;
  let min = 0;
  let max = 0;
  for (const item of part.items) {
    const body = item.type === "quant" ? item.body : item;
    const text = source.slice(body.start - offset, body.end - offset);
    if (body.type !== "set" || (atom !== undefined && text !== atom)) return undefined;
    atom = text;
    min += item.type === "quant" ? item.min : 1;
    max += item.type === "quant" ? item.max : 1;
  }
  if (max === Infinity && min <= 1) return atom + (min === 0 ? "*" : "+");
  return `${atom}{${min},${max === Infinity ? "" : max}}`;
}

/** Why a measured part fails, and what to write instead. */
function explain(
  part: RegexNode,
  root: RegexNode,
  source: string,
  offset: number,
  rewrite: boolean,
): string {
  const text = describe(part, source, offset);
  const bounded = rewrite ? boundedRewrite(part, root, source, offset) : undefined;
  const merged = mergedRepeat(part, source, offset);
  const hint = merged !== undefined
    ? `write the run as one repeat, e.g. ${JSON.stringify(merged)}`
    : bounded !== undefined
    ? `bound its repeats, e.g. ${JSON.stringify(bounded)}`
    : part.type === "quant"
    ? `repeat a part that can match a given text in only one way (e.g. "a+" instead of ` +
      `"(a+)+" or "(a?){9}", "(?:ab?)*" instead of "(a|ab)*")`
    : `make its parts unable to match the same characters (e.g. "[^/]*z" instead of ` +
      `".*.*z"), or bound their repeats (e.g. "{1,16}" instead of "+")`;
  return `${text} can match the same text in too many ways (more than ${MAX_STEPS_PER_CHAR} ` +
    `engine steps per character of the path), so a crafted path can make the regex engine ` +
    `backtrack for a long time; ${hint}`;
}

/**
 * Finds the first reason `root` could make the engine take more than
 * {@linkcode MAX_STEPS_PER_CHAR} steps per character, with its position and a fix.
 *
 * @param root The regex, parsed with `offset`.
 * @param source The text `root`'s positions index, minus `offset`.
 * @param offset The parser's offset.
 * @param rewrite Whether to try a bounded rewrite for the message (`source` is a regex).
 */
export function findRisk(
  root: RegexNode,
  source: string,
  offset = 0,
  rewrite = true,
): RegexProblem | undefined {
  const verdict = measure(root);
  let risk: RegexProblem | undefined;
  if (verdict.kind === "large") {
    risk = new RegexProblem(
      `the repeat ${describe(verdict.node, source, offset)} is too large for the ReDoS guard ` +
        `to check; use smaller bounds`,
      verdict.node.start,
      true,
    );
  } else if (verdict.kind === "complex") {
    risk = new RegexProblem(
      `the regex has more than ${MAX_VECTORS} states for the ReDoS guard to check; simplify it`,
      root.start,
      true,
    );
  } else if (verdict.kind === "ambiguous") {
    const part = culprit(root);
    risk = new RegexProblem(explain(part, root, source, offset, rewrite), part.start, true);
  }
  if (risk !== undefined || verdict.kind !== "ok") return risk;
  // A lookaround runs its body as a separate match each time a path reaches it. One at the
  // start of the regex is reached at one position only, so its work spreads over the input:
  // its steps per character add up. Elsewhere it may be reached at every position, so its
  // whole run counts, and only a bounded body keeps that a constant.
  let extra = 0;
  let costliest: { node: RegexNode; cost: number } | undefined;
  visitInContext(root, (node, context) => {
    if (risk !== undefined || node.type !== "look") return;
    const inner = findRisk(node.body, source, offset, rewrite);
    const longest = lengths(node.body)[1];
    if (inner !== undefined) {
      risk = new RegexProblem(`inside a lookaround, ${inner.message}`, inner.position, true);
    } else if (longest === Infinity && context.before[1] > 0) {
      risk = new RegexProblem(
        `the lookaround ${describe(node, source, offset)} has an unbounded body and can be ` +
          `tried at each of many positions, each time scanning to the end of the path; ` +
          `bound its body (e.g. "{0,64}" instead of "*") or move it to the start of the regex`,
        node.start,
        true,
      );
    } else {
      const body = measure(node.body);
      const steps = body.kind === "ok" ? body.steps : Infinity;
      const cost = context.before[1] === 0 ? steps : steps * (longest + 1);
      extra += cost;
      if (costliest === undefined || cost > costliest.cost) costliest = { node, cost };
    }
  });
  if (risk === undefined && costliest !== undefined) {
    const total = verdict.steps * (1 + extra);
    if (total > MAX_STEPS_PER_CHAR) {
      risk = new RegexProblem(
        `the lookaround ${describe(costliest.node, source, offset)} runs its body again for ` +
          `each path that reaches it, which makes up to ${total} engine steps per character ` +
          `of the path (more than ${MAX_STEPS_PER_CHAR}); shorten its body or move it to the ` +
          `start of the regex`,
        costliest.node.start,
        true,
      );
    }
  }
  return risk;
}

/** What the router needs to know about a variable's regex. */
export interface RegexFacts {
  /** Whether a match can contain `/`, so the variable can span path segments. */
  readonly canMatchSlash: boolean;
  /** Every code point a match can contain. */
  readonly consumes: Ranges;
  /** Number of capturing groups of its own. */
  readonly groups: number;
  /**
   * A backtracking risk found by {@linkcode findRisk}, if any. Computed when first read, so
   * that a router with `allowUnsafeRegex` never pays for it.
   */
  readonly risk: RegexProblem | undefined;
}
export { hasCode } from "./regex_syntax.ts";
