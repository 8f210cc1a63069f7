/**
 * A faithful bridge that runs ASGI 3.0 applications (HTTP spec 2.1, WebSocket 2.5, lifespan
 * 2.0), written in TypeScript, on `Deno.serve` — or on `node:http`, which also makes it run on
 * Node.js.
 *
 * An ASGI application is one async function of a connection `scope` and two callables: `receive`
 * for events from the client and `send` for events to it. Message and scope keys are the ASGI
 * spec's own snake_case names (`more_body`, `raw_path`): they are protocol data, not API names.
 * Bytes are `Uint8Array`s.
 *
 * ```ts
 * import { type Receive, type Scope, type Send, serve } from "@stellarator/stellarator/asgi";
 * import { assertEquals } from "@std/assert";
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
 * assertEquals(await (await fetch(`http://127.0.0.1:${port}/`)).text(), "Hello");
 * ```
 *
 * Transports: `"deno"` (the default, `Deno.serve`) drops the body of GET and HEAD requests, as
 * Fetch does; `"node"` (`node:http`, loaded only when chosen) delivers them and keeps repeated
 * request headers apart. {@linkcode createFetchHandler} is the portable form for `deno serve` and
 * other Fetch hosts. What the application does wrong is handled as uvicorn does: see
 * {@linkcode serve}. Behind a reverse proxy, {@linkcode proxyHeaders} gives the application the
 * client's address and scheme from the headers of trusted proxies.
 *
 * @module
 */
import type {
  AsgiApplication,
  AsgiFetchHandler,
  AsgiServer,
  AsgiServerAddr,
  AsgiUnixAddr,
  FetchHandlerOptions,
  FetchInfo,
  ProxyHeadersOptions,
  ServeOptions,
  UnixServeOptions,
} from "./_asgi/types.ts";
import { textBytes as sharedTextBytes } from "./_asgi/bytes.ts";
import { describe, errorText } from "./_common/describe.ts";
import { rejectUnknownKeys } from "./_common/keys.ts";
import { guardLogger } from "./_common/logger.ts";
import { MAX_TIMER_MS } from "./_common/timers.ts";
import { type ConnectionLimits, Core, type ListenAddress, type Listener } from "./_asgi/core.ts";
import { LifespanError } from "./_asgi/errors.ts";
import { withResolvers } from "./_asgi/promises.ts";
import { handleFetch, listenDeno, type PeerInfo, textResponse } from "./_asgi/deno_transport.ts";
import { forwardedApp } from "./_asgi/proxy_headers.ts";
import { fetchHandlerMark, markFetchHandler } from "./_common/fetch_mark.ts";
import { trackShutdown } from "./_asgi/shutdowns.ts";
import { checkTls } from "./_asgi/tls.ts";
import type { SocketFileState } from "./_asgi/unix_socket.ts";
import {
  abortWebSockets,
  closeWebSockets,
  configureWebSockets,
  DEFAULT_MAX_MESSAGE_SIZE,
  webSocketsIdle,
} from "./_asgi/websocket.ts";

export { ASGI_VERSION } from "./_asgi/types.ts";
export type {
  AsgiApplication,
  AsgiFetchHandler,
  AsgiLogger,
  AsgiServer,
  AsgiServerAddr,
  AsgiUnixAddr,
  FetchHandlerOptions,
  FetchInfo,
  HttpAsgiVersions,
  HttpDisconnectMessage,
  HttpRequestMessage,
  HttpResponseBodyMessage,
  HttpResponseStartMessage,
  HttpScope,
  LifespanAsgiVersions,
  LifespanScope,
  LifespanShutdownCompleteMessage,
  LifespanShutdownFailedMessage,
  LifespanShutdownMessage,
  LifespanStartupCompleteMessage,
  LifespanStartupFailedMessage,
  LifespanStartupMessage,
  ProxyHeadersOptions,
  Receive,
  ReceiveMessage,
  Scope,
  Send,
  SendMessage,
  ServeOptions,
  UnixServeOptions,
  WebSocketAcceptMessage,
  WebSocketAsgiVersions,
  WebSocketCloseMessage,
  WebSocketConnectMessage,
  WebSocketDisconnectMessage,
  WebSocketHttpResponseBodyMessage,
  WebSocketHttpResponseStartMessage,
  WebSocketReceiveMessage,
  WebSocketScope,
  WebSocketSendMessage,
} from "./_asgi/types.ts";

export { AsgiProtocolError, LifespanError, ResponseCutOffError } from "./_asgi/errors.ts";
export { ClientDisconnected } from "./_asgi/websocket.ts";
export { LOG_TEXT_MAX, logQuoted, logText } from "./_common/log_text.ts";
import { logQuoted } from "./_common/log_text.ts";

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
 * import { textBytes } from "@stellarator/stellarator/asgi";
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
      `Invalid text ${describe(text)}: pass textBytes() a string, e.g. String(value)`,
    );
  }
  return sharedTextBytes(text);
}

const DEFAULT_PORT = 8000;
const DEFAULT_HOSTNAME = "127.0.0.1";
const DEFAULT_SHUTDOWN_TIMEOUT = 30_000;
/** As nginx's `client_body_timeout` and `send_timeout`. */
const DEFAULT_STALL_TIMEOUT = 60_000;
/** Hypercorn's `startup_timeout` and `shutdown_timeout`. */
const DEFAULT_LIFESPAN_TIMEOUT = 60_000;
/** Node's `server.headersTimeout` default. */
const DEFAULT_HEADERS_TIMEOUT = 60_000;
/** uvicorn's `timeout_keep_alive` and Node's `server.keepAliveTimeout` default. */
const DEFAULT_KEEP_ALIVE_TIMEOUT = 5_000;
/**
 * The least finite `keepAliveTimeout`. node:http states it to clients in whole seconds rounded
 * down (`Keep-Alive: timeout=5`): 500 ms went out as `timeout=0`, which tells a client that honours
 * it (Firefox, undici) not to reuse a connection the server keeps (1.5 s, measured on Deno 2.9.6).
 * Rounded down from 1000 ms or more, the field never promises more than the server keeps.
 */
