/**
 * A faithful bridge that runs ASGI 3.0 applications (HTTP spec 2.1, lifespan spec 2.0), written
 * in TypeScript, on `Deno.serve` — or on `node:http`, which also makes it run on Node.js.
 *
 * An ASGI application is one async function of a connection `scope` and two callables: `receive`
 * for events from the client and `send` for events to it. Message and scope keys are the ASGI
 * spec's own snake_case names (`more_body`, `raw_path`): they are protocol data, not API names.
 * Bytes are `Uint8Array`s.
 *
 * ```ts
 * import { type Receive, type Scope, type Send, serve } from "./asgi.ts";
 *
 * async function app(scope: Scope, receive: Receive, send: Send): Promise<void> {
 *   if (scope.type !== "http") return; // (no lifespan: "auto" serves without it)
 *   await receive();
 *   await send({ type: "http.response.start", status: 200 });
 *   await send({ type: "http.response.body", body: new TextEncoder().encode("Hello") });
 * }
 *
 * await using server = serve(app, { port: 0, onListen() {} });
 * const { port } = await server.addr;
 * console.assert(await (await fetch(`http://127.0.0.1:${port}/`)).text() === "Hello");
 * ```
 *
 * Transports: `"deno"` (the default, `Deno.serve`) drops the body of GET and HEAD requests, as
 * Fetch does; `"node"` (`node:http`, loaded only when chosen) delivers them and keeps repeated
 * request headers apart. {@linkcode createFetchHandler} is the portable form for `deno serve` and
 * other Fetch hosts. What the application does wrong is handled as uvicorn does: see
 * {@linkcode serve}.
 *
 * @module
 */
import { textBytes as sharedTextBytes } from "./_bytes.ts";
import { Core, type Listener, withResolvers } from "./_asgi_core.ts";
import { handleFetch, listenDeno } from "./_deno_transport.ts";

/**
 * The ASGI protocol version this bridge speaks (`scope.asgi.version`).
 *
 * @example Checking a scope
 * ```ts
 * import { ASGI_VERSION } from "./asgi.ts";
 * console.assert(ASGI_VERSION === "3.0");
 * ```
 */
export const ASGI_VERSION = "3.0";

// ---------------------------------------------------------------------------------------------
// Scopes
// ---------------------------------------------------------------------------------------------

/**
 * The `asgi` key of an HTTP scope.
 *
 * @example The value every HTTP scope carries
 * ```ts
 * import type { HttpAsgiVersions } from "./asgi.ts";
 * const versions: HttpAsgiVersions = { version: "3.0", spec_version: "2.1" };
 * ```
 */
export interface HttpAsgiVersions {
  /** The ASGI protocol version. */
  version: "3.0";
  /** The version of the ASGI HTTP spec the bridge implements. */
  spec_version: "2.1";
}

/**
 * The `asgi` key of a lifespan scope.
 *
 * @example The value every lifespan scope carries
 * ```ts
 * import type { LifespanAsgiVersions } from "./asgi.ts";
 * const versions: LifespanAsgiVersions = { version: "3.0", spec_version: "2.0" };
 * ```
 */
export interface LifespanAsgiVersions {
  /** The ASGI protocol version. */
  version: "3.0";
  /** The version of the ASGI lifespan spec the bridge implements. */
  spec_version: "2.0";
}

/**
 * The connection scope of one HTTP request.
 *
 * The byte strings (`raw_path`, `query_string`, `headers`) are views into a buffer shared with
 * other requests, as Node.js does for small Buffers, because each ArrayBuffer of its own costs
 * more in Deno than the rest of the scope: their `.buffer` holds other requests' bytes, and
 * keeping one alive keeps that buffer (16 KiB). Use `.slice()` for a copy of your own.
 *
 * @example Reading a scope
 * ```ts
 * import type { HttpScope } from "./asgi.ts";
 *
 * function describe(scope: HttpScope): string {
 *   const host = scope.headers.find(([name]) => new TextDecoder().decode(name) === "host");
 *   return `${scope.method} ${scope.path} on ${host ? new TextDecoder().decode(host[1]) : "?"}`;
 * }
 * ```
 */
