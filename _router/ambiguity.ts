// Copyright the stellarator authors. MIT license.
/**
 * How much work a backtracking regex engine can do per character of input on a regex: the
 * measure behind the ReDoS guard (`redos.ts`).
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
 * {@linkcode measure} computes the number. It builds the position automaton (Glushkov) with
 * multiplicities: each transition counts the distinct empty paths between two characters, so
 * `(?:|a)` and `(a|a)` count twice, as the engine tries both. Counted repeats are unrolled as
 * the engine runs them (the first `min` iterations may be empty, later ones may not, though
 * the engine walks their empty paths before rejecting them), and repeats too large to unroll
 * are widened to unbounded ones; assertions and lookarounds are taken as always passing. Each
 * of these approximations only adds paths. Then it walks the automaton's counting subset
 * construction: a state is the vector of how many paths end at each position after some
 * input, one successor per class of characters no position tells apart, the vectors with the
 * most paths first. Growing ambiguity of any degree makes the vectors grow past any limit, so
 * the walk ends, either past the limit or having seen every vector.
 *
 * The count is of all paths, whether or not something after them can still fail; a regex that
 * always succeeds at once (`[^/]*` before the end) may be counted as costlier than it is.
 *
 * @module
 */

import { hasCode, lengths, type Ranges, type RegexNode } from "./regex_syntax.ts";

/**
 * The most steps the engine may take per character of input. A step is a path of the automaton
 * reaching a position, or trying to leave it. Route regexes take 2 to 6; bounded rewrites such
 * as `.{0,16}.{0,16}z` about 50. At the 1.2 to 2.3 ns a step measured on V8 (busy machine,
 * `bench/redos_bench.ts`), 128 steps a character over 8192 characters take 1.3 to 2.5 ms.
 */
export const MAX_STEPS_PER_CHAR = 128;
/** Positions an unrolled regex may have; larger counted repeats are widened to unbounded. */
const MAX_POSITIONS = 4000;
/**
 * Parts built for the copies of repeats, beyond the regex's own nodes, before the guard gives
 * up. Widening does not stop nesting from multiplying: a repeat with `min >= 1` builds its body
 * at least twice (once for the required iteration, once for the loop), so `(?:…)+` nested 20
 * deep built a million copies (34 s) and 22 deep ran out of memory.
 */
const MAX_COPIES = 8 * MAX_POSITIONS;
/**
 * Links between positions (entries of the follow sets) the automaton may hold. A wide
 * alternation under a repeat links each alternative's end to every alternative's start, so
 * `(?:a|a|…)+` with 4,090 alternatives made 16.7 million links: 3.5 s and 1.3 GB before the
 * refusal. The most any accepted regex of the tests and benchmarks makes is 1,596.
 */
export const MAX_LINKS = 200_000;
/** Vectors the walk may visit before the regex is declared too complex to prove safe. */
export const MAX_VECTORS = 2000;
/**
 * Positions a counted repeat may unroll to when a regex too complex to walk is judged again with
 * its long counted repeats widened (see {@linkcode measure}).
 */
const WIDENED_ROOM = 64;
/**
 * Classes of characters the walk may tell apart. It reads each class from each vector it visits,
 * and each class holds a flag per distinct set, so 16,000 distinct characters in a row (16,001
 * classes of 16,000 flags) took 19 s and 2.5 GB before the refusal. Route regexes of the tests
 * and benchmarks tell apart at most 16, twenty Japanese city names 38, and a list of 100 words of
 * three Han characters 300.
 */
export const MAX_CLASSES = 1024;
/**
 * Distinct sets times the boundaries of their ranges: the work of finding the classes, refused
 * before it starts. A run of 1,024 distinct characters, the most {@linkcode MAX_CLASSES} lets
 * through, takes about a million.
 */
const MAX_CLASS_WORK = 4 * MAX_CLASSES * MAX_CLASSES;
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

/**
 * A repeat whose unrolled automaton would exceed {@linkcode MAX_POSITIONS}, or (the outermost
 * one being built) take more than {@linkcode MAX_COPIES} copies of its parts; or, with `links`,
 * a regex whose automaton would hold more than {@linkcode MAX_LINKS} links.
 */
class TooLarge extends Error {
  constructor(readonly node: RegexNode, readonly links = false) {
    super("too large");
  }
}

/**
 * A regex whose characters fall in more than {@linkcode MAX_CLASSES} classes, or whose sets have
 * too many range boundaries to find its classes (`ranges`): a few classes that list thousands of
 * characters one by one make few classes, and must not be blamed on distinct characters.
 */
class TooVaried extends Error {
  readonly ranges: boolean;
  constructor(ranges: boolean) {
    super("too varied");
    this.ranges = ranges;
  }
}

/** The position automaton with multiplicities. */
class Automaton {
  /** The character set of each position (shared between unrolled copies). */
  readonly sets: Ranges[] = [];
  /** For each position, the positions that can follow it, with their multiplicities. */
  readonly follow: Weights[] = [];
  /** Parts this automaton may still build before it is too large to judge. */
  #budget: number;
  /** Links this automaton may still make. */
  #links = MAX_LINKS;
  /** The regex being built. */
  readonly #root: RegexNode;
  /** The outermost repeat being built, blamed when the budget runs out. */
  #outermost: RegexNode | undefined;

  /** Unroll a counted repeat to at most {@linkcode WIDENED_ROOM} positions (see `measure`). */
  readonly #widen: boolean;

  constructor(root: RegexNode, widen = false) {
    this.#budget = nodeCount(root) + MAX_COPIES;
    this.#root = root;
    this.#widen = widen;
  }