const MIN_KEEP_ALIVE_TIMEOUT = 1_000;

function resolveApp(app: AsgiApplication | { asgi: AsgiApplication }): AsgiApplication {
  const instead = fetchHandlerMark(app);
  if (instead !== undefined) {
    throw new TypeError(
      `Invalid application: a Fetch handler (request, info), not an ASGI application (scope, ` +
        `receive, send); pass ${instead}`,
    );
  }
  if (typeof app === "function") return app;
  if (typeof app === "object" && app !== null && typeof app.asgi === "function") {
    return app.asgi.bind(app);
  }
  throw new TypeError(
    `Invalid application ${
      describe(app)
    }: pass an ASGI callable (scope, receive, send) or an object with an "asgi" method`,
  );
}

/** Every key of `FetchHandlerOptions`. */
const FETCH_HANDLER_KEYS: readonly string[] = [
  "lifespan",
  "rootPath",
  "maxBodySize",
  "logger",
  "maxMessageSize",
];

/** Every key of `ServeOptions`. */
const SERVE_KEYS: readonly string[] = [
  ...FETCH_HANDLER_KEYS,
  "port",
  "hostname",
  "signal",
  "onListen",
  "transport",
  "headersTimeout",
  "keepAliveTimeout",
  "maxConnections",
  "shutdownTimeout",
  "lifespanTimeout",
  "stallTimeout",
  "cert",
  "key",
  "path",
  "mode",
];

function checkOptions(options: ServeOptions): void {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`Invalid options ${describe(options)}: pass an object`);
  }
  const { lifespan, rootPath, maxBodySize, logger } = options;
  if (lifespan !== undefined && lifespan !== "auto" && lifespan !== "on" && lifespan !== "off") {
    throw new TypeError(
      `Invalid lifespan ${describe(lifespan)}: use "auto", "on" or "off"`,
    );
  }
  if (rootPath !== undefined) {
    if (typeof rootPath !== "string") {
      throw new TypeError(`Invalid rootPath ${describe(rootPath)}: use a string`);
    }
    if (rootPath !== "" && (!rootPath.startsWith("/") || rootPath.endsWith("/"))) {
      throw new RangeError(
        `Invalid rootPath ${
          describe(rootPath)
        }: use "" or a path that starts with "/" and does not end with one`,
      );
    }
  }
  checkByteCount("maxBodySize", maxBodySize);
  checkByteCount("maxMessageSize", options.maxMessageSize);
  if (
    logger !== undefined &&
    (typeof logger !== "object" || logger === null ||
      typeof logger.error !== "function" || typeof logger.warn !== "function" ||
      typeof logger.info !== "function")
  ) {
    throw new TypeError(
      `Invalid logger ${describe(logger)}: use an object with error, warn and info methods`,
    );
  }
}

/** The unit of a number option, and an example of it, for a message. */
const UNITS = {
  bytes: "a number of bytes, such as 1048576 for 1 MiB",
  milliseconds: "a number of milliseconds, such as 30000 for 30 s",
} as const;

function checkNonNegative(name: string, value: unknown, unit: keyof typeof UNITS): void {
  if (value === undefined) return;
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`Invalid ${name} ${describe(value)}: use ${UNITS[unit]}`);
  }
  if (value < 0) {
    throw new RangeError(`Invalid ${name} ${describe(value)}: use a number of 0 or more`);
  }
}

/** Checks a size in bytes: a whole number of 0 or more, or `Infinity` (a fraction of a byte was
 * taken, and compared as if it meant something). */
function checkByteCount(name: string, value: unknown): void {
  checkNonNegative(name, value, "bytes");
  if (value !== undefined && !Number.isInteger(value) && value !== Infinity) {
    throw new RangeError(
      `Invalid ${name} ${describe(value)}: use a whole number of bytes, or Infinity for no limit`,
    );
  }
}

/** Checks `keepAliveTimeout`: a duration, and no fraction of a second (see `MIN_KEEP_ALIVE_TIMEOUT`). */
function checkKeepAliveTimeout(value: unknown): void {
  checkMilliseconds("keepAliveTimeout", value);
  if (typeof value === "number" && value > 0 && value < MIN_KEEP_ALIVE_TIMEOUT) {
    throw new RangeError(
      `Invalid keepAliveTimeout ${
        describe(value)
      }: use milliseconds from ${MIN_KEEP_ALIVE_TIMEOUT} to ${MAX_TIMER_MS} (Keep-Alive states whole seconds), or 0 or Infinity for no limit`,
    );
  }
}

/**
 * Checks a duration in milliseconds: up to what a timer can wait, or `Infinity`. A larger finite
 * value would overflow `setTimeout`, which then fires at once: a shutdownTimeout of 1e12 once
 * meant no wait at all.
 */
function checkMilliseconds(name: string, value: unknown): void {
  checkNonNegative(name, value, "milliseconds");
  if (typeof value === "number" && value > MAX_TIMER_MS && value !== Infinity) {
    throw new RangeError(
      `Invalid ${name} ${
        describe(value)
      }: use milliseconds from 0 to ${MAX_TIMER_MS}, or Infinity for no limit`,
    );
  }
}

/**
 * Below this many milliseconds, a time is more likely seconds written by mistake than meant: an
 * App's time limits are in seconds, uvicorn's and hypercorn's too, and `shutdownTimeout: 30` gave
 * requests in flight 30 ms.
 */
const LIKELY_SECONDS_BELOW = 100;

