/**
 * A bridge that runs ASGI 3.0 applications (HTTP spec 2.1, lifespan spec 2.0) on `Deno.serve`.
 *
 * @module
 */
import { Core, type Listener, withResolvers } from "./_asgi_core.ts";
import { handleFetch, listenDeno } from "./_deno_transport.ts";

/** The ASGI protocol version this bridge speaks. */
export const ASGI_VERSION = "3.0";

// ---------------------------------------------------------------------------------------------
// Scopes
// ---------------------------------------------------------------------------------------------

/** The `asgi` key of an HTTP scope. */
export interface HttpAsgiVersions {
  /** The ASGI protocol version. */
  version: "3.0";
  /** The version of the ASGI HTTP spec the bridge implements. */
  spec_version: "2.1";
}

/** The `asgi` key of a lifespan scope. */
export interface LifespanAsgiVersions {
  /** The ASGI protocol version. */
  version: "3.0";
  /** The version of the ASGI lifespan spec the bridge implements. */
  spec_version: "2.0";
}

/** The connection scope of one HTTP request. Keys follow the ASGI spec (snake_case protocol data). */
export interface HttpScope {
  /** Always `"http"`. */
  type: "http";
  /** Protocol versions. */
  asgi: HttpAsgiVersions;
  /** `"1.1"`: `Deno.serve` does not expose the protocol version of a request. */
  http_version: string;
  /** The request method, upper case. */
  method: string;
  /** `"http"` or `"https"`. */
  scheme: string;
  /** The percent-decoded path (UTF-8, decoded tolerantly), without `root_path`. */
  path: string;
  /** The path exactly as the client sent it, still percent-encoded, without the query. */
  raw_path: Uint8Array;
  /** The query string after `?`, still percent-encoded, without the `?`. */
  query_string: Uint8Array;
  /** The mount point of the application (the `rootPath` option). */
  root_path: string;
  /** Request headers as `[name, value]` byte pairs, names lower case. */
  headers: [Uint8Array, Uint8Array][];
  /** `[host, port]` of the client, or `null` when unknown. */
  client: [string, number] | null;
  /** `[host, port]` of the listening socket, or `null` when unknown. */
  server: [string, number] | null;
  /** A shallow copy of the lifespan state. */
  state: Record<string, unknown>;
  /** Protocol extensions the server supports (none). */
  extensions: Record<string, unknown>;
}

/** The scope of the lifespan connection, which lives as long as the server. */
export interface LifespanScope {
  /** Always `"lifespan"`. */
  type: "lifespan";
  /** Protocol versions. */
  asgi: LifespanAsgiVersions;
  /** A namespace the application may fill during startup; each HTTP scope gets a shallow copy. */
  state: Record<string, unknown>;
}

/** Any scope the bridge calls an application with. */
export type Scope = HttpScope | LifespanScope;

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/** A chunk of the request body. */
export interface HttpRequestMessage {
  /** Message type. */
  type: "http.request";
  /** The chunk; empty for an empty body. */
  body: Uint8Array;
  /** `true` while more chunks follow. */
  more_body: boolean;
}

/** The client has gone, or the response is complete. */
export interface HttpDisconnectMessage {
  /** Message type. */
  type: "http.disconnect";
}

/** The server is starting. */
export interface LifespanStartupMessage {
  /** Message type. */
  type: "lifespan.startup";
}

/** The server is stopping. */
export interface LifespanShutdownMessage {
  /** Message type. */
  type: "lifespan.shutdown";
}

/** Any message `receive()` returns. */
export type ReceiveMessage =
  | HttpRequestMessage
  | HttpDisconnectMessage
  | LifespanStartupMessage
  | LifespanShutdownMessage;

/** Starts the response. */
export interface HttpResponseStartMessage {
  /** Message type. */
  type: "http.response.start";
  /** The status code, an integer from 100 to 999. */
  status: number;
  /** Response headers as `[name, value]` byte pairs. */
  headers?: Iterable<readonly [Uint8Array, Uint8Array]>;
  /** Trailers are not supported: must be absent or `false`. */
  trailers?: boolean;
}

