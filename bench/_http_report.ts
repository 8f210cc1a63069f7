/**
 * The HTTP section of bench/RESULTS.md: per route, each server's requests/s (median and range
 * over the rounds), server CPU per request and core use; then one verdict per target of issue 13,
 * judged on ratios paired within each round.
 *
 * @module
 */
import type { Pinning } from "./_proc.ts";
import { formatRatio, readSection } from "./_results.ts";
import { type HttpOptions, ROUTES, type RouteSpec, SERVERS } from "./_http_specs.ts";
import type { WrkResult } from "./_wrk.ts";

/** One measurement: one server, one route, one round. */
export interface Sample extends WrkResult {
  /** The round, from 0. */
  readonly round: number;
  /** Wall-clock seconds the measured wrk run took. */
  readonly seconds: number;
  /** CPU seconds the server process used meanwhile (all its threads), where measurable. */
  readonly serverCpu?: number;
  /** The user-space part of `serverCpu`; the rest is the kernel's (system calls, TCP). */
  readonly serverUserCpu?: number;
  /** Busy seconds of the server's core meanwhile (every process), when pinned. */
  readonly serverCoreBusy?: number;
  /** Busy seconds of wrk's core meanwhile (every process), when pinned. */
  readonly loadCoreBusy?: number;
}

/** Everything a run measured. */
export interface HttpRun {
  /** Its settings. */
  readonly options: HttpOptions;
  /** Where the server and wrk ran. */
  readonly pinning: Pinning;
  /** Environment lines (date, versions, CPU, load). */
  readonly header: string;
  /** The command that made it. */
  readonly command: string;
  /** Samples by server id, then route id, indexed by round (a hole where a round failed). */
  readonly samples: ReadonlyMap<string, ReadonlyMap<string, readonly (Sample | undefined)[]>>;
  /** Servers left out, with the reason. */
  readonly failed: ReadonlyMap<string, string>;
}

/** Median and range of some values. */
export interface Spread {
  /** The median. */
  readonly median: number;
  /** The smallest. */
  readonly min: number;
  /** The largest. */
  readonly max: number;
  /** How many values. */
  readonly n: number;
}

/**
 * Median and range.
 *
 * @param values The values; NaN and undefined are left out.
 * @returns The spread, or undefined for no values.
 */
export function spread(values: readonly (number | undefined)[]): Spread | undefined {
  const sorted = values.filter((v): v is number => v !== undefined && !Number.isNaN(v))
    .sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return undefined;
  const mid = n >> 1;
  const median = n % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[n - 1]!, n };
}

/** Seconds of a sample's server CPU as microseconds per request served. */
function perRequest(seconds: number | undefined, requests: number): number | undefined {
  return seconds === undefined || requests === 0 ? undefined : (seconds * 1e6) / requests;
}

/**
 * Server CPU time per request of a sample, in microseconds.
 *
 * @param s The sample.
 * @returns Microseconds, or undefined where not measured.
 */
export function cpuPerRequest(s: Sample): number | undefined {
  return perRequest(s.serverCpu, s.requests);
}

/**
 * Server CPU time per request spent in user space (the server's own code), in microseconds.
 *
 * @param s The sample.
 * @returns Microseconds, or undefined where not measured.
 */
export function userCpuPerRequest(s: Sample): number | undefined {
  return perRequest(s.serverUserCpu, s.requests);
}

function samplesOf(run: HttpRun, id: string, route: string): readonly (Sample | undefined)[] {
  return run.samples.get(id)?.get(route) ?? [];
}

/** The ratios of a server to another within each round, on one route. */
export interface Paired {
  /** ours ÷ theirs in requests/s, one per round both were measured in. */
  readonly rps: readonly number[];
  /** theirs ÷ ours in server CPU per request (above 1: we use less), one per round. */
  readonly cpu: readonly number[];
  /**
   * theirs ÷ ours in server CPU per request, each server at its fastest round: a Deno server's
   * speed varies by up to a fifth between starts and windows (see bench/README.md), so a median
   * of per-round ratios can rest on the baseline's slow draws. Undefined without CPU figures.
   */
  readonly fastest: number | undefined;
}