/** Warns of a time under `LIKELY_SECONDS_BELOW` ms (not 0, which means none or no limit). */
function warnLikelySeconds(core: Core, name: string, value: number | undefined): void {
  if (value === undefined || value <= 0 || value >= LIKELY_SECONDS_BELOW) return;
  core.logger.warn(
    `${name} is in milliseconds: ${value} means ${value} ms. For ${value} seconds write ${name}: ${
      value * 1000
    } (the bridge's times are milliseconds; an App's time limits are seconds)`,
  );
}

function createCore(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: FetchHandlerOptions,
): Core {
  const application = resolveApp(app);
  checkOptions(options);
  const core = new Core(application, {
    lifespan: options.lifespan ?? "auto",
    rootPath: options.rootPath ?? "",
    maxBodySize: options.maxBodySize ?? Infinity,
    // Wrapped: a logger that throws must not take a request, or the process, down with it.
    logger: guardLogger(options.logger ?? console, ["error", "warn", "info"]),
  });
  configureWebSockets(core, options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE);
  return core;
}

/**
 * Wraps an ASGI application as a Fetch handler: the portable form of the bridge. Use it with
 * `Deno.serve(handler.fetch)`, as the default export for `deno serve` (each `--parallel` worker
 * runs its own lifespan), or with any runtime that speaks Fetch.
 *
 * Lifespan startup runs on the first request unless `startup()` was awaited before; requests get
 * 503 when it fails, and once `shutdown()` has been called. Nothing runs lifespan shutdown by
 * itself: call `shutdown()` (from a signal listener, say) once the host has stopped, since it
 * does not wait for the requests in flight (their application may find what it uses closed).
 * The scope's `server` is `null`: a Fetch handler cannot see the listening socket.
 *
 * @param app The application, or an object with an `asgi` method.
 * @param options Lifespan, root path, body limit and logging.
 * @returns The handler, with `startup()` and `shutdown()` for the lifespan protocol.
 * @throws {TypeError} When `app` is not an application, or an option has the wrong type.
 * @throws {RangeError} When an option is out of range.
 *
 * @example Serving with Deno.serve
 * ```ts
 * import { createFetchHandler, type Scope, type Receive, type Send } from "@stellarator/stellarator/asgi";
 * import { assertEquals } from "@std/assert";
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
 * assertEquals(await response.text(), "hi");
 * ```
 */
export function createFetchHandler(
  app: AsgiApplication | { asgi: AsgiApplication },
  options?: FetchHandlerOptions,
): AsgiFetchHandler {
  const core = createCore(app, options === undefined ? {} : options);
  if (options !== undefined) rejectUnknownKeys(options, FETCH_HANDLER_KEYS, "createFetchHandler()");
  const lifespan = core.lifespan;
  let failureLogged = false;
  /**
   * shutdown() was called. Requests that arrive later get 503: the application's lifespan
   * shutdown closes what they would use (they once reached it with its database closed), and
   * a Fetch handler cannot stop its host from accepting them, as uvicorn stops before it.
   */
  let closing = false;
  const unavailable = (method: string, error: unknown): Response => {
    if (!failureLogged) {
      failureLogged = true;
      core.logger.error(`Application startup failed: ${errorText(error)}`);
    }
    return textResponse(method, 503, "Service Unavailable");
  };
  return {
    fetch: markFetchHandler(function fetch(request: Request, info?: FetchInfo): Promise<Response> {
      if (closing) return Promise.resolve(textResponse(request.method, 503, "Service Unavailable"));
      // Deno.serve on a Unix socket passes its peer as { transport: "unix", path }: no address,
      // so no client (it once made client [undefined, undefined], which proxyHeaders() threw on).
      const peer = info !== undefined &&
          typeof (info.remoteAddr as { hostname?: unknown } | null | undefined)?.hostname ===
            "string"
        ? info as PeerInfo
        : undefined;
      // No info: a Request made in process, not handed over by a server (see handleFetch).
      const byHand = info === undefined;
      if (lifespan.ready) {
        return Promise.resolve(handleFetch(core, request, peer, null, false, undefined, byHand));
      }
      return lifespan.startup().then(
        () => handleFetch(core, request, peer, null, false, undefined, byHand),
        (error) => unavailable(request.method, error),
      );
    }, "the ASGI application given to createFetchHandler()"),
    startup: () => lifespan.startup(),
    shutdown: () => {
      closing = true;
      // Open WebSockets learn that the server restarts; nothing waits for their closing
      // handshakes here, since a Fetch host gives no time limit to bound the wait.
      void closeWebSockets(core);
      core.warnHeldBack();
      return lifespan.shutdown();
    },
  };
}

