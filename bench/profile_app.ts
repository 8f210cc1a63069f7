/**
 * Where the time and the memory of one request go, in-process: the benchmark's handlers (the same
 * modules the HTTP benchmark serves) called in a loop through their Fetch handlers, no network.
 * Run by `deno task bench:profile`:
 *
 * ```sh
 * deno task bench:profile [--targets=bare,floor,hono,asgi,app,app-limit]
 *   [--routes=hello-world,echo] [--requests=100000] [--profiles-dir=DIR] [--no-write] [--quick]
 * ```
 *
 * Per target and route, three fresh processes:
 * - **time**: warm-up, then the median of five timed windows, in µs per request; with
 *   `--trace-gc`, the collections, their pause time and the bytes they freed (a second measure
 *   of allocation) per request, warm-up included; then the heap a sixth window leaves behind
 *   after collections (what requests retain);
 * - **alloc**: a young generation of 1 GB (`--min-semi-space-size`), so nothing is collected
 *   while requests run; heap growth over 10 000 and then 20 000 requests after two `gc()` calls is
 *   the allocation per request (both windows must agree, and `--trace-gc` must show no collection
 *   but the forced ones);
 * - **profile**: `--cpu-prof` at a 100 µs interval over warm-up and requests; self time per
 *   function and per layer, counted from the end of the warm-up (marked by a function that spins
 *   for 5 ms) on.
 *
 * Writes the figures to bench/PROFILE.md (between markers; the analysis around them is
 * hand-written). Timing figures taken while other work runs on the machine are noisy; allocation
 * figures are not.
 *
 * `asgi` goes through `createFetchHandler()`, `app` and `app-limit` through `app.fetch` (the same
 * handler): the Fetch adapter, not the `Deno.serve` transport `serve()` uses, so bridge costs
 * specific to that transport do not show here.
 *
 * @module
 */
import { writeSection } from "./_results.ts";
import { ECHO_BODY, ROUTES, type RouteSpec } from "./_http_specs.ts";
import {
  byGroup,
  type CpuProfile,
  type GcTrace,
  parseTraceGc,
  type SelfTime,
  selfTimes,
} from "./_profile_parse.ts";

/** Where the figures go. */
export const PROFILE_FILE: URL = new URL("./PROFILE.md", import.meta.url);

/** One thing profiled. */
export interface ProfileTarget {
  /** Short id for `--targets`. */
  readonly id: string;
  /** Name in the tables. */
  readonly label: string;
}

/** Every target, in table order. */
export const TARGETS: readonly ProfileTarget[] = [
  { id: "bare", label: "bare Deno.serve handler" },
  { id: "floor", label: "the floor's handler" },
  { id: "hono", label: "Hono, app.fetch" },
  { id: "asgi", label: "ASGI app, createFetchHandler" },
  { id: "app", label: "App, app.fetch" },
  { id: "app-limit", label: "App, requestTimeLimit 10 s" },
];

/** Targets whose CPU profile is worth reading by default: ours. */
const PROFILED = ["asgi", "app", "app-limit"];

type Handle = (request: Request) => Response | Promise<Response>;

const INFO = {
  remoteAddr: { transport: "tcp" as const, hostname: "127.0.0.1", port: 40000 },
  completed: Promise.resolve(),
};

/** Builds a target's handler, importing only its module. */
async function makeHandle(id: string): Promise<Handle> {
  switch (id) {
    case "bare": {
      const { handler } = await import("./servers/deno_bare.ts");
      return handler;
    }
    case "floor": {
      const { handler } = await import("./servers/deno_floor.ts");
      return (request) => handler(request, INFO);
    }
    case "hono": {
      const { app } = await import("./servers/hono.ts");
      return (request) => app.fetch(request);
    }
    case "asgi": {
      const { app } = await import("./servers/asgi_app.ts");
      const { createFetchHandler } = await import("../asgi.ts");
      const handler = createFetchHandler(app);
      return (request) => handler.fetch(request, INFO);
    }
    case "app":
    case "app-limit": {
      const { makeApp } = await import("./servers/web_app.ts");
      const app = makeApp(id === "app-limit" ? 10 : undefined);
      return (request) => app.fetch(request, INFO);
    }
  }
  throw new TypeError(`Unknown target "${id}": use one of ${TARGETS.map((t) => t.id).join(",")}`);
}

