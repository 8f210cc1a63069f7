/**
 * HTTP throughput: the same two trivial handlers (`GET /hello` → "hello",
 * `GET /hello/{name}` → "hello <name>") served by bare `Deno.serve`, Hono on
 * `Deno.serve`, our ASGI app through `serve()`, our `App` (with and without a
 * request time limit), and, for information, our ASGI app on the `node`
 * transport against a bare `node:http` server. Run by `deno task bench:http`:
 *
 * ```sh
 * deno run -A bench/http_bench.ts [--duration=10] [--warmup=2] [--rounds=3] [--quick]
 *   [--servers=deno,hono,asgi] [--connections=64] [--threads=2] [--no-write]
 * ```
 *
 * Each server runs alone in its own process on a free loopback port; `wrk`
 * loads it after a warm-up; servers take turns in alternating order over the
 * rounds; the medians of requests/s and p99 latency go to bench/RESULTS.md with
 * the ratio to bare `Deno.serve`. `--quick` is a smoke run (1 s, one round).
 * `BENCH_DURATION`, `BENCH_WARMUP` and `BENCH_ROUNDS` set the same as the flags.
 *
 * @module
 */
import { environment, formatRatio, writeSection } from "./_results.ts";
import { median } from "./_runner.ts";

/** One way of serving the handlers. */
export interface ServerSpec {
  /** Short id for `--servers`. */
  readonly id: string;
  /** Name in the table. */
  readonly label: string;
  /** The server script in bench/servers/. */
  readonly script: string;
  /** Extra environment for the server process. */
  readonly env?: Readonly<Record<string, string>>;
  /** For information only: not part of the Deno.serve comparison. */
  readonly info?: boolean;
}

/** Every server, in the order of the first round. */
export const SERVERS: readonly ServerSpec[] = [
  { id: "deno", label: "bare Deno.serve", script: "deno_bare.ts" },
  { id: "hono", label: "Hono on Deno.serve", script: "hono.ts" },
  {
    id: "floor",
    label: "floor: Deno.serve reading what a scope needs",
    script: "deno_floor.ts",
  },
  { id: "asgi", label: "ours: ASGI app, serve()", script: "asgi_app.ts" },
  { id: "app", label: "ours: App, serve()", script: "web_app.ts" },
  {
    id: "app-limit",
    label: "ours: App, requestTimeLimit 10 s",
    script: "web_app.ts",
    env: { REQUEST_TIME_LIMIT: "10" },
  },
  { id: "node", label: "bare node:http (Deno)", script: "node_bare.ts", info: true },
  {
    id: "asgi-node",
    label: "ours: ASGI app, node transport",
    script: "asgi_app.ts",
    env: { TRANSPORT: "node" },
    info: true,
  },
];

/** The paths loaded, with the body each must answer. */
export const PATHS: readonly { readonly path: string; readonly body: string }[] = [
  { path: "/hello", body: "hello" },
  { path: "/hello/world", body: "hello world" },
];

/** Settings of one run. */
export interface HttpOptions {
  /** Seconds of measured load per server, path and round. */
  readonly duration: number;
  /** Seconds of unmeasured load before each measurement. */
  readonly warmup: number;
  /** Rounds over all servers. */
  readonly rounds: number;
  /** wrk connections. */
  readonly connections: number;
  /** wrk threads. */
  readonly threads: number;
  /** Server ids to run. */
  readonly servers: readonly string[];
  /** Write bench/RESULTS.md. */
  readonly write: boolean;
}

/** What wrk reported for one measurement. */
export interface WrkResult {
  /** Requests per second. */
  readonly rps: number;
  /** 99th percentile latency in milliseconds. */
  readonly p99: number;
  /** Non-2xx responses plus socket errors. */
  readonly errors: number;
  /** Requests completed. */
  readonly requests: number;
  /** Server CPU time (user + system) per request in microseconds, where measurable. */
  readonly cpuPerRequest?: number;
}

/**
 * Reads requests/s, p99 latency and errors from wrk's `--latency` output.
 *
 * @param output wrk's standard output.
 * @returns The figures.
 * @throws {Error} If the output has no `Requests/sec` line.
 */