/**
 * Wraps an application so that it sees the client's address and scheme as the reverse proxy in
 * front saw them, from `X-Forwarded-For` and `X-Forwarded-Proto`, as uvicorn's
 * `--proxy-headers` does. Behind a proxy, a scope's `client` is otherwise the proxy's address and
 * its `scheme` the listener's.
 *
 * The headers are believed only on a connection whose peer (the scope's `client` host) is in
 * `trusted`, or, with `"unix"` in it (the default), that came over a Unix socket (`serve()`'s
 * `path`: `client` null, `server` `[path, null]`); anyone else could send them. Then the application gets a new scope (the server's is
 * left as it was) in which:
 * - `client` is `[host, 0]` (the proxy does not pass the client's port), where `host` is, as
 *   written, the rightmost `X-Forwarded-For` entry that is not in a `trusted` address or
 *   network, or the leftmost when all are: each proxy appends the address it got the request
 *   from, so only the entries a trusted proxy wrote are facts, and what a client sends ahead of
 *   them (`attacker, proxy`) is ignored. `"*"` trusts every peer but names no proxy, so with it
 *   alone the rightmost entry is taken, the one the peer wrote (uvicorn takes the leftmost, which
 *   the client chose). Several fields are one list, in order; entries are trimmed and empty
 *   ones skipped.
 *   When the entry that decides is no IP address (`unknown`, `_hidden`, `1.2.3.4:80`, an IPv6
 *   zone other than an interface name of up to 32 letters, digits and `-._~`, as in
 *   `fe80::1%<b>`), or the list is empty, `client` stays as it was (uvicorn would take that text
 *   as the host);
 * - `scheme` follows `X-Forwarded-Proto` when it holds one of `http`, `https`, `ws`, `wss` in any
 *   case: `http`/`https` in an `http` scope, `ws`/`wss` in a `websocket` scope, by whether it was
 *   secure. Anything else, a list (`https, http`) or a value over 64 bytes included, leaves
 *   `scheme` as it was.
 *
 * Other scopes (`lifespan`) go to the application untouched. `Forwarded` (RFC 7239) and the
 * other `X-Forwarded-*` headers are not read; all of them stay in `headers`.
 *
 * @param app The application, or an object with an `asgi` method (an `App` of the web layer).
 * @param options `trusted`: who may set the headers; by default the loopback addresses and the
 *   peers of a Unix socket. So by default any process of this machine that can connect (over
 *   loopback, or to the socket file as its mode allows) may set the headers and be believed:
 *   pass a shorter list when local processes are not to be trusted.
 * @returns The wrapped application, for {@linkcode serve} or {@linkcode createFetchHandler}.
 * @throws {TypeError} When `app` is not an application, an option has the wrong type, or a
 *   `trusted` entry is not an address (a host name, say), holds several, or is the unspecified
 *   `0.0.0.0` or `::`.
 * @throws {RangeError} When a CIDR prefix length is out of range, or the network has host bits set.
 *
 * @example An App behind a proxy on the same machine
 * ```ts
 * import {
 *   App,
 *   AsgiRouter,
 *   proxyHeaders,
 *   type Request,
 *   Response,
 *   Route,
 *   serve,
 * } from "@stellarator/stellarator/web";
 * import { assertEquals } from "@std/assert";
 *
 * async function whoami(request: Request): Promise<void> {
 *   const { scheme, client } = request.scope;
 *   await request.respondWith(new Response({ body: `${scheme} ${client?.[0]}` }));
 * }
 *
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/whoami", { handler: whoami })] }),
 * });
 * // The proxy connects from 127.0.0.1, which is trusted by default; so does this fetch.
 * await using server = serve(proxyHeaders(app), { port: 0, onListen() {} });
 * const response = await fetch(`http://127.0.0.1:${(await server.addr).port}/whoami`, {
 *   headers: { "x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "https" },
 * });
 * assertEquals(await response.text(), "https 203.0.113.7");
 * ```
 *
 * @example Trusting the proxies' networks
 * ```ts
 * import { proxyHeaders, type Scope } from "@stellarator/stellarator/asgi";
 * import { assertThrows } from "@std/assert";
 *
 * async function app(_scope: Scope): Promise<void> {}
 *
 * const forwarded = proxyHeaders(app, { trusted: ["10.0.0.0/8", "fd00::/8"] });
 * assertThrows(
 *   () => proxyHeaders(app, { trusted: ["proxy.internal"] }),
 *   TypeError,
 *   "host names are not resolved",
 * );
 * ```
 */
export function proxyHeaders(
  app: AsgiApplication | { asgi: AsgiApplication },
  options?: ProxyHeadersOptions,
): AsgiApplication {
  return forwardedApp(resolveApp(app), options);
}

/**
 * Serves an ASGI application over HTTP/1.1 on a Unix domain socket, as behind a reverse proxy on
 * the same machine (uvicorn's `--uds`): `path` in place of `port` and `hostname`, no TLS. Scopes
 * say `server: [path, null]` and `client: null` (a Unix socket's peer has no address), and
 * `scheme` `"http"` or `"ws"`; `addr` resolves with `{ transport: "unix", path }`. A socket file
 * left by a server that died is removed before listening (one a live server listens on is not),
 * and the file is removed at shutdown. Everything else is as on TCP: see the other overload and
 * {@linkcode UnixServeOptions}.
 *
 * @param app The application, or an object with an `asgi` method.
 * @param options The socket's path, transport, lifespan and limits.
 * @returns The running server: `addr` resolves with the socket's address.
 * @throws {TypeError} When `app` is not an application, an option has the wrong type, `path` is
 *   empty or holds a NUL, or `port`, `hostname`, `cert` or `key` is given with `path`.
 * @throws {RangeError} When an option is out of range, or `path` is over 107 bytes in UTF-8.
 *
 * @example Serving on a Unix socket
 * ```ts
 * import { serve, type Scope, type Receive, type Send } from "@stellarator/stellarator/asgi";
 * import { assertEquals } from "@std/assert";
 *
 * async function app(scope: Scope, _receive: Receive, send: Send): Promise<void> {
 *   if (scope.type !== "http") return;
 *   await send({ type: "http.response.start", status: 200 });
 *   await send({ type: "http.response.body", body: new TextEncoder().encode(`${scope.client}`) });
 * }
 *
 * const dir = await Deno.makeTempDir();
 * await using server = serve(app, { path: `${dir}/app.sock`, lifespan: "off", onListen() {} });
 * const { path } = await server.addr;
 * const client = Deno.createHttpClient({ proxy: { transport: "unix", path } });
 * const response = await fetch("http://localhost/", { client });
 * assertEquals(await response.text(), "null");
 * client.close();
 * ```
 */
export function serve(
  app: AsgiApplication | { asgi: AsgiApplication },
  options: UnixServeOptions,
): AsgiServer<AsgiUnixAddr>;
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
 *   (no 500 is injected); a {@linkcode ResponseCutOffError} does the same on purpose and is
 *   logged as one warning line, not as an exception with its stack;
 * - a message breaks the protocol (a body before the start, a second start, anything after the
 *   last body, a wrong type, CR or LF in a header, more or fewer bytes than `content-length`):
 *   `send` rejects with {@linkcode AsgiProtocolError}.
 *
 * @param app The application, or an object with an `asgi` method.
 * @param options Listening address, transport, lifespan and limits.
 * @returns The running server: await `addr` for the bound address.
 * @throws {TypeError} When `app` is not an application, an option has the wrong type, or `cert`
 *   and `key` are not a certificate and its key as PEM text.
 * @throws {RangeError} When an option is out of range.
 *
 * @example Serving on a free port
 * ```ts
 * import { serve, type Scope, type Receive, type Send } from "@stellarator/stellarator/asgi";
 * import { assertEquals } from "@std/assert";
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
 * assertEquals(await response.text(), "OK");
 * ```
 */