export interface HttpScope {
  /** Always `"http"`. */
  type: "http";
  /** Protocol versions: `{ version: "3.0", spec_version: "2.1" }`. */
  asgi: HttpAsgiVersions;
  /**
   * `"1.1"` on the `deno` transport, which cannot see the request's protocol version (HTTP/1.0
   * and HTTP/2 requests say `"1.1"` too); the `node` transport reports the real one.
   */
  http_version: string;
  /** The request method, upper case. */
  method: string;
  /** `"http"` or `"https"`. */
  scheme: string;
  /**
   * `root_path` followed by the request path, percent-decoded as UTF-8 tolerantly, like Python's
   * `urllib.parse.unquote`: a malformed `%` sequence stays as it is and bytes that are not UTF-8
   * become U+FFFD (`/a%2Fb/caf%C3%A9` → `/a/b/café`, `/%zz/%E0%A4%A` → `/%zz/\ufffd%A`).
   */
  path: string;
  /**
   * `root_path` followed by the request path exactly as the client sent it, still encoded and
   * not normalised (`..` and `%7e` stay), without the query.
   */
  raw_path: Uint8Array;
  /** The query string after `?`, still percent-encoded, without the `?`; empty when absent. */
  query_string: Uint8Array;
  /** The mount point of the application (the `rootPath` option). */
  root_path: string;
  /**
   * Request headers as `[name, value]` byte pairs, names lower case, values as sent. On the
   * `deno` transport Fetch sorts the names and joins repeated fields with ", " (except
   * `set-cookie`); the `node` transport keeps the fields in order and apart.
   */
  headers: [Uint8Array, Uint8Array][];
  /** `[host, port]` of the client, or `null` when the host does not say. */
  client: [string, number] | null;
  /** `[host, port]` of the listening socket, or `null` under `createFetchHandler`. */
  server: [string, number] | null;
  /** A shallow copy of the lifespan scope's `state`, made for each request. */
  state: Record<string, unknown>;
  /** Protocol extensions the server supports: none, so `{}`. */
  extensions: Record<string, unknown>;
}

/**
 * The scope of the lifespan connection, which lives as long as the server.
 *
 * @example Keeping a resource in the state
 * ```ts
 * import type { LifespanScope } from "./asgi.ts";
 *
 * function remember(scope: LifespanScope): void {
 *   scope.state.startedAt = Date.now(); // each HTTP scope's state sees it
 * }
 * ```
 */
export interface LifespanScope {
  /** Always `"lifespan"`. */
  type: "lifespan";
  /** Protocol versions: `{ version: "3.0", spec_version: "2.0" }`. */
  asgi: LifespanAsgiVersions;
  /** A namespace the application may fill during startup; each HTTP scope gets a shallow copy. */
  state: Record<string, unknown>;
}

/**
 * Any scope the bridge calls an application with; tell them apart by `type`.
 *
 * @example Narrowing
 * ```ts
 * import type { Scope } from "./asgi.ts";
 * const label = (scope: Scope) => scope.type === "http" ? scope.path : "lifespan";
 * ```
 */
export type Scope = HttpScope | LifespanScope;

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/**
 * A chunk of the request body. Chunks arrive as the client sends them: `more_body` is `true`
 * while more follow; the last has `false` (an empty body is one message with an empty `body`).
 *
 * @example Reading the whole body
 * ```ts
 * import type { Receive } from "./asgi.ts";
 *
 * async function readBody(receive: Receive): Promise<Uint8Array[] | null> {
 *   const chunks: Uint8Array[] = [];
 *   for (;;) {
 *     const message = await receive();
 *     if (message.type !== "http.request") return null; // the client has gone
 *     chunks.push(message.body);
 *     if (!message.more_body) return chunks;
 *   }
 * }
 * ```
 */
export interface HttpRequestMessage {
  /** Message type. */
  type: "http.request";
  /** The chunk; empty for an empty body. */
  body: Uint8Array;
  /** `true` while more chunks follow. */
  more_body: boolean;
}

/**
 * The client has gone, or the response is complete: `receive()` returns it once the body has
 * been read and the response finishes, or as soon as the client disconnects.
 *
 * @example Stopping work when the client leaves
 * ```ts
 * import type { ReceiveMessage } from "./asgi.ts";
 * const gone = (message: ReceiveMessage) => message.type === "http.disconnect";
 * ```
 */
export interface HttpDisconnectMessage {
  /** Message type. */
  type: "http.disconnect";
}

