/**
 * The router benchmark's own timer: verifies every router on every workload,
 * then times lookups in interleaved batches and reports medians. `Deno.bench`
 * prints its numbers but does not hand them back, so the summary table in
 * bench/RESULTS.md comes from here; `router_bench.ts` registers the same
 * workloads with `Deno.bench` for the familiar per-group view.
 *
 * @module
 */
import type { Adapter, Built } from "./_adapter.ts";
import { type RouteSet, sameAnswer, show, type Workload, type WorkloadKind } from "./_sets.ts";

/** A router that passed verification on a set, ready to time. */
export interface Contender {
  /** The adapter it came from. */
  readonly adapter: Adapter;
  /** The built router. */
  readonly built: Built;
  /** Its own timing loop (see {@link compileLoop}). */
  readonly loop: Loop;
}

/**
 * Runs `reps` passes of lookups over `stored` (see {@link storedPaths}); returns a count so the
 * work can't be skipped.
 */
export type Loop = (a: unknown, b: unknown, stored: readonly string[], reps: number) => number;

const STORED = new WeakMap<readonly string[], readonly string[]>();

/**
 * The form the timing loops take their paths in: each path behind one extra leading
 * character, which the loop slices off before every lookup.
 *
 * So every lookup sees a fresh string, as a server does (its path is a new slice of each
 * request's URL). Looking up the same string objects again and again would let V8 reuse the
 * hash it cached on them, and flatter every router that keeps a `Map` of static paths
 * (13 ns instead of ~60 ns per hash on this machine). The slice, a few ns, is paid by all.
 *
 * @param paths Workload paths.
 * @returns The stored form, cached per array.
 */
export function storedPaths(paths: readonly string[]): readonly string[] {
  let stored = STORED.get(paths);
  if (stored === undefined) {
    stored = paths.map((p) => `~${p}`);
    STORED.set(paths, stored);
  }
  return stored;
}

/** A router left out of a set, and why. */
export interface Skipped {
  /** The adapter's name. */
  readonly name: string;
  /** Why it was left out. */
  readonly reason: string;
}

/**
 * Compiles a timing loop around one router's lookup expression. Each router gets
 * a function of its own (`new Function`), not a shared closure: closures made from
 * one function literal share V8's type feedback, so one loop calling several
 * routers would go megamorphic and slow every router down by a varying amount.
 * Each lookup gets a fresh path string (see {@link storedPaths}).
 *
 * @param call The lookup as an expression over `a`, `b` and the path `p`.
 * @returns The loop.
 */
export function compileLoop(call: string): Loop {
  return new Function(
    "a",
    "b",
    "stored",
    "reps",
    `"use strict";
    let n = 0;
    for (let r = 0; r < reps; r++) {
      for (let i = 0; i < stored.length; i++) {
        const p = stored[i].slice(1);
        if (${call} !== undefined) n++;
      }
    }
    return n;`,
  ) as Loop;
}

/**
 * Builds every router for a set and checks its answer on every workload path.
 * A router that cannot express a route, refuses one, throws, or gives one wrong
 * answer is left out of the whole set, with the reason.
 *
 * @param set The route set.
 * @param adapters The routers.
 * @returns The routers that passed and the ones left out.
 */
