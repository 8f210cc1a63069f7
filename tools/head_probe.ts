// Copyright the stellarator authors. MIT license.
/**
 * The request-head probe: sends each transport the largest request heads it accepts, built to
 * cost the server the most (long paths, tens of thousands of segments, every byte a
 * percent-escape, paths against the near-limit regex routes, the most header fields, the longest
 * `X-Forwarded-For` chains with `proxyHeaders()` on), doubling the size up to the transport's
 * limit, and prints the server's CPU time per request at each size, how it grows over the last
 * doubling (2× is linear) and the server's memory. The figures of docs/asgi.md ("Request heads:
 * sizes and costs") come from it.
 *
 * ```sh
 * deno run -A tools/with_jsr_mirror.ts deno run -A tools/head_probe.ts
 * deno run -A tools/with_jsr_mirror.ts deno run -A tools/head_probe.ts --servers=node:app --only=forwarded
 * # a server started by hand (uvicorn, say): its port, its pid and the largest head to try
 * deno run -A tools/with_jsr_mirror.ts deno run -A tools/head_probe.ts --port=18530 --pid=1234 --limit=127000
 * ```
 *
 * Options: `--servers` (`deno:asgi,deno:app,node:asgi,node:app`: a transport and an application
 * each; `asgi` is an ASGI function that routes with an `AsgiRouter`, `app` an `App`, both behind
 * `proxyHeaders()`, which trusts loopback, on the routes of `bench/routes/` and four near-limit
 * regex routes of `bench/redos_bench.ts`), `--reps` (5: each size is sent once to warm up, then
 * in three rounds of this many requests, the cheapest round giving the figure), `--only` (the
 * cases whose name contains one of these comma-separated words), `--port` (18500: the servers
 * take it and the next ones), `--trickle` (also send the largest path one byte per write).
 * Linux only: CPU time is read from `/proc/<pid>/task/<tid>/schedstat` (nanoseconds, all of the
 * server's threads), and each request has a connection of its own, so each figure includes
 * accepting and closing it (0.1-0.3 ms on a busy 2-core machine).
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import {
  App,
  type AsgiApplication,
  AsgiRouter,
  proxyHeaders,
  type Request,
  Response,
  Route,
  serve,
} from "../web.ts";

function option(name: string, fallback: string): string {
  const prefix = `--${name}=`;
  return Deno.args.find((arg) => arg.startsWith(prefix))?.slice(prefix.length) ?? fallback;
}

/** The largest head each transport took (Deno 2.9.6), less room for the request line. */
const LIMITS: Readonly<Record<string, number>> = { deno: 65_400, node: 16_300 };

// ---------------------------------------------------------------------------------------------
// The server: this file again, run with `--serve=<transport>:<application>` by the probe.
// ---------------------------------------------------------------------------------------------

/** The most ambiguous regex routes the guard accepts (bench/redos_bench.ts). */
const NEAR_LIMIT_ROUTES: readonly string[] = [
  "/test/{id:[a-z]+(?:a{1,40}!)?}",
  "/test2/{id:[a-z]*(?:[a-c]{1,30}!)?}",
  "/s/{file:.+}.{ext:[^./]+}",
  "/d/{path:.+}/{name:[a-z]+}",
];

function routePatterns(): string[] {
  const patterns = [...NEAR_LIMIT_ROUTES];
  for (const file of ["github-api-routes.txt", "hard-routes.txt", "constraint-routes.txt"]) {
    const text = Deno.readTextFileSync(new URL(`../bench/routes/${file}`, import.meta.url));
    for (const line of text.split("\n")) {
      if (line !== "" && !line.startsWith("#") && !patterns.includes(line)) patterns.push(line);
    }
  }
  return patterns;
}

/** Serves until killed. */
async function serveProbed(transport: "deno" | "node", kind: string, port: number): Promise<void> {
  const encoder = new TextEncoder();
  let app: AsgiApplication | App;
  if (kind === "app") {
    const answer = async (request: Request): Promise<void> => {
      await request.respondWith(new Response({ body: `${request.path.length}\n` }));
    };
    const routes = routePatterns().map((path) => new Route(path, { handler: answer }));
    app = new App({ router: new AsgiRouter({ routes }) });
  } else {
    const routes = routePatterns().map((path) => new Route(path, { handler: () => path }));
    const router = new AsgiRouter({ routes });
    app = async (scope, _receive, send) => {
      if (scope.type !== "http") return;
      const found = router.match(scope.path) !== undefined;
      await send({ type: "http.response.start", status: found ? 200 : 404 });
      await send({
        type: "http.response.body",
        body: encoder.encode(`${scope.path.length} ${scope.client?.[0]}\n`),
      });
    };
  }
  await serve(proxyHeaders(app), { port, transport, lifespan: "off", onListen() {} }).finished;
}

// ---------------------------------------------------------------------------------------------
// The heads.
// ---------------------------------------------------------------------------------------------

/** `unit` repeated after `prefix` up to `size` characters. */
function fill(prefix: string, unit: string, size: number): string {
  return prefix + unit.repeat(Math.max(1, Math.floor((size - prefix.length) / unit.length)));
}

