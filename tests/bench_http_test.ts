import { assert, assertEquals, assertMatch, assertThrows } from "@std/assert";
import { checkAnswers, startServer, stopServer } from "../bench/http_bench.ts";
import {
  DEFAULT_ROUTES,
  ECHO_BODY,
  type HttpOptions,
  parseOptions,
  ROUTES,
  SERVERS,
} from "../bench/_http_specs.ts";
import { parseWrk, wrkScript } from "../bench/_wrk.ts";
import { coreBusySeconds, cpuTimes, onCore, parseCpuList } from "../bench/_proc.ts";
import {
  type HttpRun,
  httpVerdicts,
  renderHttp,
  type Sample,
  spread,
} from "../bench/_http_report.ts";

const WRK_OUTPUT = `Running 1s test @ http://127.0.0.1:40123/hello
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms  412.51us   9.87ms   87.12%
    Req/Sec    31.52k     2.10k   35.01k    70.00%
  Latency Distribution
     50%  0.95ms
     75%    1.10ms
     90%    1.40ms
     99%  850.00us
  62741 requests in 1.00s, 8.14MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  62712.45
Transfer/sec:      8.14MB
`;

Deno.test("parseWrk() reads requests/s, p99 in milliseconds, errors and the request count", () => {
  assertEquals(parseWrk(WRK_OUTPUT), { rps: 62712.45, p99: 0.85, errors: 7, requests: 62741 });
  assertEquals(parseWrk(WRK_OUTPUT.replace("850.00us", "1.20s")).p99, 1200);
});

Deno.test("parseWrk() throws when wrk printed no Requests/sec line", () => {
  assertThrows(
    () => parseWrk("connection refused"),
    Error,
    'Cannot read wrk\'s output: no "Requests/sec" line',
  );
});

Deno.test("wrkScript() sets the method, the body and its content-type", () => {
  assertEquals(
    wrkScript("POST", ECHO_BODY, "application/json").split("\n"),
    [
      'wrk.method = "POST"',
      `wrk.body = ${JSON.stringify(ECHO_BODY)}`,
      'wrk.headers["Content-Type"] = "application/json"',
      "",
    ],
  );
  assertEquals(new TextEncoder().encode(ECHO_BODY).byteLength, 64);
});

Deno.test("parseOptions() defaults to three pinned rounds of 4 s and takes a quick smoke run", () => {
  const full = parseOptions([]);
  assertEquals(
    [full.duration, full.warmup, full.rounds, full.connections, full.threads, full.pin],
    [4, 1, 3, 64, undefined, true],
  );
  assertEquals(full.servers, SERVERS.filter((s) => !s.optional).map((s) => s.id));
  assertEquals(full.servers.includes("native-bound"), false);
  assertEquals(parseOptions(["--servers=floor,native-bound"]).servers, ["floor", "native-bound"]);
  assertEquals(full.routes, DEFAULT_ROUTES);
  const quick = parseOptions(["--quick", "--servers=deno,asgi", "--no-write", "--no-pin"]);
  assertEquals([quick.duration, quick.warmup, quick.rounds, quick.write, quick.pin], [
    1,
    0,
    1,
    false,
    false,
  ]);
  assertEquals(quick.servers, ["deno", "asgi"]);
  const custom = parseOptions(["--duration=3", "--rounds=5", "--threads=2", "--routes=hello"]);
  assertEquals([custom.rounds, custom.threads, custom.routes], [5, 2, ["hello"]]);
  assertEquals(parseOptions(["--warmup=0"]).warmup, 0);
});

Deno.test("parseOptions() rejects unknown flags, servers, routes and bad numbers with TypeError", async (t) => {
  const cases: [string[], string][] = [
    [["--fast"], 'Unknown flag "--fast"'],
    [["duration=3"], 'Unknown argument "duration=3": flags look like --duration=4'],
    [["--servers=deno,nginx"], 'Unknown server "nginx"'],
    [["--routes=put"], 'Unknown route "put"'],
    [["--duration=0"], 'Invalid --duration "0": expected a whole number of at least 1'],
    [["--duration=1.5"], 'Invalid --duration "1.5": expected a whole number of at least 1'],
    [["--rounds=x"], 'Invalid --rounds "x": expected a whole number of at least 1'],
    [["--warmup=-1"], 'Invalid --warmup "-1": expected a whole number of at least 0'],
  ];
  for (const [args, message] of cases) {
    await t.step(args.join(" "), () => {
      assertThrows(() => parseOptions(args), TypeError, message);
    });
  }
});