export function parseWrk(output: string): WrkResult {
  const rps = /Requests\/sec:\s*([\d.]+)/.exec(output)?.[1];
  if (rps === undefined) {
    throw new Error(
      `Cannot read wrk's output: no "Requests/sec" line in ${JSON.stringify(output)}`,
    );
  }
  const p99 = /^\s*99%\s+([\d.]+)(us|ms|s)\s*$/m.exec(output);
  const scale = { us: 1e-3, ms: 1, s: 1e3 } as const;
  const p99ms = p99 === null ? NaN : Number(p99[1]) * scale[p99[2] as keyof typeof scale];
  const non2xx = Number(/Non-2xx or 3xx responses:\s*(\d+)/.exec(output)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(
    output,
  );
  const socketErrors = socket === null ? 0 : socket.slice(1).reduce((a, b) => a + Number(b), 0);
  const requests = Number(/(\d+) requests in/.exec(output)?.[1] ?? 0);
  return { rps: Number(rps), p99: p99ms, errors: non2xx + socketErrors, requests };
}

/**
 * Reads the options from flags, then environment, then defaults.
 *
 * @param args Command-line arguments.
 * @returns The options.
 * @throws {TypeError} On an unknown flag or a value that is not a positive number.
 */
export function parseOptions(args: readonly string[]): HttpOptions {
  const flags = new Map<string, string>();
  for (const arg of args) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m === null) throw new TypeError(`Unknown argument "${arg}": flags look like --duration=10`);
    flags.set(m[1]!, m[2] ?? "");
  }
  const known = [
    "duration",
    "warmup",
    "rounds",
    "connections",
    "threads",
    "servers",
    "quick",
    "no-write",
  ];
  for (const name of flags.keys()) {
    if (!known.includes(name)) {
      throw new TypeError(
        `Unknown flag "--${name}": use one of ${known.map((k) => `--${k}`).join(", ")}`,
      );
    }
  }
  const quick = flags.has("quick");
  const number = (name: string, env: string, fallback: number, quickValue = fallback) => {
    const raw = flags.get(name) ?? Deno.env.get(env);
    if (raw === undefined) return quick ? quickValue : fallback;
    const value = Number(raw);
    if (!(value > 0) || !Number.isFinite(value)) {
      throw new TypeError(`Invalid --${name} "${raw}": expected a positive number`);
    }
    return value;
  };
  const servers = flags.get("servers")?.split(",") ?? SERVERS.map((s) => s.id);
  for (const id of servers) {
    if (!SERVERS.some((s) => s.id === id)) {
      throw new TypeError(
        `Unknown server "${id}": use some of ${SERVERS.map((s) => s.id).join(",")}`,
      );
    }
  }
  return {
    duration: number("duration", "BENCH_DURATION", 10, 1),
    warmup: number("warmup", "BENCH_WARMUP", 2, 0.5),
    rounds: Math.round(number("rounds", "BENCH_ROUNDS", 3, 1)),
    connections: Math.round(number("connections", "BENCH_CONNECTIONS", 64)),
    threads: Math.round(number("threads", "BENCH_THREADS", 2)),
    servers,
    write: !flags.has("no-write"),
  };
}

