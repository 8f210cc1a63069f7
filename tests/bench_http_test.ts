import { assertEquals, assertThrows } from "@std/assert";
import { cpuSeconds, parseOptions, parseWrk, SERVERS } from "../bench/http_bench.ts";

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

Deno.test("parseOptions() defaults to the issue's load and takes a quick smoke run", () => {
  const full = parseOptions([]);
  assertEquals([full.duration, full.warmup, full.rounds, full.connections, full.threads], [
    10,
    2,
    3,
    64,
    2,
  ]);
  assertEquals(full.servers, SERVERS.map((s) => s.id));
  const quick = parseOptions(["--quick", "--servers=deno,asgi", "--no-write"]);
  assertEquals([quick.duration, quick.rounds, quick.write], [1, 1, false]);
  assertEquals(quick.servers, ["deno", "asgi"]);
  assertEquals(parseOptions(["--duration=3", "--rounds=5"]).rounds, 5);
});

Deno.test("parseOptions() rejects unknown flags, servers and bad numbers with TypeError", async (t) => {
  const cases: [string[], string][] = [
    [["--fast"], 'Unknown flag "--fast"'],
    [["duration=3"], 'Unknown argument "duration=3": flags look like --duration=10'],
    [["--servers=deno,nginx"], 'Unknown server "nginx"'],
    [["--duration=0"], 'Invalid --duration "0": expected a positive number'],
    [["--rounds=x"], 'Invalid --rounds "x": expected a positive number'],
  ];
  for (const [args, message] of cases) {
    await t.step(args.join(" "), () => {
      assertThrows(() => parseOptions(args), TypeError, message);
    });
  }
});

Deno.test({
  name: "cpuSeconds() reads this process's CPU time from /proc, growing with work",
  ignore: Deno.build.os !== "linux",
  fn() {
    const before = cpuSeconds(Deno.pid)!;
    const end = performance.now() + 50;
    while (performance.now() < end) { /* spin */ }
    const after = cpuSeconds(Deno.pid)!;
    assertEquals(after >= before + 0.02, true, `${before} -> ${after}`);
    assertEquals(cpuSeconds(-1), undefined);
  },
});
