/**
 * Measures one router's build time and heap per route in a fresh process, so
 * that neither the JIT state nor the garbage of earlier measurements leaks into
 * the figures. Run by `_runner.ts`:
 *
 * ```sh
 * deno run -A --v8-flags=--expose-gc bench/_build_probe.ts <router name> <route count>
 * ```
 *
 * Prints one JSON line: `{ coldMs, warmMs, bytesPerRoute }` or `{ reason }`.
 *
 * @module
 */
import { OURS } from "./_ours.ts";
import { PEERS } from "./_peers.ts";
import { scalingRoutes } from "./_sets.ts";

/** The probe's answer. */
export type ProbeResult =
  | { coldMs: number; warmMs: number; bytesPerRoute: number | undefined }
  | { reason: string };

function probe(name: string, size: number): ProbeResult {
  const adapter = [OURS, ...PEERS].find((a) => a.name === name);
  if (adapter === undefined) return { reason: `no router named "${name}"` };
  const patterns = scalingRoutes(size);
  const plan = adapter.build(patterns);
  if ("reason" in plan) return plan;
  const path = patterns[patterns.length - 1]!.replace(/\{[^}]*\}/g, "x1");
  const gc = (globalThis as { gc?: () => void }).gc;
  const time = () => {
    const start = performance.now();
    plan.construct().resolve(path);
    return performance.now() - start;
  };
  // The first build in a process is what a server pays at startup: lazy compilation of the
  // router's own code included. The heap is read around it too, because a router may cache
  // parsed patterns module-wide, and a second build would then look nearly free.
  gc?.();
  gc?.();
  const before = Deno.memoryUsage().heapUsed;
  const start = performance.now();
  const kept = plan.construct();
  kept.resolve(path);
  const coldMs = performance.now() - start;
  let bytesPerRoute: number | undefined;
  if (gc !== undefined) {
    gc();
    gc();
    bytesPerRoute = (Deno.memoryUsage().heapUsed - before) / size;
  }
  // Keeps the router alive until after the heap reading.
  if (kept.a === null) console.log(kept);
  const warm = Array.from({ length: 5 }, time).sort((a, b) => a - b);
  return { coldMs, warmMs: warm[2]!, bytesPerRoute };
}

if (import.meta.main) {
  const [name = "", size = "10000"] = Deno.args;
  let result: ProbeResult;
  try {
    result = probe(name, Number(size));
  } catch (error) {
    result = { reason: `refuses the route set: ${error instanceof Error ? error.message : error}` };
  }
  console.log(JSON.stringify(result));
}
