/**
 * What the HTTP benchmark loads: its servers, its routes, and the settings of a run, read from
 * the command line.
 *
 * @module
 */

/** One way of serving the handlers. */
export interface ServerSpec {
  /** Short id for `--servers`. */
  readonly id: string;
  /** Name in the tables. */
  readonly label: string;
  /** The server script in bench/servers/. */
  readonly script: string;
  /** Extra environment for the server process. */
  readonly env?: Readonly<Record<string, string>>;
  /** The server the ratio column divides by. */
  readonly baseline: string;
  /** Left out of the default run: only `--servers` names it. */
  readonly optional?: boolean;
}

/** Every server, in the order of the first round. */
export const SERVERS: readonly ServerSpec[] = [
  { id: "deno", label: "bare Deno.serve", script: "deno_bare.ts", baseline: "deno" },
  {
    id: "floor",
    label: "the floor (Deno.serve reading a scope)",
    script: "deno_floor.ts",
    baseline: "deno",
  },
  { id: "hono", label: "Hono on Deno.serve", script: "hono.ts", baseline: "deno" },
  { id: "asgi", label: "ASGI app, serve() deno", script: "asgi_app.ts", baseline: "deno" },
  { id: "app", label: "App, serve()", script: "web_app.ts", baseline: "deno" },
  {
    id: "app-limit",
    label: "App, requestTimeLimit 10 s",
    script: "web_app.ts",
    env: { REQUEST_TIME_LIMIT: "10" },
    baseline: "deno",
  },
  { id: "node", label: "bare node:http (Deno)", script: "node_bare.ts", baseline: "node" },
  {
    id: "asgi-node",
    label: "ASGI app, serve() node",
    script: "asgi_app.ts",
    env: { TRANSPORT: "node" },
    baseline: "node",
  },
  {
    id: "native-bound",
    label: "bound: an App without ASGI",
    script: "native_bound.ts",
    baseline: "deno",
    optional: true,
  },
];

/** A small body for `POST /echo`: 64 bytes of JSON, about what a form or an API call sends. */
export const ECHO_BODY = '{"id":12345,"name":"stellarator","tags":["bench","echo"],"ok":1}';

/** One request the benchmark loads a server with. */
export interface RouteSpec {
  /** Short id for `--routes`. */
  readonly id: string;
  /** Request method. */
  readonly method: "GET" | "POST";
  /** Request path. */
  readonly path: string;
  /** Request body, for POST. */
  readonly body?: string;
  /** The response body every server must give. */
  readonly expect: string;
}

/** Every route; the default run loads all but `hello`. */
export const ROUTES: readonly RouteSpec[] = [
  { id: "hello", method: "GET", path: "/hello", expect: "hello" },
  { id: "hello-world", method: "GET", path: "/hello/world", expect: "hello world" },
  { id: "echo", method: "POST", path: "/echo", body: ECHO_BODY, expect: ECHO_BODY },
];

/** Routes loaded unless `--routes` says otherwise: the issue's GET and the POST. */
export const DEFAULT_ROUTES: readonly string[] = ["hello-world", "echo"];

/** Settings of one run. */
export interface HttpOptions {
  /** Seconds of measured load per server, route and round (whole seconds: wrk takes no fractions). */
  readonly duration: number;
  /** Seconds of unmeasured load on each route before it is measured; 0 for none. */
  readonly warmup: number;
  /** Rounds over all servers. */
  readonly rounds: number;
  /** wrk connections. */
  readonly connections: number;
  /** wrk threads, or undefined for 1 when pinned (wrk has one core) and 2 when not. */
  readonly threads: number | undefined;
  /** Server ids to run, in first-round order. */
  readonly servers: readonly string[];
  /** Route ids to load. */
  readonly routes: readonly string[];
  /** Pin the server and wrk to cores of their own. */
  readonly pin: boolean;
  /** Write bench/RESULTS.md. */
  readonly write: boolean;
  /** A smoke run: too short for conclusions. */
  readonly quick: boolean;
}

const FLAGS = [
  "duration",
  "warmup",
  "rounds",
  "connections",
  "threads",
  "servers",
  "routes",
  "quick",
  "no-pin",
  "no-write",
] as const;

/**
 * Reads the options from flags, then environment (`BENCH_DURATION`, `BENCH_WARMUP`,
 * `BENCH_ROUNDS`), then defaults.
 *
 * @param args Command-line arguments.
 * @returns The options.
 * @throws {TypeError} On an unknown flag, server or route, or a value that is not a number in range.
 */
export function parseOptions(args: readonly string[]): HttpOptions {
  const flags = new Map<string, string>();
  for (const arg of args) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m === null) throw new TypeError(`Unknown argument "${arg}": flags look like --duration=4`);
    if (!(FLAGS as readonly string[]).includes(m[1]!)) {
      throw new TypeError(
        `Unknown flag "--${m[1]}": use one of ${FLAGS.map((k) => `--${k}`).join(", ")}`,
      );
    }
    flags.set(m[1]!, m[2] ?? "");
  }
  const quick = flags.has("quick");
  const number = (name: string, env: string, fallback: number, quickValue: number, min = 1) => {
    const raw = flags.get(name) ?? Deno.env.get(env);
    if (raw === undefined) return quick ? quickValue : fallback;
    const value = Number(raw);
    if (raw.trim() === "" || !Number.isInteger(value) || value < min) {
      throw new TypeError(`Invalid --${name} "${raw}": expected a whole number of at least ${min}`);
    }
    return value;
  };
  const list = (name: string, known: readonly { id: string }[], fallback: readonly string[]) => {
    const ids = flags.get(name)?.split(",") ?? fallback;
    for (const id of ids) {
      if (!known.some((k) => k.id === id)) {
        throw new TypeError(
          `Unknown ${name.slice(0, -1)} "${id}": use some of ${known.map((k) => k.id).join(",")}`,
        );
      }
    }
    return ids;
  };
  const threads = flags.get("threads");
  return {
    duration: number("duration", "BENCH_DURATION", 4, 1),
    warmup: number("warmup", "BENCH_WARMUP", 1, 0, 0),
    rounds: number("rounds", "BENCH_ROUNDS", 3, 1),
    connections: number("connections", "BENCH_CONNECTIONS", 64, 64),
    threads: threads === undefined ? undefined : number("threads", "", 1, 1),
    servers: list("servers", SERVERS, SERVERS.filter((s) => !s.optional).map((s) => s.id)),
    routes: list("routes", ROUTES, DEFAULT_ROUTES),
    pin: !flags.has("no-pin"),
    write: !flags.has("no-write"),
    quick,
  };
}

/**
 * Seconds a run will take, roughly: every measurement and warm-up, plus a second per server start.
 *
 * @param options The run's settings.
 * @returns Seconds.
 */
export function estimateSeconds(options: HttpOptions): number {
  const starts = options.servers.length * options.rounds;
  return starts * (1 + options.routes.length * (options.duration + options.warmup));
}