export function prepareSet(
  set: RouteSet,
  adapters: readonly Adapter[],
): { contenders: Contender[]; skipped: Skipped[] } {
  const contenders: Contender[] = [];
  const skipped: Skipped[] = [];
  for (const adapter of adapters) {
    const reason = (() => {
      let built: Built;
      try {
        const plan = adapter.build(set.patterns);
        if ("reason" in plan) return plan.reason;
        built = plan.construct();
      } catch (error) {
        return `refuses the route set: ${describe(error)}`;
      }
      const wrong = firstWrongAnswer(set, built);
      if (wrong !== undefined) return wrong;
      contenders.push({ adapter, built, loop: compileLoop(built.call) });
      return undefined;
    })();
    if (reason !== undefined) skipped.push({ name: adapter.name, reason });
  }
  return { contenders, skipped };
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The first path a router answers wrongly, as a sentence, or undefined. */
function firstWrongAnswer(set: RouteSet, built: Built): string | undefined {
  for (const workload of set.workloads) {
    for (let i = 0; i < workload.paths.length; i++) {
      const path = workload.paths[i]!;
      const want = workload.expected[i];
      let got;
      try {
        got = built.resolve(path);
      } catch (error) {
        return `throws on "${path}": ${describe(error)}`;
      }
      if (!sameAnswer(got, want)) {
        return `answers "${path}" with ${show(got, set.patterns)}, expected ${
          show(want, set.patterns)
        }`;
      }
    }
  }
  return undefined;
}

/** How long and how often to time. */
export interface TimingOptions {
  /** Length of one warm-up window, in milliseconds. */
  readonly warmupMs: number;
  /** Warm-up stops once two windows in a row are no faster, or after this many milliseconds. */
  readonly maxWarmupMs: number;
  /** Target length of one timed batch, in milliseconds. */
  readonly batchMs: number;
  /** Timed batches per router and workload; the median is reported. */
  readonly batches: number;
}

/** Default timing: warm up to steady state (at most 3 s), then 31 batches of ~2 ms. */
export const DEFAULT_TIMING: TimingOptions = {
  warmupMs: 50,
  maxWarmupMs: 3_000,
  batchMs: 2,
  batches: 31,
};

/** Short timing for smoke runs. */
export const QUICK_TIMING: TimingOptions = {
  warmupMs: 10,
  maxWarmupMs: 100,
  batchMs: 1,
  batches: 7,
};

/**
 * Runs a contender until its speed stops improving, so every router is timed in
 * its steady state: V8 tiers code up as it gets hot, and a router whose code is
 * spread over many functions (or generated at run time) gets there later.
 *
 * @returns Milliseconds per pass over `paths` in the fastest window.
 */
function warmUp(c: Contender, paths: readonly string[], timing: TimingOptions): number {
  let best = Infinity;
  let calm = 0;
  const end = performance.now() + timing.maxWarmupMs;
  while (calm < 2 && performance.now() < end) {
    const start = performance.now();
    let passes = 0;
    while (performance.now() - start < timing.warmupMs) {
      c.loop(c.built.a, c.built.b, paths, 1);
      passes++;
    }
    const perPass = (performance.now() - start) / passes;
    if (perPass < best * 0.97) {
      best = perPass;
      calm = 0;
    } else {
      calm++;
      best = Math.min(best, perPass);
    }
  }
  return best;
}

/**
 * Times one workload on every contender. Each is first warmed up to its steady
 * state; then batches rotate through the routers (A B C, B C A, …) so that drift
 * from other processes on the machine spreads over all of them instead of
 * landing on one.
 *
 * @param contenders The routers, already verified.
 * @param workload The paths.
 * @param timing Warm-up, batch length and count.
 * @returns Median nanoseconds per lookup, per router name.
 */
export function timeWorkload(
  contenders: readonly Contender[],
  workload: Workload,
  timing: TimingOptions,
): Map<string, number> {
  const paths = storedPaths(workload.paths);
  const reps = contenders.map((c) =>
    Math.max(1, Math.round(timing.batchMs / warmUp(c, paths, timing)))
  );
  const samples = contenders.map(() => [] as number[]);
  for (let b = 0; b < timing.batches; b++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (b + k) % contenders.length;
      const c = contenders[i]!;
      const n = reps[i]!;
      const start = performance.now();
      c.loop(c.built.a, c.built.b, paths, n);
      const elapsed = performance.now() - start;
      samples[i]!.push((elapsed * 1e6) / (n * paths.length));
    }
  }
  return new Map(contenders.map((c, i) => [c.adapter.name, median(samples[i]!)]));
}

/**
 * The median of some numbers.
 *
 * @param values At least one number.
 * @returns The middle value (the mean of the two middle ones for an even count).
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Build time and memory of one router. */
export interface BuildCost {
  /** Milliseconds from an empty router to its first answer, the first time in a fresh process. */
  readonly coldMs: number;
  /** The same once the process has built it before (median of five). */
  readonly warmMs: number;
  /** Heap growth per route in bytes, or undefined without `--expose-gc`. */
  readonly bytesPerRoute: number | undefined;
}