/**
 * Pairs two servers round by round, so a round the whole machine was slower in cancels out.
 *
 * @param run The run.
 * @param id Ours.
 * @param base Theirs.
 * @param route The route id.
 * @returns The per-round ratios.
 */
export function paired(run: HttpRun, id: string, base: string, route: string): Paired {
  const ours = samplesOf(run, id, route);
  const theirs = samplesOf(run, base, route);
  const rps: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < Math.max(ours.length, theirs.length); r++) {
    const a = ours[r];
    const b = theirs[r];
    if (a === undefined || b === undefined || b.rps === 0) continue;
    rps.push(a.rps / b.rps);
    const ca = cpuPerRequest(a);
    const cb = cpuPerRequest(b);
    if (ca !== undefined && cb !== undefined && ca > 0) cpu.push(cb / ca);
  }
  const least = (samples: readonly (Sample | undefined)[]) => {
    let min = Infinity;
    for (const sample of samples) {
      const c = sample === undefined ? undefined : cpuPerRequest(sample);
      if (c !== undefined && c > 0) min = Math.min(min, c);
    }
    return min;
  };
  const oursLeast = least(ours);
  const theirsLeast = least(theirs);
  const fastest = oursLeast === Infinity || theirsLeast === Infinity
    ? undefined
    : theirsLeast / oursLeast;
  return { rps, cpu, fastest };
}

/** One row of the verdict table. */
export interface Verdict {
  /** The target as the issue states it. */
  readonly target: string;
  /** What was measured. */
  readonly measured: string;
  /** The verdict: met, missed, n/a, or info for a figure without a target. */
  readonly verdict: string;
}

function range(s: Spread, format: (v: number) => string): string {
  return format(s.min) === format(s.max)
    ? format(s.median)
    : `${format(s.median)} (${format(s.min)}–${format(s.max)})`;
}

/**
 * Judges one ratio target on one route: met when the median of the per-round ratios reaches
 * `limit`, and so does the ratio of the two servers' fastest rounds by server CPU; the rounds
 * that reached it are counted, so a verdict carried by one lucky round shows.
 *
 * @param run The run.
 * @param target The target's text.
 * @param id Ours.
 * @param base Theirs.
 * @param route The route.
 * @param limit The ratio to reach, or undefined for a figure given for information.
 * @returns The row.
 */
export function ratioVerdict(
  run: HttpRun,
  target: string,
  id: string,
  base: string,
  route: RouteSpec,
  limit: number | undefined,
): Verdict {
  const text = `${target}, ${route.method} ${route.path}`;
  const pair = paired(run, id, base, route.id);
  const rps = spread(pair.rps);
  if (rps === undefined) return { target: text, measured: "not measured", verdict: "n/a" };
  const cpu = spread(pair.cpu);
  const fastest = pair.fastest;
  const measured = `${range(rps, formatRatio)}${
    cpu === undefined ? "" : `; by server CPU ${formatRatio(cpu.median)}`
  }${fastest === undefined ? "" : `; fastest rounds ${formatRatio(fastest)}`}`;
  if (limit === undefined) return { target: text, measured, verdict: "info" };
  const reached = pair.rps.filter((r) => r >= limit).length;
  const byCpu = cpu === undefined ? "" : `; by CPU ${cpu.median >= limit ? "met" : "missed"}`;
  const byFastest = fastest === undefined
    ? ""
    : `; fastest rounds ${fastest >= limit ? "met" : "missed"}`;
  const met = rps.median >= limit && (fastest === undefined || fastest >= limit);
  const verdict = `${met ? "met" : "missed"} (${reached}/${rps.n} rounds${byCpu}${byFastest})`;
  return { target: text, measured, verdict };
}

const percent = (v: number) => `${(v * 100).toFixed(0)} %`;

/** How far the machine let each server have its core to itself. */
export interface Quality {
  /** Measurements in all. */
  readonly total: number;
  /** Measurements where the server used under 85 % of its core or others took over 10 % of it. */
  readonly disturbed: number;
  /** The worst of those: the lowest share of its core a server got. */
  readonly worst: string | undefined;
}