function requestMaker(route: RouteSpec): () => Request {
  const url = `http://127.0.0.1:8000${route.path}`;
  // The header fields wrk sends (it adds content-length itself).
  if (route.body === undefined) {
    const headers = { host: "127.0.0.1:8000" };
    return () => new Request(url, { method: route.method, headers });
  }
  const headers = { host: "127.0.0.1:8000", "content-type": "application/json" };
  return () => new Request(url, { method: route.method, body: route.body, headers });
}

/** Requests between two turns of the event loop. */
const TURN_EVERY = 100;

// A message to ourselves: one turn of the event loop in some 20 µs. `setTimeout(0)` would do too,
// but nested timers are clamped to 4 ms. Made in the child only: a port listening keeps the
// process alive.
let channel: MessageChannel | undefined;
let wake: (() => void) | undefined;

function turn(): Promise<void> {
  if (channel === undefined) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => {
      const resolve = wake;
      wake = undefined;
      resolve?.();
    };
  }
  const port = channel.port2;
  return new Promise((resolve) => {
    wake = resolve;
    port.postMessage(null);
  });
}

/**
 * Collects garbage until the heap stops shrinking, turning the event loop between collections so
 * the FinalizationRegistry callbacks they schedule run (V8 may spread those over several tasks).
 */
async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  let heap = Infinity;
  for (let i = 0; i < 50; i++) {
    gc();
    await turn();
    const now = Deno.memoryUsage().heapUsed;
    if (now > heap - 1024) return;
    heap = now;
  }
}

async function loop(handle: Handle, make: () => Request, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const response = await handle(make());
    await response.arrayBuffer();
    // A server turns the event loop between requests; a loop of microtasks alone never would,
    // and FinalizationRegistry callbacks (Deno frees bookkeeping of abort signals and response
    // headers through them) would never run: the App then seemed to retain 0.1 KB per request,
    // 1.3 KB with a time limit (a WeakCell and its holdings each), all of it freed by these turns.
    if (i % TURN_EVERY === TURN_EVERY - 1) await turn();
  }
}

/** What a child process reports. */
interface ChildResult {
  /** Requests made in all, warm-up and check included. */
  readonly total: number;
  /** Median µs per request over the timed windows (time mode). */
  readonly us?: number;
  /** Range of the timed windows (time mode). */
  readonly usMin?: number;
  readonly usMax?: number;
  /** Bytes allocated per request in the two windows (alloc mode). */
  readonly bytes?: readonly [number, number];
  /** Bytes per request left on the heap after a full collection (time mode). */
  readonly retained?: number;
}

/** Where the profiled requests start: the profile is read from this function's last sample on. */
function markProfileWindow(): void {
  const end = performance.now() + 5;
  while (performance.now() < end) { /* show up in the profile for a few samples */ }
}

/** The child: one target, one route, one mode. Prints `RESULT <json>` on stderr. */
async function child(mode: string, targetId: string, routeId: string, n: number): Promise<void> {
  const route = ROUTES.find((r) => r.id === routeId)!;
  const handle = await makeHandle(targetId);
  const make = requestMaker(route);
  const first = await handle(make());
  const text = await first.text();
  if (first.status !== 200 || text !== route.expect) {
    console.error(`${targetId} answered ${first.status} ${JSON.stringify(text)}`);
    Deno.exit(3);
  }
  let result: ChildResult;
  if (mode === "alloc") {
    const heap = () => Deno.memoryUsage().heapUsed;
    const warm = 5_000;
    await loop(handle, make, warm);
    await settle();
    const h0 = heap();
    await loop(handle, make, n);
    const h1 = heap();
    await settle();
    const h2 = heap();
    await loop(handle, make, 2 * n);
    const h3 = heap();
    result = { total: 1 + warm + 3 * n, bytes: [(h1 - h0) / n, (h3 - h2) / (2 * n)] };
  } else if (mode === "time") {
    const window = Math.max(1, Math.floor(n / 5));
    await loop(handle, make, window);
    const us: number[] = [];
    for (let w = 0; w < 5; w++) {
      const t0 = performance.now();
      await loop(handle, make, window);
      us.push(((performance.now() - t0) * 1000) / window);
    }
    us.sort((a, b) => a - b);
    // Retention is measured here, with V8's usual heap: under the alloc run's 1 GB young
    // generation Deno's finalizers lag, and some 70 B per request seemed to stay for good.
    await settle();
    const h0 = Deno.memoryUsage().heapUsed;
    await loop(handle, make, window);
    await settle();
    const retained = (Deno.memoryUsage().heapUsed - h0) / window;
    result = { total: 1 + 7 * window, us: us[2], usMin: us[0], usMax: us[4], retained };
  } else {
    await loop(handle, make, Math.floor(n / 5));
    markProfileWindow();
    await loop(handle, make, n);
    result = { total: n };
  }
  // On stderr: V8 writes --trace-gc to stdout through its own buffer, which may flush mid-line.
  console.error(`RESULT ${JSON.stringify(result)}`);
  channel?.port1.close();
}