/** A chunk of the response body. */
export interface HttpResponseBodyMessage {
  /** Message type. */
  type: "http.response.body";
  /** The chunk. @default {new Uint8Array()} */
  body?: Uint8Array;
  /** `true` while more chunks follow. @default {false} */
  more_body?: boolean;
}

/** Startup succeeded. */
export interface LifespanStartupCompleteMessage {
  /** Message type. */
  type: "lifespan.startup.complete";
}

/** Startup failed: the server does not start. */
export interface LifespanStartupFailedMessage {
  /** Message type. */
  type: "lifespan.startup.failed";
  /** Why. @default {""} */
  message?: string;
}

/** Shutdown finished. */
export interface LifespanShutdownCompleteMessage {
  /** Message type. */
  type: "lifespan.shutdown.complete";
}

/** Shutdown failed. */
export interface LifespanShutdownFailedMessage {
  /** Message type. */
  type: "lifespan.shutdown.failed";
  /** Why. @default {""} */
  message?: string;
}

/** Any message an application may `send()`. */
export type SendMessage =
  | HttpResponseStartMessage
  | HttpResponseBodyMessage
  | LifespanStartupCompleteMessage
  | LifespanStartupFailedMessage
  | LifespanShutdownCompleteMessage
  | LifespanShutdownFailedMessage;

/** Returns the next event for the application. */
export type Receive = () => Promise<ReceiveMessage>;

/** Sends one event from the application; resolves when the server has accepted it. */
export type Send = (message: SendMessage) => Promise<void>;

/** An ASGI 3.0 application. */
export type AsgiApplication = (scope: Scope, receive: Receive, send: Send) => Promise<void>;

// ---------------------------------------------------------------------------------------------
// Options and server
// ---------------------------------------------------------------------------------------------

/** Where the bridge writes its log lines. `console` fits. */
export interface AsgiLogger {
  /** Application errors and failed startups. */
  error(...data: unknown[]): void;
  /** Suspicious but survivable events. */
  warn(...data: unknown[]): void;
  /** Informational events, such as lifespan being unsupported in `"auto"` mode. */
  info(...data: unknown[]): void;
}

/** Options of {@linkcode createFetchHandler}. */
export interface FetchHandlerOptions {
  /**
   * Lifespan protocol: `"auto"` runs it and serves without it when the application raises on the
   * lifespan scope; `"on"` makes any lifespan error fatal; `"off"` never calls it.
   *
   * @default {"auto"}
   */
  lifespan?: "auto" | "on" | "off";
  /** The `root_path` of every HTTP scope. @default {""} */
  rootPath?: string;
  /**
   * The largest request body accepted, in bytes. A larger `content-length` gets 413 without the
   * application being called.
   *
   * @default {Infinity}
   */
  maxBodySize?: number;
  /** Where log lines go. @default {console} */
  logger?: AsgiLogger;
}

/** The address a server listens on. */
export interface AsgiServerAddr {
  /** Always `"tcp"`. */
  transport: "tcp";
  /** The bound host name or IP address. */
  hostname: string;
  /** The bound port. */
  port: number;
}

/** Options of {@linkcode serve}. */
export interface ServeOptions extends FetchHandlerOptions {
  /** The port to listen on; `0` picks a free one. @default {8000} */
  port?: number;
  /** The interface to listen on. @default {"127.0.0.1"} */
  hostname?: string;
  /** Aborting it shuts the server down gracefully. */
  signal?: AbortSignal;
  /** Called once the server listens. @default {logs the address} */
  onListen?: (addr: AsgiServerAddr) => void;
  /** `"deno"` uses `Deno.serve`; `"node"` uses `node:http` and delivers GET bodies. @default {"deno"} */
  transport?: "deno" | "node";
  /** How long graceful shutdown waits for in-flight requests, in milliseconds. @default {30000} */
  shutdownTimeout?: number;
}

/** A running server returned by {@linkcode serve}. */
export interface AsgiServer extends AsyncDisposable {
  /** Resolves with the bound address once lifespan startup is complete and the server listens. */
  readonly addr: Promise<AsgiServerAddr>;
  /** Settles when the server has stopped and lifespan shutdown has run. */
  readonly finished: Promise<void>;
  /** Stops accepting, lets in-flight requests finish, then runs lifespan shutdown. */
  shutdown(): Promise<void>;
}

