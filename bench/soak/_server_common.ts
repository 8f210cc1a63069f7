/**
 * What the fault suite's two servers share: a logger that counts instead of printing, live timer
 * counting, the `/_stats` answer, and the SIGTERM → graceful shutdown → `SUMMARY {json}` exit the
 * runner reads.
 *
 * A server prints `LISTENING <port>` once it listens on 127.0.0.1 and, after SIGTERM, one
 * `SUMMARY <json>` line once shutdown has finished, then exits 0 (1 when shutdown failed).
 *
 * @module
 */
import type { AsgiServer } from "../../asgi.ts";

/** Final states of background tasks, as the App logs them (`Background task "…" (#n) …`). */
export const TASK_STATES = ["completed", "failed", "cutOff", "cancelled", "notRun"] as const;

/** A task's final state. */
export type TaskState = typeof TASK_STATES[number];

const FINAL_STATE: [RegExp, TaskState][] = [
  [/ completed in /, "completed"],
  [/ failed after /, "failed"],
  [/ cut off at its time limit/, "cutOff"],
  [/ cancelled at shutdown/, "cancelled"],
  // A registration still waiting for room when shutdown starts is a cancellation too.
  [/ not run: the app is shutting down/, "cancelled"],
  [/ not run: /, "notRun"],
];

/** What a server reports in `/_stats` and in its summary. */
export interface ServerStats {
  /** Background tasks registered (`registerBackground` calls). */
  registered: number;
  /** Tasks by the final state logged for them. */
  tasks: Record<TaskState, number>;
  /** Error-level log lines. */
  errors: number;
  /** Warning-level log lines that are not a task's final state. */
  warnings: number;
  /** The first few distinct error and warning texts, for the report. */
  samples: string[];
  /** Timers armed and neither fired nor cleared. */
  timers: number;
  /** V8 heap in use, bytes (after a GC when the server runs with --expose-gc). */
  heapUsed: number;
}

const stats: ServerStats = {
  registered: 0,
  tasks: { completed: 0, failed: 0, cutOff: 0, cancelled: 0, notRun: 0 },
  errors: 0,
  warnings: 0,
  samples: [],
  timers: 0,
  heapUsed: 0,
};

/** Counts one registered task. */
export function countRegistered(): void {
  stats.registered++;
}

function textOf(data: unknown[]): string {
  return data.map((part) => part instanceof Error ? `${part.name}: ${part.message}` : String(part))
    .join(" ");
}

function sample(text: string): void {
  const short = text.split("\n")[0]!.slice(0, 160).replace(/#\d+/g, "#n").replace(/\d+/g, "N");
  if (stats.samples.length < 6 && !stats.samples.includes(short)) stats.samples.push(short);
}

function record(level: "error" | "warn" | "info" | "debug", data: unknown[]): void {
  const text = textOf(data);
  if (text.startsWith("Background task ")) {
    for (const [pattern, state] of FINAL_STATE) {
      if (pattern.test(text)) {
        stats.tasks[state]++;
        if (level === "error") stats.errors++;
        return;
      }
    }
  }
  if (level === "error") {
    stats.errors++;
    sample(`error: ${text}`);
  } else if (level === "warn") {
    stats.warnings++;
    sample(`warn: ${text}`);
  }
}

/** A logger for both the bridge and the App: it counts, and prints nothing. */
export const countingLogger = {
  error: (...data: unknown[]): void => record("error", data),
  warn: (...data: unknown[]): void => record("warn", data),
  info: (...data: unknown[]): void => record("info", data),
  debug: (...data: unknown[]): void => record("debug", data),
};

// Every timer the libraries arm goes through these globals: count the ones still pending, so
// the suite sees a timer left armed per request (as the time-limit timers once were).
const live = new Set<unknown>();
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
globalThis.setTimeout = ((
  callback: (...args: unknown[]) => void,
  ms?: number,
  ...args: unknown[]
) => {
  const id = realSetTimeout(() => {
    live.delete(id);
    callback(...args);
  }, ms);
  live.add(id);
  return id;
}) as unknown as typeof setTimeout;
globalThis.clearTimeout = ((id?: unknown) => {
  live.delete(id);
  realClearTimeout(id as number);
}) as typeof clearTimeout;

/** The current stats, after a GC when one is available. */
export function currentStats(): ServerStats {
  (globalThis as { gc?: () => void }).gc?.();
  return { ...stats, timers: live.size, heapUsed: Deno.memoryUsage().heapUsed };
}

/** The `/_stats` response body. */
export function statsJson(): string {
  return JSON.stringify(currentStats());
}

/** The listening options: 127.0.0.1, any free port, `LISTENING <port>` on stdout. */
export const listen = {
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }: { port: number }): void => console.log(`LISTENING ${port}`),
};

/**
 * Shuts `server` down on SIGTERM, prints the summary, and exits.
 *
 * @param server The server.
 */
export function exitOnSigterm(server: AsgiServer): void {
  Deno.addSignalListener("SIGTERM", () => {
    server.shutdown().then(
      () => {
        console.log(`SUMMARY ${statsJson()}`);
        Deno.exit(0);
      },
      (error) => {
        console.log(`SUMMARY ${statsJson()}`);
        console.error("Shutdown failed:", error);
        Deno.exit(1);
      },
    );
  });
  server.finished.catch((error) => {
    // A dead listener (issue 10: out of fds) must be reported, not end the process silently.
    console.error("Server finished with an error:", error);
  });
}

/** A number from the environment, or `fallback`. */
export function envNumber(name: string, fallback?: number): number | undefined {
  const value = Deno.env.get(name);
  return value === undefined || value === "" ? fallback : Number(value);
}