Deno.test({
  name: "cpuTimes() and coreBusySeconds() read CPU time from /proc, growing with work",
  ignore: Deno.build.os !== "linux",
  fn() {
    const timesBefore = cpuTimes(Deno.pid)!;
    const before = timesBefore.user + timesBefore.system;
    const coresBefore = coreBusySeconds()!;
    const end = performance.now() + 50;
    while (performance.now() < end) { /* spin */ }
    const timesAfter = cpuTimes(Deno.pid)!;
    const after = timesAfter.user + timesAfter.system;
    const coresAfter = coreBusySeconds()!;
    assert(after >= before + 0.02, `${before} -> ${after}`);
    // A spin in JavaScript is user time.
    assert(
      timesAfter.user >= timesBefore.user + 0.02,
      `user ${timesBefore.user} -> ${timesAfter.user}`,
    );
    assert(timesAfter.system >= timesBefore.system);
    const busy = coresAfter.reduce((a, b) => a + b, 0) - coresBefore.reduce((a, b) => a + b, 0);
    assert(busy >= 0.02, `cores busy ${busy} s`);
    assertEquals(coresAfter.length, coresBefore.length);
    assertEquals(cpuTimes(-1), undefined);
  },
});

Deno.test("parseCpuList() reads ranges and single cores", () => {
  assertEquals(parseCpuList("0-3,6\n"), [0, 1, 2, 3, 6]);
  assertEquals(parseCpuList("1"), [1]);
  assertEquals(parseCpuList(""), []);
});

Deno.test("onCore() runs a command through taskset only when given a core", () => {
  assertEquals(onCore(["wrk", "-t1"], 1), ["taskset", "-c", "1", "wrk", "-t1"]);
  assertEquals(onCore(["wrk", "-t1"], undefined), ["wrk", "-t1"]);
});

Deno.test("spread() gives the median and range, leaving out what was not measured", () => {
  assertEquals(spread([3, 1, undefined, 2]), { median: 2, min: 1, max: 3, n: 3 });
  assertEquals(spread([4, 1]), { median: 2.5, min: 1, max: 4, n: 2 });
  assertEquals(spread([undefined, NaN]), undefined);
});

/** A run where every server serves `rps[id][round]` requests/s on every route. */
function syntheticRun(
  rps: Record<string, number[]>,
  options: Partial<HttpOptions> = {},
): HttpRun {
  const samples = new Map<string, Map<string, Sample[]>>();
  for (const [id, rounds] of Object.entries(rps)) {
    const byRoute = new Map<string, Sample[]>();
    for (const route of DEFAULT_ROUTES) {
      byRoute.set(
        route,
        rounds.map((r, round) => ({
          rps: r,
          p99: 1,
          errors: 0,
          requests: r * 4,
          round,
          seconds: 4,
          // CPU-bound on one core: 4 s of CPU for 4 s of load.
          serverCpu: 4,
          // Of which a quarter in user space, the rest the kernel's.
          serverUserCpu: 1,
          serverCoreBusy: 4,
          loadCoreBusy: 3,
        })),
      );
    }
    samples.set(id, byRoute);
  }
  return {
    options: { ...parseOptions(["--no-write"]), ...options },
    pinning: { pinned: true, serverCore: 0, loadCore: 1 },
    header: "- Date: test",
    command: "deno task bench:http",
    samples,
    failed: new Map([["node", "exited before listening"]]),
  };
}

Deno.test("httpVerdicts() misses a target that only the baseline's slow rounds let through", () => {
  // The floor drew its slow mode (94 k) in three rounds of five: every per-round ratio of the
  // ASGI app is at least 1.00, but at its fastest the floor serves 112 k to the app's 94 k.
  const run = syntheticRun({
    deno: [140, 140, 140, 140, 140],
    floor: [112, 94, 94, 112, 94],
    hono: [128, 128, 128, 128, 128],
    asgi: [94, 94, 94, 94, 94],
    app: [90, 90, 90, 90, 90],
    "app-limit": [88, 88, 88, 88, 88],
  }, { rounds: 5 });
  const rows = new Map(httpVerdicts(run).map((v) => [v.target, v]));
  const asgi = rows.get("3. ASGI app ≥ 0.95× the floor, GET /hello/world")!;
  assertEquals(asgi.verdict, "missed (3/5 rounds; by CPU met; fastest rounds missed)");
  assertMatch(asgi.measured, /fastest rounds 0\.84×$/);
});

