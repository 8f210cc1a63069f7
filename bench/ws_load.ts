/**
 * WebSocket load test (`deno task bench:ws`): N concurrent sockets (default 1,000) each echo
 * messages for D seconds (default 30) against bench/servers/ws_echo.ts, on each transport.
 * Every socket keeps one message in flight and checks that what comes back is what it sent.
 * Reports messages/s, the server's open fds, RSS and heap after a full GC before the sockets
 * open, once all are open, and at the end (all closed again), and lost messages: sent but never
 * echoed, which must be 0. Client and server share the machine: on 2 cores the client's own
 * work caps messages/s.
 *
 * ```sh
 * deno task bench:ws                       # 1,000 sockets, 30 s, both transports
 * deno task bench:ws --sockets 50 --seconds 2 --transport deno
 * ```
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** Options of one run. */
export interface LoadOptions {
  /** Concurrent sockets. */
  sockets: number;
  /** How long the sockets echo, in seconds. */
  seconds: number;
  /** The server transports to measure. */
  transports: ("deno" | "node")[];
}

/** What one run measured. */
export interface LoadResult {
  transport: string;
  sockets: number;
  seconds: number;
  sent: number;
  received: number;
  lost: number;
  mismatched: number;
  messagesPerSecond: number;
  fds: { before: number; open: number; end: number };
  rssMiB: { before: number; open: number; end: number };
  /** The server's heap after a full GC. */
  heapMiB: { before: number; open: number; end: number };
  /** Echo applications still running at the end: must be 0. */
  activeAtEnd: number;
}

/**
 * Reads `--sockets N --seconds S --transport deno|node` (each optional).
 *
 * @param args The command-line arguments.
 * @returns The options.
 */
export function parseOptions(args: string[]): LoadOptions {
  const options: LoadOptions = { sockets: 1000, seconds: 30, transports: ["deno", "node"] };
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === "--sockets" || flag === "--seconds") {
      const n = Number(value);
      if (!(n > 0) || !Number.isFinite(n)) {
        throw new RangeError(`Invalid ${flag} ${JSON.stringify(value)}: give a positive number`);
      }
      options[flag === "--sockets" ? "sockets" : "seconds"] = n;
    } else if (flag === "--transport" && (value === "deno" || value === "node")) {
      options.transports = [value];
    } else {
      throw new TypeError(
        `Unknown option ${
          JSON.stringify(flag)
        }: use --sockets N, --seconds S, --transport deno|node`,
      );
    }
  }
  return options;
}

function fdCount(pid: number): number {
  let n = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
  return n;
}

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kib = Number(status.match(/VmRSS:\s+(\d+) kB/)?.[1] ?? NaN);
  return Math.round(kib / 1024 * 10) / 10;
}

async function startServer(transport: string): Promise<{ child: Deno.ChildProcess; port: number }> {
  const script = fileURLToPath(new URL("./servers/ws_echo.ts", import.meta.url));
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", script],
    env: { TRANSPORT: transport },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`The ${transport} server exited before listening`);
    text += value;
    const match = text.match(/LISTENING (\d+)/);
    if (match) {
      reader.releaseLock();
      child.stdout.cancel().catch(() => {});
      return { child, port: Number(match[1]) };
    }
  }
}

async function stats(port: number): Promise<{ heapMiB: number; active: number }> {
  const response = await fetch(`http://127.0.0.1:${port}/stats`);
  const { heapUsed, active } = await response.json();
  return { heapMiB: Math.round(heapUsed / 1024 / 1024 * 10) / 10, active };
}

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.onopen = () => resolve(socket);
    socket.onerror = () => reject(new Error(`Cannot open ${url}`));
  });
}

