/**
 * Markdown for the router comparison: one table per route set, the build table
 * and the issue's targets, each checked against the measured figures.
 *
 * @module
 */
import type { RouterResults } from "./_runner.ts";
import { formatNs, formatRatio } from "./_results.ts";
import { WORKLOAD_KINDS, type WorkloadKind } from "./_sets.ts";

/** One target of the issue and how the run measured up. */
export interface TargetCheck {
  /** The target as the issue states it. */
  readonly target: string;
  /** What was measured. */
  readonly measured: string;
  /** Met, missed, or not measurable in this run. */
  readonly verdict: "met" | "missed" | "n/a";
}

type SetResult = RouterResults["sets"][number];

function findSet(results: RouterResults, name: string): SetResult | undefined {
  return results.sets.find((s) => s.set.name === name);
}

/** Ours and the fastest peer on one workload, or undefined if either is missing. */
function versusBestPeer(
  results: RouterResults,
  set: SetResult | undefined,
  kind: WorkloadKind,
): { ours: number; peer: string; best: number } | undefined {
  const row = set?.ns.get(kind);
  const ours = row?.get(results.ours);
  if (row === undefined || ours === undefined) return undefined;
  let peer = "";
  let best = Infinity;
  for (const [name, ns] of row) {
    if (name !== results.ours && ns < best) [peer, best] = [name, ns];
  }
  return peer === "" ? undefined : { ours, peer, best };
}

/** Mean of our hit workloads (static, one-var, many-var) on a set. */
function oursHits(results: RouterResults, set: SetResult): number | undefined {
  const values = (["static", "one-var", "many-var"] as const)
    .map((k) => set.ns.get(k)?.get(results.ours))
    .filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : values.reduce((a, b) => a + b) / values.length;
}

/**
 * Checks the router targets of issue 6 against one run.
 *
 * @param results The run.
 * @returns One row per target.
 */
export function routerTargets(results: RouterResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const peerTarget = (name: string, kind: WorkloadKind, limit: number) => {
    const v = versusBestPeer(results, findSet(results, name), kind);
    const target = `${name} set, ${kind}: at most ${formatRatio(limit)} the fastest peer`;
    if (v === undefined) {
      checks.push({
        target,
        measured: "not measured (ours or every peer left out)",
        verdict: "n/a",
      });
      return;
    }
    const ratio = v.ours / v.best;
    checks.push({
      target,
      measured: `${formatNs(v.ours)} vs ${v.peer} ${formatNs(v.best)}: ${formatRatio(ratio)}`,
      verdict: ratio <= limit ? "met" : "missed",
    });
  };
  peerTarget("github", "mix", 1.0);
  peerTarget("priority", "mix", 1.0);
  peerTarget("hono", "mix", 1.2);

  const misses: string[] = [];
  let missesOk = true;
  for (const set of results.sets) {
    const miss = set.ns.get("miss")?.get(results.ours);
    const hits = oursHits(results, set);
    if (miss === undefined || hits === undefined) continue;
    misses.push(`${set.set.name} ${formatRatio(miss / hits)}`);
    if (miss > hits) missesOk = false;
  }
  checks.push({
    target: "misses no slower than hits (miss ÷ mean of our hit workloads, per set)",
    measured: misses.length > 0 ? misses.join(", ") : "not measured",
    verdict: misses.length === 0 ? "n/a" : missesOk ? "met" : "missed",
  });

  const small = findSet(results, "scaling-10");
  const large = findSet(results, "scaling-10000");
  const scaling: string[] = [];
  let worst = 0;
  for (const kind of WORKLOAD_KINDS) {
    const a = small?.ns.get(kind)?.get(results.ours);
    const b = large?.ns.get(kind)?.get(results.ours);
    if (a === undefined || b === undefined) continue;
    scaling.push(`${kind} ${formatRatio(b / a)}`);
    worst = Math.max(worst, b / a);
  }
  checks.push({
    target: "lookup at 10 000 routes at most 2× the lookup at 10 routes (same path shape)",
    measured: scaling.length > 0 ? scaling.join(", ") : "not measured",
    verdict: scaling.length === 0 ? "n/a" : worst <= 2 ? "met" : "missed",
  });

  const build = results.build.get(results.ours);
  checks.push({
    target: `build ${
      results.buildRoutes.toLocaleString("en")
    } routes in under 100 ms; heap per route reported`,
    measured: build === undefined
      ? "not measured"
      : `first build ${build.coldMs.toFixed(1)} ms (later builds ${build.warmMs.toFixed(1)} ms), ${
        build.bytesPerRoute?.toFixed(0) ?? "?"
      } B/route`,
    verdict: build === undefined || results.buildRoutes < 10_000
      ? "n/a"
      : build.coldMs < 100
      ? "met"
      : "missed",
  });
  return checks;
}

