// Copyright the stellarator authors. MIT license.
/**
 * The WebSocket abuse probe: a few hostile clients the fuzzer (`tools/ws_fuzz.ts`) does not play,
 * because they are about time, memory and numbers rather than frames. Each server (`deno`,
 * `node`, and uvicorn with `--ws websockets`) runs the fuzzer's echo application in a process of
 * its own; what it prints for each is what docs/asgi.md's WebSocket section quotes.
 *
 * ```sh
 * deno run -A tools/with_jsr_mirror.ts deno run -A tools/ws_abuse.ts --clients=5000
 * ```
 *
 * Scenarios (`--scenarios`, all by default):
 * - `deflate`: a handshake offering `permessage-deflate`: does the 101 accept it?
 * - `close-hold`: the client sends its close frame, reads the answer and keeps its TCP side open:
 *   when does the application get its `websocket.disconnect`? (At most 15 s.)
 * - `ping-flood`: 100,000 pings of 125 bytes from a client that reads nothing, written for at
 *   most 15 s: is it dropped, or stopped, and what does the server's RSS do?
 * - `vanish`: `--clients` (1000) connections opened, then closed without a close frame (half
 *   with a FIN, half with a reset: they leave an echo unread), `--rounds` (2) times: every application told once with 1006,
 *   the server's fds and RSS before, open, and 2 s after each round.
 *
 * Other options: `--port` (19600: the servers take the next three), `--servers`
 * (`deno,node,uvicorn`). Every wait is bounded; the servers are stopped at the end. Raise
 * `ulimit -n` above `--clients` first: the probe and each server hold that many sockets.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { encodeFrame } from "../tests/fixtures/ws_fuzz/frames.ts";

const DIR = new URL("../tests/fixtures/ws_fuzz/", import.meta.url);

function option(name: string, fallback: string): string {
  const prefix = `--${name}=`;
  return Deno.args.find((arg) => arg.startsWith(prefix))?.slice(prefix.length) ?? fallback;
}

const basePort = Number(option("port", "19600"));
const names = option("servers", "deno,node,uvicorn").split(",");
const scenarios = option("scenarios", "deflate,close-hold,ping-flood,vanish").split(",");
const clients = Number(option("clients", "1000"));
const rounds = Number(option("rounds", "2"));
const MAX_SIZE = 1 << 20;

interface Server {
  name: string;
  port: number;
  child: Deno.ChildProcess;
}

function fds(pid: number): number {
  try {
    return [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
  } catch {
    return -1;
  }
}

/** Resident memory of a process, in MiB. */
function rss(pid: number): number {
  try {
    const line = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmRSS:\s+(\d+)/);
    return line === null ? -1 : Math.round(Number(line[1]) / 1024);
  } catch {
    return -1;
  }
}

function start(name: string, port: number): Server {
  const command = name === "uvicorn"
    ? new Deno.Command("/usr/bin/python3", {
      args: [
        ...["-m", "uvicorn", "--app-dir", fileURLToPath(DIR), "app:app", "--host", "127.0.0.1"],
        ...["--port", String(port), "--ws", "websockets", "--ws-max-size", String(MAX_SIZE)],
        ...["--lifespan", "off", "--log-level", "warning"],
      ],
      stdout: "null",
      stderr: "null",
    })
    : new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", "--config", fileURLToPath(new URL("../deno.json", import.meta.url))],
        ...[fileURLToPath(new URL("server.ts", DIR)), name, String(port), String(MAX_SIZE)],
      ],
      stdout: "null",
      stderr: "null",
    });
  return { name, port, child: command.spawn() };
}