/**
 * The server is starting: answer with {@linkcode LifespanStartupCompleteMessage} or
 * {@linkcode LifespanStartupFailedMessage}.
 *
 * @example The first lifespan event
 * ```ts
 * import type { LifespanStartupMessage } from "./asgi.ts";
 * const message: LifespanStartupMessage = { type: "lifespan.startup" };
 * ```
 */
export interface LifespanStartupMessage {
  /** Message type. */
  type: "lifespan.startup";
}

/**
 * The server is stopping: answer with {@linkcode LifespanShutdownCompleteMessage} or
 * {@linkcode LifespanShutdownFailedMessage}.
 *
 * @example The last lifespan event
 * ```ts
 * import type { LifespanShutdownMessage } from "./asgi.ts";
 * const message: LifespanShutdownMessage = { type: "lifespan.shutdown" };
 * ```
 */
export interface LifespanShutdownMessage {
  /** Message type. */
  type: "lifespan.shutdown";
}

/**
 * Any message `receive()` returns.
 *
 * @example Dispatching on the type
 * ```ts
 * import type { ReceiveMessage } from "./asgi.ts";
 * const size = (m: ReceiveMessage) => m.type === "http.request" ? m.body.length : 0;
 * ```
 */
export type ReceiveMessage =
  | HttpRequestMessage
  | HttpDisconnectMessage
  | LifespanStartupMessage
  | LifespanShutdownMessage;

/**
 * Starts the response. Nothing is written until the first body message, so a response sent
 * as one body message goes out as one plain response.
 *
 * @example A JSON response head
 * ```ts
 * import type { HttpResponseStartMessage } from "./asgi.ts";
 * const encoder = new TextEncoder();
 * const start: HttpResponseStartMessage = {
 *   type: "http.response.start",
 *   status: 200,
 *   headers: [[encoder.encode("content-type"), encoder.encode("application/json")]],
 * };
 * ```
 */
export interface HttpResponseStartMessage {
  /** Message type. */
  type: "http.response.start";
  /** The status code, an integer from 200 to 599 (the range Fetch can send). */
  status: number;
  /**
   * Response headers as `[name, value]` byte pairs, sent as given (repeated names included).
   * Names must be tokens and values must not contain CR, LF or NUL.
   *
   * @default {[]}
   */
  headers?: Iterable<readonly [Uint8Array, Uint8Array]>;
  /** Trailers are not supported: leave it out or `false`. @default {false} */
  trailers?: boolean;
}

/**
 * A chunk of the response body. With `more_body: true` the response is streamed (chunked unless
 * a `content-length` was given) and `send` resolves when the client has taken the chunk; don't
 * change a chunk after sending it. HEAD responses and 204/205/304 drop the body.
 *
 * @example A streamed response
 * ```ts
 * import type { Send } from "./asgi.ts";
 *
 * async function stream(send: Send, parts: string[]): Promise<void> {
 *   await send({ type: "http.response.start", status: 200 });
 *   for (const part of parts) {
 *     await send({ type: "http.response.body", body: new TextEncoder().encode(part), more_body: true });
 *   }
 *   await send({ type: "http.response.body" });
 * }
 * ```
 */
export interface HttpResponseBodyMessage {
  /** Message type. */
  type: "http.response.body";
  /** The chunk. @default {new Uint8Array()} */
  body?: Uint8Array;
  /** `true` while more chunks follow. @default {false} */
  more_body?: boolean;
}

/**
 * Startup succeeded: the server starts listening.
 *
 * @example Answering startup
 * ```ts
 * import type { LifespanStartupCompleteMessage } from "./asgi.ts";
 * const done: LifespanStartupCompleteMessage = { type: "lifespan.startup.complete" };
 * ```
 */
export interface LifespanStartupCompleteMessage {
  /** Message type. */
  type: "lifespan.startup.complete";
}

/**
 * Startup failed: the server does not start, and `serve` rejects with a {@linkcode LifespanError}
 * carrying the message.
 *
 * @example Refusing to start
 * ```ts
 * import type { LifespanStartupFailedMessage } from "./asgi.ts";
 * const failed: LifespanStartupFailedMessage = {
 *   type: "lifespan.startup.failed",
 *   message: "Database unreachable",
 * };
 * ```
 */
export interface LifespanStartupFailedMessage {
  /** Message type. */
  type: "lifespan.startup.failed";
  /** Why. @default {""} */
  message?: string;
}

