/**
 * The slow-leak probe: one server process (`leak_probe_server.ts`) under a long, moderate mix of
 * traffic, its heap after GC, RSS, fds, timers and abort listeners read every `--every` seconds
 * (30 by default), and a straight line fitted through the heap samples from the third minute on:
 * bytes kept per request and per connection. A leak of a few hundred bytes a request shows as a
 * slope of that size; the fault suite's scenarios are too short for it. Documented, with its last
 * figures, in `docs/fault-suite.md`.
 *
 * ```sh
 * deno run -A tools/with_jsr_mirror.ts deno run -A bench/soak/leak_probe.ts \
 *   --app=asgi --transport=deno --minutes=15 --rate=3000 --out=/tmp/probe --snapshots=3,14
 * ```
 *
 * `--mix=main` (the default), each part paced to its share of `--rate` requests per second:
 * keep-alive GETs on distinct paths and query strings, from distinct `X-Forwarded-For` addresses;
 * keep-alive POSTs of 100 B to 4 KiB; one request per new connection; short streams; clients that
 * leave mid-body, while waiting, mid-stream and mid-head; WebSockets that open, echo three messages
 * and close; and with `--app=app`, requests past the 0.2 s time limit and background tasks.
 * `--mix=edge`: four WebSockets kept open for the whole run, echoing messages of 1 B to 2 KB, text
 * and binary; pipelined GETs; chunked POSTs; HEAD; 404 and 405; HTTP/1.0; uploads past a
 * `maxBodySize` of 64 KiB (413). Every response carries headers whose values never repeat.
 *
 * `--snapshots=3,14` writes heap snapshots at those minutes into `--out` (beside `samples.json`),
 * to diff by constructor; `--server-flags=--unstable-no-legacy-abort` passes flags to the server's
 * `deno run`; `--port` picks the port (any free one by default). Bounded: at most 20 minutes and
 * 5,000 requests a second; the load stops after `--minutes`, the server is read once more 3 s
 * later (fds and timers back to their start), then gets SIGTERM.
 *
 * @module
 */
import { Connection, requestBytes } from "./_client.ts";
import { ServerProcess } from "./_proc.ts";

function arg(name: string, fallback: string): string {
  const prefix = `--${name}=`;
  return Deno.args.find((a) => a.startsWith(prefix))?.slice(prefix.length) ?? fallback;
}

const APP = arg("app", "asgi");
const TRANSPORT = arg("transport", "deno");
const MINUTES = Number(arg("minutes", "2"));
const RATE = Number(arg("rate", "3000"));
/** The server's port: `--port`, or any free one (0) by default; set once it listens. */
let port = Number(arg("port", "0"));
const EVERY = Number(arg("every", "30"));
const OUT = arg("out", `/tmp/leak_probe_${APP}_${TRANSPORT}`);
const SNAPSHOTS = arg("snapshots", "").split(",").filter((s) => s !== "").map(Number);
const MIX = arg("mix", "main");
/** Extra `deno run` flags for the server, comma-separated: `--unstable-no-legacy-abort`. */
const SERVER_FLAGS = arg("server-flags", "").split(",").filter((s) => s !== "");
if (
  !["asgi", "app"].includes(APP) || !["deno", "node"].includes(TRANSPORT) ||
  !["main", "edge"].includes(MIX)
) {
  throw new TypeError(`Invalid --app=${APP}, --transport=${TRANSPORT} or --mix=${MIX}`);
}
if (!(MINUTES > 0 && MINUTES <= 20)) throw new RangeError(`Invalid --minutes=${MINUTES}: 0-20`);
if (!(RATE > 0 && RATE <= 5000)) throw new RangeError(`Invalid --rate=${RATE}: 1-5000`);
Deno.mkdirSync(OUT, { recursive: true });

const counts = {
  requests: 0,
  connections: 0,
  websockets: 0,
  left: 0,
  timedOut: 0,
  tasks: 0,
  errors: 0,
  statuses: {} as Record<number, number>,
  errorSamples: [] as string[],
};

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function random36(): string {
  return Math.floor(Math.random() * 2 ** 40).toString(36);
}

