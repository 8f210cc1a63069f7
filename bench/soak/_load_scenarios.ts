/**
 * Load scenarios of the fault suite: sustained mixed load, wrk POST load, and heap and timers
 * after many requests under a time limit.
 *
 * @module
 */
import { load, type LoadRequest } from "./_client.ts";
import {
  chunked,
  finish,
  get,
  loadFigures,
  newRow,
  pick,
  post,
  type Scenario,
  start,
} from "./_scenario.ts";

/** Sustained mixed load on the App: fds stay bounded (issue 10, item 1), nothing fails. */
export const mixed: Scenario = {
  name: "sustained mixed load",
  checks: "keep-alive GET, POST (content-length and chunked), streams, JSON and tasks on the " +
    "App: no errors, open fds under 200 at 64 connections, back to base after",
  async run(transport, size) {
    const server = await start("./app_server.ts", transport, { env: { TASK_LIMIT: "1000" } });
    server.watch();
    const row = newRow(transport, server);
    const hundred = "x".repeat(98);
    const next = pick<LoadRequest>([
      [40, { bytes: get("/ok") }],
      [25, { bytes: post("/echo", `"${hundred}"`) }],
      [10, { bytes: chunked("/echo", ["a".repeat(1024), "b".repeat(1024)]) }],
      [10, { bytes: get("/stream?n=4&ms=2") }],
      [10, { bytes: post("/json", '{"a":[1,2,3],"b":"c"}') }],
      [5, { bytes: get("/tasks?n=2&ms=5") }],
    ]);
    const result = await load(server.port, {
      connections: 64,
      durationMs: size.short ? 6_000 : 60_000,
      next,
    });
    loadFigures(row, result);
    server.sample();
    if (result.errors > 0) row.failures.push(`${result.errors} requests failed`);
    // Issue 10, item 1: a POST body once made Deno.serve answer `connection: close` and keep the
    // socket in CLOSE-WAIT until a GC.
    row.notes.push(`responses with connection: close: ${result.closes}`);
    if (result.closes > 0) {
      row.failures.push(`${result.closes} responses closed their keep-alive connection`);
    }
    if (server.fds.peak >= 200) {
      row.failures.push(`open fds reached ${server.fds.peak} at 64 connections (must stay < 200)`);
    }
    return await finish(server, row);
  },
};

/** wrk POST load on the bridge, as issue 10 item 1 measured it. */
export const wrkPost: Scenario = {
  name: "POST load (wrk -t2 -c64, 100-byte bodies)",
  checks: "the bridge keeps keep-alive connections alive after a POST body: open fds under 200",
  async run(transport, size) {
    const server = await start("./asgi_server.ts", transport);
    server.watch();
    const row = newRow(transport, server);
    const script = await Deno.makeTempFile({ suffix: ".lua" });
    await Deno.writeTextFile(
      script,
      `wrk.method = "POST"\nwrk.body = string.rep("x", 100)\n` +
        `wrk.headers["content-type"] = "text/plain"\n`,
    );
    const seconds = size.short ? 5 : 20;
    const output = await new Deno.Command("wrk", {
      args: [
        "-t2",
        "-c64",
        `-d${seconds}s`,
        "--latency",
        "-s",
        script,
        "--timeout",
        "5s",
        `http://127.0.0.1:${server.port}/echo`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    await Deno.remove(script);
    const text = new TextDecoder().decode(output.stdout);
    server.sample();
    row.rate = Math.round(Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? 0));
    const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(text);
    if (p99) {
      const scale = { us: 0.001, ms: 1, s: 1000 }[p99[2] as "us" | "ms" | "s"];
      row.p99 = Math.round(Number(p99[1]) * scale * 10) / 10;
    }
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/
      .exec(text);
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0);
    row.errors = non2xx +
      (socketErrors ? socketErrors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0);
    if (row.errors > 0) {
      row.notes.push(`wrk: ${socketErrors?.[0] ?? ""} non-2xx ${non2xx}`);
    }
    if (server.fds.peak >= 200) {
      row.failures.push(`open fds reached ${server.fds.peak} at 64 connections (must stay < 200)`);
    }
    return await finish(server, row);
  },
};

/** Heap and timers after many requests under a request time limit. */
export const heap: Scenario = {
  name: "heap and timers after many requests with a time limit",
  checks: "no timer stays armed per request (requestTimeLimit 10 s) and the heap after GC " +
    "comes back near its start",
  async run(transport, size) {
    const server = await start("./app_server.ts", transport, {
      env: { REQUEST_TIME_LIMIT: "10" },
      denoFlags: ["--v8-flags=--expose-gc"],
    });
    const row = newRow(transport, server);
    const requests = size.short ? 20_000 : 100_000;
    // Warm up, so that the start figures include what the first requests allocate for good.
    await load(server.port, {
      connections: 8,
      durationMs: 10_000,
      maxRequests: 1000,
      next: () => ({ bytes: get("/ok") }),
    });
    const before = await server.stats();
    server.watch();
    const result = await load(server.port, {
      connections: 32,
      durationMs: size.short ? 40_000 : 180_000,
      maxRequests: requests,
      next: () => ({ bytes: get("/ok") }),
    });
    loadFigures(row, result);
    if (result.errors > 0) row.failures.push(`${result.errors} requests failed`);
    const served = result.requests;
    if (served < requests) row.notes.push(`time limit reached after ${served} requests`);
    const after = await server.stats();
    if (before !== undefined && after !== undefined) {
      const grew = (after.heapUsed - before.heapUsed) / (1024 * 1024);
      row.notes.push(
        `after ${served} requests: heap ${(before.heapUsed / 1048576).toFixed(1)} -> ` +
          `${(after.heapUsed / 1048576).toFixed(1)} MiB after GC, timers armed ${after.timers}`,
      );
      if (grew > 16) row.failures.push(`heap grew by ${grew.toFixed(1)} MiB after GC`);
      if (after.timers > 5) row.failures.push(`${after.timers} timers still armed`);
    } else {
      row.failures.push("no /_stats answer");
    }
    return await finish(server, row);
  },
};