/** A GET head for `target`: `Host`, `Connection: close`, then `fields`. */
function head(target: string, fields: readonly string[] = []): Uint8Array {
  const lines = [`GET ${target} HTTP/1.1`, "Host: 127.0.0.1", "Connection: close", ...fields];
  return Uint8Array.from(`${lines.join("\r\n")}\r\n\r\n`, (c) => c.charCodeAt(0));
}

/** Room left for the request line and the two fields `head` adds. */
const OVERHEAD = 70;

/** As many fields of `each` bytes (line end included) as fit in a head of `size` bytes. */
function fields(size: number, each: number, field: (i: number) => string): string[] {
  return Array.from({ length: Math.floor((size - OVERHEAD) / each) }, (_, i) => field(i));
}

/** How many `a`s make the hostile path of the regex route: to fill `room`, at most 8192 in all. */
function hostileRun(room: number): number {
  return Math.max(1, Math.min(Math.floor(room), 8192) - "/test/!b".length);
}

/** Each case: a head of about `size` bytes. */
const CASES: Readonly<Record<string, (size: number) => Uint8Array>> = {
  "path: one segment": (n) => head(fill("/", "a", n - OVERHEAD)),
  "path: /a segments": (n) => head(fill("", "/a", n - OVERHEAD)),
  "path: a run of /": (n) => head(fill("", "/", n - OVERHEAD)),
  "path: /.. segments": (n) => head(fill("", "/..", n - OVERHEAD)),
  "path: %2F": (n) => head(fill("/", "%2F", n - OVERHEAD)),
  "path: %00": (n) => head(fill("/", "%00", n - OVERHEAD)),
  "path: %C0%AF": (n) => head(fill("/", "%C0%AF", n - OVERHEAD)),
  "path: %FF": (n) => head(fill("/", "%FF", n - OVERHEAD)),
  "path: % alone": (n) => head(fill("/", "%", n - OVERHEAD)),
  // The slowest path bench/redos_bench.ts finds for /test/{id:[a-z]+(?:a{1,40}!)?}, up to the
  // router's maxPathLength (8192) once decoded: beyond, the router refuses it by its length.
  "path: a…a!b on a regex route": (n) => head(`/test/${"a".repeat(hostileRun(n - OVERHEAD))}!b`),
  "path: %61…%21b on a regex route": (n) =>
    head(`/test/${"%61".repeat(hostileRun((n - OVERHEAD) / 3))}%21b`),
  "path: : on {user1}:{branch1}...": (n) => head(fill("/repos/o/r/compare/", ":", n - OVERHEAD)),
  "query: a=b&": (n) => head(fill("/?", "a=b&", n - OVERHEAD)),
  "fields: one long value": (n) => head("/", [fill("x-long: ", "v", n - OVERHEAD)]),
  "fields: 100-byte fields": (n) => head("/", fields(n, 102, (i) => `x-${i}: ${"v".repeat(92)}`)),
  "fields: one name repeated": (n) => head("/", fields(n, 102, () => `x-same: ${"v".repeat(92)}`)),
  "fields: tiny (a: b)": (n) => head("/", fields(n, 6, () => "a: b")),
  "x-forwarded-for: 127.0.0.1 chain": (n) =>
    head("/", [fill("x-forwarded-for: ", "127.0.0.1, ", n - OVERHEAD) + "10.1.2.3"]),
  "x-forwarded-for: ::1 chain": (n) =>
    head("/", [fill("x-forwarded-for: ", "::1,", n - OVERHEAD) + "::1"]),
  "x-forwarded-for: 100-byte fields": (n) =>
    head("/", fields(n, 102, () => fill("x-forwarded-for: ", "::1,", 97) + "::1")),
  // The costliest head found: the regex route's slowest path, the rest an X-Forwarded-For chain.
  "all at once: the regex route's path, then ::1 chain": (n) => {
    const target = `/test/${"a".repeat(hostileRun(n / 8))}!b`;
    return head(target, [fill("x-forwarded-for: ", "::1,", n - OVERHEAD - target.length) + "::1"]);
  },
  "forwarded: long": (n) =>
    head("/", [fill("forwarded: ", "for=127.0.0.1;proto=https, ", n - OVERHEAD) + "for=10.1.2.3"]),
};

// ---------------------------------------------------------------------------------------------
// Measuring.
// ---------------------------------------------------------------------------------------------

