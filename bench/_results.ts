/**
 * bench/RESULTS.md: the machine header and one section per benchmark, each
 * between its own markers so the router and HTTP runs can rewrite their part
 * without touching the other's.
 *
 * @module
 */

/** Where the results go. */
export const RESULTS_FILE: URL = new URL("./RESULTS.md", import.meta.url);

/**
 * Describes the machine and runtime a run happened on.
 *
 * @returns Markdown lines: date, Deno/V8 versions, CPU model and count, OS, load.
 */
export function environment(): string {
  let cpu = "unknown CPU";
  let load = "";
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    const model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? "unknown CPU";
    const count = info.match(/^processor\s*:/gm)?.length ?? navigator.hardwareConcurrency;
    cpu = `${model} × ${count}`;
    load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    cpu = `${navigator.hardwareConcurrency} logical CPUs`;
  }
  const lines = [
    `- Date: ${new Date().toISOString().replace(/\.\d+Z$/, "Z")}`,
    `- Deno ${Deno.version.deno} (V8 ${Deno.version.v8}, TypeScript ${Deno.version.typescript}), ${Deno.build.os}/${Deno.build.arch}`,
    `- CPU: ${cpu}`,
  ];
  if (load !== "") lines.push(`- Load average when the run started: ${load}`);
  return lines.join("\n");
}

/**
 * Replaces (or appends) one section of bench/RESULTS.md, then runs `deno fmt` on it.
 *
 * @param id The section's marker name (`router`, `http`).
 * @param markdown The section's content, heading included.
 * @param file The results file.
 */
export function writeSection(id: string, markdown: string, file: URL = RESULTS_FILE): void {
  const start = `<!-- ${id}:start -->`;
  const end = `<!-- ${id}:end -->`;
  let text: string;
  try {
    text = Deno.readTextFileSync(file);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    text = "# Benchmark results\n\nWritten by `deno task bench` and `deno task bench:http`; see " +
      "[README.md](README.md) for what is measured and how.\n";
  }
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  text = from >= 0 && to > from
    ? text.slice(0, from) + block + text.slice(to + end.length)
    : `${text.trimEnd()}\n\n${block}\n`;
  Deno.writeTextFileSync(file, text);
  // The file is committed and `deno fmt --check` runs over the repository: format it the same way.
  new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--quiet", file.pathname],
    stdout: "null",
    stderr: "inherit",
  }).outputSync();
}

/**
 * Reads one section of bench/RESULTS.md, between its markers.
 *
 * @param id The section's marker name (`router`, `http`).
 * @param file The results file.
 * @returns The section's markdown, or undefined when the file or the section is missing.
 */
export function readSection(id: string, file: URL = RESULTS_FILE): string | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(file);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
  const start = `<!-- ${id}:start -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(`<!-- ${id}:end -->`);
  return from >= 0 && to > from ? text.slice(from + start.length, to).trim() : undefined;
}

/**
 * Formats nanoseconds for a table.
 *
 * @param ns Nanoseconds.
 * @returns `7.4 ns`, `123 ns` or `1.2 µs`.
 */
export function formatNs(ns: number): string {
  if (ns < 10) return `${ns.toFixed(1)} ns`;
  if (ns < 1000) return `${ns.toFixed(0)} ns`;
  return `${(ns / 1000).toFixed(1)} µs`;
}

/**
 * Formats a ratio.
 *
 * @param ratio A ratio.
 * @returns `1.23×`.
 */
export function formatRatio(ratio: number): string {
  return `${ratio.toFixed(2)}×`;
}