/**
 * Shutdown finished.
 *
 * @example Answering shutdown
 * ```ts
 * import type { LifespanShutdownCompleteMessage } from "./asgi.ts";
 * const done: LifespanShutdownCompleteMessage = { type: "lifespan.shutdown.complete" };
 * ```
 */
export interface LifespanShutdownCompleteMessage {
  /** Message type. */
  type: "lifespan.shutdown.complete";
}

/**
 * Shutdown failed: `shutdown()` and `finished` reject with a {@linkcode LifespanError}.
 *
 * @example Reporting a failed shutdown
 * ```ts
 * import type { LifespanShutdownFailedMessage } from "./asgi.ts";
 * const failed: LifespanShutdownFailedMessage = {
 *   type: "lifespan.shutdown.failed",
 *   message: "Could not flush the queue",
 * };
 * ```
 */
export interface LifespanShutdownFailedMessage {
  /** Message type. */
  type: "lifespan.shutdown.failed";
  /** Why. @default {""} */
  message?: string;
}

/**
 * Any message an application may `send()`.
 *
 * @example A helper that sends a whole response
 * ```ts
 * import type { SendMessage } from "./asgi.ts";
 *
 * function whole(status: number, body: Uint8Array): SendMessage[] {
 *   return [{ type: "http.response.start", status }, { type: "http.response.body", body }];
 * }
 * ```
 */
export type SendMessage =
  | HttpResponseStartMessage
  | HttpResponseBodyMessage
  | LifespanStartupCompleteMessage
  | LifespanStartupFailedMessage
  | LifespanShutdownCompleteMessage
  | LifespanShutdownFailedMessage;

/**
 * Returns the next event for the application.
 *
 * @example Waiting for the client to leave
 * ```ts
 * import type { Receive } from "./asgi.ts";
 *
 * async function untilDisconnect(receive: Receive): Promise<void> {
 *   while ((await receive()).type !== "http.disconnect");
 * }
 * ```
 */
export type Receive = () => Promise<ReceiveMessage>;

/**
 * Sends one event from the application; resolves when the server has accepted it. Rejects with
 * {@linkcode AsgiProtocolError} when the message breaks the protocol; after the client has gone it
 * does nothing.
 *
 * @example Sending an empty 204
 * ```ts
 * import type { Send } from "./asgi.ts";
 *
 * async function noContent(send: Send): Promise<void> {
 *   await send({ type: "http.response.start", status: 204 });
 *   await send({ type: "http.response.body" });
 * }
 * ```
 */
export type Send = (message: SendMessage) => Promise<void>;

/**
 * An ASGI 3.0 application: called once per HTTP request, and once for the server's lifespan.
 *
 * @example An application with a lifespan
 * ```ts
 * import type { AsgiApplication } from "./asgi.ts";
 *
 * const app: AsgiApplication = async (scope, receive, send) => {
 *   if (scope.type === "lifespan") {
 *     for (;;) {
 *       const message = await receive();
 *       if (message.type === "lifespan.startup") {
 *         await send({ type: "lifespan.startup.complete" });
 *       } else if (message.type === "lifespan.shutdown") {
 *         return await send({ type: "lifespan.shutdown.complete" });
 *       }
 *     }
 *   }
 *   await send({ type: "http.response.start", status: 200 });
 *   await send({ type: "http.response.body", body: new TextEncoder().encode(scope.path) });
 * };
 * ```
 */
export type AsgiApplication = (scope: Scope, receive: Receive, send: Send) => Promise<void>;

// ---------------------------------------------------------------------------------------------
// Options and server
// ---------------------------------------------------------------------------------------------

/**
 * Where the bridge writes its log lines: application errors (with their stacks), protocol
 * errors, failed startups and shutdowns, and informational lines. `console` fits.
 *
 * @example Keeping log lines for a test
 * ```ts
 * import type { AsgiLogger } from "./asgi.ts";
 *
 * const lines: string[] = [];
 * const logger: AsgiLogger = {
 *   error: (...data) => lines.push(data.join(" ")),
 *   warn: (...data) => lines.push(data.join(" ")),
 *   info: () => {},
 * };
 * ```
 */
export interface AsgiLogger {
  /** Application errors, protocol errors and failed startups or shutdowns. */
  error(...data: unknown[]): void;
  /** Survivable trouble: a request body over the limit, a shutdown that ran out of time. */
  warn(...data: unknown[]): void;
  /** Informational lines: the listening address, lifespan unsupported in `"auto"` mode. */
  info(...data: unknown[]): void;
}