/** A measurement is disturbed below this share of the core for the server... */
const MIN_SERVER_USE = 0.85;
/** ...or above this share for other processes on the server's core. */
const MAX_OTHERS = 0.10;

/**
 * Counts the measurements in which the server did not have its core to itself: then the
 * load generator or other processes, not the server, set the pace.
 *
 * @param run The run.
 * @returns The counts; all zero when not pinned (nothing to compare with).
 */
export function runQuality(run: HttpRun): Quality {
  let total = 0;
  let disturbed = 0;
  let worst: { use: number; text: string } | undefined;
  if (!run.pinning.pinned) return { total, disturbed, worst: undefined };
  for (const [id, byRoute] of run.samples) {
    for (const [routeId, list] of byRoute) {
      for (const s of list) {
        if (s?.serverCpu === undefined || s.serverCoreBusy === undefined) continue;
        total++;
        const use = s.serverCpu / s.seconds;
        const others = Math.max(0, s.serverCoreBusy - s.serverCpu) / s.seconds;
        if (use >= MIN_SERVER_USE && others <= MAX_OTHERS) continue;
        disturbed++;
        if (worst === undefined || use < worst.use) {
          const route = ROUTES.find((r) => r.id === routeId)!;
          worst = {
            use,
            text: `${
              SERVERS.find((x) => x.id === id)?.label ?? id
            }, ${route.method} ${route.path}, ` +
              `round ${s.round + 1}: server ${percent(use)} of its core, others ${percent(others)}`,
          };
        }
      }
    }
  }
  return { total, disturbed, worst: worst?.text };
}

/** The router targets' verdicts from the router section of bench/RESULTS.md. */
function routerVerdict(): Verdict {
  const target = "6. router lookups do not regress: the router targets of `deno task bench` hold";
  const section = readSection("router");
  if (section === undefined) {
    return { target, measured: "no router run in bench/RESULTS.md", verdict: "n/a" };
  }
  const date = /^- Date: (.+)$/m.exec(section)?.[1] ?? "undated";
  const met = section.match(/\*\*met\*\*/g)?.length ?? 0;
  const missed = section.match(/\*\*missed\*\*/g)?.length ?? 0;
  return {
    target,
    measured: `${met} of ${met + missed} met in the router run of ${date}`,
    verdict: met + missed === 0 ? "n/a" : missed === 0 ? "met" : "missed",
  };
}

/**
 * Every target of issue 13 that this run can judge, one row each (one per route for ratios).
 *
 * @param run The run.
 * @returns The rows.
 */
