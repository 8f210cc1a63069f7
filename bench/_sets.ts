/**
 * Route sets and lookup workloads for the router benchmark.
 *
 * Every workload path carries the answer it must get (route index and context),
 * built with the path and checked against the brute-force reference semantics
 * of `_pattern.ts`, with and without a trailing slash ignored. A router's time
 * counts only when its answers agree with these.
 *
 * Generation is deterministic (a seeded PRNG per set), so two runs time the same
 * paths, and the scaling sets share one path shape across sizes.
 *
 * @module
 */
import { parsePattern, type ReferenceHit, referenceMatcher } from "./_pattern.ts";

/** The answer a lookup must give: the route's index and its context, or undefined for a miss. */
export type Expected = ReferenceHit | undefined;

/** The kinds of workload every set offers (when it has routes of that kind). */
export const WORKLOAD_KINDS = ["static", "one-var", "many-var", "miss", "mix"] as const;

/** One of {@link WORKLOAD_KINDS}. */
export type WorkloadKind = typeof WORKLOAD_KINDS[number];

/** Paths to look up, each with its expected answer. */
export interface Workload {
  /** What the paths exercise. */
  readonly kind: WorkloadKind;
  /** The paths, as flat strings. */
  readonly paths: readonly string[];
  /** The answer for each path, index for index. */
  readonly expected: readonly Expected[];
}

/** A named list of routes and the workloads on it. */
export interface RouteSet {
  /** Short name used in tables and bench groups. */
  readonly name: string;
  /** One line saying what the set is. */
  readonly title: string;
  /** The route patterns, in registration order. */
  readonly patterns: readonly string[];
  /** The workloads; kinds the set has no routes for are absent. */
  readonly workloads: readonly Workload[];
}

/** The number of lookups in each workload. */
export const WORKLOAD_LENGTH = 512;

/** Sizes of the generated scaling sets. */
export const SCALING_SIZES = [10, 100, 1_000, 10_000] as const;

/**
 * A small seeded PRNG (mulberry32): the same seed gives the same sequence everywhere.
 *
 * @param seed Any 32-bit integer.
 * @returns A function returning floats in [0, 1).
 */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit FNV-1a hash, to seed each set from its name. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const LETTERS = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";

function pick(random: () => number, from: string): string {
  return from[Math.floor(random() * from.length)]!;
}

/** `length` characters from `alphabet`. */
function word(random: () => number, length: number, alphabet = LETTERS): string {
  let out = "";
  for (let i = 0; i < length; i++) out += pick(random, alphabet);
  return out;
}

/**
 * A value for a plain variable: lower-case letters and digits with at least one
 * digit. The route sets' literal segments hold no digits, so a value can never
 * spell a literal and silently change which route a path belongs to.
 */
function plainValue(random: () => number, length = 4 + Math.floor(random() * 7)): string {
  const at = Math.floor(random() * length);
  let out = "";
  for (let i = 0; i < length; i++) {
    out += i === at ? pick(random, DIGITS) : pick(random, LETTERS + DIGITS);
  }
  return out;
}

/** Values for the regex constraints used in bench/routes/; an unknown regex is a bug in a set. */
function regexValue(random: () => number, regex: string): string {
  switch (regex) {
    case "[0-9]+":
      return word(random, 1 + Math.floor(random() * 6), DIGITS);
    case "[0-9]{4}":
      return word(random, 4, DIGITS);
    case "[0-9]{2}":
      return word(random, 2, DIGITS);
    case "[a-zA-Z]+":
    case "[a-z1-9]+":
      return word(random, 3 + Math.floor(random() * 6), LETTERS + LETTERS.toUpperCase());
    case "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}": {
      const hex = "0123456789abcdef";
      return [8, 4, 4, 4, 12].map((n) => word(random, n, hex)).join("-");
    }
  }
  throw new RangeError(`No value generator for the regex "${regex}": add one in bench/_sets.ts`);
}

/**
 * Fills a pattern's variables with generated values.
 *
 * @param pattern One of our patterns.
 * @param random The PRNG to draw values from.
 * @returns The path and the context it should produce.
 * @throws {RangeError} If a variable has a regex with no value generator.
 */
