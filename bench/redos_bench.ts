/**
 * The ReDoS guarantee, measured: every route the guard accepts, given the most hostile paths
 * we can craft up to `maxPathLength` (8192), and how long one lookup takes. Run by
 * `deno task bench:redos`.
 *
 * The routes are the constructs route regexes are made of (bounded classes, literal
 * alternations, UUIDs, dates, extensions, slugs, versions, optional parts, lookarounds), the
 * most ambiguous regexes the guard still accepts, multi-variable routes the engine runs as one
 * regex, and every accepted entry of the corpora in `tests/fixtures/redos/`. For each, the
 * paths are those of `hostileInputs()` (the guard's own automaton, walked along the class of
 * characters that keeps the most paths alive, then a character that kills them) and runs of
 * single characters with a failing last character. The slowest of them becomes the bench.
 *
 * Before `Deno.bench` runs, a summary prints each route's lookup time on its slowest path (the
 * fastest of five runs, which is the lookup's own cost, and the slowest, which adds whatever
 * else the machine was doing), the worst of all, and the time per character and step of the
 * guard's bound, which gives the figure in the README. For contrast, two refused routes run
 * with `allowUnsafeRegex: true`.
 *
 * @module
 */
import { AsgiRouter, Route } from "@stellarator/stellarator/router";
import { CATCH_ALL, LITERAL, parsePattern, PLAIN, REGEX, suffixTree } from "../_router/pattern.ts";
import { hostileInputs, MAX_STEPS_PER_CHAR, measure } from "../_router/redos.ts";

const MAX_PATH_LENGTH = 8192;

const CONSTRUCTS: string[] = [
  "/test/{id:[a-z]{1,64}}",
  "/test/{id:[a-z0-9_-]{1,255}}",
  "/test/{id:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}}",
  "/test/{id:\\d{4}-\\d{2}-\\d{2}}",
  "/test/{id:png|jpg|gif|webp}",
  "/test/{id:[^/]+\\.(png|jpg)}",
  "/test/{id:[a-z0-9]+(?:-[a-z0-9]+)*}",
  "/test/{id:v[0-9]+(?:\\.[0-9]+)*}",
  "/test/{id:\\d+}",
  "/test/{id:.+}",
  "/test/{id:[^@/]+@[^@/]+}",
  "/test/{id:(?:foo|bar)+}",
  "/test/{id:(?!new$)[a-z]+}",
  "/test/{id:(?!.*\\.\\.)[a-z.]+}",
  "/test/{id:\\d\\d(?<!00)}",
  "/test/{id:(?i:[a-z]+)}",
  // Near the guard's limit: the most ambiguous shapes it still accepts.
  "/test/{id:(a|ab)+}",
  "/test/{id:.{0,16}.{0,16}z}",
  "/test/{id:.{0,24}.{0,24}}",
  "/test/{id:(a?){5}a{5}}",
  "/test/{id:(?:|a)(?:|a)(?:|a)b}",
  "/test/{id:(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)b}",
  // Near the limit over the whole path: 40 branches alive at each "a" (123 steps a character).
  "/test/{id:[a-z]+(?:a{1,40}!)?}",
  "/test/{id:[a-z]*(?:[a-c]{1,30}!)?}",
  "/test/{id:[^/]*(?:x{1,40}y)?}",
  "/test/{id:\\d+(?:0{1,20}x|1{1,20}y)?}",
  "/test/{id:[a-z]{0,4}[a-z0-9]{0,4}[a-z0-9.]{0,4}x}",
  // Routes the engine runs from an ambiguous variable on, as one regex.
  "/s/{file:.+}.{ext:[^./]+}",
  "/f/{name}.{ext:png|jpg}",
  "/d/{path:.+}/{name:[a-z]+}",
  "/v/{a:[a-z]+}-{b:[0-9]+}.{c}",
];
const REFUSED = ["/test/{id:.*.*z}", "/s/{file:.+}.{ext}"];

/** Paths that make `pattern` work hardest, by the guard's automaton and by plain runs. */
function hostilePaths(pattern: string): string[] {
  const tokens = parsePattern(pattern);
  const out: string[] = [];
  const prefixOf = (end: number) =>
    tokens.slice(0, end).map((t) => t.kind === LITERAL ? t.text : "p").join("");
  tokens.forEach((token, i) => {
    if (token.kind !== REGEX) return;
    const prefix = prefixOf(i);
    for (const input of hostileInputs(token.facts!.tree, MAX_PATH_LENGTH - prefix.length)) {
      out.push(prefix + input);
    }
  });
  const suffix = suffixTree(pattern, tokens);
  if (suffix !== undefined) {
    const prefix = prefixOf(suffix.from);
    for (const input of hostileInputs(suffix.tree, MAX_PATH_LENGTH - prefix.length)) {
      out.push(prefix + input);
    }
  }
  const first = tokens.findIndex((t) =>
    t.kind === REGEX || t.kind === PLAIN || t.kind === CATCH_ALL
  );
  const prefix = prefixOf(first);
  for (const c of ["a", "z", "0", ".", "-", "ab", "a.", "1337"]) {
    const run = c.repeat(MAX_PATH_LENGTH).slice(0, MAX_PATH_LENGTH - prefix.length - 1);
    for (const end of ["!", "/", ""]) out.push(prefix + run + end);
  }
  return out.map((path) => path.slice(0, MAX_PATH_LENGTH));
}