  build(node: RegexNode): Fragment {
    // Only the copies of repeats can build more parts than the regex has, so #outermost is set.
    if (--this.#budget < 0) throw new TooLarge(this.#outermost ?? node);
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
      const before = follow.size;
      for (const [q, wq] of b.first) add(follow, q, Math.min(CAP, wp * wq));
      this.#links -= follow.size - before;
      if (this.#links < 0) throw new TooLarge(this.#outermost ?? this.#root, true);
    }
    return {
      first: scaled(b.first, a.empty, scaled(a.first, 1)),
      last: scaled(a.last, b.empty, scaled(b.last, 1)),
      empty: Math.min(CAP, a.empty * b.empty),
    };
  }

  #repeat(node: Extract<RegexNode, { type: "quant" }>): Fragment {
    if (this.#outermost !== undefined) return this.#unroll(node);
    this.#outermost = node;
    try {
      return this.#unroll(node);
    } finally {
      this.#outermost = undefined;
    }
  }

  #unroll(node: Extract<RegexNode, { type: "quant" }>): Fragment {
    const size = unrolledSize(node.body);
    const left = MAX_POSITIONS - this.sets.length;
    const room = this.#widen ? Math.min(left, WIDENED_ROOM) : left;
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

/** The nodes of `node`'s tree. */
function nodeCount(node: RegexNode): number {
  switch (node.type) {
    case "set":
    case "assert":
      return 1;
    case "look":
    case "quant":
      return 1 + nodeCount(node.body);
    case "seq":
      return node.items.reduce((sum, item) => sum + nodeCount(item), 1);
    case "alt":
      return node.alts.reduce((sum, alt) => sum + nodeCount(alt), 1);
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
export type Measure =
  | { readonly kind: "ok"; readonly steps: number }
  | { readonly kind: "ambiguous"; readonly steps: number }
  | { readonly kind: "complex" }
  | { readonly kind: "large"; readonly node: RegexNode }
  | { readonly kind: "dense"; readonly node: RegexNode }
  | { readonly kind: "varied"; readonly ranges: boolean };

/** A class of characters that no position tells apart. */
interface CharClass {
  /** Whether the class is in the set of each distinct set id. */
  readonly member: boolean[];
  /** One character of the class, preferably printable, for crafting inputs. */
  readonly sample: number;
}

/**
 * The classes of characters the automaton's sets tell apart.
 *
 * @throws {TooVaried} Past {@linkcode MAX_CLASS_WORK} or {@linkcode MAX_CLASSES}.
 */
function characterClasses(
  sets: readonly Ranges[],
): { ids: number[]; classes: CharClass[]; distinct: Ranges[] } {
  // Equal sets share an id: each literal character of the regex has a set of its own.
  const distinct: Ranges[] = [];
  const byIdentity = new Map<Ranges, number>();
  const byContent = new Map<string, number>();
  const ids = sets.map((set) => {
    let id = byIdentity.get(set);
    if (id !== undefined) return id;
    const key = set.join();
    id = byContent.get(key);
    if (id === undefined) byContent.set(key, id = distinct.push(set) - 1);
    byIdentity.set(set, id);
    return id;
  });
  const points = new Set<number>([0, 0x21, 0x30, 0x41, 0x61]);
  for (const set of distinct) {
    for (let i = 0; i < set.length; i += 2) {
      points.add(set[i]!);
      points.add(set[i + 1]! + 1);
    }
  }
  // Past the work bound the classes are not counted: more distinct sets than classes allowed
  // (a long run of distinct characters) is blamed on the kinds, fewer on the sets' ranges.
  if (points.size * distinct.length > MAX_CLASS_WORK) {
    throw new TooVaried(distinct.length <= MAX_CLASSES);
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
  if (seen.size > MAX_CLASSES) throw new TooVaried(false);
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

function walkOf(node: RegexNode, widen = false): Walk | TooLarge | TooVaried {
  const automaton = new Automaton(node, widen);
  try {
    return new Walk(automaton, automaton.build(node));
  } catch (error) {
    if (error instanceof TooLarge || error instanceof TooVaried) return error;
    throw error;
  }
}

/**
 * The most steps per character the engine can take on `node`, by the walk described in the
 * module documentation, stopping as soon as it passes {@linkcode MAX_STEPS_PER_CHAR}.
 *
 * A regex whose walk visits more than {@linkcode MAX_VECTORS} vectors is judged once more with
 * its long counted repeats widened (`{n}` to `{1,}`, as those past {@linkcode MAX_POSITIONS}
 * always are), which keeps every path the engine can take and only adds some: if that passes,
 * so does the regex. A long chain of one class, `[a-z]{2001}`, visits one vector per position
 * and was refused as too complex, while `[a-z]{4001}`, widened from the start, was accepted.
 */
export function measure(node: RegexNode): Measure {
  const measured = measureWith(node, false);
  if (measured.kind !== "complex") return measured;
  const widened = measureWith(node, true);
  return widened.kind === "ok" ? widened : measured;
}

function measureWith(node: RegexNode, widen: boolean): Measure {
  const walk = walkOf(node, widen);
  if (walk instanceof TooVaried) return { kind: "varied", ranges: walk.ranges };
  if (walk instanceof TooLarge) {
    if (!walk.links) return { kind: "large", node: walk.node };
    // The cap counts the links of the whole regex, so the repeat being built when they passed it
    // may be a small one after wide parts: it is named only if it passes the cap on its own.
    const alone = walk.node === node ? walk : walkOf(walk.node, widen);
    return { kind: "dense", node: alone instanceof TooLarge && alone.links ? walk.node : node };
  }
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

/** Whether `node` takes more than {@linkcode MAX_STEPS_PER_CHAR} steps per character. */
export function fails(node: RegexNode): boolean {
  return measure(node).kind !== "ok";
}