function forwardedFor(): string {
  const ip = () =>
    `${1 + Math.floor(Math.random() * 223)}.${Math.floor(Math.random() * 256)}.${
      Math.floor(Math.random() * 256)
    }.${1 + Math.floor(Math.random() * 254)}`;
  switch (Math.floor(Math.random() * 4)) {
    case 0:
      return ip();
    case 1:
      return `${ip()}, 127.0.0.1`;
    case 2:
      return `2001:db8::${Math.floor(Math.random() * 65536).toString(16)}`;
    default:
      return `${ip()}, ${ip()}`;
  }
}

function head(method: string, target: string, extra = ""): string {
  return `${method} ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-forwarded-for: ${forwardedFor()}\r\n` +
    `x-forwarded-proto: ${Math.random() < 0.5 ? "https" : "http"}\r\n` +
    `x-trace-${random36().slice(0, 3)}: ${random36()}\r\n${extra}`;
}

function distinctTarget(): string {
  const query = `?q=${random36()}&n=${Math.floor(Math.random() * 1e9)}`;
  switch (Math.floor(Math.random() * 3)) {
    case 0:
      return `/p/${random36()}/${random36()}${query}`;
    case 1:
      return `/p/${random36()}/${random36()}/${random36()}%20x%C3%A9${query}`;
    default:
      return `/p/${random36()}${query}`;
  }
}

function count(status: number): void {
  counts.requests++;
  counts.statuses[status] = (counts.statuses[status] ?? 0) + 1;
}

function failed(error: unknown): void {
  counts.errors++;
  const text = String(error).slice(0, 160);
  if (counts.errorSamples.length < 8 && !counts.errorSamples.includes(text)) {
    counts.errorSamples.push(text);
  }
}

/** A keep-alive connection that reconnects when the server closes it. */
class KeepAlive {
  #connection: Connection | undefined;

  async request(bytes: Uint8Array): Promise<number> {
    if (this.#connection === undefined) {
      this.#connection = await Connection.open(port);
      counts.connections++;
    }
    const connection = this.#connection;
    try {
      await connection.write(bytes);
      const response = await connection.readResponse();
      if (response === null) throw new Error("closed before a response");
      if (response.close) this.close();
      count(response.status);
      return response.status;
    } catch (error) {
      this.close();
      throw error;
    }
  }

  close(): void {
    this.#connection?.close();
    this.#connection = undefined;
  }
}

/** Runs `step` `rate` times a second until `until`, never faster. */
async function paced(rate: number, until: number, step: () => Promise<void>): Promise<void> {
  const start = performance.now();
  for (let n = 1; performance.now() < until; n++) {
    try {
      await step();
    } catch (error) {
      failed(error);
    }
    const wait = start + n * 1000 / rate - performance.now();
    if (wait > 0) await sleep(wait);
  }
}

async function oneShot(text: string): Promise<number> {
  const connection = await Connection.open(port);
  counts.connections++;
  try {
    await connection.write(requestBytes(text));
    const response = await connection.readResponse();
    if (response === null) throw new Error("closed before a response");
    count(response.status);
    return response.status;
  } finally {
    connection.close();
  }
}

/** A client that leaves in one of four places. */
async function leave(): Promise<void> {
  const connection = await Connection.open(port);
  counts.connections++;
  counts.left++;
  try {
    switch (Math.floor(Math.random() * 4)) {
      case 0: // mid-body
        await connection.write(
          requestBytes(head("POST", "/echo", "content-length: 10000\r\n\r\n") + "x".repeat(100)),
        );
        await sleep(5);
        break;
      case 1: // while the handler waits
        await connection.write(requestBytes(head("GET", "/slow?ms=300", "\r\n")));
        await sleep(20);
        break;
      case 2: // mid-stream
        await connection.write(requestBytes(head("GET", "/stream?n=64", "\r\n")));
        await sleep(10);
        break;
      default: // mid-head
        await connection.write(requestBytes("GET /p/x HTTP/1.1\r\nhost: 127.0.0.1\r\nx-a"));
        await sleep(5);
    }
  } finally {
    connection.close();
  }
}