/** Makes sure wrk is installed, installing Debian's package when running as root. */
async function ensureWrk(): Promise<void> {
  const has = async () => {
    try {
      await new Deno.Command("wrk", { args: ["--version"], stdout: "null", stderr: "null" })
        .output();
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  };
  if (await has()) return;
  if (Deno.uid() !== 0) {
    throw new Error(
      "wrk is not installed: run `sudo apt-get install -y wrk` (Debian/Ubuntu) and retry",
    );
  }
  console.log("wrk is missing: installing it with apt-get");
  for (const args of [["update"], ["install", "-y", "wrk"]]) {
    const { success } = await new Deno.Command("apt-get", {
      args,
      stdout: "inherit",
      stderr: "inherit",
    })
      .output();
    if (!success) {
      throw new Error(`apt-get ${args.join(" ")} failed: install wrk by hand and retry`);
    }
  }
}

/** A server process we started, and its port. */
interface Running {
  readonly child: Deno.ChildProcess;
  readonly port: number;
}

/** Starts a server script and waits for its `LISTENING <port>` line. */
async function start(spec: ServerSpec): Promise<Running> {
  const script = new URL(`./servers/${spec.script}`, import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script],
    env: { PORT: "0", ...spec.env },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  const timeout = setTimeout(() => child.kill("SIGKILL"), 60_000);
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${spec.label} exited before listening; its output: ${seen}`);
      seen += value;
      const m = /LISTENING (\d+)/.exec(seen);
      if (m !== null) {
        // Keep draining stdout so a chatty server never blocks on a full pipe.
        (async () => {
          while (!(await reader.read()).done) { /* discard */ }
        })().catch(() => {});
        return { child, port: Number(m[1]) };
      }
    }
  } finally {
    clearTimeout(timeout);
  }
}

/** Stops a server we started: SIGTERM, then SIGKILL after 5 s. */
async function stop(server: Running): Promise<void> {
  try {
    server.child.kill("SIGTERM");
  } catch { /* already gone */ }
  const timer = setTimeout(() => {
    try {
      server.child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, 5_000);
  await server.child.status;
  clearTimeout(timer);
}

/** Runs wrk once against a URL. */
async function wrk(url: string, seconds: number, options: HttpOptions): Promise<WrkResult> {
  const { stdout, stderr, success } = await new Deno.Command("wrk", {
    args: [
      `-t${options.threads}`,
      `-c${options.connections}`,
      `-d${Math.max(1, Math.round(seconds))}s`,
      "--latency",
      url,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout);
  if (!success) throw new Error(`wrk failed: ${new TextDecoder().decode(stderr)}${text}`);
  return parseWrk(text);
}

/**
 * CPU time a process has used so far, in seconds (user + system, from /proc), or
 * undefined where /proc is not available.
 *
 * @param pid The process id.
 * @returns Seconds of CPU time.
 */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // Fields after the command name (which may hold spaces) start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on mainstream kernels). */
const CLOCK_TICKS = 100;

/** Checks that a server answers each path with the expected body before it is timed. */
async function checkAnswers(port: number): Promise<string | undefined> {
  for (const { path, body } of PATHS) {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    const text = await response.text();
    if (response.status !== 200 || text !== body) {
      return `answers GET ${path} with ${response.status} ${
        JSON.stringify(text)
      }, expected 200 "${body}"`;
    }
  }
  return undefined;
}

/** Medians per server and path. */
/** Medians over the rounds for one server and path. */
export interface Figure {
  /** Median requests per second. */
  readonly rps: number;
  /** Median p99 latency, ms. */
  readonly p99: number;
  /** Errors summed over the rounds. */
  readonly errors: number;
  /** Rounds measured. */
  readonly runs: number;
  /** Median server CPU µs per request, where measurable. */
  readonly cpu: number | undefined;
}

/** Medians per server id and path. */
export type Figures = Map<string, Map<string, Figure>>;

/**
 * Runs every round and returns the medians.
 *
 * @param options The run's settings.
 * @returns Medians per server id and path, and the servers left out with the reason.
 */
export async function runHttp(
  options: HttpOptions,
): Promise<{ figures: Figures; failed: Map<string, string> }> {
  await ensureWrk();
  const specs = SERVERS.filter((s) => options.servers.includes(s.id));
  const samples = new Map<string, Map<string, WrkResult[]>>();
  const failed = new Map<string, string>();
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? specs : [...specs].reverse();
    for (const spec of order) {
      if (failed.has(spec.id)) continue;
      let server: Running | undefined;
      try {
        server = await start(spec);
        const wrong = await checkAnswers(server.port);
        if (wrong !== undefined) throw new Error(wrong);
        for (const { path } of PATHS) {
          const url = `http://127.0.0.1:${server.port}${path}`;
          if (options.warmup > 0) await wrk(url, options.warmup, options);
          const cpuBefore = cpuSeconds(server.child.pid);
          const measured = await wrk(url, options.duration, options);
          const cpuAfter = cpuSeconds(server.child.pid);
          const result: WrkResult = {
            ...measured,
            cpuPerRequest: cpuBefore === undefined || cpuAfter === undefined ||
                measured.requests === 0
              ? undefined
              : ((cpuAfter - cpuBefore) * 1e6) / measured.requests,
          };
          console.log(
            `round ${round + 1}/${options.rounds} ${spec.label.padEnd(34)} ${path.padEnd(13)} ${
              result.rps.toFixed(0).padStart(7)
            } req/s  p99 ${result.p99.toFixed(2)} ms  server CPU ${
              result.cpuPerRequest?.toFixed(1) ?? "?"
            } µs/req${result.errors > 0 ? `  ${result.errors} errors` : ""}`,
          );
          const byPath = samples.get(spec.id) ?? new Map<string, WrkResult[]>();
          byPath.set(path, [...byPath.get(path) ?? [], result]);
          samples.set(spec.id, byPath);
        }
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        console.log(`${spec.label} left out: ${reason}`);
        failed.set(spec.id, reason);
      } finally {
        if (server !== undefined) await stop(server);
      }
    }
  }
  const figures: Figures = new Map();
  for (const [id, byPath] of samples) {
    if (failed.has(id)) continue;
    const out = new Map<string, Figure>();
    for (const [path, results] of byPath) {
      out.set(path, {
        rps: median(results.map((r) => r.rps)),
        p99: median(results.map((r) => r.p99)),
        errors: results.reduce((a, r) => a + r.errors, 0),
        runs: results.length,
        cpu: results.every((r) => r.cpuPerRequest !== undefined)
          ? median(results.map((r) => r.cpuPerRequest!))
          : undefined,
      });
    }
    figures.set(id, out);
  }
  return { figures, failed };
}

/**
 * Renders the HTTP section of bench/RESULTS.md: the table and the targets.
 *
 * @param figures Medians per server and path.
 * @param failed Servers left out, with the reason.
 * @param options The run's settings.
 * @param header Environment lines.
 * @returns Markdown.
 */