async function listening(server: Server): Promise<void> {
  const until = performance.now() + 30_000;
  for (;;) {
    try {
      return (await Deno.connect({ hostname: "127.0.0.1", port: server.port })).close();
    } catch (error) {
      if (performance.now() > until) {
        throw new Error(`${server.name} did not listen`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

const encoder = new TextEncoder();
let ids = 0;

/** Opens a WebSocket on a raw socket; returns it after the 101, with the head. */
async function open(
  port: number,
  extra = "",
): Promise<{ conn: Deno.TcpConn; head: string; id: string }> {
  const id = `abuse${++ids}`;
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(encoder.encode(
    `GET /fuzz/${id} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
  ));
  let head = "";
  const byte = new Uint8Array(1);
  while (!head.endsWith("\r\n\r\n")) {
    if (await conn.read(byte) === null) break;
    head += String.fromCharCode(byte[0]!);
  }
  if (!head.startsWith("HTTP/1.1 101")) throw new Error(`No 101: ${head.split("\r\n")[0]}`);
  return { conn, head, id };
}

/** The `websocket.disconnect` code the application recorded, or `null`. */
async function disconnectOf(port: number, id: string): Promise<number | null> {
  const response = await fetch(`http://127.0.0.1:${port}/log/${id}`);
  return ((await response.json()) as { d: number | null } | null)?.d ?? null;
}

function frame(opcode: number, payload: Uint8Array): Uint8Array {
  return encodeFrame({ fin: true, rsv: 0, opcode, masked: true, payload });
}

/** Reads until `ms` pass or the server closes the connection; returns the bytes read. */
async function drain(conn: Deno.Conn, ms: number): Promise<number> {
  let total = 0;
  const buffer = new Uint8Array(65536);
  const until = performance.now() + ms;
  while (performance.now() < until) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const n = await Promise.race([
      conn.read(buffer).catch(() => null),
      new Promise<"late">((resolve) =>
        timer = setTimeout(resolve, until - performance.now(), "late")
      ),
    ]);
    clearTimeout(timer);
    if (n === null || n === "late") break;
    total += n;
  }
  return total;
}

async function deflate(server: Server): Promise<string> {
  const { conn, head } = await open(
    server.port,
    "Sec-WebSocket-Extensions: permessage-deflate\r\n",
  );
  conn.close();
  const extension = head.match(/sec-websocket-extensions:[^\r]*/i)?.[0];
  return `101, ${extension ?? "no extension accepted"}`;
}

async function closeHold(server: Server): Promise<string> {
  const { conn, id } = await open(server.port);
  const started = performance.now();
  await conn.write(frame(8, new Uint8Array([0x03, 0xe8])));
  await drain(conn, 200);
  let code: number | null = null;
  while (performance.now() - started < 15_000) {
    if ((code = await disconnectOf(server.port, id)) !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  conn.close();
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  return code === null ? "no disconnect within 15 s" : `disconnect ${code} after ${seconds} s`;
}

async function pingFlood(server: Server): Promise<string> {
  const { conn, id } = await open(server.port);
  const pid = server.child.pid;
  const before = rss(pid);
  const batch = new Uint8Array(1000 * 131);
  const ping = frame(9, new Uint8Array(125));
  for (let i = 0; i < 1000; i++) batch.set(ping, i * ping.length);
  let sent = 0;
  let fate = "all written";
  const started = performance.now();
  const until = started + 15_000;
  try {
    while (sent < 100_000) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) =>
        timer = setTimeout(resolve, Math.max(until - performance.now(), 1), "late")
      );
      const written = await Promise.race([conn.write(batch).then(() => "ok" as const), late]);
      clearTimeout(timer);
      if (written === "late") {
        fate = "writes blocked (the server stopped reading)";
        break;
      }
      sent += 1000;
    }
  } catch (error) {
    fate = `dropped (${(error as Error).name})`;
  }
  const during = rss(pid);
  fate += ` after ${((performance.now() - started) / 1000).toFixed(1)} s`;
  conn.close();
  await new Promise((resolve) => setTimeout(resolve, 500));
  return `${sent} pings sent, ${fate}; RSS ${before} -> ${during} MiB; app saw ${await disconnectOf(
    server.port,
    id,
  )}`;
}

async function vanish(server: Server): Promise<string> {
  const pid = server.child.pid;
  const lines: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const [fdsBefore, rssBefore] = [fds(pid), rss(pid)];
    const opened: { conn: Deno.TcpConn; id: string }[] = [];
    for (let i = 0; i < clients; i++) {
      const socket = await open(server.port);
      // Half send a message whose echo they leave unread: their close is then a reset.
      if (i % 2 === 1) await socket.conn.write(frame(1, encoder.encode("x")));
      opened.push(socket);
    }
    const [fdsOpen, rssOpen] = [fds(pid), rss(pid)];
    for (const { conn } of opened) conn.close();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const codes = new Map<string, number>();
    for (const { id } of opened) {
      const code = String(await disconnectOf(server.port, id));
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    lines.push(
      `round ${round + 1}: fds ${fdsBefore} -> ${fdsOpen} -> ${fds(pid)}, RSS ${rssBefore} -> ` +
        `${rssOpen} -> ${rss(pid)} MiB, disconnects ${JSON.stringify(Object.fromEntries(codes))}`,
    );
  }
  return lines.join("\n    ");
}

const run: Record<string, (server: Server) => Promise<string>> = {
  deflate,
  "close-hold": closeHold,
  "ping-flood": pingFlood,
  vanish,
};
const servers = names.map((name, i) => start(name, basePort + 1 + i));
try {
  await Promise.all(servers.map(listening));
  for (const scenario of scenarios) {
    console.log(`${scenario}:`);
    for (const server of servers) {
      const result = await run[scenario]!(server).catch((error) => `failed: ${error}`);
      console.log(`  ${server.name}: ${result}`);
    }
  }
} finally {
  for (const server of servers) {
    try {
      server.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    await server.child.status;
  }
}