/** Connection facts a Fetch-style host passes along with a request (`Deno.ServeHandlerInfo` fits). */
export interface FetchInfo {
  /** The client's address. */
  remoteAddr?: { hostname: string; port: number };
}

/** The portable form of the bridge: a Fetch handler plus explicit lifespan control. */
export interface AsgiFetchHandler {
  /** Serves one request; runs lifespan startup first if it has not run yet. */
  fetch(request: Request, info?: FetchInfo): Promise<Response>;
  /** Runs lifespan startup (once). */
  startup(): Promise<void>;
  /** Runs lifespan shutdown (once). */
  shutdown(): Promise<void>;
}

export { AsgiProtocolError, LifespanError } from "./_asgi_core.ts";

const DEFAULT_PORT = 8000;
const DEFAULT_HOSTNAME = "127.0.0.1";
const DEFAULT_SHUTDOWN_TIMEOUT = 30_000;

function resolveApp(app: AsgiApplication | { asgi: AsgiApplication }): AsgiApplication {
  if (typeof app === "function") return app;
  if (typeof app === "object" && app !== null && typeof app.asgi === "function") {
    return app.asgi.bind(app);
  }
  throw new TypeError(
    `Invalid application ${
      describeValue(app)
    }: pass an ASGI callable (scope, receive, send) or an object with an "asgi" method`,
  );
}

function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "array" : "object";
}

function checkOptions(options: ServeOptions): void {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`Invalid options ${describeValue(options)}: pass an object`);
  }
  const { lifespan, rootPath, maxBodySize, logger } = options;
  if (lifespan !== undefined && lifespan !== "auto" && lifespan !== "on" && lifespan !== "off") {
    throw new TypeError(
      `Invalid lifespan ${describeValue(lifespan)}: use "auto", "on" or "off"`,
    );
  }
  if (rootPath !== undefined) {
    if (typeof rootPath !== "string") {
      throw new TypeError(`Invalid rootPath ${describeValue(rootPath)}: use a string`);
    }
    if (rootPath !== "" && (!rootPath.startsWith("/") || rootPath.endsWith("/"))) {
      throw new RangeError(
        `Invalid rootPath ${
          JSON.stringify(rootPath)
        }: use "" or a path that starts with "/" and does not end with one`,
      );
    }
  }
  checkNonNegative("maxBodySize", maxBodySize);
  if (
    logger !== undefined &&
    (typeof logger !== "object" || logger === null ||
      typeof logger.error !== "function" || typeof logger.warn !== "function" ||
      typeof logger.info !== "function")
  ) {
    throw new TypeError(
      `Invalid logger ${describeValue(logger)}: use an object with error, warn and info methods`,
    );
  }
}

function checkNonNegative(name: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`Invalid ${name} ${describeValue(value)}: use a number`);
  }
  if (value < 0) throw new RangeError(`Invalid ${name} ${value}: use a number of 0 or more`);
}

function createCore(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: FetchHandlerOptions,
): Core {
  const application = resolveApp(app);
  checkOptions(options);
  return new Core(application, {
    lifespan: options.lifespan ?? "auto",
    rootPath: options.rootPath ?? "",
    maxBodySize: options.maxBodySize ?? Infinity,
    logger: options.logger ?? console,
  });
}

/**
 * Wraps an ASGI application as a Fetch handler: the portable form of the bridge. Use it with
 * `Deno.serve(handler.fetch)`, as the default export for `deno serve` (each `--parallel` worker
 * runs its own lifespan), or with any runtime that speaks Fetch.
 *
 * Lifespan startup runs on the first request unless `startup()` was awaited before; requests get
 * 503 when it fails. Nothing runs lifespan shutdown by itself: call `shutdown()` (from a signal
 * listener, say) when the host stops. The scope's `server` is `null`: a Fetch handler cannot see
 * the listening socket.
 *
 * @param app The application, or an object with an `asgi` method.
 * @param options Lifespan, root path, body limit and logging.
 * @returns The handler, with `startup()` and `shutdown()` for the lifespan protocol.
 * @throws {TypeError} When `app` is not an application, or an option has the wrong type.
 * @throws {RangeError} When an option is out of range.
 *
 * @example Serving with Deno.serve
 * ```ts
 * import { createFetchHandler, type Scope, type Receive, type Send } from "./asgi.ts";
 *
 * async function app(scope: Scope, receive: Receive, send: Send): Promise<void> {
 *   if (scope.type !== "http") return;
 *   await receive();
 *   await send({ type: "http.response.start", status: 200, headers: [] });
 *   await send({ type: "http.response.body", body: new TextEncoder().encode("hi") });
 * }
 *
 * const handler = createFetchHandler(app, { lifespan: "off" });
 * const response = await handler.fetch(new Request("http://localhost/"));
 * console.assert(await response.text() === "hi");
 * ```
 */
