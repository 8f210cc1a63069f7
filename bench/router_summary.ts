/**
 * The router comparison's summary on its own, without `Deno.bench`:
 *
 * ```sh
 * deno run -A --v8-flags=--expose-gc bench/router_summary.ts [--quick] [--sets=github,hono] [--no-write]
 * ```
 *
 * It verifies every router on every workload, times them in interleaved batches,
 * prints progress and writes the tables to bench/RESULTS.md.
 *
 * @module
 */
import { routerSummary } from "./_summary.ts";

if (import.meta.main) {
  const args = new Set(Deno.args);
  const only = Deno.args.find((a) => a.startsWith("--sets="))?.slice("--sets=".length).split(",");
  const unknown = Deno.args.filter((a) =>
    !["--quick", "--no-write"].includes(a) && !a.startsWith("--sets=")
  );
  if (unknown.length > 0) {
    console.error(
      `Unknown argument "${unknown[0]}": use --quick, --no-write or --sets=github,hono`,
    );
    Deno.exit(2);
  }
  await routerSummary({
    quick: args.has("--quick"),
    only,
    write: !args.has("--no-write"),
    command: `deno run -A --v8-flags=--expose-gc bench/router_summary.ts ${Deno.args.join(" ")}`
      .trim(),
  });
}