export function serve(
  app: AsgiApplication | { asgi: AsgiApplication },
  options?: ServeOptions,
): AsgiServer;
export function serve(
  app: AsgiApplication | { asgi: AsgiApplication },
  givenOptions?: ServeOptions | UnixServeOptions,
): AsgiServer<AsgiServerAddr | AsgiUnixAddr> {
  // Checked as what a caller without types may pass: `path` beside `port`, say.
  const options = (givenOptions ?? {}) as ServeOptions & { path?: unknown; mode?: unknown };
  const core = createCore(app, options);
  // Deno.serve's own options (reusePort, handler) are not taken either: say so, not ignore them.
  rejectUnknownKeys(options, SERVE_KEYS, "serve()");
  const { port = DEFAULT_PORT, hostname = DEFAULT_HOSTNAME, transport = "deno" } = options;
  const path = checkPath(options);
  const mode = checkMode(options.mode, path);
  if (typeof port !== "number") {
    throw new TypeError(`Invalid port ${describe(port)}: use a number from 0 to 65535`);
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`Invalid port ${describe(port)}: use an integer from 0 to 65535`);
  }
  if (typeof hostname !== "string" || hostname === "") {
    throw new TypeError(`Invalid hostname ${describe(hostname)}: use a host name or address`);
  }
  if (transport !== "deno" && transport !== "node") {
    throw new TypeError(`Invalid transport ${describe(transport)}: use "deno" or "node"`);
  }
  checkMilliseconds("shutdownTimeout", options.shutdownTimeout);
  checkMilliseconds("lifespanTimeout", options.lifespanTimeout);
  checkMilliseconds("headersTimeout", options.headersTimeout);
  checkKeepAliveTimeout(options.keepAliveTimeout);
  checkMilliseconds("stallTimeout", options.stallTimeout);
  for (
    const name of ["shutdownTimeout", "lifespanTimeout", "headersTimeout", "stallTimeout"] as const
  ) {
    warnLikelySeconds(core, name, options[name]);
  }
  const { maxConnections } = options;
  if (maxConnections !== undefined && typeof maxConnections !== "number") {
    throw new TypeError(
      `Invalid maxConnections ${describe(maxConnections)}: use a number, or Infinity`,
    );
  }
  if (
    maxConnections !== undefined &&
    (!(Number.isInteger(maxConnections) || maxConnections === Infinity) || maxConnections < 1)
  ) {
    throw new RangeError(
      `Invalid maxConnections ${
        describe(maxConnections)
      }: use an integer of 1 or more, or Infinity`,
    );
  }
  if (
    transport === "deno" &&
    (options.headersTimeout !== undefined || options.keepAliveTimeout !== undefined ||
      maxConnections !== undefined)
  ) {
    core.logger.warn(
      'headersTimeout, keepAliveTimeout and maxConnections have no effect with transport "deno": Deno.serve cannot bound connections; use transport "node" for them',
    );
  }
  if (options.onListen !== undefined && typeof options.onListen !== "function") {
    throw new TypeError(`Invalid onListen ${describe(options.onListen)}: use a function`);
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new TypeError(
      (options.signal as unknown) instanceof AbortController
        ? "Invalid signal an AbortController: pass its signal, e.g. { signal: controller.signal }"
        : `Invalid signal ${describe(options.signal)}: use an AbortSignal`,
    );
  }
  const tls = checkTls(options.cert, options.key);
  const stallTimeout = options.stallTimeout ?? DEFAULT_STALL_TIMEOUT;
  core.stallTimeout = stallTimeout === 0 ? Infinity : stallTimeout;
  return new Server(core, {
    port,
    hostname,
    path,
    mode,
    transport,
    tls,
    shutdownTimeout: options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
    lifespanTimeout: options.lifespanTimeout ?? DEFAULT_LIFESPAN_TIMEOUT,
    limits: {
      // Node takes 0 for "no limit" and refuses Infinity.
      headersTimeout: noLimitAsZero(options.headersTimeout ?? DEFAULT_HEADERS_TIMEOUT),
      keepAliveTimeout: noLimitAsZero(options.keepAliveTimeout ?? DEFAULT_KEEP_ALIVE_TIMEOUT),
      maxConnections: options.maxConnections,
    },
    onListen: (options.onListen as ((addr: AsgiServerAddr | AsgiUnixAddr) => void) | undefined) ??
      ((addr) =>
        core.logger.info(
          addr.transport === "unix"
            ? `Listening on unix:${addr.path}`
            : `Listening on ${tls ? "https" : "http"}://${hostForUrl(addr.hostname)}:${addr.port}/`,
        )),
    signal: options.signal,
  });
}

/**
 * The most bytes of a Unix socket's path: Linux's `sun_path` holds 108, its terminating NUL
 * included. Deno says only "path must be shorter than SUN_LEN", node "EINVAL" (Deno 2.9.6).
 */
const MAX_SOCKET_PATH_BYTES = 107;

/**
 * Checks the `path` option and that nothing given beside it is meant for TCP: a port or host
 * name has no meaning on a Unix socket, and `Deno.serve` ignores a certificate given with a path
 * (it served plain HTTP with `cert: "x"`), so TLS is refused on both transports alike.
 *
 * @returns The path, or `undefined` when the server listens on TCP.
 */