/** Settings of a profiling run. */
export interface ProfileOptions {
  /** Target ids. */
  readonly targets: readonly string[];
  /** Route ids. */
  readonly routes: readonly string[];
  /** Requests per timed run (five windows of a fifth each) and per profile. */
  readonly requests: number;
  /** Requests in the first allocation window (the second is twice as long). */
  readonly allocRequests: number;
  /** Keep the `.cpuprofile` files here (open them in Chrome DevTools), or undefined. */
  readonly profilesDir: string | undefined;
  /** Write bench/PROFILE.md. */
  readonly write: boolean;
  /** A smoke run. */
  readonly quick: boolean;
}

/**
 * Reads the options from the command line.
 *
 * @param args Command-line arguments.
 * @returns The options.
 * @throws {TypeError} On an unknown flag, target or route, or a bad number.
 */
export function parseProfileOptions(args: readonly string[]): ProfileOptions {
  const known = ["targets", "routes", "requests", "profiles-dir", "no-write", "quick"];
  const flags = new Map<string, string>();
  for (const arg of args) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m === null || !known.includes(m[1]!)) {
      throw new TypeError(
        `Unknown argument "${arg}": use ${known.map((k) => `--${k}`).join(", ")}`,
      );
    }
    flags.set(m[1]!, m[2] ?? "");
  }
  const quick = flags.has("quick");
  const list = (name: string, all: readonly { id: string }[], fallback: readonly string[]) => {
    const ids = flags.get(name)?.split(",") ?? fallback;
    for (const id of ids) {
      if (!all.some((t) => t.id === id)) {
        throw new TypeError(
          `Unknown ${name.slice(0, -1)} "${id}": use some of ${all.map((t) => t.id).join(",")}`,
        );
      }
    }
    return ids;
  };
  const raw = flags.get("requests");
  const requests = raw === undefined ? (quick ? 2_000 : 100_000) : Number(raw);
  if (!Number.isInteger(requests) || requests < 5) {
    throw new TypeError(`Invalid --requests "${raw}": expected a whole number of at least 5`);
  }
  return {
    targets: list("targets", TARGETS, TARGETS.map((t) => t.id)),
    routes: list("routes", ROUTES, ["hello-world", "echo"]),
    requests,
    allocRequests: quick ? 1_000 : 10_000,
    profilesDir: flags.get("profiles-dir"),
    write: !flags.has("no-write") && !quick,
    quick,
  };
}

/** Everything measured for one target and route. */
export interface Measured {
  /** Time mode's result. */
  readonly time: ChildResult;
  /** Collections during the time mode's run. */
  readonly gc: GcTrace;
  /** Alloc mode's result. */
  readonly alloc: ChildResult;
  /** Collections during the alloc run (should be forced ones only). */
  readonly allocGc: GcTrace;
  /** Self times, if profiled, and the requests the profile covers. */
  readonly profile?: { readonly times: readonly SelfTime[]; readonly total: number };
}

/** The longest one child process may take. */
const CHILD_TIMEOUT_MS = 180_000;