export function fillPattern(
  pattern: string,
  random: () => number,
): { path: string; params: Record<string, string> } {
  const params: Record<string, string> = {};
  let path = "";
  for (const token of parsePattern(pattern)) {
    if (token.kind === "literal") {
      path += token.text;
      continue;
    }
    const value = token.kind === "catchall"
      ? `${plainValue(random)}/${plainValue(random)}.css`
      : token.regex === undefined
      ? plainValue(random)
      : regexValue(random, token.regex);
    params[token.name] = value;
    path += value;
  }
  return { path, params };
}

/** How many variables a pattern has (a catch-all counts). */
function variableCount(pattern: string): number {
  return parsePattern(pattern).filter((t) => t.kind !== "literal").length;
}

/** The workload kind a hit on `pattern` belongs to. */
function hitKind(pattern: string): WorkloadKind {
  const n = variableCount(pattern);
  return n === 0 ? "static" : n === 1 ? "one-var" : "many-var";
}

/**
 * Turns a hit path into a miss: an unknown first segment, an unknown last
 * segment, or one segment too many, chosen at random.
 */
function mutate(path: string, random: () => number): string {
  const segments = path.split("/");
  const bogus = `zz${plainValue(random, 5)}`;
  const r = random();
  if (r < 1 / 3) segments[1] = bogus;
  else if (r < 2 / 3) segments[segments.length - 1] = bogus;
  else segments.push(bogus);
  return segments.join("/");
}

/**
 * A fresh flat copy of a string. Concatenation makes V8 cons-strings, which the
 * first lookup would flatten and later ones not: paths from a real server arrive
 * flat, so every timed path is flat from the start.
 */
const encoder = new TextEncoder();
const decoder = new TextDecoder();
function flat(text: string): string {
  return decoder.decode(encoder.encode(text));
}

/** A path that must give a known answer; `weight` makes tricky cases more frequent. */
export interface Case {
  /** The path. */
  readonly path: string;
  /** The pattern that must win, or undefined for a miss. */
  readonly pattern: string | undefined;
  /** The context it must give. */
  readonly params?: Record<string, string>;
}

/**
 * Builds the workloads of a route set: for each kind, {@link WORKLOAD_LENGTH}
 * lookups drawn with a seeded PRNG. Hits take fresh variable values each time,
 * so a router cannot win by caching paths; misses mutate hits; the mix is 90 %
 * hits spread evenly over the routes and 10 % misses.
 *
 * @param name The set's name (it seeds the PRNG).
 * @param patterns The routes in registration order.
 * @param options `cases`: hand-written paths with known answers, drawn for half of each
 *   workload of their kind.
 * @returns The workloads, in {@link WORKLOAD_KINDS} order, omitting kinds with no routes.
 * @throws {Error} If a hand-written case disagrees with the reference semantics.
 */
export function buildWorkloads(
  name: string,
  patterns: readonly string[],
  options: { cases?: readonly Case[] } = {},
): Workload[] {
  const random = prng(hash(name));
  // Routers differ on trailing slashes by default (ours and rou3 ignore one, the others
  // don't), so a path is kept only if its answer is the same either way.
  const strict = referenceMatcher(patterns);
  const relaxed = referenceMatcher(patterns, { trailingSlash: "relaxed" });
  const agrees = (path: string, expected: Expected): boolean =>
    sameAnswer(strict(path), expected) && sameAnswer(relaxed(path), expected);
  const byKind = new Map<WorkloadKind, number[]>();
  patterns.forEach((pattern, index) => {
    const kind = hitKind(pattern);
    byKind.set(kind, [...byKind.get(kind) ?? [], index]);
  });
  const cases = (options.cases ?? []).map((c) => {
    const index = c.pattern === undefined ? -1 : patterns.indexOf(c.pattern);
    if (c.pattern !== undefined && index < 0) {
      throw new Error(`Case "${c.path}" names "${c.pattern}", which is not in the set "${name}"`);
    }
    const expected: Expected = index < 0 ? undefined : { index, params: c.params ?? {} };
    if (!agrees(c.path, expected)) {
      throw new Error(
        `Case "${c.path}" expects ${show(expected, patterns)} but the reference gives ${
          show(strict(c.path), patterns)
        } (strict) and ${show(relaxed(c.path), patterns)} (relaxed trailing slash)`,
      );
    }
    return { path: c.path, expected, kind: index < 0 ? "miss" : hitKind(c.pattern!) };
  });

  const hit = (indices: readonly number[]): { path: string; expected: Expected } => {
    for (let attempt = 0; attempt < 50; attempt++) {
      const index = indices[Math.floor(random() * indices.length)]!;
      const { path, params } = fillPattern(patterns[index]!, random);
      const expected = { index, params };
      if (agrees(path, expected)) return { path, expected };
    }
    throw new Error(
      `Could not generate hits for the set "${name}": values keep hitting other routes`,
    );
  };
  const all = patterns.map((_, i) => i);
  const miss = (): { path: string; expected: Expected } => {
    for (let attempt = 0; attempt < 50; attempt++) {
      const path = mutate(hit(all).path, random);
      if (agrees(path, undefined)) return { path, expected: undefined };
    }
    throw new Error(`Could not generate misses for the set "${name}"`);
  };

  const workloads: Workload[] = [];
  for (const kind of WORKLOAD_KINDS) {
    const indices = kind === "mix" ? all : kind === "miss" ? [] : byKind.get(kind) ?? [];
    if (kind !== "mix" && kind !== "miss" && indices.length === 0) continue;
    const tricky = cases.filter((c) => kind === "mix" || c.kind === kind);
    const paths: string[] = [];
    const expected: Expected[] = [];
    for (let i = 0; i < WORKLOAD_LENGTH; i++) {
      let entry: { path: string; expected: Expected };
      if (tricky.length > 0 && random() < 0.5) {
        entry = tricky[Math.floor(random() * tricky.length)]!;
      } else if (kind === "miss" || (kind === "mix" && random() < 0.1)) {
        entry = miss();
      } else {
        entry = hit(indices);
      }
      paths.push(flat(entry.path));
      expected.push(entry.expected);
    }
    workloads.push({ kind, paths, expected });
  }
  return workloads;
}

