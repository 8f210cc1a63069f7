/**
 * The ASGI protocol's data: scopes, messages, the application signature and the server's options.
 * Only types (and the version constant) live here, below the code that uses them, so that the
 * core, the transports and the public face `asgi.ts` all import from this one place.
 *
 * @module
 */
/**
 * The ASGI protocol version this bridge speaks (`scope.asgi.version`).
 *
 * @example Checking a scope
 * ```ts
 * import { ASGI_VERSION } from "@stellarator/stellarator/asgi";
 * import { assertEquals } from "@std/assert";
 * assertEquals(ASGI_VERSION, "3.0");
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
 * import type { HttpAsgiVersions } from "@stellarator/stellarator/asgi";
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
 * import type { LifespanAsgiVersions } from "@stellarator/stellarator/asgi";
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
 * keeping one alive keeps that buffer (16 KiB). Header names are moreover the very same arrays
 * in every request that repeats them, as equal immutable `bytes` may be in Python (values and
 * paths never are, so wiping a token in place stays within its request). Use `.slice()` for a
 * copy of your own.
 *
 * @example Reading a scope
 * ```ts
 * import type { HttpScope } from "@stellarator/stellarator/asgi";
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
  /**
   * `[host, port]` of the client; `null` when the host does not say, and on a Unix socket,
   * whose peers have no address.
   */
  client: [string, number] | null;
  /**
   * `[host, port]` of the listening socket on `deno` (`0.0.0.0` for one bound to every
   * interface), of the connection's local end on `node`; `[path, null]` on a Unix socket (the
   * `path` option of `serve()`); `null` under `createFetchHandler`.
   */
  server: [string, number | null] | null;
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
 * import type { LifespanScope } from "@stellarator/stellarator/asgi";
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
 * import type { Scope } from "@stellarator/stellarator/asgi";
 * const label = (scope: Scope) => scope.type === "http" ? scope.path : "lifespan";
 * ```
 */
export type Scope = HttpScope | WebSocketScope | LifespanScope;

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/**
 * A chunk of the request body. Chunks arrive as the client sends them: `more_body` is `true`
 * while more follow; the last has `false` (an empty body is one message with an empty `body`).
 *
 * @example Reading the whole body
 * ```ts
 * import type { Receive } from "@stellarator/stellarator/asgi";
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
 * been read and the response finishes, or as soon as the client disconnects. When the bridge
 * itself ended the request over its body, its client still there, the message says why in
 * `reason` (and, for a body over `maxBodySize`, the limit in `exceeded_max_body_size`): keys the
 * ASGI spec does not define, which applications that do not know them ignore, as the spec asks
 * of extra keys.
 *
 * @example Telling the server's ending from a client that left
 * ```ts
 * import type { ReceiveMessage } from "@stellarator/stellarator/asgi";
 *
 * function whyEnded(message: ReceiveMessage): string | undefined {
 *   if (message.type !== "http.disconnect") return undefined;
 *   if (message.reason === "exceeded_max_body_size") {
 *     return `the body exceeded ${message.exceeded_max_body_size} bytes (413 sent)`;
 *   }
 *   return message.reason ?? "the client left";
 * }
 * console.assert(whyEnded({ type: "http.disconnect" }) === "the client left");
 * console.assert(whyEnded({ type: "http.disconnect", reason: "body_stalled" }) === "body_stalled");
 * ```
 */
export interface HttpDisconnectMessage {
  /** Message type. */
  type: "http.disconnect";
  /**
   * Present only when the bridge ended the request because its body, read as it arrived (a
   * chunked body, one of no declared length, or one over HTTP/2), grew past `maxBodySize`: the
   * limit, in bytes. The client is still there then, and got a 413 (or, when the response had
   * started, a response cut off); what the application sends from then on is dropped. Never set
   * for a client that left. Not an ASGI key: see docs/asgi.md, "Limits".
   */
  exceeded_max_body_size?: number;
  /**
   * Present only when the bridge itself ended the request over its body, its client still there:
   * why. Absent for a client that left, for the end of a complete exchange, and for the bridge's
   * other endings, which look like a client that left (a response the client took nothing of for
   * `stallTimeout`, a request still running at the end of `shutdownTimeout`). Not an ASGI key
   * (see docs/asgi.md, "Why a request ended"):
   *
   * - `"exceeded_max_body_size"`: the body grew past `maxBodySize`; the client got 413 (or a
   *   response cut off). `exceeded_max_body_size` gives the limit.
   * - `"body_stalled"`: no byte of the body arrived for `stallTimeout`; the client got 408 (or a
   *   response cut off).
   * - `"body_malformed"`: the body could not be parsed (a bad chunk size, on either transport;
   *   a chunk extension of 4 KiB or more, on `deno`); the client got 400 (or a response cut
   *   off), and the connection closes.
   * - `"body_failed"`: the body stream of a `Request` given to `createFetchHandler` failed (the
   *   program's fault, logged as an error); the caller gets 500 if no response had started.
   */
  reason?: "exceeded_max_body_size" | "body_stalled" | "body_malformed" | "body_failed";
}