async function runChild(
  mode: string,
  target: string,
  route: string,
  n: number,
  v8Flags: string[],
  extra: string[] = [],
): Promise<{ result: ChildResult; stdout: string }> {
  const self = new URL(import.meta.url).pathname;
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), CHILD_TIMEOUT_MS);
  const { success, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...(v8Flags.length > 0 ? [`--v8-flags=${v8Flags.join(",")}`] : []),
      ...extra,
      self,
      `--child=${mode}`,
      `--target=${target}`,
      `--route=${route}`,
      `--n=${n}`,
    ],
    stdout: "piped",
    stderr: "piped",
    // Bounded, so a child that hangs fails the run instead of stalling it.
    signal: stop.signal,
  }).output().finally(() => clearTimeout(timer));
  const out = new TextDecoder().decode(stdout);
  const err = new TextDecoder().decode(stderr);
  const line = /^RESULT (.*)$/m.exec(err)?.[1];
  if (!success || line === undefined) {
    throw new Error(`The ${mode} run of ${target} on ${route} failed: ${err}`);
  }
  return { result: JSON.parse(line), stdout: out };
}

/**
 * Measures one target on one route.
 *
 * @param target Target id.
 * @param route Route id.
 * @param options The run's settings.
 * @returns The figures.
 */
export async function measureTarget(
  target: string,
  route: string,
  options: ProfileOptions,
): Promise<Measured> {
  const time = await runChild("time", target, route, options.requests, [
    "--expose-gc",
    "--trace-gc",
  ]);
  const alloc = await runChild("alloc", target, route, options.allocRequests, [
    "--expose-gc",
    "--trace-gc",
    "--min-semi-space-size=1024",
    "--max-semi-space-size=1024",
  ]);
  let profile: Measured["profile"];
  if (PROFILED.includes(target) || options.profilesDir !== undefined) {
    const dir = options.profilesDir ?? await Deno.makeTempDir({ prefix: "stellarator-prof-" });
    await Deno.mkdir(dir, { recursive: true });
    const name = `${target}-${route}.cpuprofile`;
    const run = await runChild("profile", target, route, options.requests, [], [
      "--cpu-prof",
      `--cpu-prof-dir=${dir}`,
      `--cpu-prof-name=${name}`,
      "--cpu-prof-interval=100",
    ]);
    const data = JSON.parse(await Deno.readTextFile(`${dir}/${name}`)) as CpuProfile;
    profile = { times: selfTimes(data, "markProfileWindow"), total: run.result.total };
    if (options.profilesDir === undefined) await Deno.remove(dir, { recursive: true });
  }
  return {
    time: time.result,
    gc: parseTraceGc(time.stdout),
    alloc: alloc.result,
    allocGc: parseTraceGc(alloc.stdout),
    profile,
  };
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`;

/**
 * Renders the measured section of bench/PROFILE.md.
 *
 * @param results Figures by target id, then route id.
 * @param options The run's settings.
 * @param command The command that made them.
 * @returns Markdown.
 */
export function renderProfile(
  results: ReadonlyMap<string, ReadonlyMap<string, Measured>>,
  options: ProfileOptions,
  command: string,
): string {
  const out = [
    "## Measured",
    "",
    `- Date: ${
      new Date().toISOString().replace(/\.\d+Z$/, "Z")
    }, Deno ${Deno.version.deno} (V8 ${Deno.version.v8})`,
    `- Command: \`${command}\``,
    `- ${options.requests} requests per timed run (median of five windows) and per profile; allocation over ${options.allocRequests} and ${
      2 * options.allocRequests
    } requests with a 1 GB young generation.${
      options.quick ? " **Smoke run: too short for conclusions.**" : ""
    }`,
    "",
  ];
  const routes = ROUTES.filter((r) => options.routes.includes(r.id));
  for (const route of routes) {
    out.push(
      `### ${route.method} ${route.path}${
        route.body === undefined ? "" : ` (${ECHO_BODY.length} B body)`
      }`,
      "",
      "| target | µs per request | beyond bare | allocated per request | beyond bare | by --trace-gc | retained per request | GCs per 1k requests | GC pause per 1k requests |",
      "| --- | --: | --: | --: | --: | --: | --: | --: | --: |",
    );
    const bare = results.get("bare")?.get(route.id);
    for (const target of TARGETS) {
      const m = results.get(target.id)?.get(route.id);
      if (m === undefined) continue;
      const [a1, a2] = m.alloc.bytes ?? [NaN, NaN];
      // Two windows that disagree by more than 5 % mean something other than requests allocated.
      const steady = Math.abs(a1 - a2) <= 0.05 * Math.max(a1, a2) && m.allocGc.young === 0 &&
        m.allocGc.full === 0;
      const perK = 1000 / m.time.total;
      const beyond = (
        ours: number | undefined,
        base: number | undefined,
        f: (v: number) => string,
      ) =>
        bare === undefined || target.id === "bare" || ours === undefined || base === undefined
          ? "—"
          : `+${f(ours - base)}`;
      out.push(
        `| ${target.label} | ${m.time.us!.toFixed(2)} (${m.time.usMin!.toFixed(2)}–${
          m.time.usMax!.toFixed(2)
        }) | ${beyond(m.time.us, bare?.time.us, (v) => v.toFixed(2))} | ${kb(a2)}${
          steady
            ? ""
            : ` (unsteady: ${kb(a1)} then ${kb(a2)}, ${m.allocGc.young + m.allocGc.full} GCs)`
        } | ${beyond(a2, bare?.alloc.bytes?.[1], kb)} | ${
          kb((m.gc.freedMb * 1024 * 1024) / m.time.total)
        } | ${kb(m.time.retained ?? NaN)} | ${((m.gc.young + m.gc.full) * perK).toFixed(2)} | ${
          (m.gc.pauseMs * perK).toFixed(2)
        } ms |`,
      );
    }
    out.push("");
    for (const target of TARGETS) {
      const m = results.get(target.id)?.get(route.id);
      if (m?.profile === undefined) continue;
      const { times, total } = m.profile;
      const sum = times.reduce((a, t) => a + t.us, 0);
      out.push(
        `#### ${target.label}, ${route.method} ${route.path}: self time per request (profiled, ${
          (sum / total).toFixed(2)
        } µs in all)`,
        "",
        "| layer | µs | share |",
        "| --- | --: | --: |",
      );
      for (const g of byGroup(times)) {
        out.push(
          `| ${g.name} | ${(g.us / total).toFixed(2)} | ${((g.us / sum) * 100).toFixed(1)} % |`,
        );
      }
      out.push("", "| function | layer | µs | share |", "| --- | --- | --: | --: |");
      for (const t of times.slice(0, 15)) {
        out.push(
          `| \`${t.name.replaceAll("|", "\\|")}\` | ${t.group} | ${(t.us / total).toFixed(2)} | ${
            ((t.us / sum) * 100).toFixed(1)
          } % |`,
        );
      }
      out.push("");
    }
  }
  return out.join("\n");
}