/**
 * Whether two answers agree: same route and the same context, key for key.
 *
 * @param a One answer.
 * @param b The other.
 * @returns True when both miss, or both hit the same route with equal contexts.
 */
export function sameAnswer(a: Expected, b: Expected): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.index !== b.index) return false;
  const ka = Object.keys(a.params);
  if (ka.length !== Object.keys(b.params).length) return false;
  return ka.every((k) => Object.hasOwn(b.params, k) && a.params[k] === b.params[k]);
}

/**
 * Writes an answer for a message.
 *
 * @param answer The answer.
 * @param patterns The set's routes, to name the route.
 * @returns `"/users/{id}" {"id":"7"}` or `no route`.
 */
export function show(answer: Expected, patterns: readonly string[]): string {
  return answer === undefined
    ? "no route"
    : `"${patterns[answer.index] ?? `#${answer.index}`}" ${JSON.stringify(answer.params)}`;
}

/**
 * Reads a route file from bench/routes/: one pattern a line, `#` comments and
 * blank lines ignored.
 *
 * @param file The file name.
 * @returns The patterns in file order.
 * @throws {Deno.errors.NotFound} If the file is missing.
 */
export function readRoutes(file: string): string[] {
  const text = Deno.readTextFileSync(new URL(`./routes/${file}`, import.meta.url));
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
}

/** Tricky paths of the priority set, each with the answer the matching rules give it. */
export const PRIORITY_CASES: readonly Case[] = [
  { path: "/users/new", pattern: "/users/new" },
  { path: "/users/newer", pattern: "/users/{id}", params: { id: "newer" } },
  { path: "/users/ne", pattern: "/users/{id}", params: { id: "ne" } },
  { path: "/users/me", pattern: "/users/{id}", params: { id: "me" } },
  { path: "/users/me/settings", pattern: "/users/me/settings" },
  { path: "/users/me/posts", pattern: "/users/{id}/posts", params: { id: "me" } },
  { path: "/users/new/edit", pattern: "/users/{id}/edit", params: { id: "new" } },
  { path: "/users/new/posts/new", pattern: "/users/{id}/posts/new", params: { id: "new" } },
  {
    path: "/users/new/posts/news",
    pattern: "/users/{id}/posts/{post}",
    params: { id: "new", post: "news" },
  },
  { path: "/posts/latest", pattern: "/posts/latest" },
  { path: "/posts/latest/comments", pattern: "/posts/{slug}/comments", params: { slug: "latest" } },
  { path: "/posts/archive", pattern: "/posts/{slug}", params: { slug: "archive" } },
  { path: "/posts/archive/2024", pattern: "/posts/archive/{year}", params: { year: "2024" } },
  {
    path: "/posts/archive/comments",
    pattern: "/posts/archive/{year}",
    params: { year: "comments" },
  },
  {
    path: "/posts/hello/intro",
    pattern: "/posts/{slug}/{section}",
    params: { slug: "hello", section: "intro" },
  },
  { path: "/api/v1/status", pattern: "/api/v1/status" },
  { path: "/api/v2/status", pattern: "/api/{version}/status", params: { version: "v2" } },
  { path: "/api/v1/users", pattern: "/api/v1/{resource}", params: { resource: "users" } },
  {
    path: "/api/v2/users",
    pattern: "/api/{version}/{resource}",
    params: { version: "v2", resource: "users" },
  },
  {
    path: "/api/v1/users/42",
    pattern: "/api/v1/{resource}/{id}",
    params: { resource: "users", id: "42" },
  },
  { path: "/api/v2/users/42", pattern: undefined },
  { path: "/static/favicon.ico", pattern: "/static/favicon.ico" },
  { path: "/static/favicon.icon", pattern: "/static/{path:*}", params: { path: "favicon.icon" } },
  { path: "/static/css/site.css", pattern: "/static/{path:*}", params: { path: "css/site.css" } },
  { path: "/about", pattern: "/about" },
  { path: "/abouts", pattern: "/{page}", params: { page: "abouts" } },
  { path: "/users/7/posts/8/comments", pattern: undefined },
];