async function websocket(): Promise<void> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`);
  counts.connections++;
  const closed = new Promise<void>((resolve) => socket.addEventListener("close", () => resolve()));
  const timer = setTimeout(() => socket.close(), 5000);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.onopen = () => resolve();
      socket.onerror = () => reject(new Error("WebSocket failed to open"));
    });
    let got = 0;
    const echoed = new Promise<void>((resolve) => {
      socket.onmessage = () => {
        if (++got === 3) resolve();
      };
    });
    for (let i = 0; i < 3; i++) socket.send(`message ${i} ${random36()}`);
    await echoed;
    counts.websockets++;
    socket.close(1000);
    await closed;
  } finally {
    clearTimeout(timer);
    if (socket.readyState !== WebSocket.CLOSED) socket.close();
  }
}

/** One WebSocket kept open until `until`, echoing messages of varied sizes at `rate` a second. */
async function longSocket(rate: number, until: number): Promise<void> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`);
  socket.binaryType = "arraybuffer";
  counts.connections++;
  const closed = new Promise<void>((resolve) => socket.addEventListener("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new Error("WebSocket failed to open"));
  });
  let wake: (() => void) | undefined;
  socket.onmessage = () => {
    counts.requests++;
    wake?.();
  };
  await paced(rate, until, async () => {
    const size = 1 + Math.floor(Math.random() * 2000);
    const reply = new Promise<void>((resolve) => (wake = resolve));
    if (Math.random() < 0.3) socket.send(new Uint8Array(size).fill(0x62));
    else socket.send("m".repeat(size));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      reply,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("no echo")), 5000))),
    ]).finally(() => clearTimeout(timer));
  });
  counts.websockets++;
  socket.close(1000);
  await closed;
}

/** What the edge mix adds: pipelining, chunked bodies, HEAD, 404, 405, HTTP/1.0, 413. */
function edgeWorkers(until: number, workers: Promise<void>[]): void {
  const share = (fraction: number) => Math.max(1, RATE * fraction);
  for (let i = 0; i < 4; i++) workers.push(longSocket(share(0.04), until));
  const pipelined = new KeepAlive();
  workers.push(
    paced(share(0.01), until, async () => {
      const eight = Array.from({ length: 8 }, () => head("GET", distinctTarget(), "\r\n")).join("");
      const connection = await Connection.open(port);
      counts.connections++;
      try {
        await connection.write(requestBytes(eight));
        for (let i = 0; i < 8; i++) {
          const response = await connection.readResponse();
          if (response === null) throw new Error("pipelined: closed before a response");
          count(response.status);
        }
      } finally {
        connection.close();
      }
    }).finally(() => pipelined.close()),
  );
  const chunked = new KeepAlive();
  workers.push(
    paced(share(0.08), until, async () => {
      const chunk = () => {
        const size = 1 + Math.floor(Math.random() * 1500);
        return `${size.toString(16)}\r\n${"c".repeat(size)}\r\n`;
      };
      await chunked.request(
        requestBytes(
          head("POST", "/echo", "transfer-encoding: chunked\r\n\r\n") + chunk() + chunk() +
            chunk() + "0\r\n\r\n",
        ),
      );
    }).finally(() => chunked.close()),
  );
  const heads = new KeepAlive();
  workers.push(
    paced(share(0.04), until, async () => {
      const connection = await Connection.open(port);
      counts.connections++;
      try {
        await connection.write(requestBytes(head("HEAD", distinctTarget(), "\r\n")));
        const response = await connection.readResponse(true);
        if (response === null) throw new Error("HEAD: closed before a response");
        count(response.status);
      } finally {
        connection.close();
      }
    }).finally(() => heads.close()),
  );
  const misses = new KeepAlive();
  workers.push(
    paced(share(0.06), until, async () => {
      const target = `/nope/${random36()}?${random36()}`;
      await misses.request(
        requestBytes(
          Math.random() < 0.5
            ? head("GET", target, "\r\n")
            : head("DELETE", distinctTarget(), "content-length: 0\r\n\r\n"),
        ),
      );
    }).finally(() => misses.close()),
  );
  workers.push(paced(share(0.02), until, async () => {
    await oneShot(
      `GET ${distinctTarget()} HTTP/1.0\r\nx-forwarded-for: ${forwardedFor()}\r\n\r\n`,
    );
  }));
  workers.push(paced(share(0.003), until, async () => {
    // Past the server's 64 KiB maxBodySize: a 413, and the connection closes.
    const body = "z".repeat(100_000);
    await oneShot(head("POST", "/echo", `content-length: ${body.length}\r\n\r\n`) + body);
  }));
}