/**
 * The server is starting: answer with {@linkcode LifespanStartupCompleteMessage} or
 * {@linkcode LifespanStartupFailedMessage}.
 *
 * @example The first lifespan event
 * ```ts
 * import type { LifespanStartupMessage } from "@stellarator/stellarator/asgi";
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
 * import type { LifespanShutdownMessage } from "@stellarator/stellarator/asgi";
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
 * import type { ReceiveMessage } from "@stellarator/stellarator/asgi";
 * const size = (m: ReceiveMessage) => m.type === "http.request" ? m.body.length : 0;
 * ```
 */
export type ReceiveMessage =
  | HttpRequestMessage
  | HttpDisconnectMessage
  | WebSocketConnectMessage
  | WebSocketReceiveMessage
  | WebSocketDisconnectMessage
  | LifespanStartupMessage
  | LifespanShutdownMessage;

/**
 * Starts the response. Nothing is written until the first body message, so a response sent
 * as one body message goes out as one plain response.
 *
 * @example A JSON response head
 * ```ts
 * import type { HttpResponseStartMessage } from "@stellarator/stellarator/asgi";
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
  /**
   * Trailers are not supported: leave it out or `false`.
   *
   * @default {false}
   */
  trailers?: boolean;
}

/**
 * A chunk of the response body. With `more_body: true` the response is streamed (chunked unless
 * a `content-length` was given) and `send` resolves once the transport is ready for the next
 * chunk. The bridge keeps a copy of what it has not written yet, so the array may be changed or
 * reused once `send` has resolved. HEAD responses and 204/205/304 drop the body.
 *
 * @example A streamed response
 * ```ts
 * import type { Send } from "@stellarator/stellarator/asgi";
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
  /**
   * The chunk.
   *
   * @default {new Uint8Array()}
   */
  body?: Uint8Array;
  /**
   * `true` while more chunks follow.
   *
   * @default {false}
   */
  more_body?: boolean;
}

/**
 * Startup succeeded: the server starts listening.
 *
 * @example Answering startup
 * ```ts
 * import type { LifespanStartupCompleteMessage } from "@stellarator/stellarator/asgi";
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
 * import type { LifespanStartupFailedMessage } from "@stellarator/stellarator/asgi";
 * const failed: LifespanStartupFailedMessage = {
 *   type: "lifespan.startup.failed",
 *   message: "Database unreachable",
 * };
 * ```
 */
export interface LifespanStartupFailedMessage {
  /** Message type. */
  type: "lifespan.startup.failed";
  /**
   * Why.
   *
   * @default {""}
   */
  message?: string;
}

/**
 * Shutdown finished.
 *
 * @example Answering shutdown
 * ```ts
 * import type { LifespanShutdownCompleteMessage } from "@stellarator/stellarator/asgi";
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
 * import type { LifespanShutdownFailedMessage } from "@stellarator/stellarator/asgi";
 * const failed: LifespanShutdownFailedMessage = {
 *   type: "lifespan.shutdown.failed",
 *   message: "Could not flush the queue",
 * };
 * ```
 */
export interface LifespanShutdownFailedMessage {
  /** Message type. */
  type: "lifespan.shutdown.failed";
  /**
   * Why.
   *
   * @default {""}
   */
  message?: string;
}

/**
 * Any message an application may `send()`.
 *
 * @example A helper that sends a whole response
 * ```ts
 * import type { SendMessage } from "@stellarator/stellarator/asgi";
 *
 * function whole(status: number, body: Uint8Array): SendMessage[] {
 *   return [{ type: "http.response.start", status }, { type: "http.response.body", body }];
 * }
 * ```
 */
export type SendMessage =
  | HttpResponseStartMessage
  | HttpResponseBodyMessage
  | WebSocketAcceptMessage
  | WebSocketSendMessage
  | WebSocketCloseMessage
  | WebSocketHttpResponseStartMessage
  | WebSocketHttpResponseBodyMessage
  | LifespanStartupCompleteMessage
  | LifespanStartupFailedMessage
  | LifespanShutdownCompleteMessage
  | LifespanShutdownFailedMessage;