export function renderHttp(
  figures: Figures,
  failed: ReadonlyMap<string, string>,
  options: HttpOptions,
  header: string,
): string {
  const quick = options.duration < 5 || options.rounds < 3;
  const out = [
    "## HTTP throughput",
    "",
    header,
    `- Load: \`wrk -t${options.threads} -c${options.connections} -d${options.duration}s --latency\` on 127.0.0.1 after ${options.warmup} s of warm-up, per server and path; ${options.rounds} round(s), servers one at a time in alternating order; medians over rounds.${
      quick ? " **Smoke run: too short for conclusions.**" : ""
    }`,
    "",
  ];
  const ratio = (id: string, base: string, path: string) => {
    const a = figures.get(id)?.get(path)?.rps;
    const b = figures.get(base)?.get(path)?.rps;
    return a === undefined || b === undefined ? undefined : a / b;
  };
  out.push(
    "req/s and p99 are wrk's figures; **server CPU** is the server process's user + system CPU " +
      "time during the measured run divided by the requests served (from /proc): on a machine " +
      "where wrk and the server share the cores it is the steadier measure of what each layer costs.",
    "",
  );
  for (const { path } of PATHS) {
    out.push(
      `#### GET ${path}`,
      "",
      "| server | req/s | ÷ baseline | p99 | server CPU per request | ÷ baseline |",
      "| --- | --: | --: | --: | --: | --: |",
    );
    for (const spec of SERVERS) {
      const v = figures.get(spec.id)?.get(path);
      if (v === undefined) continue;
      const base = spec.info ? "node" : "deno";
      const r = ratio(spec.id, base, path);
      const baseCpu = figures.get(base)?.get(path)?.cpu;
      const of = spec.info ? " of node:http" : "";
      const err = v.errors > 0 ? ` (${v.errors} errors)` : "";
      out.push(
        `| ${spec.label} | ${v.rps.toFixed(0)}${err} | ${
          r === undefined ? "—" : formatRatio(r)
        }${of} | ${v.p99.toFixed(2)} ms | ${
          v.cpu === undefined ? "—" : `${v.cpu.toFixed(1)} µs`
        } | ${
          v.cpu === undefined || baseCpu === undefined
            ? "—"
            : `${formatRatio(v.cpu / baseCpu)}${of}`
        } |`,
      );
    }
    out.push("");
  }
  for (const [id, reason] of failed) {
    out.push(`- ${SERVERS.find((s) => s.id === id)?.label ?? id} left out: ${reason}`);
  }
  if (failed.size > 0) out.push("");
  out.push(
    "The node rows compare with bare `node:http` on Deno, not with `Deno.serve`.",
    "",
    "### Targets",
    "",
    "Verdicts use req/s, as the issue states the targets; the CPU figure in brackets is the " +
      "baseline's server CPU per request divided by ours (the throughput ratio if both were " +
      "CPU-bound on the same cores).",
    "",
    "| target | measured | verdict |",
    "| --- | --- | --- |",
  );
  const target = (text: string, id: string, base: string, limit?: number) => {
    const rs = PATHS.map(({ path }) => ratio(id, base, path));
    if (rs.some((r) => r === undefined)) {
      out.push(`| ${text} | not measured | **n/a** |`);
      return;
    }
    const measured = PATHS.map(({ path }, i) => {
      const ours = figures.get(id)?.get(path)?.cpu;
      const theirs = figures.get(base)?.get(path)?.cpu;
      const cpu = ours === undefined || theirs === undefined
        ? ""
        : ` (by server CPU ${formatRatio(theirs / ours)})`;
      return `${path} ${formatRatio(rs[i]!)}${cpu}`;
    }).join(", ");
    const verdict = limit === undefined ? "info" : rs.every((r) => r! >= limit) ? "met" : "missed";
    out.push(`| ${text} | ${measured} | **${verdict}** |`);
  };
  target("our ASGI app ≥ 0.85× bare Deno.serve", "asgi", "deno", 0.85);
  target("our App ≥ 0.80× bare Deno.serve", "app", "deno", 0.80);
  target("our App ahead of Hono", "app", "hono", 1.0);
  target("cost of requestTimeLimit: App with it ÷ App without", "app-limit", "app");
  target("the floor (reads a scope needs, promised response) ÷ bare Deno.serve", "floor", "deno");
  target("our ASGI app ÷ the floor (what the bridge itself costs)", "asgi", "floor");
  target("Hono ÷ the floor", "hono", "floor");
  target("ASGI app on the node transport ÷ bare node:http", "asgi-node", "node");
  return out.join("\n");
}

if (import.meta.main) {
  let options: HttpOptions;
  try {
    options = parseOptions(Deno.args);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    Deno.exit(2);
  }
  const header = environment();
  const { figures, failed } = await runHttp(options);
  const markdown = renderHttp(figures, failed, options, header);
  console.log(`\n${markdown}`);
  if (options.write) writeSection("http", markdown);
}
