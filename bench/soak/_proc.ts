/**
 * A server of the fault suite running as a subprocess, watched from outside through /proc: open
 * fds and resident memory, sampled while a scenario runs.
 *
 * @module
 */
import type { ServerStats } from "./_server_common.ts";

/** Start, peak and end of one measure. */
export interface Span {
  start: number;
  peak: number;
  end: number;
}

/** Open file descriptors of a process, or -1 once it is gone. */
export function openFds(pid: number): number {
  try {
    let n = 0;
    for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
    return n;
  } catch {
    return -1;
  }
}

/** Resident memory of a process in MiB (VmRSS), or -1 once it is gone. */
export function rssMiB(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? -1024);
    return kib / 1024;
  } catch {
    return -1;
  }
}

/** Options of {@linkcode ServerProcess.start}. */
export interface StartOptions {
  /** Environment for the server (TRANSPORT, limits). */
  env?: Record<string, string>;
  /** A file-descriptor limit set with `prlimit --nofile`. */
  nofile?: number;
  /** Extra `deno run` flags, e.g. `--v8-flags=--expose-gc`. */
  denoFlags?: string[];
}

/** The end of a server process. */
export interface Exit {
  /** Exit code (128 + N after signal N). */
  code: number;
  /** Milliseconds from SIGTERM to exit, or from start when it died by itself. */
  ms: number;
  /** The summary it printed, when it printed one. */
  summary?: ServerStats;
}

/** A server subprocess. */
export class ServerProcess {
  readonly pid: number;
  readonly port: number;
  readonly #child: Deno.ChildProcess;
  readonly #lines: string[];
  readonly #stderr: string[];
  readonly #reading: Promise<void>;
  #exited: Deno.CommandStatus | undefined;
  #fds: Span;
  #rss: Span;
  #sampler: ReturnType<typeof setInterval> | undefined;

  private constructor(
    child: Deno.ChildProcess,
    port: number,
    lines: string[],
    stderr: string[],
    reading: Promise<void>,
  ) {
    this.#child = child;
    this.pid = child.pid;
    this.port = port;
    this.#lines = lines;
    this.#stderr = stderr;
    this.#reading = reading;
    child.status.then((status) => (this.#exited = status));
    const fds = openFds(this.pid);
    const rss = rssMiB(this.pid);
    this.#fds = { start: fds, peak: fds, end: fds };
    this.#rss = { start: rss, peak: rss, end: rss };
  }

  /**
   * Starts `script` (a file of bench/soak) and waits until it listens.
   *
   * @throws {Error} When it exits or stays silent for 60 s first.
   */
  static async start(script: string, options: StartOptions = {}): Promise<ServerProcess> {
    const path = new URL(script, import.meta.url).pathname;
    const deno = [Deno.execPath(), "run", "-A", ...(options.denoFlags ?? []), path];
    const [cmd, ...args] = options.nofile === undefined
      ? deno
      : ["prlimit", `--nofile=${options.nofile}:${options.nofile}`, "--", ...deno];
    const child = new Deno.Command(cmd!, {
      args,
      env: options.env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lines: string[] = [];
    const stderr: string[] = [];
    const { promise: listening, resolve, reject } = Promise.withResolvers<number>();
    const reading = (async () => {
      let rest = "";
      for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
        rest += text;
        const parts = rest.split("\n");
        rest = parts.pop()!;
        for (const line of parts) {
          lines.push(line);
          const port = /^LISTENING (\d+)$/.exec(line)?.[1];
          if (port !== undefined) resolve(Number(port));
        }
      }
      reject(new Error(`${script} exited before listening: ${stderr.join("").slice(-2000)}`));
    })();
    (async () => {
      for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) {
        if (stderr.length < 200) stderr.push(text);
      }
    })().catch(() => {});
    const timer = setTimeout(
      () => reject(new Error(`${script} did not listen within 60 s`)),
      60_000,
    );
    try {
      const port = await listening;
      return new ServerProcess(child, port, lines, stderr, reading);
    } catch (error) {
      try {
        child.kill("SIGKILL");
      } catch {
        // Gone already.
      }
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the process still runs. */
  get alive(): boolean {
    return this.#exited === undefined;
  }

  /** What it wrote to stderr (the first 200 writes). */
  get stderr(): string {
    return this.#stderr.join("");
  }

  /** Takes one sample of fds and RSS. */
  sample(): void {
    const fds = openFds(this.pid);
    const rss = rssMiB(this.pid);
    if (fds < 0) return;
    this.#fds.peak = Math.max(this.#fds.peak, fds);
    this.#fds.end = fds;
    this.#rss.peak = Math.max(this.#rss.peak, rss);
    this.#rss.end = rss;
  }

  /** Starts sampling every `ms` (and resets the spans to now). */
  watch(ms = 100): void {
    this.resetSpans();
    this.#sampler ??= setInterval(() => this.sample(), ms);
  }

  /** Makes now the start of the spans. */
  resetSpans(): void {
    const fds = openFds(this.pid);
    const rss = rssMiB(this.pid);
    this.#fds = { start: fds, peak: fds, end: fds };
    this.#rss = { start: rss, peak: rss, end: rss };
  }

  /** The fds span so far. */
  get fds(): Span {
    return { ...this.#fds };
  }

  /** The RSS span so far, MiB. */
  get rss(): Span {
    return { ...this.#rss };
  }

  /**
   * Waits until the open fds are at most `limit`, sampling; returns whether they got there.
   *
   * @param limit The most fds allowed.
   * @param ms How long to wait.
   */
  async settleFds(limit: number, ms: number): Promise<boolean> {
    const until = performance.now() + ms;
    for (;;) {
      this.sample();
      if (this.#fds.end <= limit) return true;
      if (performance.now() > until || !this.alive) return false;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** The server's `/_stats`, or undefined when it does not answer within `ms`. */
  async stats(ms = 5000): Promise<ServerStats | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.port}/_stats`, {
        signal: AbortSignal.timeout(ms),
      });
      return await response.json() as ServerStats;
    } catch {
      return undefined;
    }
  }

  /**
   * Sends SIGTERM and waits for the exit, at most `ms`; then kills it.
   *
   * @returns How it ended; code -1 when it had to be killed.
   */
  async stop(ms: number): Promise<Exit> {
    if (this.#sampler !== undefined) clearInterval(this.#sampler);
    this.#sampler = undefined;
    const started = performance.now();
    if (this.alive) {
      try {
        this.#child.kill("SIGTERM");
      } catch {
        // It exited just now.
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const status = await Promise.race([
      this.#child.status,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms))),
    ]);
    clearTimeout(timer);
    const took = performance.now() - started;
    if (status === undefined) {
      this.#child.kill("SIGKILL");
      await this.#child.status;
    }
    await this.#reading.catch(() => {});
    const line = this.#lines.find((l) => l.startsWith("SUMMARY "));
    return {
      code: status?.code ?? -1,
      ms: took,
      summary: line === undefined ? undefined : JSON.parse(line.slice(8)) as ServerStats,
    };
  }
}