/** Echoes on one socket until `until`; each message carries the socket and sequence number. */
function echoLoop(
  socket: WebSocket,
  id: number,
  until: number,
  counts: { sent: number; received: number; mismatched: number },
): Promise<void> {
  return new Promise((resolve) => {
    // A message that never comes back would stall the loop: give up 10 s after the end.
    const timer = setTimeout(resolve, until - performance.now() + 10_000);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    let seq = 0;
    let expected = "";
    const next = () => {
      if (performance.now() >= until) return done();
      expected = `${id}:${++seq}:${"x".repeat(32)}`;
      socket.send(expected);
      counts.sent++;
    };
    socket.onmessage = (event) => {
      counts.received++;
      if (event.data !== expected) counts.mismatched++;
      next();
    };
    socket.onclose = () => done();
    next();
  });
}

/**
 * Runs the load against one transport.
 *
 * @param transport The server's transport.
 * @param sockets How many sockets.
 * @param seconds How long they echo.
 * @returns The figures.
 */
export async function runLoad(
  transport: "deno" | "node",
  sockets: number,
  seconds: number,
): Promise<LoadResult> {
  const { child, port } = await startServer(transport);
  try {
    const pid = child.pid;
    const before = { ...await stats(port), fds: fdCount(pid), rss: rssMiB(pid) };
    const clients: WebSocket[] = [];
    // Opened in batches, so the handshakes do not all land in one instant.
    for (let i = 0; i < sockets; i += 100) {
      const batch = [];
      for (let j = i; j < Math.min(sockets, i + 100); j++) {
        batch.push(open(`ws://127.0.0.1:${port}/`));
      }
      clients.push(...await Promise.all(batch));
    }
    const open_ = { ...await stats(port), fds: fdCount(pid), rss: rssMiB(pid) };
    const counts = { sent: 0, received: 0, mismatched: 0 };
    const started = performance.now();
    const until = started + seconds * 1000;
    await Promise.all(clients.map((socket, id) => echoLoop(socket, id, until, counts)));
    const elapsed = (performance.now() - started) / 1000;
    const closed = clients.map((socket) =>
      new Promise<void>((resolve) => {
        socket.onclose = () => resolve();
        socket.close();
      })
    );
    await Promise.all(closed);
    // Let the server finish its closing handshakes and release the sockets.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const end = { ...await stats(port), fds: fdCount(pid), rss: rssMiB(pid) };
    return {
      transport,
      sockets,
      seconds: Math.round(elapsed * 10) / 10,
      sent: counts.sent,
      received: counts.received,
      lost: counts.sent - counts.received,
      mismatched: counts.mismatched,
      messagesPerSecond: Math.round(counts.received / elapsed),
      fds: { before: before.fds, open: open_.fds, end: end.fds },
      rssMiB: { before: before.rss, open: open_.rss, end: end.rss },
      heapMiB: { before: before.heapMiB, open: open_.heapMiB, end: end.heapMiB },
      activeAtEnd: end.active,
    };
  } finally {
    child.kill("SIGTERM");
    await child.status;
  }
}

/**
 * The results as a Markdown table.
 *
 * @param results The runs.
 * @returns The table.
 */
export function table(results: LoadResult[]): string {
  const rows = [
    "| transport | sockets | seconds | messages/s | lost | fds start → open → end | RSS MiB start → open → end | heap after GC, MiB |",
    "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
  ];
  for (const r of results) {
    rows.push(
      `| ${r.transport} | ${r.sockets} | ${r.seconds} | ${r.messagesPerSecond} | ${r.lost} | ` +
        `${r.fds.before} → ${r.fds.open} → ${r.fds.end} | ` +
        `${r.rssMiB.before} → ${r.rssMiB.open} → ${r.rssMiB.end} | ` +
        `${r.heapMiB.before} → ${r.heapMiB.open} → ${r.heapMiB.end} |`,
    );
  }
  return rows.join("\n");
}

if (import.meta.main) {
  const options = parseOptions(Deno.args);
  const results: LoadResult[] = [];
  for (const transport of options.transports) {
    const result = await runLoad(transport, options.sockets, options.seconds);
    console.log(JSON.stringify(result));
    results.push(result);
  }
  console.log(table(results));
  if (results.some((r) => r.lost !== 0 || r.mismatched !== 0 || r.activeAtEnd !== 0)) {
    Deno.exitCode = 1;
  }
}