export function createFetchHandler(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: FetchHandlerOptions = {},
): AsgiFetchHandler {
  const core = createCore(app, options);
  const lifespan = core.lifespan;
  let failureLogged = false;
  const unavailable = (error: unknown): Response => {
    if (!failureLogged) {
      failureLogged = true;
      core.logger.error(`Application startup failed: ${errorMessage(error)}`);
    }
    return new Response("Service Unavailable", {
      status: 503,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  };
  return {
    fetch(request: Request, info?: FetchInfo): Promise<Response> {
      if (lifespan.ready) return handleFetch(core, request, info, null);
      return lifespan.startup().then(() => handleFetch(core, request, info, null), unavailable);
    },
    startup: () => lifespan.startup(),
    shutdown: () => lifespan.shutdown(),
  };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Serves an ASGI application over HTTP/1.1.
 *
 * Lifespan startup runs first; only then does the server listen. When startup fails
 * (`lifespan.startup.failed`, or an exception with lifespan `"on"`), the server never listens:
 * `addr` and `finished` reject with a {@linkcode LifespanError} carrying the application's message,
 * which is also logged. Use `transport: "node"` to receive GET and HEAD request bodies, which
 * `Deno.serve` drops.
 *
 * @param app The application, or an object with an `asgi` method.
 * @param options Listening address, transport, lifespan and limits.
 * @returns The running server: await `addr` for the bound address.
 * @throws {TypeError} When `app` is not an application, or an option has the wrong type.
 * @throws {RangeError} When an option is out of range.
 *
 * @example Serving on a free port
 * ```ts
 * import { serve, type Scope, type Receive, type Send } from "./asgi.ts";
 *
 * async function app(scope: Scope, receive: Receive, send: Send): Promise<void> {
 *   if (scope.type !== "http") return;
 *   await send({ type: "http.response.start", status: 200 });
 *   await send({ type: "http.response.body", body: new TextEncoder().encode("OK") });
 * }
 *
 * await using server = serve(app, { port: 0, lifespan: "off", onListen() {} });
 * const { port } = await server.addr;
 * const response = await fetch(`http://127.0.0.1:${port}/`);
 * console.assert(await response.text() === "OK");
 * ```
 */
export function serve(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: ServeOptions = {},
): AsgiServer {
  const core = createCore(app, options);
  const { port = DEFAULT_PORT, hostname = DEFAULT_HOSTNAME, transport = "deno" } = options;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`Invalid port ${describeValue(port)}: use an integer from 0 to 65535`);
  }
  if (typeof hostname !== "string" || hostname === "") {
    throw new TypeError(`Invalid hostname ${describeValue(hostname)}: use a host name or address`);
  }
  if (transport !== "deno" && transport !== "node") {
    throw new TypeError(`Invalid transport ${describeValue(transport)}: use "deno" or "node"`);
  }
  checkNonNegative("shutdownTimeout", options.shutdownTimeout);
  if (options.onListen !== undefined && typeof options.onListen !== "function") {
    throw new TypeError(`Invalid onListen ${describeValue(options.onListen)}: use a function`);
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new TypeError(`Invalid signal ${describeValue(options.signal)}: use an AbortSignal`);
  }
  return new Server(core, {
    port,
    hostname,
    transport,
    shutdownTimeout: options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
    onListen: options.onListen ??
      ((addr) =>
        core.logger.info(`Listening on http://${hostForUrl(addr.hostname)}:${addr.port}/`)),
    signal: options.signal,
  });
}

