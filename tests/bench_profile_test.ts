import { assertEquals, assertThrows } from "@std/assert";
import {
  byGroup,
  type CpuProfile,
  groupOf,
  parseTraceGc,
  selfTimes,
} from "../bench/_profile_parse.ts";
import { parseProfileOptions, TARGETS } from "../bench/profile_app.ts";

const TRACE =
  `[1:0x5]       20 ms: Mark-Compact 2.3 (2.8) -> 2.2 (2.8) MB, pooled: 0.0 MB, 2.89 / 0.00 ms (average mu = 0.841, current mu = 0.841) testing; GC in old space requested
RESULT {"total":10}
[1:0x5]      412 ms: Scavenge 12.5 (14.0) -> 2.5 (15.2) MB, pooled: 0.0 MB, 0.93 / 0.00 ms (average mu = 1.000, current mu = 1.000) allocation failure;
[1:0x5]      512 ms: Scavenge 12.0 (15.2) -> 3.0 (15.2) MB, pooled: 0.0 MB, 1.07 / 0.00 ms (average mu = 1.000, current mu = 1.000) allocation failure;
[1:0x5]      900 ms: Mark-Compact 40.0 (50.0) -> 20.0 (45.0) MB, pooled: 0.0 MB, 5.00 / 0.00 ms (average mu = 0.9, current mu = 0.9) finalize incremental marking via task; GC in old space requested
`;

Deno.test("parseTraceGc() counts young and full collections, their pause and what they freed, leaving out gc() calls", () => {
  assertEquals(parseTraceGc(TRACE), { young: 2, full: 1, pauseMs: 7, forced: 1, freedMb: 39 });
  assertEquals(parseTraceGc("no trace"), { young: 0, full: 0, pauseMs: 0, forced: 0, freedMb: 0 });
});

Deno.test("groupOf() puts each script in its layer", () => {
  assertEquals(groupOf("file:///r/web.ts", "f"), "stellarator web layer (web.ts, _web/)");
  assertEquals(
    groupOf("file:///r/_asgi/core.ts", "f"),
    "stellarator ASGI bridge (asgi.ts, _asgi/)",
  );
  assertEquals(groupOf("file:///r/router.ts", "f"), "stellarator router (router.ts, _router/)");
  assertEquals(
    groupOf("file:///r/bench/servers/web_app.ts", "f"),
    "benchmark code (handlers and loop)",
  );
  assertEquals(groupOf("http://127.0.0.1:1/@std/async/1.0.0/deadline.js", "f"), "@std/async");
  assertEquals(groupOf("ext:deno_fetch/23_request.js", "f"), "Deno runtime: deno_fetch");
  assertEquals(groupOf("", "(garbage collector)"), "garbage collector");
  assertEquals(groupOf("", "op_now"), "V8 builtins");
});

Deno.test("selfTimes() sums each function's samples from the end of the marker on, idle left out", () => {
  const frame = (functionName: string, url = "") => ({ functionName, url, lineNumber: 0 });
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame("(root)"), children: [2, 3, 5, 6] },
      {
        id: 2,
        callFrame: frame("markProfileWindow", "file:///r/bench/profile_app.ts"),
        children: [4],
      },
      { id: 3, callFrame: frame("#handle", "file:///r/web.ts") },
      { id: 4, callFrame: frame("op_now") },
      { id: 5, callFrame: frame("(idle)") },
      { id: 6, callFrame: frame("(garbage collector)") },
    ],
    // Samples before the marker's last one (in op_now, under it) do not count.
    samples: [3, 3, 2, 4, 3, 6, 5, 3],
    timeDeltas: [100, 100, 100, 100, 100, 100, 100, 100],
  };
  const times = selfTimes(profile, "markProfileWindow");
  assertEquals(times.map((t) => [t.name, t.us]), [["#handle web.ts:1", 200], [
    "(garbage collector)",
    100,
  ]]);
  assertEquals(byGroup(times).map((g) => [g.name, g.us]), [
    ["stellarator web layer (web.ts, _web/)", 200],
    ["garbage collector", 100],
  ]);
  assertEquals(selfTimes(profile).reduce((a, t) => a + t.us, 0), 700);
});

Deno.test("parseProfileOptions() defaults to every target on the GET and the POST route", () => {
  const options = parseProfileOptions([]);
  assertEquals(options.targets, TARGETS.map((t) => t.id));
  assertEquals([options.routes, options.requests, options.write], [
    ["hello-world", "echo"],
    100_000,
    true,
  ]);
  const quick = parseProfileOptions(["--quick", "--targets=app"]);
  assertEquals([quick.requests, quick.write, quick.targets], [2_000, false, ["app"]]);
  assertThrows(() => parseProfileOptions(["--targets=nginx"]), TypeError, 'Unknown target "nginx"');
  assertThrows(() => parseProfileOptions(["--requests=2"]), TypeError, 'Invalid --requests "2"');
  assertThrows(() => parseProfileOptions(["--fast"]), TypeError, 'Unknown argument "--fast"');
});