/**
 * Returns the next event for the application.
 *
 * @example Waiting for the client to leave
 * ```ts
 * import type { Receive } from "@stellarator/stellarator/asgi";
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
 * import type { Send } from "@stellarator/stellarator/asgi";
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
 * import type { AsgiApplication } from "@stellarator/stellarator/asgi";
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
 * import type { AsgiLogger } from "@stellarator/stellarator/asgi";
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
 * import type { FetchHandlerOptions } from "@stellarator/stellarator/asgi";
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
   * started) and the application sees `http.disconnect` with `exceeded_max_body_size` set to
   * this limit (an App's handler, a `BodyTooLargeError`). Then the connection closes: on `deno`
   * at once (a reset while the client still sends), on `node` once what still arrives has been
   * read and dropped (see docs/asgi.md, "Request bodies on deno"). A response already started is
   * cut off instead, and on both the connection closes at once. A client that sent
   * `Expect: 100-continue` with a larger `content-length` gets the 413 instead of
   * `100 Continue` on `node`, so it sends no body; on `deno`, `Deno.serve` has sent the 100
   * before the bridge sees the request.
   *
   * @default {Infinity}
   */
  maxBodySize?: number;
  /**
   * Where log lines go. Warnings a client can cause once per request or connection (a body over
   * `maxBodySize`, a stall) are bounded: the first 10 of each kind in full, then one a minute
   * that counts those held back, and a count at shutdown (docs/asgi.md, "Serving an
   * application"). Application errors are not bounded.
   *
   * @default {console}
   */
  logger?: AsgiLogger;
  /**
   * The largest WebSocket message accepted from a client, in bytes (UTF-8 bytes for text). A
   * larger one closes the connection with code 1009 (message too big) and the application sees
   * `websocket.disconnect` with that code. The default is uvicorn's `ws_max_size`. On `deno`,
   * which cannot stop reading a WebSocket, it also bounds what waits unread: messages the
   * application has not received may hold twice this much, and number 16,384, beyond which the
   * connection is closed with code 1008.
   *
   * @default {16777216}
   */
  maxMessageSize?: number;
}

/**
 * The address a server listens on (the shape of `Deno.NetAddr`).
 *
 * @example Building a URL
 * ```ts
 * import type { AsgiServerAddr } from "@stellarator/stellarator/asgi";
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
 * import type { ServeOptions } from "@stellarator/stellarator/asgi";
 * const options: ServeOptions = { port: 0, lifespan: "off", onListen() {} };
 * ```
 */