if (import.meta.main) {
  const childArgs = new Map(
    Deno.args.map((a) => /^--(child|target|route|n)=(.*)$/.exec(a)).filter((m) => m !== null)
      .map((m) => [m![1]!, m![2]!]),
  );
  if (childArgs.has("child")) {
    await child(
      childArgs.get("child")!,
      childArgs.get("target")!,
      childArgs.get("route")!,
      Number(childArgs.get("n")),
    );
  } else {
    let options: ProfileOptions;
    try {
      options = parseProfileOptions(Deno.args);
    } catch (error) {
      console.error(error instanceof Error ? error.message : error);
      Deno.exit(2);
    }
    const command = ["deno task bench:profile", ...Deno.args].join(" ");
    const results = new Map<string, Map<string, Measured>>();
    for (const route of options.routes) {
      for (const target of options.targets) {
        const m = await measureTarget(target, route, options);
        const byRoute = results.get(target) ?? new Map<string, Measured>();
        byRoute.set(route, m);
        results.set(target, byRoute);
        console.log(
          `${target.padEnd(10)} ${route.padEnd(12)} ${m.time.us!.toFixed(2)} µs/req  ${
            kb(m.alloc.bytes![1])
          }/req allocated  ${kb(m.time.retained!)}/req retained  ${(m.gc.young + m.gc.full)} GCs`,
        );
      }
    }
    const markdown = renderProfile(results, options, command);
    console.log(`\n${markdown}`);
    if (options.write) writeSection("profile", markdown, PROFILE_FILE);
  }
}
