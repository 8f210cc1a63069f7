/**
 * A bridge that runs ASGI 3.0 applications (HTTP spec 2.1, lifespan spec 2.0) on `Deno.serve`.
 *
 * @module
 */

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

/** A send() call broke the ASGI HTTP protocol. */
export class AsgiProtocolError extends Error {
  /**
   * Creates the error.
   *
   * @param message What broke the protocol.
   */
  constructor(message: string) {
    super(message);
    this.name = "AsgiProtocolError";
  }
}

/** Lifespan startup or shutdown failed. */
export class LifespanError extends Error {
  /** The phase that failed. */
  readonly phase: "startup" | "shutdown";
  /**
   * Creates the error.
   *
   * @param phase The phase that failed.
   * @param message The application's message.
   */
  constructor(phase: "startup" | "shutdown", message: string) {
    super(message);
    this.name = "LifespanError";
    this.phase = phase;
  }
}

/**
 * Wraps an ASGI application as a Fetch handler.
 *
 * @param app The application, or an object with an `asgi` property holding it.
 * @param options Lifespan, root path, body limit and logging.
 * @returns The handler.
 */
export function createFetchHandler(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: FetchHandlerOptions = {},
): AsgiFetchHandler {
  void app;
  void options;
  throw new Error("Not implemented yet");
}

/**
 * Serves an ASGI application.
 *
 * @param app The application, or an object with an `asgi` property holding it.
 * @param options Listening address, transport, lifespan and limits.
 * @returns The running server.
 */
export function serve(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: ServeOptions = {},
): AsgiServer {
  void app;
  void options;
  throw new Error("Not implemented yet");
}
