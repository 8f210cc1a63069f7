/**
 * One run of the router comparison, written to bench/RESULTS.md. Shared by
 * `router_bench.ts` (under `deno task bench`) and `router_summary.ts`.
 *
 * @module
 */
import { OUR_OPTIONS, OURS } from "./_ours.ts";
import { PEER_VERSIONS, PEERS } from "./_peers.ts";
import { renderRouterResults } from "./_report.ts";
import { environment, writeSection } from "./_results.ts";
import {
  DEFAULT_TIMING,
  QUICK_TIMING,
  type RouterResults,
  runRouterComparison,
} from "./_runner.ts";
import { routeSets } from "./_sets.ts";

/** What to run. */
export interface SummaryOptions {
  /** Short timing for a smoke run. @default {false} */
  readonly quick?: boolean;
  /** Only these sets (names as in the tables). @default {every set} */
  readonly only?: readonly string[];
  /** Write bench/RESULTS.md. @default {true} */
  readonly write?: boolean;
  /** The command that produced the run, for the header. */
  readonly command: string;
}

/**
 * Runs the router comparison and writes its section of bench/RESULTS.md.
 *
 * @param options What to run.
 * @returns The figures.
 */
export async function routerSummary(options: SummaryOptions): Promise<RouterResults> {
  const sets = routeSets({ only: options.only });
  const timing = options.quick ? QUICK_TIMING : DEFAULT_TIMING;
  const results = await runRouterComparison(sets, [OURS, ...PEERS], timing);
  const peers = Object.entries(PEER_VERSIONS).map(([n, v]) => `${n}@${v}`).join(", ");
  const header = [
    environment(),
    `- Peers: ${peers}`,
    ...(Object.keys(OUR_OPTIONS).length > 0
      ? [`- Our router's options: \`${Deno.env.get("BENCH_ROUTER_OPTIONS")}\` (not the defaults)`]
      : []),
    `- Command: \`${options.command}\`${
      options.quick ? " (quick smoke timing: not for comparison)" : ""
    }`,
    `- Timing: per router and workload, warm-up until two ${timing.warmupMs} ms windows in a row ` +
    `are no faster (at most ${timing.maxWarmupMs} ms), then ${timing.batches} batches of ` +
    `~${timing.batchMs} ms interleaved with the other routers; median per lookup; ` +
    `${sets[0]?.workloads[0]?.paths.length ?? 0} lookups per workload, each on a fresh path ` +
    `string sliced from a stored one (as a server slices it from the URL; the slice is in every ` +
    `figure)`,
  ].join("\n");
  if (options.write !== false) writeSection("router", renderRouterResults(results, header));
  return results;
}