/** CPU time of all of `pid`'s threads so far, in nanoseconds. */
function cpuNanoseconds(pid: number): number {
  let total = 0;
  for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(
        Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/schedstat`).split(" ")[0],
      );
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return total;
}

/** A `/proc/<pid>/status` figure (`VmRSS`, `VmHWM`) in MiB. */
function memoryMiB(pid: number, field: string): number {
  const line = Deno.readTextFileSync(`/proc/${pid}/status`).split("\n")
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** Sends `bytes` on a connection of its own, `chunk` bytes a write; returns the status line. */
async function exchange(port: number, bytes: Uint8Array, chunk = bytes.length): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  conn.setNoDelay(true);
  const received: Uint8Array[] = [];
  const reading = (async () => {
    const buffer = new Uint8Array(65_536);
    for (;;) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) return;
      received.push(buffer.slice(0, n));
    }
  })();
  try {
    for (let at = 0; at < bytes.length; at += chunk) {
      const piece = bytes.subarray(at, at + chunk);
      for (let written = 0; written < piece.length;) {
        written += await conn.write(piece.subarray(written));
      }
    }
  } catch {
    // A server that refuses the head may close before it is all sent.
  }
  const timer = setTimeout(() => conn.close(), 20_000);
  await reading;
  clearTimeout(timer);
  try {
    conn.close();
  } catch {
    // Closed by the timer.
  }
  const first = received[0] ?? new Uint8Array(0);
  const text = String.fromCharCode(...first.subarray(0, 64));
  return text.slice(0, Math.max(0, text.indexOf("\r\n"))) || "(no answer)";
}

/** The sizes of a run: doubling from 2 KiB (4 KiB past 32 KiB) up to `limit`, which ends it. */
function sizes(limit: number): number[] {
  const out: number[] = [];
  for (let size = limit > 32_768 ? 4096 : 2048; size < limit; size *= 2) out.push(size);
  out.push(limit);
  return out;
}

async function probe(port: number, pid: number, limit: number): Promise<void> {
  const reps = Number(option("reps", "5"));
  const only = option("only", "").split(",").filter((word) => word !== "");
  const steps = sizes(limit);
  console.log(
    `| case | status at the largest | server CPU ms per request at ${
      steps.map((size) => `${(size / 1024).toFixed(0)} KiB`).join(", ")
    } | last doubling | RSS MiB |`,
  );
  console.log("| --- | --- | --- | --- | --- |");
  for (const [name, make] of Object.entries(CASES)) {
    if (only.length > 0 && !only.some((word) => name.includes(word))) continue;
    const costs: number[] = [];
    let status = "";
    for (const size of steps) {
      const bytes = make(size);
      await exchange(port, bytes);
      // The lowest of three rounds: the request's own cost, less of what else the machine did.
      let best = Infinity;
      for (let round = 0; round < 3; round++) {
        const before = cpuNanoseconds(pid);
        for (let i = 0; i < reps; i++) status = await exchange(port, bytes);
        best = Math.min(best, (cpuNanoseconds(pid) - before) / reps / 1e6);
      }
      costs.push(best);
    }
    // The last step may be shorter than a doubling: scale its growth to one.
    const [a, b] = [costs.at(-2)!, costs.at(-1)!];
    const span = Math.log2(steps.at(-1)! / steps.at(-2)!);
    const growth = Math.pow(b / a, 1 / span);
    console.log(
      `| ${name} | ${status.slice(9)} | ${costs.map((ms) => ms.toFixed(2)).join(", ")} | ${
        growth.toFixed(1)
      }× | ${memoryMiB(pid, "VmRSS").toFixed(0)} |`,
    );
  }
  if (Deno.args.includes("--trickle")) {
    const bytes = CASES["path: one segment"]!(limit);
    const before = cpuNanoseconds(pid);
    const status = await exchange(port, bytes, 1);
    console.log(
      `\nThe largest path, one byte per write (${bytes.length} writes): ${status.slice(9)}, ${
        ((cpuNanoseconds(pid) - before) / 1e6).toFixed(0)
      } ms of server CPU`,
    );
  }
  console.log(`\nPeak RSS: ${memoryMiB(pid, "VmHWM").toFixed(0)} MiB`);
}

async function startServer(spec: string, port: number): Promise<Deno.ChildProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      fileURLToPath(new URL("../deno.json", import.meta.url)),
      fileURLToPath(import.meta.url),
      `--serve=${spec}`,
      `--port=${port}`,
    ],
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  const until = performance.now() + 30_000;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return child;
    } catch (error) {
      if (performance.now() > until) {
        child.kill();
        throw new Error(`The ${spec} server did not listen on ${port}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

if (import.meta.main) {
  const serveSpec = option("serve", "");
  const port = Number(option("port", "18500"));
  if (serveSpec !== "") {
    const [transport, kind] = serveSpec.split(":");
    await serveProbed(transport === "node" ? "node" : "deno", kind ?? "asgi", port);
  } else if (option("pid", "") !== "") {
    await probe(port, Number(option("pid", "")), Number(option("limit", "16300")));
  } else {
    const specs = option("servers", "deno:asgi,deno:app,node:asgi,node:app").split(",");
    for (const [i, spec] of specs.entries()) {
      const transport = spec.split(":")[0]!;
      const limit = LIMITS[transport];
      if (limit === undefined) throw new TypeError(`Unknown transport in ${JSON.stringify(spec)}`);
      const child = await startServer(spec, port + i);
      console.log(`\n## ${spec} (Deno ${Deno.version.deno}, ${new Date().toISOString()})\n`);
      try {
        await probe(port + i, child.pid, Number(option("limit", String(limit))));
      } finally {
        child.kill();
        await child.status;
      }
    }
  }
}