/**
 * The scaling family: route `i` of every size is the same, so a set of size n is
 * the first n routes of one endless list. Each resource has four routes (one
 * static, two with one variable, one with two), resources are grouped sixteen to a
 * namespace, and every name has a fixed length: a lookup at 10 routes walks a path
 * of the same shape as one at 10 000. No static route sits beside a variable
 * here (the priority set covers that), so Hono's RegExpRouter can take part.
 *
 * @param size How many routes.
 * @returns The patterns.
 */
export function scalingRoutes(size: number): string[] {
  const names = scalingNames(Math.ceil(size / 4));
  const patterns: string[] = [];
  for (let r = 0; patterns.length < size; r++) {
    const base = `/${names.namespaces[Math.floor(r / 16)]}/${names.resources[r]}`;
    for (const tail of ["", "/{id}", "/{id}/items", "/{id}/items/{item}"]) {
      if (patterns.length < size) patterns.push(base + tail);
    }
  }
  return patterns;
}

/** Unique fixed-length names for resources (8 letters) and namespaces (6 letters). */
function scalingNames(resources: number): { namespaces: string[]; resources: string[] } {
  const random = prng(0x5ca1ab1e);
  const unique = (count: number, length: number, taken: Set<string>): string[] => {
    const out: string[] = [];
    while (out.length < count) {
      const w = word(random, length);
      if (!taken.has(w)) {
        taken.add(w);
        out.push(w);
      }
    }
    return out;
  };
  // Always draw the full 10 000-route name list so that sizes share their prefixes.
  const taken = new Set(["items"]);
  const all = unique(2_500, 8, taken);
  const namespaces = unique(Math.ceil(2_500 / 16), 6, taken);
  return { namespaces, resources: all.slice(0, Math.max(resources, 1)) };
}

/**
 * Builds every route set with its workloads.
 *
 * @param options `only`: build just the sets with these names.
 * @returns The sets: github, hono, priority, constraints, then scaling-10 … scaling-10000.
 * @throws {Deno.errors.NotFound} If a route file is missing.
 */
export function routeSets(options: { only?: readonly string[] } = {}): RouteSet[] {
  const wanted = (name: string) => options.only === undefined || options.only.includes(name);
  const sets: RouteSet[] = [];
  const add = (name: string, title: string, patterns: string[], cases?: readonly Case[]) => {
    if (wanted(name)) {
      sets.push({ name, title, patterns, workloads: buildWorkloads(name, patterns, { cases }) });
    }
  };
  add("github", "GitHub REST API, 143 routes", readRoutes("github-api-routes.txt"));
  add("hono", "Hono's router benchmark set, 12 routes", readRoutes("hono-routes.txt"));
  add(
    "priority",
    "static and variable siblings under shared parents",
    readRoutes("priority-routes.txt"),
    PRIORITY_CASES,
  );
  add(
    "constraints",
    "regex constraints, several variables in a segment",
    [...readRoutes("hard-routes.txt"), ...readRoutes("constraint-routes.txt")],
  );
  for (const size of SCALING_SIZES) {
    add(`scaling-${size}`, `${size} generated routes, one path shape`, scalingRoutes(size));
  }
  return sets;
}