/**
 * Options of {@linkcode createFetchHandler}, and the shared part of {@linkcode ServeOptions}.
 *
 * @example Mounting under a prefix with a body limit
 * ```ts
 * import type { FetchHandlerOptions } from "./asgi.ts";
 * const options: FetchHandlerOptions = { rootPath: "/api", maxBodySize: 1024 * 1024 };
 * ```
 */
export interface FetchHandlerOptions {
  /**
   * Lifespan protocol: `"auto"` runs it and serves without it (logged once) when the application
   * raises on the lifespan scope; `"on"` makes such an exception stop the server from starting;
   * `"off"` never calls the application with a lifespan scope. As uvicorn.
   *
   * @default {"auto"}
   */
  lifespan?: "auto" | "on" | "off";
  /**
   * The `root_path` of every HTTP scope: where a proxy mounts the application. It prefixes
   * `path` and `raw_path` too, as in uvicorn. `""` or a path starting (not ending) with `/`.
   *
   * @default {""}
   */
  rootPath?: string;
  /**
   * The largest request body accepted, in bytes. A larger `content-length` gets 413 without the
   * application being called; a chunked body that grows past it gets 413 (if no response has
   * started) and the application sees `http.disconnect`.
   *
   * @default {Infinity}
   */
  maxBodySize?: number;
  /** Where log lines go. @default {console} */
  logger?: AsgiLogger;
}

/**
 * The address a server listens on (the shape of `Deno.NetAddr`).
 *
 * @example Building a URL
 * ```ts
 * import type { AsgiServerAddr } from "./asgi.ts";
 * const url = (addr: AsgiServerAddr) => `http://${addr.hostname}:${addr.port}/`;
 * ```
 */
export interface AsgiServerAddr {
  /** Always `"tcp"`. */
  transport: "tcp";
  /** The bound host name or IP address. */
  hostname: string;
  /** The bound port. */
  port: number;
}

/**
 * Options of {@linkcode serve}.
 *
 * @example Everything a test server usually sets
 * ```ts
 * import type { ServeOptions } from "./asgi.ts";
 * const options: ServeOptions = { port: 0, lifespan: "off", onListen() {} };
 * ```
 */
export interface ServeOptions extends FetchHandlerOptions {
  /** The port to listen on; `0` picks a free one (see `addr`). @default {8000} */
  port?: number;
  /**
   * The interface to listen on. Loopback by default: a library should not open a port on every
   * interface by surprise; pass `"0.0.0.0"` (or `"::"`) to accept connections from elsewhere.
   *
   * @default {"127.0.0.1"}
   */
  hostname?: string;
  /** Aborting it shuts the server down, as `shutdown()` does. */
  signal?: AbortSignal;
  /** Called once the server listens. @default {logs "Listening on http://…/" at info level} */
  onListen?: (addr: AsgiServerAddr) => void;
  /**
   * `"deno"` serves with `Deno.serve`, which drops GET and HEAD request bodies and merges
   * repeated request headers; `"node"` serves with `node:http` (loaded only when chosen), which
   * delivers those bodies, keeps headers apart and also works on Node.js.
   *
   * @default {"deno"}
   */
  transport?: "deno" | "node";
  /**
   * How long `shutdown()` waits for requests in flight, in milliseconds. Then their applications
   * see `http.disconnect`, unstarted responses get 500 and started ones are cut off, after
   * which lifespan shutdown runs.
   *
   * @default {30000}
   */
  shutdownTimeout?: number;
}

/**
 * A running server returned by {@linkcode serve}.
 *
 * @example Stopping a server
 * ```ts
 * import { serve } from "./asgi.ts";
 *
 * const server = serve(async () => {}, { port: 0, lifespan: "off", onListen() {} });
 * await server.addr;
 * await server.shutdown();
 * await server.finished;
 * ```
 */
export interface AsgiServer extends AsyncDisposable {
  /**
   * Resolves with the bound address once lifespan startup is complete and the server listens
   * (the server only listens after startup). Rejects with {@linkcode LifespanError} when startup
   * fails, with the listen error when the port is taken, and with an `AbortError` when the server
   * was shut down before it listened.
   */
  readonly addr: Promise<AsgiServerAddr>;
  /**
   * Settles when the server has stopped and lifespan shutdown has run; rejects when startup,
   * listening or lifespan shutdown failed.
   */
  readonly finished: Promise<void>;
  /**
   * Stops accepting connections, lets requests in flight finish (up to `shutdownTimeout`), then
   * runs lifespan shutdown. Runs once; later calls return the same promise. Rejects with
   * {@linkcode LifespanError} when lifespan shutdown fails.
   */
  shutdown(): Promise<void>;
}