Deno.test("httpVerdicts() judges each target on the median of ratios paired by round", () => {
  const run = syntheticRun({
    deno: [100, 100, 100],
    floor: [80, 80, 40],
    hono: [100, 100, 100],
    // 0.95, 0.9375, 2.0 of the floor: the median (0.95) meets 0.95 though one round did not.
    asgi: [76, 75, 80],
    app: [72, 72, 36],
    "app-limit": [72, 56, 36],
  });
  const rows = new Map(httpVerdicts(run).map((v) => [v.target, v]));
  const asgi = rows.get("3. ASGI app ≥ 0.95× the floor, GET /hello/world")!;
  assertEquals(asgi.verdict, "met (2/3 rounds; by CPU met; fastest rounds met)");
  assertMatch(
    asgi.measured,
    /^0\.95× \(0\.94×–2\.00×\); by server CPU 0\.95×; fastest rounds 1\.00×$/,
  );
  assertEquals(
    rows.get("4. App ≥ 0.90× the floor, POST /echo")!.verdict,
    "met (3/3 rounds; by CPU met; fastest rounds met)",
  );
  assertEquals(
    rows.get("2. App with requestTimeLimit ≥ 0.90× the App, GET /hello/world")!.verdict,
    "met (2/3 rounds; by CPU met; fastest rounds met)",
  );
  assertEquals(
    rows.get("5. moonshot: App ahead of Hono (≥ 1.00×), GET /hello/world")!.verdict,
    "missed (0/3 rounds; by CPU missed; fastest rounds missed)",
  );
  assertEquals(
    rows.get("ASGI app on node ÷ bare node:http, GET /hello/world")!.verdict,
    "n/a",
  );
  assertEquals(rows.get("1. server and load generator on separate cores")!.verdict, "met");
  assertEquals(rows.get("1. bare Deno.serve, the floor and Hono in the same run")!.verdict, "met");
  const quality = rows.get(
    "the server had its core to itself (≥ 85 % busy with it, others ≤ 10 %)",
  )!;
  assertEquals([quality.measured, quality.verdict], ["36 of 36 measurements", "clean"]);
});

Deno.test("httpVerdicts() marks an unpinned or one-round run as not meeting the method", () => {
  const run = {
    ...syntheticRun({ deno: [100] }, { rounds: 1 }),
    pinning: { pinned: false, reason: "--no-pin was given" } as const,
  };
  const rows = new Map(httpVerdicts(run).map((v) => [v.target, v]));
  const pin = rows.get("1. server and load generator on separate cores")!;
  assertEquals([pin.verdict, pin.measured], ["missed", "not pinned: --no-pin was given"]);
  assertEquals(
    rows.get("1. several alternating rounds; median, spread and server CPU per request")!.verdict,
    "missed",
  );
  assertEquals(
    rows.get("1. bare Deno.serve, the floor and Hono in the same run")!.measured,
    "only deno",
  );
});

Deno.test("renderHttp() gives median and range per server and calls a run disturbed when a server lacked its core", () => {
  const run = syntheticRun({ deno: [100, 90, 110], floor: [80, 80, 80] });
  const starved = run.samples.get("floor")!.get("echo")![1]!;
  (run.samples.get("floor")!.get("echo") as Sample[])[1] = { ...starved, serverCpu: 2 };
  const markdown = renderHttp(run);
  assertMatch(markdown, /\| bare Deno\.serve \| 100 \(90–110\) \| — \|/);
  assertMatch(markdown, /\| the floor \(Deno\.serve reading a scope\) \| 80 \| 0\.80× \|/);
  // CPU and its user part per request: 4 s and 1 s over 320 requests.
  assertMatch(
    markdown,
    /\| the floor \(Deno\.serve reading a scope\) \| 80 \| 0\.80× \| 1\.00 ms \| 12500\.0 µs \| 3125\.0 µs \|/,
  );
  assertMatch(
    markdown,
    /\| the server had its core to itself \(≥ 85 % busy with it, others ≤ 10 %\) \| 11 of 12 measurements; worst: the floor \(Deno\.serve reading a scope\), POST \/echo, round 2: server 50 % of its core, others 50 % \| \*\*disturbed: req\/s ratios inconclusive, trust the CPU ones\*\* \|/,
  );
  assertMatch(markdown, /bare node:http \(Deno\) left out: exited before listening/);
  assertMatch(markdown, /- Cores: each server pinned to core 0, wrk to core 1 \(taskset\)/);
});

Deno.test("bench servers answer every route with the expected body", async () => {
  // Server by server: all at once would crowd a small shared machine.
  for (const spec of SERVERS) {
    const server = await startServer(spec);
    try {
      assertEquals(await checkAnswers(server.port, ROUTES), undefined, spec.label);
    } finally {
      await stopServer(server);
    }
  }
});

async function hasWrk(): Promise<boolean> {
  try {
    await new Deno.Command("wrk", { args: ["--version"], stdout: "null", stderr: "null" })
      .output();
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "http_bench.ts --quick loads each route with wrk and prints the verdict table",
  ignore: !(await hasWrk()),
  async fn() {
    const script = new URL("../bench/http_bench.ts", import.meta.url).pathname;
    const { success, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script, "--quick", "--servers=floor,app", "--no-write"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(stdout);
    assert(success, `${out}${new TextDecoder().decode(stderr)}`);
    assertMatch(out, /### GET \/hello\/world/);
    assertMatch(out, /### POST \/echo/);
    assertMatch(
      out,
      /\| 1\. a POST route that echoes a small body \| POST \/echo, 64 B, 0 errors \| \*\*met\*\* \|/,
    );
    assertMatch(out, /\| 4\. App ≥ 0\.90× the floor, POST \/echo \| \d/);
  },
});
