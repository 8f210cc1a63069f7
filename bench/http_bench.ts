/**
 * HTTP throughput of the same handlers (`GET /hello` → "hello", `GET /hello/{name}` →
 * "hello <name>", `POST /echo` → the request's body) on bare `Deno.serve`, the floor, Hono, our
 * ASGI app through `serve()` on both transports (and bare `node:http` for the node one), our
 * `App`, and our `App` with a request time limit, all in one run. Run by `deno task bench:http`:
 *
 * ```sh
 * deno task bench:http [--rounds=3] [--duration=4] [--warmup=1] [--servers=deno,floor,app]
 *   [--routes=hello-world,echo] [--connections=64] [--threads=1] [--no-pin] [--no-write] [--quick]
 * ```
 *
 * The method, and why, is in bench/README.md. In short: each server runs in its own process,
 * pinned with `taskset` to one core while `wrk` runs on another; each round starts every server
 * afresh, in alternating order, warms each route up, then measures it; the report gives per
 * server and route the median and range of requests/s over the rounds, the server's CPU time per
 * request (from `/proc/<pid>/stat`), how busy both cores were, and a verdict per target of issue 13
 * from the ratios paired within each round. `--quick` is a smoke run (one round of 1 s).
 *
 * @module
 */
import { environment, writeSection } from "./_results.ts";
import { choosePinning, coreBusySeconds, cpuTimes, onCore, type Pinning } from "./_proc.ts";
import { ensureWrk, runWrk, type WrkResult, wrkScript } from "./_wrk.ts";
import {
  cpuPerRequest,
  type HttpRun,
  renderHttp,
  type Sample,
  userCpuPerRequest,
} from "./_http_report.ts";
import {
  estimateSeconds,
  type HttpOptions,
  parseOptions,
  ROUTES,
  type RouteSpec,
  SERVERS,
  type ServerSpec,
} from "./_http_specs.ts";

/** A server process we started, and its port. */
export interface RunningServer {
  /** The process (the server itself: taskset execs it). */
  readonly child: Deno.ChildProcess;
  /** Its loopback port. */
  readonly port: number;
}

/**
 * Starts a server script and waits for its `LISTENING <port>` line.
 *
 * @param spec The server.
 * @param core The core to pin it to, or undefined.
 * @returns The running server.
 * @throws {Error} When it exits or stays silent for 60 s.
 */