export function httpVerdicts(run: HttpRun): Verdict[] {
  const { options, pinning } = run;
  const routes = ROUTES.filter((r) => options.routes.includes(r.id));
  const rows: Verdict[] = [];
  const quality = runQuality(run);
  rows.push({
    target: "the server had its core to itself (≥ 85 % busy with it, others ≤ 10 %)",
    measured: quality.total === 0
      ? "not measurable (not pinned)"
      : `${quality.total - quality.disturbed} of ${quality.total} measurements${
        quality.worst === undefined ? "" : `; worst: ${quality.worst}`
      }`,
    verdict: quality.total === 0
      ? "n/a"
      : quality.disturbed === 0
      ? "clean"
      : "disturbed: req/s ratios inconclusive, trust the CPU ones",
  });
  rows.push({
    target: "1. server and load generator on separate cores",
    measured: pinning.pinned
      ? `server on core ${pinning.serverCore}, wrk on core ${pinning.loadCore} (taskset)`
      : `not pinned: ${pinning.reason}`,
    verdict: pinning.pinned ? "met" : "missed",
  });
  const measuredCpu = [...run.samples.values()].some((byRoute) =>
    [...byRoute.values()].some((list) => list.some((s) => s?.serverCpu !== undefined))
  );
  rows.push({
    target: "1. several alternating rounds; median, spread and server CPU per request",
    measured: `${options.rounds} round(s) of ${options.duration} s${
      measuredCpu ? ", server CPU from /proc" : ", no server CPU (no /proc)"
    }`,
    verdict: options.rounds >= 3 && measuredCpu ? "met" : "missed",
  });
  const together = ["deno", "floor", "hono"].filter((id) => run.samples.has(id));
  rows.push({
    target: "1. bare Deno.serve, the floor and Hono in the same run",
    measured: together.length === 3 ? "all three" : `only ${together.join(", ") || "none"}`,
    verdict: together.length === 3 ? "met" : "missed",
  });
  const echo = routes.find((r) => r.method === "POST");
  const echoErrors = [...run.samples.values()].reduce(
    (sum, byRoute) =>
      sum + (byRoute.get(echo?.id ?? "")?.reduce((a, s) => a + (s?.errors ?? 0), 0) ?? 0),
    0,
  );
  rows.push({
    target: "1. a POST route that echoes a small body",
    measured: echo === undefined
      ? "not loaded (--routes)"
      : `${echo.method} ${echo.path}, ${echo.body?.length ?? 0} B, ${echoErrors} errors`,
    verdict: echo === undefined ? "n/a" : echoErrors === 0 ? "met" : "missed",
  });
  const targets: [string, string, string, number | undefined][] = [
    ["2. App with requestTimeLimit ≥ 0.90× the App", "app-limit", "app", 0.90],
    ["3. ASGI app ≥ 0.95× the floor", "asgi", "floor", 0.95],
    ["4. App ≥ 0.90× the floor", "app", "floor", 0.90],
    ["5. moonshot: App ahead of Hono (≥ 1.00×)", "app", "hono", 1.0],
  ];
  for (const [target, id, base, limit] of targets) {
    for (const route of routes) rows.push(ratioVerdict(run, target, id, base, route, limit));
  }
  rows.push(routerVerdict());
  const info: [string, string, string][] = [
    ["the floor ÷ bare Deno.serve", "floor", "deno"],
    ["Hono ÷ the floor", "hono", "floor"],
    ["ASGI app ÷ bare Deno.serve", "asgi", "deno"],
    ["App ÷ ASGI app", "app", "asgi"],
    ["ASGI app on node ÷ bare node:http", "asgi-node", "node"],
  ];
  // The bound is measured only on request (`--servers=...,native-bound`): no rows otherwise.
  if (run.options.servers.includes("native-bound")) {
    info.push(
      ["bound: an App without ASGI ÷ the floor", "native-bound", "floor"],
      ["bound: an App without ASGI ÷ Hono", "native-bound", "hono"],
      ["App ÷ bound: an App without ASGI", "app", "native-bound"],
    );
  }
  for (const [target, id, base] of info) {
    for (const route of routes) rows.push(ratioVerdict(run, target, id, base, route, undefined));
  }
  return rows;
}

const micro = (v: number) => `${v.toFixed(1)} µs`;
const whole = (v: number) => v.toFixed(0);

/**
 * Renders the HTTP section of bench/RESULTS.md.
 *
 * @param run The run.
 * @returns Markdown.
 */