/** The fastest and the slowest of `runs` lookups of `path`, in milliseconds. */
function timed(router: AsgiRouter, path: string, runs: number): { min: number; max: number } {
  let min = Infinity;
  let max = 0;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    router.match(path);
    const ms = performance.now() - start;
    min = Math.min(min, ms);
    max = Math.max(max, ms);
  }
  return { min, max };
}

/** The guard's steps per character for the regexes the engine runs for `pattern`. */
function stepsOf(pattern: string): number {
  const tokens = parsePattern(pattern);
  const trees = tokens.flatMap((t) => t.kind === REGEX ? [t.facts!.tree] : []);
  const suffix = suffixTree(pattern, tokens);
  if (suffix !== undefined) trees.push(suffix.tree);
  return Math.max(
    0,
    ...trees.map((tree) => {
      const verdict = measure(tree);
      return verdict.kind === "ok" ? verdict.steps : Infinity;
    }),
  );
}

interface Case {
  readonly steps: number;
  readonly group: string;
  readonly pattern: string;
  readonly router: AsgiRouter;
  readonly path: string;
  /** Fastest of five lookups: the lookup's own cost. */
  readonly ms: number;
  /** Slowest of five: with whatever else the machine was doing. */
  readonly worst: number;
}

function prepare(group: string, pattern: string, allowUnsafeRegex = false): Case | undefined {
  let router: AsgiRouter;
  try {
    router = new AsgiRouter({
      routes: [new Route(pattern, { handler: () => {} })],
      allowUnsafeRegex,
    });
  } catch {
    return undefined; // refused, by the guard or as a construct (corpora entries)
  }
  let path = "";
  let slowest = -1;
  for (const candidate of hostilePaths(pattern)) {
    const { min } = timed(router, candidate, 2);
    if (min > slowest) [path, slowest] = [candidate, min];
  }
  const { min, max } = timed(router, path, 5);
  return { group, pattern, router, path, ms: min, worst: max, steps: stepsOf(pattern) };
}

const cases: Case[] = [];
for (const pattern of CONSTRUCTS) {
  const prepared = prepare("constructs", pattern);
  if (prepared === undefined) throw new Error(`The guard refuses ${pattern}`);
  cases.push(prepared);
}
for (
  const name of ["find-my-way", "safe-regex2", "safe-regex", "weideman", "regexploit", "codeql"]
) {
  const url = new URL(`../tests/fixtures/redos/${name}.json`, import.meta.url);
  const { rows } = JSON.parse(await Deno.readTextFile(url)) as {
    rows: { regex: string; expected: string }[];
  };
  const accepted = new Set(rows.filter((r) => r.expected === "accept").map((r) => r.regex));
  for (const regex of accepted) {
    const prepared = prepare(`corpus ${name}`, `/test/{id:${regex}}`);
    if (prepared !== undefined) cases.push(prepared);
  }
}
const refused = REFUSED.map((pattern) => prepare("refused (allowUnsafeRegex)", pattern, true)!);

const show = (c: Case) =>
  `${c.ms.toFixed(2).padStart(8)} ms (worst run ${c.worst.toFixed(2).padStart(6)})  ` +
  `${c.path.length.toString().padStart(5)} chars  ` +
  `${String(c.steps).padStart(8)} steps/char  ${c.group}: ${c.pattern}`;
console.log(
  "Lookup time per accepted route on its most hostile path (fastest of 5 runs, then slowest):",
);
for (const c of [...cases].sort((a, b) => b.ms - a.ms).slice(0, 12)) console.log(show(c));
const worst = cases.reduce((a, b) => (a.ms >= b.ms ? a : b));
const noisiest = cases.reduce((a, b) => (a.worst >= b.worst ? a : b));
console.log(
  `\nWorst of ${cases.length} accepted routes: ${worst.ms.toFixed(2)} ms (${worst.pattern}); ` +
    `slowest single run ${noisiest.worst.toFixed(2)} ms (${noisiest.pattern})`,
);
// The model's constant: time per character and step of the bound, from the cases where the
// bound is large enough (100 000 steps) for a fixed cost per lookup not to dominate.
const big = cases.filter((c) => c.path.length * c.steps >= 1e5);
const perStep = Math.max(...big.map((c) => (c.ms * 1e6) / (c.path.length * c.steps)));
const bound = (perStep * MAX_PATH_LENGTH * MAX_STEPS_PER_CHAR) / 1e6;
console.log(
  `At most ${perStep.toFixed(2)} ns per character and step of the guard's bound (over ` +
    `${big.length} routes); at ${MAX_PATH_LENGTH} characters and ${MAX_STEPS_PER_CHAR} steps ` +
    `a character: ${bound.toFixed(2)} ms`,
);
console.log(`For contrast, refused routes: ${refused.map((c) => show(c).trim()).join("; ")}\n`);

for (const c of [...cases, ...refused]) {
  Deno.bench({
    group: c.group,
    name: `${c.pattern} on ${c.path.length} chars`,
    fn: () => {
      c.router.match(c.path);
    },
  });
}
