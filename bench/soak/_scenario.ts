/**
 * What every scenario of the fault suite shares: the row of figures it returns, the end every
 * scenario goes through (alive, answering, fds back near their start, SIGTERM exits 0, no task
 * lost), and request builders.
 *
 * @module
 */
import { type LoadResult, percentile, probe, requestBytes } from "./_client.ts";
import { ServerProcess, type Span, type StartOptions } from "./_proc.ts";
import { type ServerStats, TASK_STATES, type TaskState } from "./_server_common.ts";

/** A transport of `serve()`. */
export type Transport = "deno" | "node";

/** The figures of one scenario on one transport. */
export interface Row {
  transport: Transport;
  /** Requests (or clients, for the storm) per second. */
  rate?: number;
  /** Client-side failures that the scenario does not expect. */
  errors?: number;
  /** 99th percentile latency, ms. */
  p99?: number;
  fds: Span;
  rss: Span;
  /** Background tasks by final state, with the ones registered and the ones lost. */
  tasks?: Record<TaskState | "registered" | "lost", number>;
  /** Scenario-specific figures, one line each. */
  notes: string[];
  /** Broken invariants; empty when the scenario passed. */
  failures: string[];
}

/** Sizes of a run: `short` for CI (both transports under 3 minutes), `full` for a soak. */
export interface Size {
  short: boolean;
}

/** A scenario. */
export interface Scenario {
  name: string;
  /** What it checks, one sentence. */
  checks: string;
  run(transport: Transport, size: Size): Promise<Row>;
}

const ANSI_COLOUR = new RegExp(String.raw`\x1b\[[0-9;]*m`, "g");

/** How far above their start the fds may end, once clients are gone. */
const FD_SLACK = 16;

export function newRow(transport: Transport, server: ServerProcess): Row {
  return { transport, fds: server.fds, rss: server.rss, notes: [], failures: [] };
}

export function loadFigures(row: Row, result: LoadResult): void {
  row.rate = Math.round(result.requests / (result.ms / 1000));
  row.errors = result.errors;
  row.p99 = Math.round(percentile(result.latencies, 99) * 10) / 10;
  if (result.errors > 0) row.notes.push(`client errors: ${result.errorSamples.join("; ")}`);
}

/** Whether the server answers `GET /ok` on a new connection within `ms`. */
export async function answers(port: number, ms = 5000): Promise<boolean> {
  return await answerTime(port, ms) !== undefined;
}

/**
 * Milliseconds until the server answers `GET /ok` with 200, or `undefined` when it does not
 * within `ms`. A connection refused or reset is tried again (every 50 ms) until then: right after
 * idle clients leave, a server at its fd limit may not have closed their sockets yet, and a
 * single attempt would return at once rather than wait the `ms` it was given.
 */
export async function answerTime(port: number, ms = 5000): Promise<number | undefined> {
  const began = performance.now();
  const request = requestBytes("GET /ok HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n\r\n");
  for (;;) {
    const left = ms - (performance.now() - began);
    if (left <= 0) return undefined;
    const { outcome } = await probe(port, request, left);
    if (outcome === 200) return performance.now() - began;
    if (outcome !== "closed") return undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function taskFigures(stats: ServerStats): Row["tasks"] {
  const ended = TASK_STATES.reduce((sum, state) => sum + stats.tasks[state], 0);
  return { ...stats.tasks, registered: stats.registered, lost: stats.registered - ended };
}

/**
 * The end every scenario shares: the server is alive and answers, its fds come back near their
 * start, SIGTERM stops it with exit code 0 within `stopMs`, and no background task is lost.
 */
export async function finish(
  server: ServerProcess,
  row: Row,
  options: { stopMs?: number; fdBase?: number; errorsAllowed?: boolean } = {},
): Promise<Row> {
  if (!server.alive) {
    // Deno colours its uncaught-error report; the first line says what killed the process.
    const said = server.stderr.replace(ANSI_COLOUR, "").trim().split("\n")[0];
    row.failures.push(`the server process died: ${said?.slice(0, 200) ?? "(nothing on stderr)"}`);
  } else {
    const ms = await answerTime(server.port);
    if (ms === undefined) {
      row.failures.push("the server does not answer GET /ok after the scenario");
    } else if (ms >= 100) {
      row.notes.push(`GET /ok after the scenario answered in ${Math.round(ms)} ms`);
    }
  }
  const base = options.fdBase ?? server.fds.start;
  if (server.alive && !await server.settleFds(base + FD_SLACK, 10_000)) {
    row.failures.push(
      `open fds did not come back near ${base} within 10 s: ${server.fds.end}`,
    );
  }
  row.fds = server.fds;
  row.rss = server.rss;
  const exit = await server.stop(options.stopMs ?? 15_000);
  if (exit.code !== 0) {
    row.failures.push(`exit code ${exit.code} after SIGTERM (${Math.round(exit.ms)} ms)`);
  }
  row.notes.push(`SIGTERM to exit: ${Math.round(exit.ms)} ms`);
  if (exit.summary === undefined) {
    row.failures.push("the server printed no summary at shutdown");
    return row;
  }
  const summary = exit.summary;
  if (summary.registered > 0) {
    row.tasks = taskFigures(summary);
    if (row.tasks!.lost !== 0) row.failures.push(`${row.tasks!.lost} background tasks lost`);
  }
  if (summary.errors > 0 && !options.errorsAllowed) {
    row.failures.push(
      `${summary.errors} error-level log lines: ${
        summary.samples.filter((s) => s.startsWith("error")).join(" | ")
      }`,
    );
  }
  if (summary.warnings > 0) {
    row.notes.push(`${summary.warnings} warnings: ${summary.samples.join(" | ")}`);
  }
  return row;
}

/** Starts a server of bench/soak on `transport`. */
export function start(
  script: string,
  transport: Transport,
  options: StartOptions = {},
): Promise<ServerProcess> {
  return ServerProcess.start(script, {
    ...options,
    env: { TRANSPORT: transport, ...options.env },
  });
}

export function pick<T>(weighted: [number, T][]): () => T {
  const total = weighted.reduce((sum, [weight]) => sum + weight, 0);
  return () => {
    let r = Math.random() * total;
    for (const [weight, value] of weighted) {
      r -= weight;
      if (r < 0) return value;
    }
    return weighted[0]![1];
  };
}

export function post(path: string, body: string, extra = ""): Uint8Array {
  return requestBytes(
    `POST ${path} HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n` +
      `content-length: ${new TextEncoder().encode(body).length}\r\n${extra}\r\n${body}`,
  );
}

export function chunked(path: string, chunks: string[]): Uint8Array {
  const body = chunks.map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join("") + "0\r\n\r\n";
  return requestBytes(
    `POST ${path} HTTP/1.1\r\nhost: soak\r\ntransfer-encoding: chunked\r\n\r\n${body}`,
  );
}

export function get(path: string): Uint8Array {
  return requestBytes(`GET ${path} HTTP/1.1\r\nhost: soak\r\n\r\n`);
}