/**
 * Measures each router's build time and heap per route on `size` scaling
 * routes, one fresh process per router (`_build_probe.ts`). Translation to the
 * peer's syntax happens before the clock starts; the clock stops after one
 * lookup, so routers that build lazily pay for it.
 *
 * @param size How many routes.
 * @param adapters The routers.
 * @returns Costs per router name; routers that cannot express the set are absent.
 */
export async function measureBuild(
  size: number,
  adapters: readonly Adapter[],
): Promise<Map<string, BuildCost>> {
  const out = new Map<string, BuildCost>();
  const probe = new URL("./_build_probe.ts", import.meta.url).pathname;
  for (const adapter of adapters) {
    const { stdout, success } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--v8-flags=--expose-gc", probe, adapter.name, String(size)],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const line = new TextDecoder().decode(stdout).trim().split("\n").at(-1) ?? "";
    if (!success || !line.startsWith("{")) continue;
    const result = JSON.parse(line) as BuildCost | { reason: string };
    if (!("reason" in result)) out.set(adapter.name, result);
  }
  return out;
}

/** Every figure of one run, for the markdown writer. */
export interface RouterResults {
  /** Per set: the routers left out and the medians per workload kind and router. */
  readonly sets: readonly {
    readonly set: RouteSet;
    readonly names: readonly string[];
    readonly skipped: readonly Skipped[];
    readonly ns: ReadonlyMap<WorkloadKind, ReadonlyMap<string, number>>;
  }[];
  /** Build cost for the largest scaling set, per router. */
  readonly build: ReadonlyMap<string, BuildCost>;
  /** How many routes the build was measured on. */
  readonly buildRoutes: number;
  /** Our router's name. */
  readonly ours: string;
  /** The adapters, for their notes. */
  readonly adapters: readonly Adapter[];
}

/**
 * Runs the whole router comparison: verify, time every workload of every set,
 * measure build cost on the largest scaling set.
 *
 * @param sets The route sets.
 * @param adapters The routers; the one marked `ours` is the baseline.
 * @param timing Timing options.
 * @param log Progress lines go here.
 * @returns Every figure.
 * @throws {Error} If no adapter is marked as ours.
 */
export async function runRouterComparison(
  sets: readonly RouteSet[],
  adapters: readonly Adapter[],
  timing: TimingOptions,
  log: (line: string) => void = console.log,
): Promise<RouterResults> {
  const ours = adapters.find((a) => a.ours)?.name;
  if (ours === undefined) {
    throw new Error("No router is marked as ours: add the stellarator adapter");
  }
  const results: RouterResults["sets"][number][] = [];
  for (const set of sets) {
    const { contenders, skipped } = prepareSet(set, adapters);
    for (const s of skipped) log(`[${set.name}] ${s.name} left out: ${s.reason}`);
    const ns = new Map<WorkloadKind, Map<string, number>>();
    for (const workload of set.workloads) {
      ns.set(workload.kind, timeWorkload(contenders, workload, timing));
      const row = [...ns.get(workload.kind)!].map(([n, v]) => `${n} ${v.toFixed(1)}`).join(", ");
      log(`[${set.name}] ${workload.kind}: ${row}`);
    }
    results.push({ set, names: contenders.map((c) => c.adapter.name), skipped, ns });
  }
  const size = Math.max(
    0,
    ...sets.filter((s) => s.name.startsWith("scaling-")).map((s) => s.patterns.length),
  );
  const build = size === 0 ? new Map<string, BuildCost>() : await measureBuild(size, adapters);
  for (const [name, cost] of build) {
    log(
      `[build ${size}] ${name}: cold ${cost.coldMs.toFixed(1)} ms, warm ${
        cost.warmMs.toFixed(1)
      } ms, ${cost.bytesPerRoute?.toFixed(0) ?? "?"} B/route`,
    );
  }
  return { sets: results, build, buildRoutes: size, ours, adapters };
}