function checkPath(options: ServeOptions & { path?: unknown }): string | undefined {
  const { path } = options;
  if (path === undefined) return undefined;
  if (typeof path !== "string") {
    throw new TypeError(
      `Invalid path ${
        describe(path)
      }: use the path of a socket file as a string, e.g. "/run/app.sock"`,
    );
  }
  if (path === "") {
    throw new TypeError('Invalid path "": use the path of a socket file, e.g. "/run/app.sock"');
  }
  if (path.includes("\0")) {
    throw new TypeError(
      `Invalid path ${
        describe(path)
      }: it holds a NUL; use a file path (abstract sockets are not offered)`,
    );
  }
  const bytes = new TextEncoder().encode(path).length;
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new RangeError(
      `Invalid path ${
        describe(path)
      }: it is ${bytes} bytes long, and a Unix socket's path holds at most ${MAX_SOCKET_PATH_BYTES}; use a shorter one (a relative path counts from the working directory)`,
    );
  }
  for (const name of ["port", "hostname"] as const) {
    if (options[name] !== undefined) {
      throw new TypeError(
        `Invalid ${name} ${describe(options[name])} with path ${
          describe(path)
        }: a Unix socket has no ${name}; leave out ${name}, or path to listen on TCP`,
      );
    }
  }
  if (options.cert !== undefined || options.key !== undefined) {
    throw new TypeError(
      `Invalid ${options.cert !== undefined ? "cert" : "key"} with path ${
        describe(path)
      }: TLS is not offered on a Unix socket (the proxy in front terminates it); leave out cert and key, or path to listen on TCP`,
    );
  }
  return path;
}

/**
 * Checks the `mode` option: the permission bits of a Unix socket's file, which has no meaning
 * without `path`.
 *
 * @returns The mode, or `undefined` to keep what the umask leaves.
 */
function checkMode(mode: unknown, path: string | undefined): number | undefined {
  if (mode === undefined) return undefined;
  // A mode is written in octal, and describe() gives 0o660 as 432: both are quoted.
  const octal = Number.isInteger(mode) && (mode as number) > 0
    ? ` (0o${(mode as number).toString(8)})`
    : "";
  if (path === undefined) {
    throw new TypeError(
      `Invalid mode ${
        describe(mode)
      }${octal} without path: mode is the permission of a Unix socket's file; pass path too, or leave out mode`,
    );
  }
  if (typeof mode !== "number") {
    throw new TypeError(
      `Invalid mode ${describe(mode)}: use a number of permission bits, such as 0o660`,
    );
  }
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    throw new RangeError(
      `Invalid mode ${
        describe(mode)
      }${octal}: use permission bits up to 0o777, such as 0o660 (owner and group may connect)`,
    );
  }
  // Denying the owner keeps no one out (the owner may chmod the file back), but a server not run
  // as root could no longer connect to its own file: after a crash, its restart could not tell
  // that file from a live server's, would leave it, and could not listen.
  if ((mode & 0o200) === 0) {
    throw new RangeError(
      `Invalid mode ${
        describe(mode)
      }${octal}: the socket file's owner, the server's user, needs write permission (0o200) to connect, ` +
        "as a restart after a crash does to tell a stale socket file from a live one; add 0o200, " +
        "such as 0o600 or 0o660",
    );
  }
  return mode;
}

function noLimitAsZero(ms: number): number {
  return ms === Infinity ? 0 : ms;
}

/** Resolves `true` if `promise` settles within `ms` milliseconds, `false` otherwise. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === Infinity) {
    // No limit means waiting: a promise that waits on nothing the runtime tracks (an app that
    // never answers lifespan.shutdown) once let the process exit 0 in the middle of shutdown.
    const hold = setInterval(() => {}, MAX_TIMER_MS);
    try {
      await promise;
    } finally {
      clearInterval(hold);
    }
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
  /** A Unix socket's path, in place of `port` and `hostname`. */
  path: string | undefined;
  /** The permission bits the socket's file gets, or `undefined` for what the umask leaves. */
  mode: number | undefined;
  transport: "deno" | "node";
  tls: { cert: string; key: string } | undefined;
  shutdownTimeout: number;
  lifespanTimeout: number;
  limits: ConnectionLimits;
  onListen: (addr: AsgiServerAddr | AsgiUnixAddr) => void;
  signal: AbortSignal | undefined;
}

class Server implements AsgiServer<AsgiServerAddr | AsgiUnixAddr> {
  readonly #addr: Promise<AsgiServerAddr | AsgiUnixAddr>;
  readonly #listening = withResolvers<AsgiServerAddr | AsgiUnixAddr>();
  readonly #core: Core;
  readonly #settings: ServerSettings;
  readonly #done = withResolvers<void>();
  #settled = false;
  /**
   * Who looks at which failure. A failure nobody looks at must still end the process with a
   * failure status, as `Deno.serve`'s own listen error does: a `serve(app)` whose port was taken
   * once logged the error and exited 0, so `Restart=on-failure` and job runners took it for
   * success. Reading `addr` covers failures before listening (startup, listen); failures after
   * it (lifespan shutdown, a listener that died) need `finished` read or `shutdown()` called.
   */
  #addrRead = false;
  #finishedRead = false;
  #shutdownCalled = false;
  #listener: Listener | null = null;
  #stopping = false;
  #stop: Promise<void> | null = null;
  #onAbort: (() => void) | null = null;
  /** Holds the process open while lifespan startup runs (see #start). */
  #keepAlive: ReturnType<typeof setInterval> | undefined;
  /** Why the listener died, if it did: `finished` rejects with it. */
  #fatal: { error: unknown } | null = null;
  /** On a Unix socket: its module, and what named our socket file once we listened. */
  #unix: { module: typeof import("./_asgi/unix_socket.ts"); ours: string | null } | null = null;