/**
 * Renders a target list as a markdown table.
 *
 * @param checks The targets.
 * @returns The table.
 */
export function targetTable(checks: readonly TargetCheck[]): string {
  const lines = ["| target | measured | verdict |", "| --- | --- | --- |"];
  for (const c of checks) lines.push(`| ${c.target} | ${c.measured} | **${c.verdict}** |`);
  return lines.join("\n");
}

/**
 * Renders one run of the router comparison.
 *
 * @param results The run.
 * @param header Environment lines and the command, placed under the heading.
 * @returns The markdown section.
 */
export function renderRouterResults(results: RouterResults, header: string): string {
  const out: string[] = ["## Router lookups", "", header, ""];
  out.push(
    "Median time per lookup over interleaved timed batches; each cell also gives the ratio to " +
      "the fastest router in its row (**bold**). The last column is ours divided by the fastest " +
      "peer: below 1 we win. A router is timed on a set only if it gave the expected route and " +
      "context for every path of every workload of that set.",
    "",
    "### Targets",
    "",
    targetTable(routerTargets(results)),
    "",
  );
  for (const { set, names, skipped, ns } of results.sets) {
    out.push(`### ${set.name}: ${set.title}`, "");
    const ordered = [results.ours, ...names.filter((n) => n !== results.ours)]
      .filter((n) => names.includes(n));
    out.push(`| workload | ${ordered.join(" | ")} | ours ÷ fastest peer |`);
    out.push(`| --- | ${ordered.map(() => "--:").join(" | ")} | --: |`);
    for (const kind of WORKLOAD_KINDS) {
      const row = ns.get(kind);
      if (row === undefined) continue;
      const fastest = Math.min(...row.values());
      const cells = ordered.map((n) => {
        const v = row.get(n);
        if (v === undefined) return "—";
        const cell = `${formatNs(v)} · ${formatRatio(v / fastest)}`;
        return v === fastest ? `**${cell}**` : cell;
      });
      const ours = row.get(results.ours);
      const peers = [...row].filter(([n]) => n !== results.ours).map(([, v]) => v);
      const vs = ours === undefined || peers.length === 0
        ? "—"
        : formatRatio(ours / Math.min(...peers));
      out.push(`| ${kind} | ${cells.join(" | ")} | ${vs} |`);
    }
    out.push("");
    for (const s of skipped) out.push(`- ${s.name} left out: ${s.reason.replaceAll("|", "\\|")}`);
    if (skipped.length > 0) out.push("");
  }
  out.push(
    `### Build and memory (${results.buildRoutes.toLocaleString("en")} routes)`,
    "",
    "Each router is measured in a fresh process: time from an empty router to its first answer " +
      "(first build, as at server startup, and the median of five later builds), and heap growth " +
      "per route (`Deno.memoryUsage().heapUsed` around one build, two `gc()` calls before each reading).",
    "",
    "| router | first build | later builds | heap per route |",
    "| --- | --: | --: | --: |",
  );
  for (const [name, cost] of results.build) {
    out.push(
      `| ${name} | ${cost.coldMs.toFixed(1)} ms | ${cost.warmMs.toFixed(1)} ms | ${
        cost.bytesPerRoute === undefined
          ? "n/a (needs --expose-gc)"
          : `${cost.bytesPerRoute.toFixed(0)} B`
      } |`,
    );
  }
  out.push("", "### What each router's timed call does", "");
  for (const a of results.adapters) out.push(`- ${a.name}: \`${a.note}\``);
  return out.join("\n");
}
