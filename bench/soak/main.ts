/**
 * The fault suite: bounded scenarios against real servers on 127.0.0.1, on both transports.
 *
 * ```sh
 * deno task soak            # the full soak: minutes per scenario
 * deno task soak --short    # the CI run: about 60 s for both transports on 2 idle cores
 * deno task soak --short --transport=node --only=storm
 * ```
 *
 * Each scenario starts a fresh server subprocess (`bench/soak/asgi_server.ts` or
 * `bench/soak/app_server.ts`), watches its open fds and RSS through /proc, and prints one table:
 * req/s, errors, p99, fds and RSS at start/peak/end, background tasks by final state. The run
 * exits 1 when an invariant breaks: the process died, a task was lost, the fds did not come back
 * near their start, the server stopped answering, or a scenario's own check failed. Linux only
 * (/proc, prlimit); the wrk scenario is skipped with a message where wrk is missing.
 *
 * @module
 */
import { type Row, SCENARIOS, type Transport, WRK_SCENARIO } from "./_scenarios.ts";

function hasWrk(): boolean {
  try {
    return new Deno.Command("wrk", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().code !== 127;
  } catch {
    return false;
  }
}

function span(s: { start: number; peak: number; end: number }, digits = 0): string {
  return [s.start, s.peak, s.end].map((n) => n.toFixed(digits)).join(" / ");
}

function table(rows: Row[]): string {
  const header = [
    "transport",
    "req/s",
    "errors",
    "p99 ms",
    "fds start / peak / end",
    "RSS MiB start / peak / end",
    "tasks done / cut / cancelled / failed / not run / lost",
    "result",
  ];
  const lines = rows.map((row) => [
    row.transport,
    row.rate?.toString() ?? "-",
    row.errors?.toString() ?? "-",
    row.p99?.toString() ?? "-",
    span(row.fds),
    span(row.rss),
    row.tasks === undefined ? "-" : [
      row.tasks.completed,
      row.tasks.cutOff,
      row.tasks.cancelled,
      row.tasks.failed,
      row.tasks.notRun,
      row.tasks.lost,
    ].join(" / ") + ` of ${row.tasks.registered}`,
    row.failures.length === 0 ? "ok" : "FAIL",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    format(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...lines.map(format),
  ].join("\n");
}

async function main(args: string[]): Promise<number> {
  const short = args.includes("--short");
  const transportArg = args.find((a) => a.startsWith("--transport="))?.slice(12);
  const only = args.find((a) => a.startsWith("--only="))?.slice(7);
  const unknown = args.filter((a) =>
    a !== "--short" && !a.startsWith("--transport=") && !a.startsWith("--only=")
  );
  if (unknown.length > 0 || (transportArg && !["deno", "node"].includes(transportArg))) {
    console.error(
      "Usage: deno task soak [--short] [--transport=deno|node] [--only=<part of a scenario name>]",
    );
    return 2;
  }
  if (Deno.build.os !== "linux") {
    console.error("The fault suite reads /proc and uses prlimit: it runs on Linux only");
    return 2;
  }
  const transports: Transport[] = transportArg ? [transportArg as Transport] : ["deno", "node"];
  const wrk = hasWrk();
  const began = performance.now();
  const broken: string[] = [];
  console.log(
    `Fault suite (${short ? "short" : "full"} run), transports: ${transports.join(", ")}, ` +
      `Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} CPUs`,
  );
  for (const scenario of SCENARIOS) {
    if (only !== undefined && !scenario.name.includes(only)) continue;
    console.log(`\n## ${scenario.name}\n${scenario.checks}\n`);
    if (scenario === WRK_SCENARIO && !wrk) {
      console.log("Skipped: wrk is not installed (apt-get install wrk)");
      continue;
    }
    const rows: Row[] = [];
    for (const transport of transports) {
      const startedAt = performance.now();
      try {
        rows.push(await scenario.run(transport, { short }));
      } catch (error) {
        rows.push({
          transport,
          fds: { start: -1, peak: -1, end: -1 },
          rss: { start: -1, peak: -1, end: -1 },
          notes: [],
          failures: [`the scenario crashed: ${error instanceof Error ? error.stack : error}`],
        });
      }
      rows.at(-1)!.notes.push(`took ${((performance.now() - startedAt) / 1000).toFixed(1)} s`);
    }
    console.log(table(rows));
    for (const row of rows) {
      for (const note of row.notes) console.log(`- ${row.transport}: ${note}`);
      for (const failure of row.failures) {
        console.log(`- ${row.transport}: FAIL: ${failure}`);
        broken.push(`${scenario.name} [${row.transport}]: ${failure}`);
      }
    }
  }
  const took = ((performance.now() - began) / 1000).toFixed(0);
  if (broken.length > 0) {
    console.log(`\nFault suite FAILED in ${took} s: ${broken.length} broken invariant(s)`);
    for (const line of broken) console.log(`- ${line}`);
    return 1;
  }
  console.log(`\nFault suite passed in ${took} s`);
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
