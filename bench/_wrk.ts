/**
 * The load generator of the HTTP benchmark: `wrk`, run on a core of its own when the run is
 * pinned, and its output read back.
 *
 * @module
 */
import { onCore } from "./_proc.ts";

/** What wrk reported for one measurement. */
export interface WrkResult {
  /** Requests per second. */
  readonly rps: number;
  /** 99th percentile latency in milliseconds. */
  readonly p99: number;
  /** Non-2xx responses plus socket errors. */
  readonly errors: number;
  /** Requests completed. */
  readonly requests: number;
}

/**
 * Reads requests/s, p99 latency, errors and the request count from wrk's `--latency` output.
 *
 * @param output wrk's standard output.
 * @returns The figures.
 * @throws {Error} If the output has no `Requests/sec` line.
 */
export function parseWrk(output: string): WrkResult {
  const rps = /Requests\/sec:\s*([\d.]+)/.exec(output)?.[1];
  if (rps === undefined) {
    throw new Error(
      `Cannot read wrk's output: no "Requests/sec" line in ${JSON.stringify(output)}`,
    );
  }
  const p99 = /^\s*99%\s+([\d.]+)(us|ms|s)\s*$/m.exec(output);
  const scale = { us: 1e-3, ms: 1, s: 1e3 } as const;
  const p99ms = p99 === null ? NaN : Number(p99[1]) * scale[p99[2] as keyof typeof scale];
  const non2xx = Number(/Non-2xx or 3xx responses:\s*(\d+)/.exec(output)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(
    output,
  );
  const socketErrors = socket === null ? 0 : socket.slice(1).reduce((a, b) => a + Number(b), 0);
  const requests = Number(/(\d+) requests in/.exec(output)?.[1] ?? 0);
  return { rps: Number(rps), p99: p99ms, errors: non2xx + socketErrors, requests };
}

/**
 * A wrk Lua script that sends every request with `method`, `body` and a `content-type`.
 * wrk adds the `content-length` itself.
 *
 * @param method The request method.
 * @param body The body, ASCII.
 * @param contentType The body's media type.
 * @returns The script.
 */
export function wrkScript(method: string, body: string, contentType: string): string {
  // JSON string literals of ASCII text are valid Lua string literals.
  return [
    `wrk.method = ${JSON.stringify(method)}`,
    `wrk.body = ${JSON.stringify(body)}`,
    `wrk.headers["Content-Type"] = ${JSON.stringify(contentType)}`,
    "",
  ].join("\n");
}

/** How to run wrk. */
export interface WrkRun {
  /** Full URL. */
  readonly url: string;
  /** Whole seconds of load (wrk takes no fractions). */
  readonly seconds: number;
  /** Connections kept open. */
  readonly connections: number;
  /** Threads. */
  readonly threads: number;
  /** A Lua script file, for requests other than a bodiless GET. */
  readonly script?: string;
  /** The core to run on, or undefined for any. */
  readonly core?: number;
}

/**
 * Runs wrk once.
 *
 * @param run What to load and how.
 * @returns wrk's figures.
 * @throws {Error} When wrk fails or prints no figures.
 */
export async function runWrk(run: WrkRun): Promise<WrkResult> {
  const args = [
    "wrk",
    `-t${run.threads}`,
    `-c${run.connections}`,
    `-d${Math.max(1, Math.round(run.seconds))}s`,
    "--latency",
    ...(run.script === undefined ? [] : ["-s", run.script]),
    run.url,
  ];
  const [program, ...rest] = onCore(args, run.core);
  const { stdout, stderr, success } = await new Deno.Command(program!, {
    args: rest,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout);
  if (!success) throw new Error(`wrk failed: ${new TextDecoder().decode(stderr)}${text}`);
  return parseWrk(text);
}

/** Makes sure wrk is installed, installing Debian's package when running as root. */
export async function ensureWrk(): Promise<void> {
  const has = async () => {
    try {
      await new Deno.Command("wrk", { args: ["--version"], stdout: "null", stderr: "null" })
        .output();
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  };
  if (await has()) return;
  if (Deno.uid() !== 0) {
    throw new Error(
      "wrk is not installed: run `sudo apt-get install -y wrk` (Debian/Ubuntu) and retry",
    );
  }
  console.log("wrk is missing: installing it with apt-get");
  for (const args of [["update"], ["install", "-y", "wrk"]]) {
    const { success } = await new Deno.Command("apt-get", {
      args,
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!success) {
      throw new Error(`apt-get ${args.join(" ")} failed: install wrk by hand and retry`);
    }
  }
}
