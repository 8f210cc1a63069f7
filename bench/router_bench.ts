/**
 * Router lookups, ours against find-my-way, rou3 (interpreted and compiled),
 * memoirist and Hono's RegExpRouter and TrieRouter, on every route set and
 * workload of `_sets.ts`. Run by `deno task bench`.
 *
 * Each bench group is one set and workload with our router as the baseline; one
 * iteration is one pass over the workload's 512 paths. Routers that cannot
 * express a set or answer one of its paths differently are left out of that set,
 * with the reason printed.
 *
 * Before the groups run, the same comparison runs through the self-timed runner
 * (medians of interleaved batches) and writes the tables to bench/RESULTS.md, as
 * `Deno.bench` does not hand its figures back. Environment:
 * - `BENCH_SETS=github,priority` limits both to some sets;
 * - `BENCH_SUMMARY=0` skips the summary, `BENCH_SUMMARY=quick` shortens it.
 *
 * @module
 */
import { OURS } from "./_ours.ts";
import { PEERS } from "./_peers.ts";
import { routerSummary } from "./_summary.ts";
import { prepareSet, storedPaths } from "./_runner.ts";
import { routeSets } from "./_sets.ts";

const only = Deno.env.get("BENCH_SETS")?.split(",");
const summary = Deno.env.get("BENCH_SUMMARY");
if (summary !== "0") {
  await routerSummary({
    quick: summary === "quick",
    only,
    command: "deno task bench",
  });
}

for (const set of routeSets({ only })) {
  const { contenders, skipped } = prepareSet(set, [OURS, ...PEERS]);
  for (const s of skipped) console.log(`[${set.name}] ${s.name} left out: ${s.reason}`);
  for (const workload of set.workloads) {
    const stored = storedPaths(workload.paths);
    for (const { adapter, built, loop } of contenders) {
      Deno.bench({
        name: adapter.name,
        group: `${set.name} · ${workload.kind} · ${workload.paths.length} lookups per iteration`,
        baseline: adapter.ours,
        fn() {
          loop(built.a, built.b, stored, 1);
        },
      });
    }
  }
}
