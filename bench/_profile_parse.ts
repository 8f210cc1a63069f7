/**
 * Reading what V8 writes when asked to: `--trace-gc` lines and `--cpu-prof` profiles, for
 * `bench/profile_app.ts`.
 *
 * @module
 */

/** Garbage collections counted in `--trace-gc` output. */
export interface GcTrace {
  /** Young-generation collections (Scavenge, Minor Mark-Compact/Sweep). */
  readonly young: number;
  /** Full collections (Mark-Compact, Mark-Sweep). */
  readonly full: number;
  /** Milliseconds of pause, summed over both kinds. */
  readonly pauseMs: number;
  /** Collections asked for with `gc()` (reason "testing"), not counted above. */
  readonly forced: number;
  /** Megabytes freed by the collections counted (heap before minus heap after, summed). */
  readonly freedMb: number;
}

/**
 * Counts the collections in `--trace-gc` output, leaving out those forced with `gc()`.
 *
 * @param output The process's standard output (the trace and anything else).
 * @returns The counts and the pause time.
 */
export function parseTraceGc(output: string): GcTrace {
  let young = 0;
  let full = 0;
  let pauseMs = 0;
  let forced = 0;
  let freedMb = 0;
  // e.g. "[1:0x5]  412 ms: Scavenge 429.9 (431.0) -> 2.3 (431.2) MB, pooled: 0.0 MB, 3.93 / 0.00 ms (…) allocation failure;"
  const line =
    /\d+ ms: (Scavenge|Minor Mark-Compact|Minor Mark-Sweep|Mark-Compact|Mark-Sweep)\b\D*([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB,.*?([\d.]+) \/ [\d.]+ ms.*?\)\s*([^;]*);?/g;
  for (const m of output.matchAll(line)) {
    if (m[5]!.trim().startsWith("testing")) {
      forced++;
      continue;
    }
    if (m[1]!.startsWith("Minor") || m[1] === "Scavenge") young++;
    else full++;
    pauseMs += Number(m[4]);
    freedMb += Number(m[2]) - Number(m[3]);
  }
  return { young, full, pauseMs, forced, freedMb };
}

/** The parts of a V8 `.cpuprofile` that are read here. */
export interface CpuProfile {
  /** Call-tree nodes. */
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: {
      readonly functionName: string;
      readonly url: string;
      readonly lineNumber: number;
    };
    readonly children?: readonly number[];
  }[];
  /** The node each sample hit. */
  readonly samples: readonly number[];
  /** Microseconds before each sample. */
  readonly timeDeltas: readonly number[];
}

/** Self time of one function or group. */
export interface SelfTime {
  /** Function (with file and line) or group name. */
  readonly name: string;
  /** Its group (layer). */
  readonly group: string;
  /** Microseconds of self time in the profile. */
  readonly us: number;
}

/**
 * The layer a script URL belongs to.
 *
 * @param url The script URL from the profile (`file:`, `ext:`, `http:` for the JSR mirror, or empty).
 * @param name The function name, for V8's pseudo-frames such as `(garbage collector)`.
 * @returns A group name.
 */
export function groupOf(url: string, name: string): string {
  if (url === "") {
    if (name === "(garbage collector)") return "garbage collector";
    if (name === "(program)") return "V8 and native code outside JavaScript (program)";
    if (name === "(idle)") return "idle";
    return "V8 builtins";
  }
  if (/\/(web\.ts|_web\/[^/]+)$/.test(url)) return "stellarator web layer (web.ts, _web/)";
  if (/\/(asgi\.ts|_asgi\/[^/]+)$/.test(url)) return "stellarator ASGI bridge (asgi.ts, _asgi/)";
  if (/\/(router\.ts|_router\/[^/]+)$/.test(url)) return "stellarator router (router.ts, _router/)";
  if (url.includes("/bench/")) return "benchmark code (handlers and loop)";
  const std = /\/@std\/([a-z_]+)\//.exec(url);
  if (std !== null) return `@std/${std[1]}`;
  if (url.includes("/hono/")) return "hono";
  const ext = /^ext:([a-z_]+)\//.exec(url);
  if (ext !== null) return `Deno runtime: ${ext[1]}`;
  if (url.startsWith("node:")) return "Deno runtime: node compat";
  return url;
}

function shortUrl(url: string): string {
  const file = /\/(bench\/.*|_[a-z]+\/[^/]+|[a-z_]+\.ts)$/.exec(url);
  if (url.startsWith("file:") && file !== null) return file[1]!;
  const std = /\/(@std\/.*)$/.exec(url);
  if (std !== null) return std[1]!;
  return url;
}

/**
 * Self time per function in a profile, highest first, idle time left out. Each sample counts
 * for the time until the next one.
 *
 * @param profile The profile.
 * @param after Count only the samples after the last one in a function of this name (a marker
 *   the profiled code runs for a few milliseconds where the part of interest starts).
 * @returns One entry per function (name, file and line).
 */
export function selfTimes(profile: CpuProfile, after?: string): SelfTime[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, SelfTime>();
  const { samples, timeDeltas } = profile;
  let from = 0;
  if (after !== undefined) {
    // The marker's samples may land in what it calls (a clock read), so its whole subtree counts.
    const marked = new Set<number>();
    const mark = (id: number) => {
      marked.add(id);
      for (const child of byId.get(id)?.children ?? []) mark(child);
    };
    for (const node of profile.nodes) {
      if (node.callFrame.functionName === after) mark(node.id);
    }
    for (let i = samples.length - 1; i >= 0; i--) {
      if (marked.has(samples[i]!)) {
        from = i + 1;
        break;
      }
    }
  }
  for (let i = from; i < samples.length; i++) {
    const node = byId.get(samples[i]!);
    if (node === undefined) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const group = groupOf(url, functionName);
    if (group === "idle") continue;
    const us = timeDeltas[i + 1] ?? timeDeltas[i] ?? 0;
    const name = url === ""
      ? functionName || "(anonymous)"
      : `${functionName || "(anonymous)"} ${shortUrl(url)}:${lineNumber + 1}`;
    const entry = totals.get(name);
    totals.set(name, { name, group, us: (entry?.us ?? 0) + us });
  }
  return [...totals.values()].sort((a, b) => b.us - a.us);
}

/**
 * Sums self times by group.
 *
 * @param times Self times per function.
 * @returns One entry per group, highest first.
 */
export function byGroup(times: readonly SelfTime[]): SelfTime[] {
  const groups = new Map<string, number>();
  for (const t of times) groups.set(t.group, (groups.get(t.group) ?? 0) + t.us);
  return [...groups].map(([group, us]) => ({ name: group, group, us }))
    .sort((a, b) => b.us - a.us);
}