export interface ServeOptions extends FetchHandlerOptions {
  /**
   * The port to listen on; `0` picks a free one (see `addr`).
   *
   * @default {8000}
   */
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
  /**
   * Called once the server listens. If it throws, the server stops, as `Deno.serve` does: it
   * closes before any request is served, runs lifespan shutdown, and `addr` and `finished`
   * reject with the error.
   *
   * @default {logs "Listening on http://…/" at info level}
   */
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
   * How long a connection may take to send a complete request head, in milliseconds, from when
   * it opens or its previous response ends; then it is closed (Node answers 408 first). `0` or
   * `Infinity`: no limit; at most 2147483647 otherwise. Node's default. Over TLS it also bounds
   * the TLS handshake, to 1 s at least (node's own limit for that is 120 s). Applies to `transport: "node"` only:
   * `Deno.serve` offers no such control (see the README's limits and docs/asgi.md).
   * A value above 0 and under 100 is logged as a warning: likely seconds written by mistake.
   *
   * @default {60000}
   */
  headersTimeout?: number;
  /**
   * How long a kept-alive connection may stay idle between requests, in milliseconds, before it
   * is closed. `0` or `Infinity`: no limit; from 1000 to 2147483647 otherwise (a `RangeError`
   * under 1000, whatever the transport: Node states the timeout to clients in whole seconds rounded down, as
   * `Keep-Alive: timeout=5`, and `timeout=0` would tell them not to reuse the connection). The
   * default of uvicorn and Node. Applies to `transport: "node"` only, as `headersTimeout`.
   *
   * @default {5000}
   */
  keepAliveTimeout?: number;
  /**
   * The most connections served at once (WebSockets included); a connection beyond is closed as
   * soon as it is accepted. Keeps accepting from running out of file descriptors most of the
   * time; a burst can still exhaust them, after which Deno's `node:http` stops accepting without
   * a sign, and the transport then notices and listens again. By default, on Linux, the soft
   * `ulimit -n` (read from `/proc/self/limits`) minus 200, and at least half of it: 824 under
   * the common 1024. Deno lets a program read that file only with every permission granted
   * (`-A`), not with `--allow-read` alone. Elsewhere, or without `-A`, no limit: set it
   * yourself. `Infinity`: no limit. Applies to `transport: "node"` only (Node's
   * `server.maxConnections`), as `headersTimeout`.
   *
   * @default {the soft fd limit minus 200 on Linux with every permission granted, else Infinity}
   */
  maxConnections?: number;
  /**
   * How long a request may wait on its client with nothing moving, in milliseconds: an
   * application waiting in `receive()` for a body of which no byte arrives, or in `send()` for a
   * client that takes none of the response (nginx's `client_body_timeout` and `send_timeout`).
   * Then the server gives up on the request as on a client that left (`receive()` says
   * `http.disconnect`, with `reason: "body_stalled"` when the body stalled; sends are dropped)
   * and closes the connection: with a 408 when the body stalled before the response began, else
   * by cutting the response off; one warning is logged.
   * On `transport: "deno"` the socket outlives that while the client holds it: a stalled upload's
   * until the client sends on or leaves, a cut response's until the client has taken what was
   * queued before the cut (`Deno.serve` cannot abort a connection); over HTTP/2 only the
   * request's stream is given up (a 408 ends it, a cut response is reset).
   * The clock starts again with each chunk that arrives or is taken, but what moves is counted in
   * lumps, so a slow client that keeps moving may still be cut: a response chunk must be taken
   * within the limit (at 60 s, a 1 MiB chunk needs 17 KiB/s), and so must the chunks of sends
   * made at once (they share one wait); a small body of stated length (64 KiB at most) on `deno`
   * must arrive whole within it; and the kernel reports room a client freed only in bursts (on
   * loopback, after 1.4-1.7 MB: at 60 s, some 28 KB/s). An application that does not ask for the
   * body, or thinks between sends, is not waiting on its client. Given up between 1 and 1.25
   * times the limit (it is checked four times per period, at most every 10 ms: under 40 ms, after
   * 40-50 ms). A WebSocket `send()` that waits this long for a client that takes nothing is given
   * up too (from when it began to wait, so exactly at the limit): the connection is dropped (on
   * `deno` only once the client leaves: Deno cannot abort it), `receive()` says 1006 and that send
   * rejects with `ClientDisconnected`; one warning is logged. On `deno` so is a client that takes
   * none of what sends that already resolved left queued (sends of up to 256 KiB resolve at once),
   * within twice the limit. On `transport: "node"` a connection
   * whose client takes nothing of answers the applications have finished giving (a client that
   * pipelines GETs and never reads), nor sends more of the body of the request answered, is
   * closed after this long too, with one warning; on `deno`
   * that cannot be seen, and such a client keeps its connection until it leaves (docs/asgi.md,
   * Limits). `0` or `Infinity`: no limit; at most 2147483647 otherwise.
   * A value above 0 and under 100 is logged as a warning: likely seconds written by mistake.
   *
   * @default {60000}
   */
  stallTimeout?: number;
  /**
   * How long `shutdown()` waits for requests in flight, in milliseconds. Then their applications
   * see `http.disconnect`, unstarted responses get 500 and started ones are cut off, after
   * which lifespan shutdown runs. At most 2147483647 (what a timer can wait), or `Infinity`.
   * A value above 0 and under 100 is logged as a warning: likely seconds written by mistake.
   *
   * @default {30000}
   */
  shutdownTimeout?: number;
  /**
   * How long `shutdown()` waits for each lifespan phase, in milliseconds: a startup still
   * running when it is called, and lifespan shutdown. An application that does not finish one
   * in time is abandoned (not cancelled: JavaScript cannot), and `finished` rejects with a
   * {@linkcode LifespanError} naming the phase. Startup on its own has no bound: a slow
   * migration is not an error. Hypercorn's default; at most 2147483647, or `Infinity`. An `App`
   * of the web layer uses lifespan shutdown for up to its `shutdownGracePeriod` (its tasks) plus
   * its `lifespanShutdownTimeLimit` (its lifespan function), so keep this above the sum.
   * A value above 0 and under 100 is logged as a warning: likely seconds written by mistake.
   *
   * @default {60000}
   */
  lifespanTimeout?: number;
  /**
   * The server certificate chain, PEM text, as `Deno.serve` takes it: given with `key`, the
   * server speaks TLS (HTTPS and WSS; scopes say `"https"` and `"wss"`). The node transport
   * passes both to `node:https`. Give the file's text (`Deno.readTextFileSync("cert.pem")`), not
   * its name or its bytes: `serve()` throws a `TypeError` for a value that is no PEM text, holds a certificate
   * that cannot be read, or does not start with the certificate of `key`. Facing the open
   * internet, prefer a TLS-terminating proxy: on `deno` a stalled TLS handshake holds shutdown,
   * and a response of some 500 bytes to 64 KiB reaches the client about 44 ms late (Nagle's
   * algorithm, left on by `Deno.serve`); on `node` a connection is closed once it holds 16 MiB
   * the application has not read, since Deno's `node:https` cannot stop reading it (Deno 2.9.6;
   * the bridge's limits in `docs/asgi.md`).
   *
   * @default {undefined (plain HTTP)}
   */
  cert?: string;
  /**
   * The private key of `cert`, PEM text, unencrypted: RSA of 2048 bits or more, ECDSA on P-256,
   * P-384 or P-521, or Ed25519 (what Deno's TLS signs with; `serve()` throws a `TypeError` for
   * any other).
   *
   * @default {undefined (plain HTTP)}
   */
  key?: string;
}

/**
 * The Unix domain socket a server listens on (the shape of `Deno.UnixAddr`): what `addr`
 * resolves with, and `onListen` is given, for a server started with the `path` option.
 *
 * @example Talking to the server over its socket
 * ```ts
 * import type { AsgiUnixAddr } from "@stellarator/stellarator/asgi";
 * const connect = (addr: AsgiUnixAddr) => Deno.connect({ transport: "unix", path: addr.path });
 * ```
 */
export interface AsgiUnixAddr {
  /** Always `"unix"`. */
  transport: "unix";
  /** The socket file's path, as given in the `path` option. */
  path: string;
}

/**
 * Options of {@linkcode serve} on a Unix domain socket, as behind a reverse proxy on the same
 * machine (nginx's `proxy_pass http://unix:/run/app.sock`): `path` in place of `port` and
 * `hostname`. TLS is not offered (`cert` and `key` are refused): nothing but the processes of
 * the machine can reach the socket, and the proxy in front terminates TLS; `Deno.serve` ignores
 * a certificate given with `path`. Every other option of {@linkcode ServeOptions} applies, the
 * connection limits of `transport: "node"` included. See the Unix socket section of
 * `docs/asgi.md` for the scope, the socket file's lifecycle and its mode.
 *
 * @example Serving on a socket
 * ```ts
 * import type { UnixServeOptions } from "@stellarator/stellarator/asgi";
 * const options: UnixServeOptions = { path: "/run/app/app.sock", transport: "node" };
 * ```
 */
export interface UnixServeOptions
  extends Omit<ServeOptions, "port" | "hostname" | "cert" | "key" | "onListen"> {
  /**
   * The socket file to listen on: a non-empty path of at most 107 bytes in UTF-8 (the
   * `sun_path` of Linux's `sockaddr_un` holds 108, its terminating NUL included). The file is
   * made when the server listens, with the mode the process umask leaves (`0o755` under the
   * usual `022`: only its owner may connect) unless `mode` says otherwise, and removed at
   * shutdown. A socket file left by a
   * server that died is removed first; one a live server listens on, or a file that is no
   * socket, is left alone and the server does not start.
   *
   * @example Behind nginx on the same machine
   * ```ts
   * import { serve, type Scope } from "@stellarator/stellarator/asgi";
   *
   * async function app(_scope: Scope): Promise<void> {}
   *
   * const path = await Deno.makeTempFile({ suffix: ".sock" });
   * await Deno.remove(path); // a regular file there would be refused
   * await using server = serve(app, { path, lifespan: "off", onListen() {} });
   * console.log((await server.addr).path === path); // true
   * ```
   */
  path: string;
  /**
   * The permission bits of the socket file, up to `0o777`: the file is made with them when the
   * server listens (the process umask is set to leave them for the moment of the bind), and so
   * again when the listener is bound afresh after fd exhaustion; there is no moment with the
   * umask's mode, and no `chmod` of the path, which a symbolic link put there could redirect.
   * Connecting needs write permission on the file: `0o660` lets a proxy in the file's group
   * connect, `0o666` (what uvicorn sets) any local user. The owner's write permission (`0o200`)
   * is required: without it a server not run as root could not connect to its own file, as a
   * restart after a crash does to tell that file from a live server's. Refused without `path`.
   *
   * @default {what the process umask leaves}
   *
   * @example A proxy in the server's group may connect
   * ```ts
   * import { serve, type Scope } from "@stellarator/stellarator/asgi";
   *
   * async function app(_scope: Scope): Promise<void> {}
   *
   * const path = await Deno.makeTempFile({ suffix: ".sock" });
   * await Deno.remove(path);
   * await using server = serve(app, { path, mode: 0o660, lifespan: "off", onListen() {} });
   * await server.addr;
   * console.log(((await Deno.lstat(path)).mode! & 0o777).toString(8)); // "660"
   * ```
   */
  mode?: number;
  /**
   * Called once the server listens, with the socket's address; as `ServeOptions.onListen`.
   *
   * @default {logs "Listening on unix:<path>" at info level}
   */
  onListen?: (addr: AsgiUnixAddr) => void;
}

/**
 * A running server returned by {@linkcode serve}: `A` is what `addr` resolves with, an
 * {@linkcode AsgiUnixAddr} for a server on a Unix socket.
 *
 * @example Stopping a server
 * ```ts
 * import { serve } from "@stellarator/stellarator/asgi";
 *
 * const server = serve(async () => {}, { port: 0, lifespan: "off", onListen() {} });
 * await server.addr;
 * await server.shutdown();
 * await server.finished;
 * ```
 */
export interface AsgiServer<A extends AsgiServerAddr | AsgiUnixAddr = AsgiServerAddr>
  extends AsyncDisposable {
  /**
   * Resolves with the bound address once lifespan startup is complete and the server listens
   * (the server only listens after startup). Rejects with {@linkcode LifespanError} when startup
   * fails, with the listen error when the port is taken (`Deno.errors.AddrInUse` on `deno`, an
   * `Error` whose `code` is `"EADDRINUSE"` on `node`; the logged line says to free the port or
   * pass another; on a Unix socket, the same errors when a live server holds the path or a file
   * that is no socket is there, which the logged line tells apart), and with an `AbortError`
   * when the server was shut down before it listened.
   */
  readonly addr: Promise<A>;
  /**
   * Settles when the server has stopped and lifespan shutdown has run; rejects when startup,
   * listening or lifespan shutdown failed or did not complete within `lifespanTimeout`, or when
   * the listener died for good (its port could not be bound again after an accept error): then
   * the server has shut down gracefully first. A failure nothing in the program holds is also
   * reported as an uncaught error, which ends the process with status 1, as `Deno.serve` does
   * when it cannot listen (a `serve(app)` whose port is taken must not exit 0): reading `addr`
   * covers failures before listening, and reading `finished` or calling `shutdown()` covers all.
   */
  readonly finished: Promise<void>;
  /**
   * Stops accepting connections, lets requests in flight finish (up to `shutdownTimeout`), then
   * runs lifespan shutdown (up to `lifespanTimeout`). Called during lifespan startup, it waits
   * for startup to complete (up to `lifespanTimeout`), and the server never listens. Runs
   * once; later calls return the same promise. Rejects with {@linkcode LifespanError} when
   * lifespan shutdown fails, or when a lifespan phase it waits for does not complete in time.
   */
  shutdown(): Promise<void>;
}

/**
 * Connection facts a Fetch host passes along with a request; `Deno.ServeHandlerInfo` fits, that
 * of `Deno.serve({ path })` on a Unix socket included, so `Deno.serve({ path }, handler.fetch)`
 * type-checks without a cast.
 *
 * @example What Deno.serve passes
 * ```ts
 * import type { FetchInfo } from "@stellarator/stellarator/asgi";
 * const info: FetchInfo = { remoteAddr: { hostname: "127.0.0.1", port: 50000 } };
 * const overUnixSocket: FetchInfo = { remoteAddr: { transport: "unix", path: "/run/app.sock" } };
 * ```
 */
export interface FetchInfo {
  /**
   * The client's address: the scope's `client`. One without a `hostname` (Deno's address of a
   * Unix socket's peer, `{ transport: "unix", path }`) names no client: `client` is `null`.
   */
  remoteAddr?: { hostname: string; port: number } | { transport: string; path?: string };
}

/**
 * The portable form of the bridge: a Fetch handler plus explicit lifespan control, made by
 * {@linkcode createFetchHandler}.
 *
 * @example As the default export for `deno serve`
 * ```ts ignore
 * import { createFetchHandler } from "@stellarator/stellarator/asgi";
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

// ---------------------------------------------------------------------------------------------
// WebSocket
// ---------------------------------------------------------------------------------------------

/**
 * The `asgi` key of a WebSocket scope. Spec 2.5 of "HTTP & WebSocket ASGI Message Format":
 * `headers` in `websocket.accept` (2.1), `reason` in `websocket.close` (2.3) and in
 * `websocket.disconnect` (2.5), and `send()` failing once the client has gone (2.4).
 *
 * @example The value every WebSocket scope carries
 * ```ts
 * import type { WebSocketAsgiVersions } from "@stellarator/stellarator/asgi";
 * const versions: WebSocketAsgiVersions = { version: "3.0", spec_version: "2.5" };
 * ```
 */
export interface WebSocketAsgiVersions {
  /** The ASGI protocol version. */
  version: "3.0";
  /** The version of the ASGI HTTP and WebSocket spec the bridge implements for WebSockets. */
  spec_version: "2.5";
}

/**
 * The connection scope of one WebSocket: it lives as long as the socket.
 *
 * @example Choosing a subprotocol
 * ```ts
 * import type { WebSocketScope } from "@stellarator/stellarator/asgi";
 * const pick = (scope: WebSocketScope) => scope.subprotocols.includes("chat") ? "chat" : null;
 * ```
 */
export interface WebSocketScope {
  /** Always `"websocket"`. */
  type: "websocket";
  /** Protocol versions: `{ version: "3.0", spec_version: "2.5" }`. */
  asgi: WebSocketAsgiVersions;
  /** Always `"1.1"`: the bridge takes WebSocket handshakes over HTTP/1.1. */
  http_version: string;
  /** `"ws"`, or `"wss"` over TLS. */
  scheme: string;
  /** `root_path` followed by the request path, percent-decoded as for HTTP scopes. */
  path: string;
  /** `root_path` followed by the request path as the client sent it, without the query. */
  raw_path: Uint8Array;
  /** The query string after `?`, still percent-encoded, without the `?`. */
  query_string: Uint8Array;
  /** The mount point of the application (the `rootPath` option). */
  root_path: string;
  /** Handshake request headers as `[name, value]` byte pairs, names lower case. */
  headers: [Uint8Array, Uint8Array][];
  /**
   * `[host, port]` of the client; `null` when the host does not say, and on a Unix socket,
   * whose peers have no address.
   */
  client: [string, number] | null;
  /**
   * `[host, port]` of the listening socket on `deno` (`0.0.0.0` for one bound to every
   * interface), of the connection's local end on `node`; `[path, null]` on a Unix socket (the
   * `path` option of `serve()`); `null` under `createFetchHandler`.
   */
  server: [string, number | null] | null;
  /** The subprotocols the client offered (`sec-websocket-protocol`), in its order. */
  subprotocols: string[];
  /** A shallow copy of the lifespan scope's `state`, made for each connection. */
  state: Record<string, unknown>;
  /**
   * `{ "websocket.http.response": {} }`: the application may deny the handshake with a response
   * of its own (`websocket.http.response.start` and `.body`) instead of the plain 403.
   */
  extensions: Record<string, unknown>;
}

/**
 * The client asks to open the socket: answer with {@linkcode WebSocketAcceptMessage}, or deny with
 * {@linkcode WebSocketCloseMessage} (HTTP 403) or a `websocket.http.response.start`.
 *
 * @example The first WebSocket event
 * ```ts
 * import type { WebSocketConnectMessage } from "@stellarator/stellarator/asgi";
 * const message: WebSocketConnectMessage = { type: "websocket.connect" };
 * ```
 */
export interface WebSocketConnectMessage {
  /** Message type. */
  type: "websocket.connect";
}

/**
 * A whole message from the client: exactly one of `text` and `bytes` is set, the other `null`.
 *
 * @example Echoing a message
 * ```ts
 * import type { Send, WebSocketReceiveMessage } from "@stellarator/stellarator/asgi";
 *
 * async function echo(message: WebSocketReceiveMessage, send: Send): Promise<void> {
 *   if (message.text !== null) await send({ type: "websocket.send", text: message.text });
 *   else await send({ type: "websocket.send", bytes: message.bytes });
 * }
 * ```
 */
export interface WebSocketReceiveMessage {
  /** Message type. */
  type: "websocket.receive";
  /** The content of a binary message, or `null`. */
  bytes: Uint8Array | null;
  /** The content of a text message, or `null`. */
  text: string | null;
}

/**
 * The socket is closed: by the client (its code, 1005 when it gave none), by the server (the code
 * it closed with: the application's, 1009, 1011 or 1012) or lost (1006). Delivered exactly once;
 * a `receive()` after it rejects with {@linkcode AsgiProtocolError}.
 *
 * @example Logging why a socket closed
 * ```ts
 * import type { WebSocketDisconnectMessage } from "@stellarator/stellarator/asgi";
 * const why = (m: WebSocketDisconnectMessage) => `${m.code} ${m.reason}`;
 * ```
 */
export interface WebSocketDisconnectMessage {
  /** Message type. */
  type: "websocket.disconnect";
  /** The close code. */
  code: number;
  /** The close reason; empty when none was given. */
  reason: string;
}

/**
 * Accepts the handshake.
 *
 * @example Accepting with a subprotocol and a header
 * ```ts
 * import type { WebSocketAcceptMessage } from "@stellarator/stellarator/asgi";
 * const encoder = new TextEncoder();
 * const accept: WebSocketAcceptMessage = {
 *   type: "websocket.accept",
 *   subprotocol: "chat",
 *   headers: [[encoder.encode("x-served-by"), encoder.encode("stellarator")]],
 * };
 * ```
 */
export interface WebSocketAcceptMessage {
  /** Message type. */
  type: "websocket.accept";
  /**
   * One of the scope's `subprotocols`, or `null` for none.
   *
   * @default {null}
   */
  subprotocol?: string | null;
  /**
   * Extra response headers as `[name, value]` byte pairs; none the 101 has already:
   * `sec-websocket-protocol` (use `subprotocol`), `sec-websocket-accept`,
   * `sec-websocket-extensions`, `upgrade`, `connection`, `content-length`, `transfer-encoding`.
   *
   * @default {[]}
   */
  headers?: Iterable<readonly [Uint8Array, Uint8Array]>;
}

/**
 * Sends one message: exactly one of `text` and `bytes` (the other left out or `null`). Resolves
 * once the frame is handed to the transport, and waits first while the transport still holds
 * more than 64 KiB (`node`) or 256 KiB (`deno`) unsent for this socket (a slow reader).
 *
 * @example Sending text and bytes
 * ```ts
 * import type { WebSocketSendMessage } from "@stellarator/stellarator/asgi";
 * const text: WebSocketSendMessage = { type: "websocket.send", text: "hello" };
 * const bytes: WebSocketSendMessage = { type: "websocket.send", bytes: new Uint8Array([1, 2]) };
 * ```
 */
export interface WebSocketSendMessage {
  /** Message type. */
  type: "websocket.send";
  /** Binary content. */
  bytes?: Uint8Array | null;
  /** Text content. */
  text?: string | null;
}

/**
 * Closes the socket, or denies the handshake with HTTP 403 when sent before
 * `websocket.accept`. Nothing may be sent after it.
 *
 * @example Closing with a reason
 * ```ts
 * import type { WebSocketCloseMessage } from "@stellarator/stellarator/asgi";
 * const close: WebSocketCloseMessage = { type: "websocket.close", code: 4000, reason: "done" };
 * ```
 */
export interface WebSocketCloseMessage {
  /** Message type. */
  type: "websocket.close";
  /**
   * 1000, 1001 to 1003, 1007 to 1014, or 3000 to 4999.
   *
   * @default {1000}
   */
  code?: number;
  /**
   * At most 123 bytes of UTF-8.
   *
   * @default {""}
   */
  reason?: string | null;
}

/**
 * Denies the handshake with an HTTP response of the application's own (the
 * `websocket.http.response` extension); body messages follow as for `http.response.body`.
 *
 * @example Asking for credentials
 * ```ts
 * import type { WebSocketHttpResponseStartMessage } from "@stellarator/stellarator/asgi";
 * const start: WebSocketHttpResponseStartMessage = { type: "websocket.http.response.start", status: 401 };
 * ```
 */
export interface WebSocketHttpResponseStartMessage {
  /** Message type. */
  type: "websocket.http.response.start";
  /** The status code, an integer from 200 to 599. */
  status: number;
  /**
   * Response headers as `[name, value]` byte pairs.
   *
   * @default {[]}
   */
  headers?: Iterable<readonly [Uint8Array, Uint8Array]>;
}

/**
 * A chunk of the denial response's body; the response goes out with the last one.
 *
 * @example The whole body at once
 * ```ts
 * import type { WebSocketHttpResponseBodyMessage } from "@stellarator/stellarator/asgi";
 * const body: WebSocketHttpResponseBodyMessage = {
 *   type: "websocket.http.response.body",
 *   body: new TextEncoder().encode("Log in first"),
 * };
 * ```
 */
export interface WebSocketHttpResponseBodyMessage {
  /** Message type. */
  type: "websocket.http.response.body";
  /**
   * The chunk.
   *
   * @default {new Uint8Array()}
   */
  body?: Uint8Array;
  /**
   * `true` while more chunks follow.
   *
   * @default {false}
   */
  more_body?: boolean;
}

/**
 * Options of `proxyHeaders()`.
 *
 * @example Trusting a proxy network
 * ```ts
 * import type { ProxyHeadersOptions } from "@stellarator/stellarator/asgi";
 *
 * const options: ProxyHeadersOptions = { trusted: ["10.0.0.0/8", "fd00::/8"] };
 * ```
 */
export interface ProxyHeadersOptions {
  /**
   * The peers whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed: IPv4 or IPv6
   * addresses in any spelling (`"10.0.0.1"`, `"::1"`), CIDR networks (`"10.0.0.0/8"`,
   * `"fd00::/8"`, no host bits set), or `"*"` for every peer (which makes no address a proxy's:
   * the rightmost `X-Forwarded-For` entry outside the listed networks is the client). IPv4 entries also match
   * IPv4-mapped IPv6 peers (`::ffff:10.0.0.1`); an IPv6 network covers the IPv4 addresses its
   * mapped form covers (`"::/0"` is every address). One entry per string. Host names are
   * refused (resolve them yourself), and so are `"0.0.0.0"` and `"::"`, which no peer has.
   * `"unix"` trusts the peers of a Unix socket (`serve()`'s `path` option), which have no
   * address (their scope's `client` is `null` and its `server` `[path, null]`): the socket
   * file's mode says who may connect, as the loopback interface keeps out other machines. Leave
   * it out when processes on the machine that can reach the socket are not to be believed.
   * Never use `"*"` on a port that anything but the proxy can reach.
   *
   * @default {["127.0.0.1", "::1", "unix"]}
   */
  trusted?: readonly string[];
}