  constructor(core: Core, settings: ServerSettings) {
    this.#core = core;
    this.#settings = settings;
    // Both promises carry a startup failure; whoever awaits one of them sees it, and the failure
    // is logged and surfaced by #fail, so an unobserved one must not crash the process again.
    this.#done.promise.catch(() => {});
    const signal = settings.signal;
    if (signal !== undefined) {
      if (signal.aborted) this.#stopping = true;
      else {
        this.#onAbort = () => {
          this.#shutdownOnce().catch(() => {});
        };
        signal.addEventListener("abort", this.#onAbort, { once: true });
      }
    }
    this.#addr = this.#listening.promise;
    this.#addr.catch(() => {});
    this.#start().then(this.#listening.resolve, this.#listening.reject);
    // A signal aborted already is a shutdown() before listening: it must bound the startup by
    // lifespanTimeout as one does. Only marking the server as stopping once left a startup that
    // never settles holding addr, finished and the process open for ever.
    if (signal?.aborted) this.#shutdownOnce().catch(() => {});
  }

  get addr(): Promise<AsgiServerAddr | AsgiUnixAddr> {
    this.#addrRead = true;
    return this.#addr;
  }

  get finished(): Promise<void> {
    this.#finishedRead = true;
    return this.#done.promise;
  }