/** Resolves `true` if `promise` settles within `ms` milliseconds, `false` otherwise. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === Infinity) {
    await promise;
    return true;
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function hostForUrl(hostname: string): string {
  return hostname.includes(":") ? `[${hostname}]` : hostname;
}

interface ServerSettings {
  port: number;
  hostname: string;
  transport: "deno" | "node";
  shutdownTimeout: number;
  onListen: (addr: AsgiServerAddr) => void;
  signal: AbortSignal | undefined;
}

class Server implements AsgiServer {
  readonly addr: Promise<AsgiServerAddr>;
  readonly finished: Promise<void>;
  readonly #core: Core;
  readonly #settings: ServerSettings;
  readonly #done = withResolvers<void>();
  #listener: Listener | null = null;
  #stopping = false;
  #stop: Promise<void> | null = null;
  #onAbort: (() => void) | null = null;

  constructor(core: Core, settings: ServerSettings) {
    this.#core = core;
    this.#settings = settings;
    this.finished = this.#done.promise;
    // Both promises carry a startup failure; whoever awaits one of them sees it, and the failure
    // is logged, so an unobserved one must not crash the process a second time.
    this.finished.catch(() => {});
    const signal = settings.signal;
    if (signal !== undefined) {
      if (signal.aborted) this.#stopping = true;
      else {
        this.#onAbort = () => {
          this.shutdown().catch(() => {});
        };
        signal.addEventListener("abort", this.#onAbort, { once: true });
      }
    }
    this.addr = this.#start();
    this.addr.catch(() => {});
  }

  async #start(): Promise<AsgiServerAddr> {
    const core = this.#core;
    const lifespan = core.lifespan;
    try {
      await lifespan.startup();
    } catch (error) {
      core.logger.error(`Application startup failed: ${errorMessage(error)}`);
      this.#release();
      this.#done.reject(error);
      throw error;
    }
    if (this.#stopping) return await this.#stopBeforeListening();
    const { hostname, port, transport } = this.#settings;
    let listener: Listener;
    try {
      listener = transport === "node"
        ? await (await import("./_node_transport.ts")).listenNode(core, hostname, port)
        : listenDeno(core, hostname, port);
    } catch (error) {
      core.logger.error(`Cannot listen on ${hostname}:${port}: ${errorMessage(error)}`);
      try {
        await lifespan.shutdown();
      } catch {
        // Already logged by the lifespan runner; the listen error is the one to report.
      }
      this.#release();
      this.#done.reject(error);
      throw error;
    }
    this.#listener = listener;
    this.#settings.onListen(listener.addr);
    return listener.addr;
  }

  async #stopBeforeListening(): Promise<never> {
    try {
      await this.#core.lifespan.shutdown();
      this.#done.resolve();
    } catch (error) {
      this.#done.reject(error);
    }
    this.#release();
    throw new DOMException("The server was shut down before it listened", "AbortError");
  }

  shutdown(): Promise<void> {
    return this.#stop ??= this.#shutdown();
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    try {
      await this.addr;
    } catch {
      // Never listened: #start has settled `finished` already.
      return;
    }
    const core = this.#core;
    const listener = this.#listener!;
    const drained = Promise.all([listener.close(), core.idle()]);
    const timeout = this.#settings.shutdownTimeout;
    if (!await within(drained, timeout)) {
      core.logger.warn(
        `Graceful shutdown exceeded shutdownTimeout ${timeout} ms: closing the requests in flight`,
      );
      core.abortAll(new Error("Server shut down before the response completed"));
      listener.forceClose();
      // A response the application has finished can still be on its way to a slow client, and
      // Deno.serve cannot cut it off: give it one more period, then stop waiting.
      if (!await within(drained, timeout)) {
        core.logger.warn("Some connections are still sending; lifespan shutdown runs anyway");
      }
    }
    try {
      await core.lifespan.shutdown();
    } catch (error) {
      core.logger.error(`Application shutdown failed: ${errorMessage(error)}`);
      this.#release();
      this.#done.reject(error);
      throw error;
    }
    this.#release();
    this.#done.resolve();
  }

  #release(): void {
    if (this.#onAbort !== null) {
      this.#settings.signal?.removeEventListener("abort", this.#onAbort);
      this.#onAbort = null;
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}