/**
 * Connection facts a Fetch host passes along with a request; `Deno.ServeHandlerInfo` fits.
 *
 * @example What Deno.serve passes
 * ```ts
 * import type { FetchInfo } from "./asgi.ts";
 * const info: FetchInfo = { remoteAddr: { hostname: "127.0.0.1", port: 50000 } };
 * ```
 */
export interface FetchInfo {
  /** The client's address: the scope's `client`. */
  remoteAddr?: { hostname: string; port: number };
}

/**
 * The portable form of the bridge: a Fetch handler plus explicit lifespan control, made by
 * {@linkcode createFetchHandler}.
 *
 * @example As the default export for `deno serve`
 * ```ts ignore
 * import { createFetchHandler } from "./asgi.ts";
 * import { app } from "./app.ts";
 *
 * export default createFetchHandler(app); // deno serve --parallel main.ts
 * ```
 */
export interface AsgiFetchHandler {
  /** Serves one request; runs lifespan startup first if it has not run yet. */
  fetch(request: Request, info?: FetchInfo): Promise<Response>;
  /** Runs lifespan startup (once); rejects with {@linkcode LifespanError} when it fails. */
  startup(): Promise<void>;
  /** Runs lifespan shutdown (once); rejects with {@linkcode LifespanError} when it fails. */
  shutdown(): Promise<void>;
}

export { AsgiProtocolError, LifespanError } from "./_asgi_core.ts";

/**
 * UTF-8 bytes of a text, for the byte strings of ASGI messages (bodies, header names and values),
 * made cheaply. `new TextEncoder().encode()` gives every call an ArrayBuffer of its own, and each
 * costs Deno some 0.4 µs of CPU, about a twentieth of a whole small request's; short ASCII text
 * (up to 2 KiB) is copied instead into a 16 KiB buffer shared with other calls and handed out as a
 * view of it, as Node.js does for small Buffers. Other text goes through `TextEncoder`.
 *
 * Treat the bytes as read-only: a view's `.buffer` is the shared buffer, other texts' bytes
 * included, and keeping a view alive keeps that buffer. `.slice()` gives a private copy.
 *
 * @param text The text.
 * @returns Its UTF-8 bytes.
 * @throws {TypeError} When `text` is not a string.
 *
 * @example A response body
 * ```ts
 * import { textBytes } from "./asgi.ts";
 * import { assertEquals } from "@std/assert";
 *
 * const body = textBytes(`hello ${"world"}`);
 * assertEquals(new TextDecoder().decode(body), "hello world");
 * assertEquals(textBytes("é"), new Uint8Array([0xc3, 0xa9]));
 * ```
 */
export function textBytes(text: string): Uint8Array {
  if (typeof text !== "string") {
    throw new TypeError(
      `Cannot encode ${describeValue(text)}: textBytes() takes a string, e.g. String(value)`,
    );
  }
  return sharedTextBytes(text);
}

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
 * Serves an ASGI application over HTTP/1.1, on 127.0.0.1:8000 unless told otherwise.
 *
 * Lifespan startup runs first; only then does the server listen. When startup fails
 * (`lifespan.startup.failed`, or an exception with lifespan `"on"`), the server never listens:
 * `addr` and `finished` reject with a {@linkcode LifespanError} carrying the application's message,
 * which is also logged. Use `transport: "node"` to receive GET and HEAD request bodies, which
 * `Deno.serve` drops.
 *
 * When the application misbehaves, the bridge does what uvicorn does, logs it, and keeps serving
 * other requests:
 * - it raises before `http.response.start`: 500 `text/plain` "Internal Server Error";
 * - it returns without starting a response: the same 500 (nothing if the client has gone);
 * - it raises, or returns, after the start: the response is cut off and the connection closed
 *   (no 500 is injected);
 * - a message breaks the protocol (a body before the start, a second start, anything after the
 *   last body, a wrong type, CR or LF in a header, more or fewer bytes than `content-length`):
 *   `send` rejects with {@linkcode AsgiProtocolError}.
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