  /** Resolves `finished`, once. */
  #succeed(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#done.resolve();
  }

  /**
   * Rejects `finished`, once; when nothing the program holds carries the error, it is also
   * reported as uncaught, which ends the process with status 1.
   *
   * @param error The failure.
   * @param beforeListening Whether it kept the server from listening (then `addr` carries it).
   */
  #fail(error: unknown, beforeListening: boolean): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#done.reject(error);
    const seen = this.#finishedRead || this.#shutdownCalled ||
      (beforeListening && this.#addrRead);
    if (!seen) reportError(error);
  }

  async #start(): Promise<AsgiServerAddr | AsgiUnixAddr> {
    const core = this.#core;
    const lifespan = core.lifespan;
    // Nothing else keeps the process alive before the listener exists: a startup waiting on
    // nothing the runtime tracks (the app awaiting receive() again before it answers
    // lifespan.startup, a promise nobody resolves) let the process exit 0 at once, never
    // listening and saying nothing. uvicorn waits; so does this, until shutdown() or a signal.
    this.#keepAlive = setInterval(() => {}, MAX_TIMER_MS);
    try {
      await lifespan.startup();
    } catch (error) {
      core.logger.error(`Application startup failed: ${errorText(error)}`);
      this.#release();
      this.#fail(error, true);
      throw error;
    } finally {
      clearInterval(this.#keepAlive);
    }
    if (this.#stopping) return await this.#stopBeforeListening();
    const { hostname, port, path, mode, transport, tls } = this.#settings;
    let listener: Listener;
    // Loaded only for a Unix socket: it imports node:net, which the deno transport does without.
    const unix = path === undefined ? null : await import("./_asgi/unix_socket.ts");
    let found: SocketFileState = "absent";
    try {
      if (unix !== null) {
        found = await unix.clearStaleSocket(path!);
        if (found === "removed") {
          core.logger.info(
            `Removed the socket file ${
              logQuoted(path!)
            } of a server that is gone (nothing listened on it)`,
          );
        }
      }
      const where: ListenAddress = path === undefined
        ? { hostname, port }
        : { path, ...(mode === undefined ? {} : { bind: unix!.bindWithMode(mode) }) };
      listener = transport === "node"
        ? await (await import("./_asgi/node_transport.ts")).listenNode(
          core,
          where,
          this.#settings.limits,
          tls,
        )
        : listenDeno(core, where, tls);
    } catch (error) {
      const hint = unix === null
        ? listenHint(error, port) || hostnameHint(hostname, port)
        : unix.socketHint(found, path!, error);
      const place = path === undefined ? `${hostname}:${port}` : `unix:${path}`;
      core.logger.error(`Cannot listen on ${place}: ${errorText(error)}${hint}`);
      // A taken port, a hostname written as a URL: the stack runs through Deno's and this
      // module's internals only, so when
      // the error is reported as uncaught (nothing reads `addr` or `finished`), the line above and
      // the error's own are the whole story.
      if (hint !== "" && error instanceof Error) error.stack = `${error.name}: ${error.message}`;
      try {
        await this.#shutDownLifespan();
      } catch {
        // Logged; the listen error is the one to report.
      }
      this.#release();
      this.#fail(error, true);
      throw error;
    }
    try {
      this.#settings.onListen(listener.addr);
    } catch (error) {
      // As Deno.serve does, a server whose onListen throws does not serve. It once served on
      // with `addr` rejected: shutdown() then took it for one that never listened and returned,
      // so the port stayed open, lifespan shutdown never ran and the process never ended. No
      // request has reached the application yet (this runs in the turn the listener opened).
      core.logger.error(`Stopping the server: onListen threw: ${errorText(error)}`);
      await listener.close();
      try {
        await this.#shutDownLifespan();
      } catch {
        // Logged; onListen's error is the one to report.
      }
      this.#release();
      this.#fail(error, true);
      throw error;
    }
    this.#listener = listener;
    if (unix !== null) {
      const state = { module: unix, ours: unix.fileIdentity(path!) };
      this.#unix = state;
      // Listening again (after fd exhaustion) makes a new file, ours as well (with the mode:
      // the transport binds it through `where.bind`).
      listener.onRebound = () => state.ours = unix.fileIdentity(path!);
    }
    listener.failed.then((error) => {
      // The listener cannot be brought back: serve what is in flight, stop, and say why.
      core.logger.error(`Shutting down: the server can no longer listen (${errorText(error)})`);
      this.#fatal = { error };
      this.#shutdownOnce().catch(() => {});
    });
    return listener.addr;
  }

  async #stopBeforeListening(): Promise<never> {
    try {
      await this.#shutDownLifespan();
      this.#succeed();
    } catch (error) {
      this.#fail(error, true);
    }
    this.#release();
    throw new DOMException("The server was shut down before it listened", "AbortError");
  }

  shutdown(): Promise<void> {
    this.#shutdownCalled = true;
    return this.#shutdownOnce();
  }

  #shutdownOnce(): Promise<void> {
    return this.#stop ??= trackShutdown(this.#shutdown());
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    const core = this.#core;
    // From the call on, answers say the connection closes (deno: see Core.draining).
    core.draining = true;
    const { shutdownTimeout: timeout, lifespanTimeout } = this.#settings;
    let started: boolean;
    try {
      // A startup that never completes would hold shutdown forever. The bound is the startup's
      // own: what follows it when the server never listens (lifespan shutdown) has its own, and
      // bounding both at once by this one failed a slow lifespan shutdown as a startup.
      started = await within(core.lifespan.startup(), lifespanTimeout);
      if (started) await this.#addr;
    } catch {
      // Never listened: #start has settled `finished` already.
      return;
    }
    if (!started) {
      const error = new LifespanError(
        "startup",
        `Lifespan startup did not complete within lifespanTimeout ${lifespanTimeout} ms of shutdown()`,
      );
      core.logger.error(`Application startup failed: ${error.message}`);
      this.#listening.reject(
        new DOMException("The server was shut down before it listened", "AbortError"),
      );
      this.#release();
      this.#fail(error, true);
      throw error;
    }
    const listener = this.#listener!;
    // Closing a Unix listener unlinks its path, whoever's file is there by then: one another
    // server made since is kept (see shelterForeignSocket).
    const unix = this.#unix;
    const shelter = unix === null
      ? null
      : unix.module.shelterForeignSocket(this.#settings.path!, unix.ours);
    // Open WebSockets get 1012 once the HTTP requests in flight are done (the deno transport
    // closes them as it stops listening: see listenDeno), and their applications are awaited.
    const drained = Promise.all([
      listener.close(),
      core.idle().then(() => closeWebSockets(core)).then(() => webSocketsIdle(core)),
    ]);
    // node has unlinked the path by now; Deno does once its shutdown runs (see below).
    shelter?.(false);
    if (!await within(drained, timeout)) {
      core.logger.warn(
        `Graceful shutdown exceeded shutdownTimeout ${timeout} ms: closing the requests in flight`,
      );
      core.abortAll(new Error("Server shut down before the response completed"));
      // Sockets still open waited for those requests (see above): they get their 1012 now, on
      // its way before the drop, or a client and its application saw 1006, as for a lost
      // connection (node, probe of 2026-11-29: 20 of 20 runs 1012 since).
      closeWebSockets(core).catch(() => {});
      abortWebSockets(core);
      listener.forceClose();
      // A response the application has finished can still be on its way to a slow client, and
      // Deno.serve cannot cut it off: give it one more period, then stop waiting.
      if (!await within(drained, timeout)) {
        core.logger.warn("Some connections are still sending; lifespan shutdown runs anyway");
      }
    }
    shelter?.(true);
    try {
      await this.#shutDownLifespan();
    } catch (error) {
      this.#release();
      this.#fail(error, false);
      throw error;
    }
    this.#release();
    if (this.#fatal !== null) this.#fail(this.#fatal.error, false);
    else this.#succeed();
  }

  /**
   * Runs lifespan shutdown for at most `lifespanTimeout`, and logs a failure. Bounded on every
   * path: when the server could not serve (port taken, onListen threw, shut down during
   * startup) it once had no bound, and an application stuck in it kept `addr` and `finished`
   * pending for ever (the process exited 0 once nothing else was pending).
   *
   * @throws {LifespanError} When it fails or does not complete in time.
   */
  async #shutDownLifespan(): Promise<void> {
    const { lifespanTimeout } = this.#settings;
    try {
      if (!await within(this.#core.lifespan.shutdown(), lifespanTimeout)) {
        throw new LifespanError(
          "shutdown",
          `Lifespan shutdown did not complete within lifespanTimeout ${lifespanTimeout} ms`,
        );
      }
    } catch (error) {
      this.#core.logger.error(`Application shutdown failed: ${errorText(error)}`);
      throw error;
    }
  }

  #release(): void {
    // A startup abandoned at lifespanTimeout never settles: its hold must go with it.
    clearInterval(this.#keepAlive);
    this.#core.stopStallChecks();
    // What a client caused and the log limit held back is told before the server is done.
    this.#core.warnHeldBack();
    if (this.#onAbort !== null) {
      this.#settings.signal?.removeEventListener("abort", this.#onAbort);
      this.#onAbort = null;
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}

/**
 * The fix for a port that is taken, the mistake of running a server twice: `Deno.listen` and
 * `node:http` name only the system's error (`AddrInUse`, `EADDRINUSE`).
 */
function listenHint(error: unknown, port: number): string {
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  const taken = (deno !== undefined && error instanceof deno.errors.AddrInUse) ||
    (error as { code?: unknown } | null)?.code === "EADDRINUSE";
  return taken
    ? `: port ${port} is taken; stop what listens there, or pass another port ` +
      "(port: 0 picks a free one)"
    : "";
}

/**
 * The fix for a `hostname` written as a URL or with its port (`"http://localhost"`,
 * `"localhost:8000"`), which the runtimes refuse as "invalid char found in FQDN" (`deno`) or
 * `ENOTFOUND` (`node`) without naming the option. An IPv6 address has two colons or more.
 *
 * @param hostname The `hostname` option.
 * @param port The `port` option, for a hostname that names none.
 * @returns `""` for any other hostname.
 */
function hostnameHint(hostname: string, port: number): string {
  if (!hostname.includes("/") && hostname.split(":").length !== 2) return "";
  const fix = ": give hostname a host name or address alone, and the port apart";
  try {
    const url = new URL(hostname.includes("://") ? hostname : `http://${hostname}`);
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    return `${fix}: { hostname: ${describe(host)}, port: ${url.port === "" ? port : url.port} }`;
  } catch {
    return fix;
  }
}