export async function startServer(spec: ServerSpec, core?: number): Promise<RunningServer> {
  const script = new URL(`./servers/${spec.script}`, import.meta.url).pathname;
  const [program, ...args] = onCore([Deno.execPath(), "run", "-A", script], core);
  const child = new Deno.Command(program!, {
    args,
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

/**
 * Stops a server we started: SIGTERM, then SIGKILL after 5 s.
 *
 * @param server The server.
 */
export async function stopServer(server: RunningServer): Promise<void> {
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

/**
 * Checks that a server answers each route with the expected body, so no server is timed on a
 * wrong or cheaper answer.
 *
 * @param port The server's port.
 * @param routes The routes.
 * @returns What was wrong, or undefined.
 */
export async function checkAnswers(
  port: number,
  routes: readonly RouteSpec[],
): Promise<string | undefined> {
  for (const { method, path, body, expect } of routes) {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      body,
      headers: body === undefined ? undefined : { "content-type": "application/json" },
    });
    const text = await response.text();
    if (response.status !== 200 || text !== expect) {
      return `answers ${method} ${path} with ${response.status} ${
        JSON.stringify(text)
      }, expected 200 ${JSON.stringify(expect)}`;
    }
  }
  return undefined;
}

/** Lua scripts for the routes that need one, written once per run. */
async function writeScripts(routes: readonly RouteSpec[]): Promise<Map<string, string>> {
  const scripts = new Map<string, string>();
  for (const route of routes) {
    if (route.method === "GET" && route.body === undefined) continue;
    const file = await Deno.makeTempFile({ prefix: `wrk-${route.id}-`, suffix: ".lua" });
    await Deno.writeTextFile(
      file,
      wrkScript(route.method, route.body ?? "", "application/json"),
    );
    scripts.set(route.id, file);
  }
  return scripts;
}

/** Measures one route of one running server. */
async function measure(
  server: RunningServer,
  route: RouteSpec,
  script: string | undefined,
  options: HttpOptions,
  pinning: Pinning,
  round: number,
): Promise<Sample> {
  const threads = options.threads ?? (pinning.pinned ? 1 : 2);
  const core = pinning.pinned ? pinning.loadCore : undefined;
  const url = `http://127.0.0.1:${server.port}${route.path}`;
  const load = { url, connections: options.connections, threads, script, core };
  if (options.warmup > 0) await runWrk({ ...load, seconds: options.warmup });
  const cpu0 = cpuTimes(server.child.pid);
  const cores0 = coreBusySeconds();
  const t0 = performance.now();
  const result: WrkResult = await runWrk({ ...load, seconds: options.duration });
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = cpuTimes(server.child.pid);
  const cores1 = coreBusySeconds();
  const busy = (c: number) =>
    cores0?.[c] === undefined || cores1?.[c] === undefined ? undefined : cores1[c]! - cores0[c]!;
  return {
    ...result,
    round,
    seconds,
    serverCpu: cpu0 === undefined || cpu1 === undefined
      ? undefined
      : cpu1.user + cpu1.system - cpu0.user - cpu0.system,
    serverUserCpu: cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.user - cpu0.user,
    serverCoreBusy: pinning.pinned ? busy(pinning.serverCore) : undefined,
    loadCoreBusy: pinning.pinned ? busy(pinning.loadCore) : undefined,
  };
}

/**
 * Runs every round.
 *
 * @param options The run's settings.
 * @param command The command line, for the report.
 * @returns Every sample, the servers left out with the reason, and how the run was pinned.
 */
export async function runHttp(options: HttpOptions, command: string): Promise<HttpRun> {
  await ensureWrk();
  const pinning = await choosePinning(options.pin);
  const header = environment();
  console.log(
    pinning.pinned
      ? `Servers on core ${pinning.serverCore}, wrk on core ${pinning.loadCore}`
      : `Not pinned: ${pinning.reason}`,
  );
  console.log(`About ${Math.ceil(estimateSeconds(options) / 60)} min`);
  const specs = SERVERS.filter((s) => options.servers.includes(s.id));
  const routes = ROUTES.filter((r) => options.routes.includes(r.id));
  const scripts = await writeScripts(routes);
  const samples = new Map<string, Map<string, (Sample | undefined)[]>>();
  const failed = new Map<string, string>();
  try {
    for (let round = 0; round < options.rounds; round++) {
      // Alternating order, so a drift in the machine's speed over the run favours no server.
      const order = round % 2 === 0 ? specs : [...specs].reverse();
      for (const spec of order) {
        if (failed.has(spec.id)) continue;
        let server: RunningServer | undefined;
        try {
          server = await startServer(spec, pinning.pinned ? pinning.serverCore : undefined);
          const wrong = await checkAnswers(server.port, routes);
          if (wrong !== undefined) throw new Error(wrong);
          for (const route of routes) {
            const sample = await measure(
              server,
              route,
              scripts.get(route.id),
              options,
              pinning,
              round,
            );
            const byRoute = samples.get(spec.id) ?? new Map<string, (Sample | undefined)[]>();
            const list = byRoute.get(route.id) ?? [];
            list[round] = sample;
            byRoute.set(route.id, list);
            samples.set(spec.id, byRoute);
            const cpu = cpuPerRequest(sample)?.toFixed(1) ?? "?";
            const user = userCpuPerRequest(sample)?.toFixed(1) ?? "?";
            console.log(
              `round ${round + 1}/${options.rounds} ${spec.label.padEnd(40)} ${
                `${route.method} ${route.path}`.padEnd(18)
              } ${sample.rps.toFixed(0).padStart(7)} req/s  p99 ${
                sample.p99.toFixed(2)
              } ms  server CPU ${cpu} µs/req (user ${user})${
                sample.errors > 0 ? `  ${sample.errors} errors` : ""
              }`,
            );
          }
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          console.log(`${spec.label} left out: ${reason}`);
          failed.set(spec.id, reason);
        } finally {
          if (server !== undefined) await stopServer(server);
        }
      }
    }
  } finally {
    for (const file of scripts.values()) await Deno.remove(file).catch(() => {});
  }
  for (const id of failed.keys()) samples.delete(id);
  return { options, pinning, header, command, samples, failed };
}

if (import.meta.main) {
  let options: HttpOptions;
  try {
    options = parseOptions(Deno.args);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    Deno.exit(2);
  }
  const command = ["deno task bench:http", ...Deno.args].join(" ");
  const run = await runHttp(options, command);
  const markdown = renderHttp(run);
  console.log(`\n${markdown}`);
  if (options.write) writeSection("http", markdown);
}