/** The server's own reading, through `/_probe/stats`. */
interface ProbeStats {
  heapUsed: number;
  heapTotal: number;
  external: number;
  rss: number;
  fds: number;
  timers: number;
  errors: number;
  warnings: number;
  samples: string[];
  tasks: Record<string, number>;
  registered: number;
  abort: { signals: number; listeners: number; most: number };
}

// No idle connection kept for the next reading: the fds counted are the traffic's.
const probeClient = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });

async function probe(path: string): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { client: probeClient });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${text}`);
  return text;
}

interface Sample {
  seconds: number;
  requests: number;
  connections: number;
  websockets: number;
  stats: ProbeStats;
}

const server = await ServerProcess.start("leak_probe_server.ts", {
  env: { APP, TRANSPORT, PORT: String(port), MAX_BODY_SIZE: String(64 * 1024) },
  denoFlags: ["--v8-flags=--expose-gc", ...SERVER_FLAGS],
});
port = server.port;
const samples: Sample[] = [];
const t0 = performance.now();
async function sample(label: string): Promise<Sample> {
  const stats = JSON.parse(await probe("/_probe/stats")) as ProbeStats;
  const s = {
    seconds: Math.round((performance.now() - t0) / 1000),
    requests: counts.requests,
    connections: counts.connections,
    websockets: counts.websockets,
    stats,
  };
  samples.push(s);
  console.log(
    `${
      label.padEnd(6)
    } t=${s.seconds}s req=${s.requests} conn=${s.connections} ws=${s.websockets} ` +
      `heap=${(stats.heapUsed / 2 ** 20).toFixed(2)}MiB rss=${
        (stats.rss / 2 ** 20).toFixed(0)
      }MiB ` +
      `fds=${stats.fds} timers=${stats.timers} abort=${JSON.stringify(stats.abort)} ` +
      `errors=${counts.errors} srvErr=${stats.errors} warn=${stats.warnings}`,
  );
  return s;
}

try {
  const baseline = await sample("start");
  const until = performance.now() + MINUTES * 60_000;
  const share = (fraction: number) => Math.max(1, RATE * fraction);
  const app = APP === "app";
  const workers: Promise<void>[] = [];
  if (MIX === "edge") edgeWorkers(until, workers);
  else {
    for (let i = 0; i < 8; i++) {
      const client = new KeepAlive();
      workers.push(
        paced(share(0.08), until, async () => {
          await client.request(requestBytes(head("GET", distinctTarget(), "\r\n")));
        }).finally(() => client.close()),
      );
    }
    for (let i = 0; i < 2; i++) {
      const client = new KeepAlive();
      workers.push(
        paced(share(0.06), until, async () => {
          const body = "b".repeat(100 + Math.floor(Math.random() * 4000));
          await client.request(
            requestBytes(head("POST", "/echo", `content-length: ${body.length}\r\n\r\n`) + body),
          );
        }).finally(() => client.close()),
      );
    }
    for (let i = 0; i < 2; i++) {
      workers.push(paced(share(0.04), until, async () => {
        await oneShot(head("GET", distinctTarget(), "connection: close\r\n\r\n"));
      }));
    }
    {
      const client = new KeepAlive();
      workers.push(
        paced(share(0.02), until, async () => {
          await client.request(requestBytes(head("GET", "/stream?n=4", "\r\n")));
        }).finally(() => client.close()),
      );
    }
    workers.push(paced(share(0.015), until, leave));
    workers.push(paced(Math.max(1, RATE / 150), until, websocket));
    {
      // App: past the 0.2 s limit (a 408 that closes); ASGI: a short wait.
      const client = new KeepAlive();
      workers.push(
        paced(share(0.005), until, async () => {
          const status = await client.request(
            requestBytes(head("GET", app ? "/slow?ms=400" : "/slow?ms=30", "\r\n")),
          );
          if (status === 408) counts.timedOut++;
        }).finally(() => client.close()),
      );
    }
    if (app) {
      const client = new KeepAlive();
      workers.push(
        paced(share(0.02), until, async () => {
          await client.request(requestBytes(head("GET", "/tasks?n=2", "\r\n")));
          counts.tasks += 2;
        }).finally(() => client.close()),
      );
    }
  }
  const snapshots = [...SNAPSHOTS];
  const sampler = (async () => {
    let next = EVERY * 1000;
    while (performance.now() < until) {
      await sleep(Math.min(1000, until - performance.now()));
      const elapsed = performance.now() - t0;
      if (elapsed >= next && performance.now() < until) {
        next += EVERY * 1000;
        await sample("load");
      }
      if (snapshots.length > 0 && elapsed >= snapshots[0]! * 60_000) {
        const minute = snapshots.shift()!;
        const path = `${OUT}/minute${minute}.heapsnapshot`;
        await probe(`/_probe/snapshot?path=${encodeURIComponent(path)}`);
        console.log(`snapshot ${path} at req=${counts.requests} conn=${counts.connections}`);
      }
    }
  })();
  await Promise.all([...workers, sampler]);
  await sleep(3000);
  const idle = await sample("idle");
  console.log(
    `fds: start ${baseline.stats.fds}, idle ${idle.stats.fds}; timers idle ${idle.stats.timers}`,
  );
  // Least squares over the load samples after the first two minutes (warm-up).
  const fitted = samples.filter((s) => s.seconds >= 120 && s !== idle);
  const slope = (x: (s: Sample) => number, y: (s: Sample) => number) => {
    const n = fitted.length;
    const mx = fitted.reduce((a, s) => a + x(s), 0) / n;
    const my = fitted.reduce((a, s) => a + y(s), 0) / n;
    let sxy = 0;
    let sxx = 0;
    for (const s of fitted) {
      sxy += (x(s) - mx) * (y(s) - my);
      sxx += (x(s) - mx) ** 2;
    }
    return sxy / sxx;
  };
  const fit = fitted.length < 3 ? undefined : {
    heapBytesPerRequest: slope((s) => s.requests, (s) => s.stats.heapUsed),
    heapBytesPerConnection: slope((s) => s.connections, (s) => s.stats.heapUsed),
    heapKiBPerMinute: slope((s) => s.seconds / 60, (s) => s.stats.heapUsed) / 1024,
    rssKiBPerMinute: slope((s) => s.seconds / 60, (s) => s.stats.rss) / 1024,
  };
  console.log(`fit (samples from 2 min on): ${JSON.stringify(fit)}`);
  console.log(`counts: ${JSON.stringify(counts)}`);
  Deno.writeTextFileSync(
    `${OUT}/samples.json`,
    JSON.stringify({ app: APP, transport: TRANSPORT, rate: RATE, samples, fit, counts }, null, 1),
  );
} finally {
  const exit = await server.stop(15_000);
  console.log(
    `exit: code ${exit.code} in ${Math.round(exit.ms)} ms; ${JSON.stringify(exit.summary)}`,
  );
  if (server.stderr !== "") console.log(`server stderr: ${server.stderr.slice(0, 2000)}`);
}