export function renderHttp(run: HttpRun): string {
  const { options, pinning } = run;
  const routes = ROUTES.filter((r) => options.routes.includes(r.id));
  const threads = options.threads ?? (pinning.pinned ? 1 : 2);
  const out = [
    "## HTTP throughput",
    "",
    run.header,
    `- Command: \`${run.command}\``,
    `- Cores: ${
      pinning.pinned
        ? `each server pinned to core ${pinning.serverCore}, wrk to core ${pinning.loadCore} (taskset)`
        : `not pinned (${pinning.reason}): server and wrk share the cores`
    }`,
    `- Load: \`wrk -t${threads} -c${options.connections} -d${options.duration}s --latency\` on 127.0.0.1 per server and route, after ${options.warmup} s of warm-up on the same route; ${options.rounds} round(s), each starting every server afresh, in alternating order.${
      options.quick ? " **Smoke run: too short for conclusions.**" : ""
    }`,
    "",
    "Per server and route: requests/s as median (min–max) over the rounds; **÷ baseline** is the " +
    "median of the per-round ratios to bare `Deno.serve` (node rows: to bare `node:http`); " +
    "**CPU/req** is the server process's user + system time during the measured run divided by " +
    "the requests it served, and **user/req** its user-space part, the server's own code: the " +
    "rest is the kernel's, mostly loopback TCP (one `recvfrom` and one `sendto` per request for " +
    "every Deno server here, `strace -c`), which no server's code can shrink; " +
    "**server core** is how busy the server kept its core, " +
    "**others** how much of that core other processes took meanwhile, **wrk core** how busy " +
    "the load generator's core was. A server that got less than its whole core was not what " +
    "set the pace, and its req/s says more about the machine than about the server; its CPU " +
    "per request still holds.",
    "",
  ];
  const notes: string[] = [];
  for (const route of routes) {
    out.push(
      `### ${route.method} ${route.path}`,
      "",
      "| server | req/s | ÷ baseline | p99 | CPU/req | user/req | server core | others | wrk core |",
      "| --- | --: | --: | --: | --: | --: | --: | --: | --: |",
    );
    for (const spec of SERVERS) {
      const list = samplesOf(run, spec.id, route.id).filter((s): s is Sample => s !== undefined);
      if (list.length === 0) continue;
      const rps = spread(list.map((s) => s.rps))!;
      const ratio = spread(paired(run, spec.id, spec.baseline, route.id).rps);
      const p99 = spread(list.map((s) => s.p99));
      const cpu = spread(list.map(cpuPerRequest));
      const user = spread(list.map(userCpuPerRequest));
      const use = spread(
        list.map((s) => s.serverCpu === undefined ? undefined : s.serverCpu / s.seconds),
      );
      const others = spread(
        list.map((s) =>
          s.serverCoreBusy === undefined || s.serverCpu === undefined
            ? undefined
            : Math.max(0, s.serverCoreBusy - s.serverCpu) / s.seconds
        ),
      );
      const wrkCore = spread(
        list.map((s) => s.loadCoreBusy === undefined ? undefined : s.loadCoreBusy / s.seconds),
      );
      const errors = list.reduce((a, s) => a + s.errors, 0);
      const dash = "—";
      out.push(
        `| ${spec.label} | ${range(rps, whole)}${errors > 0 ? ` (${errors} errors)` : ""} | ${
          spec.id === spec.baseline || ratio === undefined ? dash : formatRatio(ratio.median)
        } | ${p99 === undefined ? dash : `${p99.median.toFixed(2)} ms`} | ${
          cpu === undefined ? dash : range(cpu, micro)
        } | ${user === undefined ? dash : range(user, micro)} | ${
          use === undefined ? dash : percent(use.median)
        } | ${others === undefined ? dash : percent(others.median)} | ${
          wrkCore === undefined ? dash : percent(wrkCore.median)
        } |`,
      );
    }
    out.push("");
  }
  for (const [id, reason] of run.failed) {
    notes.push(`${SERVERS.find((s) => s.id === id)?.label ?? id} left out: ${reason}`);
  }
  if (notes.length > 0) {
    out.push("Caveats of this run:", "", ...notes.map((n) => `- ${n.replaceAll("|", "\\|")}`), "");
  }
  out.push(
    "### Targets (issue 13)",
    "",
    "A ratio target is met when the median of its per-round ratios reaches it (each round " +
      "measures both servers minutes apart at most) and so does the ratio of the two servers' " +
      "fastest rounds by server CPU: a Deno server's speed varies by up to a fifth between starts " +
      "and windows (bench/README.md), and a median can rest on the baseline's slow draws. The rounds that " +
      "reached the target on their own are counted. Ratios are in requests/s as the issue states " +
      "them; the server-CPU ratio beside them (theirs ÷ ours) is what the ratio would be if both " +
      "were CPU-bound on one core.",
    "",
    "| target | measured: median (range) over rounds | verdict |",
    "| --- | --- | --- |",
  );
  for (const v of httpVerdicts(run)) {
    out.push(`| ${v.target} | ${v.measured.replaceAll("|", "\\|")} | **${v.verdict}** |`);
  }
  return out.join("\n");
}
