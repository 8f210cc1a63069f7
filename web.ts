/**
 * The experimental web layer: {@linkcode App}, {@linkcode Request} and {@linkcode Response}, with
 * request time limits, background tasks with their own time limit, and cancellation.
 *
 * An `App` routes each request with an {@linkcode AsgiRouter} and calls the route's handler,
 * `async (request) => void`, which answers with `request.respondWith(new Response(...))`. An App is
 * an ASGI application (`app.asgi`), so {@linkcode serve} and {@linkcode createFetchHandler} take
 * it, and it has a Fetch handler (`app.fetch`), so `Deno.serve(app.fetch)` and
 * `export default app` with `deno serve` work too.
 *
 * Unknown paths get `404`, a method no route of the path serves gets `405` with an `Allow` header,
 * both answered from `router.match()` with no exception thrown. A `HEAD` request is served by the
 * path's `GET` route when no route lists `HEAD`, without the body.
 *
 * ## Time limits and cancellation
 *
 * Limits are in seconds, fractions allowed; a limit left out means no limit.
 *
 * - **Request time limit** (`requestTimeLimit`). The handler runs under `deadline` from
 *   `@std/async`. If it has not started its response when the limit passes, the client gets
 *   `408` with `content-type: text/plain; charset=utf-8`, `content-length: 27` and the body
 *   `Request time limit exceeded`; `request.signal` aborts (reason: a `TimeoutError`); whatever
 *   the handler sends later is ignored (logged at debug level), never a second response; and its
 *   background tasks do not run, as in the original. If the limit passes while a streamed body is
 *   still being sent, the stream is cut off and the connection closed. If it passes after the
 *   response is complete, the signal aborts and the handler is left to finish on its own.
 * - **Client disconnect.** `request.signal` aborts (reason: an `AbortError`) once the client goes
 *   away, `request.receive()` yields `http.disconnect` from then on, and a later `respondWith` is
 *   dropped silently. The signal watches the connection from the moment it is first read; while a
 *   handler has not read a chunk of an upload, a disconnect is noticed when it reads it.
 * - **Background tasks** (`request.registerBackground(task)`) start after the response is sent.
 *   Each runs under `backgroundTaskTimeLimit` (via `deadline`) and is called with an
 *   `AbortSignal` that aborts at that limit and at shutdown. At most `backgroundTaskLimit` run at
 *   once; a registration beyond that waits for room (back-pressure) and no task is ever dropped.
 *   Every task ends in exactly one way, and each is logged: completed, failed, cut off at its
 *   limit, cancelled at shutdown, or not run because its request never responded (it hit the
 *   request time limit, its handler failed, or it returned without responding).
 * - **Errors.** A handler that throws before responding gets a `500` and is logged with its route
 *   and stack; one that returns without responding gets a `500` too. The server keeps serving.
 * - **Shutdown** (lifespan shutdown): in-flight requests finish, queued tasks are cancelled,
 *   running tasks get their signal aborted and are awaited, all within `shutdownGracePeriod`;
 *   then the lifespan function runs with {@linkcode AppConstructor.LIFESPAN_SHUTDOWN}.
 *
 * ### What JavaScript can and cannot cancel
 *
 * JavaScript cannot pre-empt a running function or stop a promise from the outside. A time limit
 * therefore does two things: it stops *waiting* (the 408 goes out, the task's slot is freed) and it
 * *asks* the code to stop by aborting its signal. Code that passes the signal on, as in
 * `delay(ms, { signal })`, `fetch(url, { signal })` or a loop that checks `signal.aborted`, really
 * stops. Code that ignores the signal is abandoned: it runs on unobserved, its result or error is
 * ignored, a warning is logged, and a busy loop that never yields blocks the whole process, time
 * limits included.
 *
 * @example Serve an App
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
 * import { App, type Request, Response } from "@stellarator/stellarator/web";
 *
 * async function hello(request: Request): Promise<void> {
 *   await request.respondWith(new Response({ body: `Hello, ${request.context.name}` }));
 * }
 *
 * const router = new AsgiRouter({ routes: [new Route("/hello/{name}", { handler: hello })] });
 * const app = new App({ router, requestTimeLimit: 1 });
 * const response = await app.fetch(new globalThis.Request("http://localhost/hello/world"));
 * assertEquals(await response.text(), "Hello, world");
 * ```
 *
 * @module
 */
import { abortable } from "@std/async/abortable";
import { deadline } from "@std/async/deadline";
import { clearableDeadline } from "./_web/deadline.ts";
import { textBytes } from "./_asgi/bytes.ts";
import { STATUS_CODE } from "@std/http/status";
import {
  type AsgiApplication,
  type AsgiFetchHandler,
  createFetchHandler,
  type FetchInfo,
  type HttpDisconnectMessage,
  type HttpRequestMessage,
  type HttpScope,
  type Receive,
  type ReceiveMessage,
  type Scope,
  type Send,
  type SendMessage,
} from "./asgi.ts";
import type { AsgiRouter, PathContext, Route } from "./router.ts";
import {
  BackgroundRunner,
  failure,
  type Outcome,
  SUCCESS,
  type TaskEntry,
} from "./_web/background.ts";
import { countOption, describe, seconds, secondsOption } from "./_web/options.ts";
import {
  closeSockets,
  denySocket,
  handleSocket,
  sendUpgradeRequired,
  type WebSocketRequest,
} from "./_web/socket.ts";

export { WebSocketRequest } from "./_web/socket.ts";
export type { AcceptOptions, CloseInfo, SocketMessage } from "./_web/socket.ts";

// One import serves a web app (`App`, `AsgiRouter`, `Route`, `serve`...), and the types the web
// layer's signatures mention are documented from this entry point too.
export * from "./router.ts";
export * from "./asgi.ts";

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/**
 * A request handler: answers with `request.respondWith(...)`.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 */
export type WebHandler<A extends object = Record<never, never>> = (
  request: Request<A>,
) => Promise<void> | void;

/**
 * A WebSocket handler, for routes whose methods are `["WEBSOCKET"]`: accepts (or closes to deny),
 * then receives and sends until the socket closes.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 */
export type SocketHandler<A extends object = Record<never, never>> = (
  socket: WebSocketRequest<App<A>>,
) => Promise<void> | void;

/**
 * Any handler of an App's routes: a {@linkcode WebHandler}, or a {@linkcode SocketHandler} for
 * routes whose methods are `["WEBSOCKET"]`. Name it when one router holds both kinds:
 * `new AsgiRouter<AppHandler>({ routes })`.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 */
export type AppHandler<A extends object = Record<never, never>> = WebHandler<A> | SocketHandler<A>;

/**
 * A background task, registered with {@linkcode Request.registerBackground}. It is called with one
 * argument, a signal that aborts when the task reaches its time limit or the app shuts down; a
 * zero-argument function fits too.
 */
export type BackgroundTask = (signal: AbortSignal) => unknown;

/** The message types the lifespan function is called with. */
export type LifespanMessageType = "lifespan.startup" | "lifespan.shutdown";

/**
 * The lifespan function: called with {@linkcode AppConstructor.LIFESPAN_STARTUP} when the server
 * starts and {@linkcode AppConstructor.LIFESPAN_SHUTDOWN} when it stops, and awaited. It may set
 * and clear the app's attributes, and may return the app (as the original does) or nothing. An
 * exception reports `lifespan.startup.failed` or `lifespan.shutdown.failed` with its message.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 */
export type Lifespan<A extends object = Record<never, never>> = (
  app: App<A>,
  messageType: LifespanMessageType,
) => Promise<App<A> | void> | App<A> | void;

/** The HTTP scope of a request handled by an App: the bridge's scope plus `app` (seed 2.7). */
export type WebScope<A extends object = Record<never, never>> = HttpScope & {
  /** The App handling the request. */
  app: App<A>;
};

/** Where an App writes its log lines; `console` fits. */
export interface WebLogger {
  /** Ignored late responses, abandoned results: things worth seeing while debugging. */
  debug(...data: unknown[]): void;
  /** Background tasks that completed. */
  info(...data: unknown[]): void;
  /** Background tasks cut off, cancelled or not run; a shutdown that ran out of time. */
  warn(...data: unknown[]): void;
  /** Handlers and tasks that failed, failed lifespan phases. */
  error(...data: unknown[]): void;
}

/** Options of {@linkcode Request.registerBackground}. */
export interface RegisterBackgroundOptions {
  /**
   * The task's name in log lines.
   *
   * @default {the function's name, or "anonymous"}
   */
  name?: string;
}

/**
 * Options of {@linkcode App}. Time limits are in seconds, fractions allowed.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 */
export interface AppOptions<A extends object = Record<never, never>> {
  /**
   * Routes requests to handlers; routes whose methods are `["WEBSOCKET"]` take a
   * {@linkcode SocketHandler}.
   */
  router: AsgiRouter<AppHandler<A>>;
  /**
   * The longest a handler may take to start its response, in seconds; then the client gets 408.
   *
   * @default {undefined (no limit)}
   */
  requestTimeLimit?: number;
  /**
   * The longest one background task may run, in seconds; then it is cut off.
   *
   * @default {undefined (no limit)}
   */
  backgroundTaskTimeLimit?: number;
  /**
   * How many background tasks may run at once; registrations beyond it wait for room.
   *
   * @default {1000}
   */
  backgroundTaskLimit?: number;
  /**
   * How long shutdown waits, in seconds, for in-flight requests to finish and for running
   * background tasks to stop once their signal is aborted. What is still running then is
   * abandoned (and logged).
   *
   * @default {5}
   */
  shutdownGracePeriod?: number;
  /**
   * Called at startup and shutdown; see {@linkcode Lifespan}.
   *
   * @default {undefined (nothing to do)}
   */
  lifespan?: Lifespan<A>;
  /**
   * Initial values of the app's attributes, set on the app before anything else runs.
   *
   * @default {undefined (attributes stay unset until the lifespan function sets them)}
   */
  attributes?: A;
  /**
   * Where log lines go.
   *
   * @default {console}
   */
  logger?: WebLogger;
}

/** Options of {@linkcode Response}. */
export interface ResponseOptions {
  /**
   * The body: bytes, text (sent as UTF-8), or an async iterable of chunks, streamed as they come.
   *
   * @default {empty}
   */
  body?: Uint8Array | string | AsyncIterable<Uint8Array | string>;
  /**
   * The status code, from 200 to 599.
   *
   * @default {200}
   */
  status?: number;
  /**
   * Header fields; a list of pairs can repeat a name (e.g. `set-cookie`). Names are sent in lower
   * case; values must be printable ASCII.
   *
   * @default {{}}
   */
  headers?: Record<string, string> | Iterable<readonly [string, string]>;
  /**
   * The `content-type`. Give it here or in `headers`, not both.
   *
   * @default {"text/plain; charset=utf-8", or none for 204, 205 and 304}
   */
  contentType?: string;
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);
const TEXT_PLAIN = "text/plain; charset=utf-8";
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Printable ASCII, space and tab. Wider values would depend on how each transport maps bytes to
// text; percent-encode anything else (RFC 8187 does for file names).
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;

/** The encoded header pairs of a response, readable only inside this module. */
let encodedHeaders: (response: Response) => readonly (readonly [Uint8Array, Uint8Array])[];

/**
 * A response to send with {@linkcode Request.respondWith}.
 *
 * Defaults: status 200, `content-type: text/plain; charset=utf-8` unless one is given, and a
 * `content-length` computed for a byte or text body. A body given as an async iterable is
 * streamed chunk by chunk (chunked, unless a `content-length` header is given) and can be sent
 * only once. A fixed body is not copied: do not change its bytes after creating the response.
 * The header bytes in the ASGI messages an App sends are shared between responses that repeat a
 * name or value: ASGI middleware wrapping `app.asgi` may replace a pair but must not write into
 * its bytes.
 *
 * @example A JSON response
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { Response } from "@stellarator/stellarator/web";
 *
 * const response = new Response({ body: '{"ok":true}', contentType: "application/json" });
 * assertEquals(response.status, 200);
 * assertEquals(response.headers, [["content-type", "application/json"], ["content-length", "11"]]);
 * ```
 *
 * @example A streamed body
 * ```ts
 * import { Response } from "@stellarator/stellarator/web";
 *
 * async function* lines(): AsyncGenerator<string> {
 *   yield "one\n";
 *   yield "two\n";
 * }
 * const response = new Response({ body: lines() });
 * ```
 */
export class Response {
  static {
    encodedHeaders = (response) => response.#encoded ??= encodeFields(response.headers);
  }

  /** The status code. */
  readonly status: number;
  /** The header fields as sent, names in lower case, `content-type` and `content-length` included. */
  readonly headers: readonly (readonly [string, string])[];
  /**
   * The body: bytes, or the async iterable of chunks given. A short ASCII text body becomes a view
   * into a buffer shared with other responses (an ArrayBuffer per response would cost more than
   * the rest of the response): read it, or `.slice()` it for a copy of your own; its `.buffer`
   * holds other bytes too.
   */
  readonly body: Uint8Array | AsyncIterable<Uint8Array | string>;
  #encoded: readonly (readonly [Uint8Array, Uint8Array])[] | undefined;

  /**
   * Creates a response.
   *
   * @param options Body, status, headers and content type; all optional.
   * @throws {RangeError} When the status is not a whole number from 200 to 599.
   * @throws {TypeError} When a header name or value is invalid, the content type is given twice, a
   *   `content-length` header disagrees with the body, a 204, 205 or 304 response has a body, or
   *   the body is of another type.
   */
  constructor(options: ResponseOptions = {}) {
    const { body = EMPTY, status = 200, headers, contentType } = options;
    if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
      throw new RangeError(
        `Cannot use status ${describe(status)}: give a whole number from 200 to 599`,
      );
    }
    this.status = status;
    let bytes: Uint8Array | undefined;
    if (typeof body === "string") bytes = textBytes(body);
    else if (body instanceof Uint8Array) bytes = body;
    else if (body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) {
      throw new TypeError(
        `Cannot use body ${describe(body)}: give a string, a Uint8Array or an async iterable ` +
          `of them`,
      );
    }
    const nullBody = status === 204 || status === 205 || status === 304;
    if (nullBody && (bytes === undefined || bytes.length > 0)) {
      throw new TypeError(`Cannot send a body with status ${status}: leave the body out`);
    }
    const fields: (readonly [string, string])[] = [];
    let typeGiven = false;
    let lengthGiven: string | undefined;
    // Most responses give no headers: no iteration, no Object.entries() for them.
    if (headers !== undefined) {
      const pairs = Symbol.iterator in headers
        ? headers as Iterable<readonly [string, string]>
        : Object.entries(headers);
      for (const [rawName, value] of pairs) {
        const name = String(rawName).toLowerCase();
        if (!TOKEN.test(name)) {
          throw new TypeError(
            `Cannot use header name "${rawName}": use letters, digits and !#$%&'*+-.^_\`|~ only`,
          );
        }
        if (typeof value !== "string" || !FIELD_VALUE.test(value)) {
          throw new TypeError(
            `Cannot use ${describe(value)} as the value of header "${name}": give a string of ` +
              `printable ASCII (percent-encode other text)`,
          );
        }
        if (name === "content-type") typeGiven = true;
        if (name === "content-length") lengthGiven = value;
        fields.push([name, value]);
      }
    }
    if (contentType !== undefined) {
      if (typeGiven) {
        throw new TypeError(
          `Cannot use contentType "${contentType}" and a "content-type" header together: give ` +
            `one of them`,
        );
      }
      if (typeof contentType !== "string" || !FIELD_VALUE.test(contentType)) {
        throw new TypeError(
          `Cannot use contentType ${describe(contentType)}: give a string of printable ASCII`,
        );
      }
      fields.unshift(["content-type", contentType]);
    } else if (!typeGiven && !nullBody) {
      fields.unshift(["content-type", TEXT_PLAIN]);
    }
    if (bytes !== undefined && !nullBody) {
      const length = lengthText(bytes.length);
      if (lengthGiven === undefined) fields.push(["content-length", length]);
      else if (lengthGiven !== length) {
        throw new TypeError(
          `Cannot use header "content-length: ${lengthGiven}" with a body of ${length} bytes: ` +
            `leave the header out, it is computed`,
        );
      }
    }
    this.body = bytes ?? body as AsyncIterable<Uint8Array | string>;
    this.headers = fields;
  }
}

/** `String(n)` for the lengths of small bodies, made once. */
const LENGTH_TEXTS: string[] = [];

/**
 * A body length as header text. Small lengths come from a table, so every response of one length
 * carries the same string: the field cache below and the bridge then find it by identity instead
 * of hashing or comparing a new string.
 */
function lengthText(length: number): string {
  if (length >= 4096) return String(length);
  return LENGTH_TEXTS[length] ??= String(length);
}

/** Field strings already encoded: responses repeat the same few names and values. */
const fieldBytesCache = new Map<string, Uint8Array>();
/** Beyond this many entries the cache starts over, so unique values cannot grow it for ever. */
const FIELD_CACHE_ENTRIES = 256;
/** Longer strings (cookies, long links) rarely repeat; they are encoded each time. */
const FIELD_CACHE_LENGTH = 64;

/**
 * A validated header name or value as bytes. Both are ASCII (the constructor checks), so the
 * bytes are the code units. Each `TextEncoder.encode()` call costs an op call and an ArrayBuffer,
 * a third of the web layer's cost per request before this cache; the bytes are only read (the
 * bridge copies them into strings), so one array serves every response that repeats the string.
 */
function fieldBytes(text: string): Uint8Array {
  let bytes = fieldBytesCache.get(text);
  if (bytes !== undefined) return bytes;
  bytes = textBytes(text);
  if (text.length <= FIELD_CACHE_LENGTH) {
    if (fieldBytesCache.size >= FIELD_CACHE_ENTRIES) fieldBytesCache.clear();
    fieldBytesCache.set(text, bytes);
  }
  return bytes;
}

/** The header pairs of a response as bytes, for the ASGI message. */
function encodeFields(
  fields: readonly (readonly [string, string])[],
): (readonly [Uint8Array, Uint8Array])[] {
  const encoded: (readonly [Uint8Array, Uint8Array])[] = [];
  for (let i = 0; i < fields.length; i++) {
    const [name, value] = fields[i]!;
    encoded.push([fieldBytes(name), fieldBytes(value)]);
  }
  return encoded;
}

const TIMEOUT_RESPONSE = new Response({
  status: STATUS_CODE.RequestTimeout,
  body: "Request time limit exceeded",
});
const NOT_FOUND_RESPONSE = new Response({ status: STATUS_CODE.NotFound, body: "Not Found" });
const SERVER_ERROR_RESPONSE = new Response({
  status: STATUS_CODE.InternalServerError,
  body: "Internal Server Error",
});
const METHOD_NOT_ALLOWED_BODY = encoder.encode("Method Not Allowed");

async function sendFixed(send: Send, response: Response): Promise<void> {
  await send({
    type: "http.response.start",
    status: response.status,
    headers: encodedHeaders(response),
  });
  await send({ type: "http.response.body", body: response.body as Uint8Array, more_body: false });
}

async function sendMethodNotAllowed(send: Send, allowed: readonly string[]): Promise<void> {
  allowed = allowed.filter((method) => method !== "WEBSOCKET");
  if (allowed.length === 0) return await sendUpgradeRequired(send);
  if (allowed.includes("GET") && !allowed.includes("HEAD")) allowed = [...allowed, "HEAD"].sort();
  await send({
    type: "http.response.start",
    status: STATUS_CODE.MethodNotAllowed,
    headers: [
      [encoder.encode("content-type"), encoder.encode(TEXT_PLAIN)],
      [encoder.encode("content-length"), encoder.encode(String(METHOD_NOT_ALLOWED_BODY.length))],
      [encoder.encode("allow"), encoder.encode(allowed.join(", "))],
    ],
  });
  await send({ type: "http.response.body", body: METHOD_NOT_ALLOWED_BODY, more_body: false });
}

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/** What a request needs from its App; shared by all requests of one App. */
interface Host {
  readonly runner: BackgroundRunner;
  readonly log: WebLogger;
  readonly limitMs: number | undefined;
  /** Requests being handled, awaited at shutdown. */
  active: number;
  /** Resolved when `active` drops to 0 while shutdown waits. */
  idle: PromiseWithResolvers<void> | undefined;
}

/** The outcome of a request from its handler's and its response's: the first failure. */
function outcomeOf(handler: Outcome, response: Outcome): Outcome {
  return handler.ok && !response.ok ? response : handler;
}

function succeeded(): Outcome {
  return SUCCESS;
}

const DISCONNECT: HttpDisconnectMessage = Object.freeze({ type: "http.disconnect" });

// Shared empty lists, so that a request allocates none until it has tasks or waiting readers;
// never pushed to (the first element replaces them with an array of their own).
const NO_TASKS: TaskEntry[] = [];
const NO_READERS: PromiseWithResolvers<HttpRequestMessage | HttpDisconnectMessage>[] = [];

/** The response has not started. */
const PENDING = 0;
/** `http.response.start` went out; the body is on its way. */
const SENDING = 1;
/** The whole response went out (or was dropped because the client is gone). */
const COMPLETE = 2;

let createRequest: <A extends object>(
  app: App<A>,
  scope: WebScope<A>,
  context: PathContext,
  route: Route<WebHandler<A>>,
  receive: Receive,
  send: Send,
  host: Host,
) => Request<A>;
let handleRequest: <A extends object>(request: Request<A>) => Promise<void>;

/**
 * One HTTP request, as a handler sees it. Created by the {@linkcode App}; handlers receive it.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example Read a JSON body and answer
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
 * import { App, type Request, Response } from "@stellarator/stellarator/web";
 *
 * async function echo(request: Request): Promise<void> {
 *   const payload = JSON.parse(await request.text() || "{}");
 *   const body = JSON.stringify({ received: payload, user: request.context.user });
 *   await request.respondWith(new Response({ body, contentType: "application/json" }));
 * }
 *
 * const routes = [new Route("/info/{user}", { handler: echo, methods: ["POST"] })];
 * const app = new App({ router: new AsgiRouter({ routes }) });
 * const response = await app.fetch(
 *   new globalThis.Request("http://localhost/info/bob", { method: "POST", body: '{"a":1}' }),
 * );
 * assertEquals(await response.json(), { received: { a: 1 }, user: "bob" });
 * ```
 */
export class Request<A extends object = Record<never, never>> {
  static {
    createRequest = (app, scope, context, route, receive, send, host) =>
      new Request(app, scope, context, route, receive, send, host);
    handleRequest = (request) => request.#handle();
  }

  /** The ASGI scope of the request, with `app` added. */
  readonly scope: WebScope<A>;
  /** The path variables the router matched, e.g. `{ user: "bob" }` for `/info/{user}`. */
  readonly context: PathContext;
  /** The App handling the request, with its attributes. */
  readonly app: App<A>;
  /** The route that matched. */
  readonly route: Route<WebHandler<A>>;

  #receive: Receive;
  #sendRaw: Send;
  #host: Host;
  #phase: typeof PENDING | typeof SENDING | typeof COMPLETE = PENDING;
  /** The final body message is being sent. */
  #lastChunk = false;
  /** Settles when a response started by `respondWith` is fully sent (or fails). */
  #sending: Promise<Outcome> | undefined;
  /** No more sending: the request is over (the 408 went out, or the App has returned). */
  #ended = false;
  #timedOut = false;
  #disconnected = false;
  #controller: AbortController | undefined;
  #abortReason: unknown;
  /** Tasks registered before the response was sent; they hold reservations. */
  #pending: TaskEntry[] = NO_TASKS;
  // Receiving: one underlying receive() call at a time, at most one message read ahead.
  #pulling = false;
  #buffered: HttpRequestMessage | undefined;
  #readers: PromiseWithResolvers<HttpRequestMessage | HttpDisconnectMessage>[] = NO_READERS;
  #watching = false;
  #bodyRead = false;
  #body: Uint8Array | undefined;

  private constructor(
    app: App<A>,
    scope: WebScope<A>,
    context: PathContext,
    route: Route<WebHandler<A>>,
    receive: Receive,
    send: Send,
    host: Host,
  ) {
    this.app = app;
    this.scope = scope;
    this.context = context;
    this.route = route;
    this.#receive = receive;
    this.#sendRaw = send;
    this.#host = host;
  }

  /** The request path, percent-decoded (`scope.path`). */
  get path(): string {
    return this.scope.path;
  }

  /** The request method, upper case (`scope.method`). */
  get method(): string {
    return this.scope.method;
  }

  /**
   * Aborts when the request time limit passes (reason: a `TimeoutError` `DOMException`) or the
   * client goes away (reason: an `AbortError` `DOMException`). Pass it on, e.g. to
   * `delay(ms, { signal })` or `fetch(url, { signal })`, so that work really stops.
   *
   * @returns The signal.
   */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#abortReason !== undefined) this.#controller.abort(this.#abortReason);
      else {
        // Nobody can notice a disconnect before someone holds the signal, so the connection is
        // watched only from now on: a receive() call stays pending to catch `http.disconnect`.
        this.#watching = true;
        this.#readAhead();
      }
    }
    return this.#controller.signal;
  }

  /**
   * Returns the next ASGI message: `http.request` chunks of the body (`more_body` false on the
   * last), then, once the response is complete or the client is gone, `http.disconnect`.
   * After a disconnect it returns `http.disconnect` at once.
   *
   * @returns The message.
   */
  receive(): Promise<HttpRequestMessage | HttpDisconnectMessage> {
    const buffered = this.#buffered;
    if (buffered !== undefined) {
      this.#buffered = undefined;
      this.#readAhead();
      return Promise.resolve(buffered);
    }
    if (this.#disconnected) return Promise.resolve(DISCONNECT);
    const reader = Promise.withResolvers<HttpRequestMessage | HttpDisconnectMessage>();
    if (this.#readers.length === 0) this.#readers = [reader];
    else this.#readers.push(reader);
    this.#pull();
    return reader.promise;
  }

  /**
   * Reads the whole request body. A second call returns the same bytes.
   *
   * @returns The body.
   * @throws {DOMException} The signal's reason, when the client goes away while the body is read.
   * @throws {TypeError} When the body was already consumed with `receive()`.
   */
  async bytes(): Promise<Uint8Array> {
    if (this.#body !== undefined) return this.#body;
    if (this.#bodyRead) {
      throw new TypeError(
        `Cannot read the body of ${this.#label} again: it was consumed with receive(); ` +
          `keep the chunks or call bytes() instead`,
      );
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const message = await this.receive();
      if (message.type === "http.disconnect") throw this.#disconnectReason();
      chunks.push(message.body);
      size += message.body.length;
      if (!message.more_body) break;
    }
    let body = chunks[0] ?? EMPTY;
    if (chunks.length > 1) {
      body = new Uint8Array(size);
      let offset = 0;
      for (const chunk of chunks) {
        body.set(chunk, offset);
        offset += chunk.length;
      }
    }
    this.#body = body;
    return body;
  }

  /**
   * Reads the whole request body as UTF-8 text (invalid bytes become U+FFFD).
   *
   * @returns The text.
   * @throws {DOMException} The signal's reason, when the client goes away while the body is read.
   * @throws {TypeError} When the body was already consumed with `receive()`.
   */
  async text(): Promise<string> {
    return new TextDecoder().decode(await this.bytes());
  }

  /**
   * Sends the response. Resolves once the whole body is sent.
   *
   * After the request time limit has passed (the client got 408) the response is ignored and a
   * debug line logged; after the client went away it is dropped silently.
   *
   * @param response The response.
   * @returns Resolves when the response is sent, dropped or ignored.
   * @throws {TypeError} When `response` is not a {@linkcode Response}.
   * @throws {Error} When the handler already responded, or a streamed body fails.
   */
  respondWith(response: Response): Promise<void> {
    if (!(response instanceof Response)) {
      return Promise.reject(
        new TypeError(
          `Cannot respond with ${describe(response)}: give a Response from the web layer`,
        ),
      );
    }
    if (this.#timedOut) {
      this.#host.log.debug(
        `Ignored the response of route "${this.route.path}" to ${this.#label}: it came after ` +
          `the request time limit of ${seconds(this.#host.limitMs ?? 0)}; the client got 408`,
      );
      return Promise.resolve();
    }
    if (this.#phase !== PENDING || this.#ended) {
      return Promise.reject(
        new Error(
          `Cannot respond to ${this.#label} twice: route "${this.route.path}" already ` +
            `responded or the request is over`,
        ),
      );
    }
    if (this.#disconnected) {
      this.#complete();
      return Promise.resolve();
    }
    this.#phase = SENDING;
    const sent = this.#stream(response);
    // This handles a rejection, so a handler that does not await the result leaves no
    // unhandled rejection behind; the App reports a failure either way.
    this.#sending = sent.then(succeeded, failure);
    return sent;
  }

  /**
   * Schedules a background task. It starts once the response is sent, runs under the app's
   * `backgroundTaskTimeLimit`, and is called with a signal that aborts at that limit and at
   * shutdown. Bind arguments beforehand: `() => sendMail("bob")`.
   *
   * When `backgroundTaskLimit` tasks are running or waiting, this waits for room first
   * (back-pressure); no task is dropped. Tasks registered by a request that hits the request time
   * limit, whose handler fails, or that returns without responding do not run (logged).
   *
   * @param task The task.
   * @param options The task's name for log lines.
   * @returns Resolves once the task is accepted.
   * @throws {TypeError} When `task` is not a function.
   */
  async registerBackground(
    task: BackgroundTask,
    options: RegisterBackgroundOptions = {},
  ): Promise<void> {
    if (typeof task !== "function") {
      throw new TypeError(
        `Cannot register ${describe(task)} as a background task: give a function, e.g. ` +
          `() => work("argument")`,
      );
    }
    const runner = this.#host.runner;
    const entry = runner.entry(task, options.name);
    if (this.#timedOut) {
      runner.discard(entry, this.#timedOutReason, false);
      return;
    }
    if (!await runner.reserve(this.#pending.length > 0)) {
      runner.discard(entry, "the app is shutting down", false);
      return;
    }
    if (this.#timedOut) runner.discard(entry, this.#timedOutReason, true);
    else if (this.#phase === COMPLETE) runner.start(entry);
    else if (this.#ended) runner.discard(entry, `${this.#label} never responded`, true);
    else if (this.#pending.length === 0) this.#pending = [entry];
    else this.#pending.push(entry);
  }

  get #label(): string {
    return `"${this.scope.method} ${this.scope.path}"`;
  }

  get #where(): string {
    return `Route "${this.route.path}" on ${this.#label}`;
  }

  get #timedOutReason(): string {
    return `its request ${this.#label} hit the request time limit of ` +
      `${seconds(this.#host.limitMs ?? 0)}`;
  }

  #disconnectReason(): unknown {
    return this.#abortReason ?? new DOMException("The client disconnected", "AbortError");
  }

  #abort(reason: unknown): void {
    if (this.#abortReason !== undefined) return;
    this.#abortReason = reason;
    this.#controller?.abort(reason);
  }

  /** Starts one underlying receive() unless one is running; hands its message to a reader. */
  #pull(): void {
    if (this.#pulling) return;
    this.#pulling = true;
    this.#receive().then(
      (message) => this.#deliver(message),
      (error) => {
        this.#pulling = false;
        for (const reader of this.#readers.splice(0)) reader.reject(error);
      },
    );
  }

  #deliver(message: ReceiveMessage): void {
    this.#pulling = false;
    if (message.type === "http.disconnect") {
      this.#disconnected = true;
      // After a complete response the bridge reports the end of the exchange the same way (and
      // may do so before the final send() resolves); the client did nothing wrong then, so the
      // signal stays as it is and a body chunk already received can still be read.
      if (this.#phase !== COMPLETE && !this.#lastChunk) {
        this.#buffered = undefined;
        this.#abort(new DOMException("The client disconnected", "AbortError"));
      }
      for (const reader of this.#readers.splice(0)) reader.resolve(DISCONNECT);
      return;
    }
    if (message.type !== "http.request") {
      const error = new TypeError(`Unexpected "${message.type}" message in an HTTP scope`);
      for (const reader of this.#readers.splice(0)) reader.reject(error);
      return;
    }
    if (!message.more_body) this.#bodyRead = true;
    const reader = this.#readers.shift();
    if (reader === undefined) this.#buffered = message;
    else reader.resolve(message);
    if (this.#readers.length > 0) this.#pull();
    else this.#readAhead();
  }

  /**
   * While the signal is watched, keeps one receive() pending so a disconnect is seen at once. It
   * reads at most one body chunk ahead; once the whole body is in, the pending call only waits
   * for the end of the exchange.
   */
  #readAhead(): void {
    if (
      this.#watching && !this.#disconnected && !this.#ended &&
      (this.#buffered === undefined || this.#bodyRead)
    ) {
      this.#pull();
    }
  }

  async #stream(response: Response): Promise<void> {
    await this.#send({
      type: "http.response.start",
      status: response.status,
      headers: encodedHeaders(response),
    });
    const body = response.body;
    if (body instanceof Uint8Array) {
      this.#lastChunk = true;
      await this.#send({ type: "http.response.body", body, more_body: false });
    } else {
      // abortable() stops waiting for the next chunk when the time limit passes or the client
      // goes away, and closes the iterator.
      const chunks = abortable(body, this.signal) as AsyncIterable<unknown>;
      for await (const chunk of chunks) {
        let bytes: Uint8Array;
        if (typeof chunk === "string") bytes = encoder.encode(chunk);
        else if (chunk instanceof Uint8Array) bytes = chunk;
        else {
          throw new TypeError(
            `Cannot send ${describe(chunk)} as a body chunk: give a string or a Uint8Array`,
          );
        }
        await this.#send({ type: "http.response.body", body: bytes, more_body: true });
      }
      this.#lastChunk = true;
      await this.#send({ type: "http.response.body", body: EMPTY, more_body: false });
    }
    if (!this.#timedOut) this.#complete();
  }

  #send(message: SendMessage): Promise<void> {
    return this.#ended ? Promise.resolve() : this.#sendRaw(message);
  }

  /** The response is out (or dropped with the client): hand the tasks to the runner. */
  #complete(): void {
    this.#phase = COMPLETE;
    const pending = this.#pending;
    if (pending.length === 0) return;
    this.#pending = NO_TASKS;
    const runner = this.#host.runner;
    for (const entry of pending) runner.start(entry);
  }

  #discardPending(reason: string): void {
    const runner = this.#host.runner;
    for (const entry of this.#pending) runner.discard(entry, reason, true);
    this.#pending = NO_TASKS;
  }

  /** Runs the handler; settles, never rejects, once it and the response it started are done. */
  async #work(): Promise<Outcome> {
    let result: Outcome;
    try {
      await this.route.handler(this);
      result = SUCCESS;
    } catch (error) {
      result = failure(error);
    }
    // The handler may return before the response it started is fully sent.
    const sending = this.#sending;
    return sending === undefined ? result : outcomeOf(result, await sending);
  }

  async #handle(): Promise<void> {
    const host = this.#host;
    host.active++;
    try {
      const limitMs = host.limitMs;
      let result: Outcome;
      if (limitMs === undefined) {
        // No limit: nothing to race, so no promise is made beyond the handler's own (this is
        // #work() inlined: one async call less on every request).
        try {
          await this.route.handler(this);
          result = SUCCESS;
        } catch (error) {
          result = failure(error);
        }
        const sending = this.#sending;
        if (sending !== undefined) result = outcomeOf(result, await sending);
      } else {
        const { promise: work, resolve } = Promise.withResolvers<Outcome>();
        // Started before the handler is called, so the limit is never later than promised;
        // cleared as soon as the handler settles, so no timer outlives its request.
        const limited = clearableDeadline(work, limitMs);
        resolve(this.#work());
        try {
          result = await limited.promise;
        } catch {
          // `work` never rejects, so this is the time limit.
          return await this.#timeOut(work);
        } finally {
          limited.clear();
        }
      }
      this.#ended = true;
      if (result.ok && this.#phase === COMPLETE) return;
      return await this.#conclude(result);
    } finally {
      if (--host.active === 0) host.idle?.resolve();
    }
  }

  /** Ends a request that did not simply respond: 500, cut-off stream or log line. */
  async #conclude(result: Outcome): Promise<void> {
    const { log } = this.#host;
    const where = this.#where;
    if (result.ok) {
      this.#discardPending(`${this.#label} never responded`);
      if (this.#disconnected) return;
      log.error(`${where} returned without responding; sent 500`);
      return await sendFixed(this.#sendRaw, SERVER_ERROR_RESPONSE);
    }
    const error = result.error;
    if (this.#disconnected && this.#phase !== COMPLETE) {
      this.#discardPending(`${this.#label} never responded: the client went away`);
      log.debug(`${where} stopped after the client went away:`, error);
      return;
    }
    if (this.#phase === PENDING) {
      this.#discardPending(`the handler of ${this.#label} failed`);
      log.error(`${where} failed; sent 500:`, error);
      return await sendFixed(this.#sendRaw, SERVER_ERROR_RESPONSE);
    }
    if (this.#phase === SENDING) {
      this.#discardPending(`the response to ${this.#label} failed`);
      // Too late for a 500: failing the ASGI call makes the bridge cut the stream off, so the
      // client cannot take a truncated body for a whole one.
      throw new Error(`${where} failed while sending its response; the response is cut off`, {
        cause: error,
      });
    }
    log.error(`${where} failed after its response was sent:`, error);
  }

  async #timeOut(work: Promise<Outcome>): Promise<void> {
    this.#timedOut = true;
    this.#ended = true;
    const limit = seconds(this.#host.limitMs ?? 0);
    this.#abort(new DOMException(`Request time limit of ${limit} exceeded`, "TimeoutError"));
    this.#discardPending(this.#timedOutReason);
    const where = this.#where;
    void work.then((late) => {
      if (late.ok) return;
      if (late.error === this.#abortReason) {
        this.#host.log.debug(`${where} stopped on its signal after the time limit`);
      } else this.#host.log.debug(`${where} failed after its time limit; ignored:`, late.error);
    });
    if (this.#disconnected) return;
    if (this.#phase === PENDING) return await sendFixed(this.#sendRaw, TIMEOUT_RESPONSE);
    if (this.#phase === SENDING) {
      throw new Error(
        `${where} was still sending its response at the request time limit of ${limit}; ` +
          `the response is cut off`,
      );
    }
    this.#host.log.debug(
      `${where} still ran at the request time limit of ${limit}, after ` +
        `responding; its signal was aborted`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// App
// ---------------------------------------------------------------------------------------------

/**
 * The members every {@linkcode App} has. Create apps with `new App(...)`, which also gives them
 * their typed attributes; this class carries the documentation of the members.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example The lifespan constants
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { App } from "@stellarator/stellarator/web";
 *
 * assertEquals(App.LIFESPAN_STARTUP, "lifespan.startup");
 * assertEquals(App.LIFESPAN_SHUTDOWN, "lifespan.shutdown");
 * ```
 */
export class AppBase<A extends object = Record<never, never>> {
  /** The message type the lifespan function is called with at startup. */
  static readonly LIFESPAN_STARTUP: "lifespan.startup" = "lifespan.startup";
  /** The message type the lifespan function is called with at shutdown. */
  static readonly LIFESPAN_SHUTDOWN: "lifespan.shutdown" = "lifespan.shutdown";

  /** Routes requests (and WebSockets) to handlers. */
  readonly router: AsgiRouter<AppHandler<A>>;
  /** The request time limit in seconds, or `undefined` for none. */
  readonly requestTimeLimit: number | undefined;
  /** The time limit of each background task in seconds, or `undefined` for none. */
  readonly backgroundTaskTimeLimit: number | undefined;
  /** How many background tasks may run at once. */
  readonly backgroundTaskLimit: number;
  /** How long shutdown waits for requests and background tasks, in seconds. */
  readonly shutdownGracePeriod: number;
  /**
   * The app as an ASGI application: serves `http`, `websocket` and `lifespan` scopes. It is bound to the app,
   * so it can be passed on alone: `serve(app.asgi)` works as well as `serve(app)`.
   */
  readonly asgi: AsgiApplication;
  /**
   * Serves one Fetch request, so `Deno.serve(app.fetch)` and `export default app` under
   * `deno serve` work. Lifespan startup runs before the first request.
   *
   * @param request The request.
   * @param info Connection facts, such as the client's address.
   * @returns The response.
   */
  readonly fetch: (request: globalThis.Request, info?: FetchInfo) => Promise<globalThis.Response> =
    (
      request,
      info,
    ) =>
      (this.#fetchHandler ??= createFetchHandler(this, { logger: this.#log })).fetch(request, info);

  #lifespan: Lifespan<A> | undefined;
  #log: WebLogger;
  #runner: BackgroundRunner;
  #host: Host;
  #graceMs: number;
  #fetchHandler: AsgiFetchHandler | undefined;

  /**
   * Creates an app. Prefer `new App(...)`, which types the attributes.
   *
   * @param options The router, limits, lifespan function, attributes and logger.
   * @throws {TypeError} When an option has the wrong type, or an attribute would hide a member.
   * @throws {RangeError} When a time limit is negative, NaN, infinite or too long, or
   *   `backgroundTaskLimit` is not a whole number of at least 1.
   */
  constructor(options: AppOptions<A>) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`Cannot create an App from ${describe(options)}: give { router, ... }`);
    }
    const { router, lifespan, attributes, logger = console } = options;
    if (router === null || typeof router !== "object" || typeof router.match !== "function") {
      throw new TypeError(
        `Cannot use router ${describe(router)}: give an AsgiRouter, e.g. ` +
          `new AsgiRouter({ routes: [new Route("/", { handler })] })`,
      );
    }
    if (lifespan !== undefined && typeof lifespan !== "function") {
      throw new TypeError(
        `Cannot use lifespan ${describe(lifespan)}: give an async function (app, messageType)`,
      );
    }
    const limitMs = secondsOption("requestTimeLimit", options.requestTimeLimit);
    const taskLimitMs = secondsOption("backgroundTaskTimeLimit", options.backgroundTaskTimeLimit);
    this.#graceMs = secondsOption("shutdownGracePeriod", options.shutdownGracePeriod) ?? 5000;
    this.router = router;
    this.requestTimeLimit = options.requestTimeLimit;
    this.backgroundTaskTimeLimit = options.backgroundTaskTimeLimit;
    this.backgroundTaskLimit = countOption(
      "backgroundTaskLimit",
      options.backgroundTaskLimit,
      1000,
    );
    this.shutdownGracePeriod = this.#graceMs / 1000;
    this.#lifespan = lifespan;
    this.#log = logger;
    this.#runner = new BackgroundRunner(this.backgroundTaskLimit, taskLimitMs, logger);
    this.#host = { runner: this.#runner, log: logger, limitMs, active: 0, idle: undefined };
    this.asgi = this.#asgi.bind(this);
    if (attributes !== undefined) {
      if (attributes === null || typeof attributes !== "object") {
        throw new TypeError(`Cannot use attributes ${describe(attributes)}: give an object`);
      }
      for (const key of Object.keys(attributes)) {
        if (key in this) {
          throw new TypeError(
            `Cannot use the attribute "${key}": it would hide the App member of that name; ` +
              `choose another name`,
          );
        }
      }
      Object.assign(this, attributes);
    }
  }

  get #self(): App<A> {
    return this as unknown as App<A>;
  }

  #asgi(scope: Scope, receive: Receive, send: Send): Promise<void> {
    if (scope.type === "http") return this.#http(scope, receive, send);
    if (scope.type === "lifespan") return this.#lifespanLoop(receive, send);
    if (scope.type === "websocket") {
      const match = this.router.match(scope.path);
      const route = match?.routeFor("WEBSOCKET");
      if (route === undefined) return denySocket(receive, send, match === undefined ? 404 : 403);
      return handleSocket(this.#self, scope, match!.context, route, receive, send, this.#host);
    }
    return Promise.reject(
      new TypeError(
        `Cannot serve a ${describe((scope as { type?: unknown }).type)} scope: an App serves ` +
          `"http" and "lifespan" scopes`,
      ),
    );
  }

  #http(scope: HttpScope, receive: Receive, send: Send): Promise<void> {
    // The hot path: answer 404 and 405 from the match itself, with no exception thrown. Not an
    // async function: the request's own #handle() is the only async frame the App adds.
    const match = this.router.match(scope.path);
    if (match === undefined) return sendFixed(send, NOT_FOUND_RESPONSE);
    // HEAD is GET without the body (RFC 9110, 9.3.2); the bridge drops the body.
    const route = match.routeFor(scope.method) ??
      (scope.method === "HEAD" ? match.routeFor("GET") : undefined);
    if (route === undefined) return sendMethodNotAllowed(send, match.allowed);
    const webScope = scope as WebScope<A>;
    webScope.app = this.#self;
    const request = createRequest(
      this.#self,
      webScope,
      match.context,
      // An HTTP method never selects a WEBSOCKET route (the router refuses other names).
      route as Route<WebHandler<A>>,
      receive,
      send,
      this.#host,
    );
    return handleRequest(request);
  }

  async #lifespanLoop(receive: Receive, send: Send): Promise<void> {
    for (;;) {
      const message = await receive();
      if (message.type === "lifespan.startup") {
        try {
          this.#runner.open();
          await this.#lifespan?.(this.#self, AppBase.LIFESPAN_STARTUP);
        } catch (error) {
          this.#log.error("Lifespan startup failed:", error);
          await send({ type: "lifespan.startup.failed", message: messageOf(error) });
          return;
        }
        await send({ type: "lifespan.startup.complete" });
      } else if (message.type === "lifespan.shutdown") {
        await this.#drain();
        try {
          await this.#lifespan?.(this.#self, AppBase.LIFESPAN_SHUTDOWN);
        } catch (error) {
          this.#log.error("Lifespan shutdown failed:", error);
          await send({ type: "lifespan.shutdown.failed", message: messageOf(error) });
          return;
        }
        await send({ type: "lifespan.shutdown.complete" });
        return;
      }
    }
  }

  /** Lets in-flight requests finish, then stops the background tasks, within the grace period. */
  async #drain(): Promise<void> {
    const started = performance.now();
    const host = this.#host;
    if (host.active > 0) {
      host.idle = Promise.withResolvers();
      try {
        await deadline(host.idle.promise, this.#graceMs);
      } catch {
        this.#log.warn(
          `${host.active} request(s) still running after the shutdown grace period of ` +
            `${seconds(this.#graceMs)}; shutting down without them`,
        );
      } finally {
        host.idle = undefined;
      }
    }
    await closeSockets(this.#host, Math.max(0, this.#graceMs - (performance.now() - started)));
    await this.#runner.close(Math.max(0, this.#graceMs - (performance.now() - started)));
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An app: an {@linkcode AppBase} plus the attributes `A` its lifespan function and handlers share,
 * typed without casts at the use site (`app.db`, `request.app.db`).
 *
 * Attributes must not reuse the name of a member of {@linkcode AppBase}.
 *
 * @typeParam A The attributes, e.g. `{ db: Map<string, unknown> | null }`.
 */
export type App<A extends object = Record<never, never>> = AppBase<A> & A;

/** The type of the {@linkcode App} constructor: `new App<A>(options)` returns an `App<A>`. */
export interface AppConstructor {
  /**
   * Creates an app.
   *
   * @typeParam A The attributes, e.g. `{ db: Map<string, unknown> | null }`.
   * @param options The router, limits, lifespan function, attributes and logger.
   * @returns The app.
   * @throws {TypeError} When an option has the wrong type, or an attribute would hide a member.
   * @throws {RangeError} When a time limit is negative, NaN, infinite or too long, or
   *   `backgroundTaskLimit` is not a whole number of at least 1.
   */
  new <A extends object = Record<never, never>>(options: AppOptions<A>): App<A>;
  /** The prototype shared by all apps. */
  readonly prototype: AppBase<object>;
  /** `"lifespan.startup"`: the message type the lifespan function gets at startup. */
  readonly LIFESPAN_STARTUP: "lifespan.startup";
  /** `"lifespan.shutdown"`: the message type the lifespan function gets at shutdown. */
  readonly LIFESPAN_SHUTDOWN: "lifespan.shutdown";
}

/**
 * Creates an app: a router, time limits, a lifespan function and typed attributes. See the
 * module documentation for the semantics of the limits and of cancellation.
 *
 * @example Attributes set by the lifespan function, read by a handler
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { createFetchHandler } from "@stellarator/stellarator/asgi";
 * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
 * import { App, type Request, Response } from "@stellarator/stellarator/web";
 *
 * type Attributes = { db: Map<string, string> | null };
 *
 * async function count(request: Request<Attributes>): Promise<void> {
 *   const size = request.app.db?.size ?? 0;
 *   await request.respondWith(new Response({ body: String(size) }));
 * }
 *
 * const app = new App<Attributes>({
 *   router: new AsgiRouter({ routes: [new Route("/count", { handler: count })] }),
 *   requestTimeLimit: 1,
 *   backgroundTaskTimeLimit: 3,
 *   lifespan: (app, messageType) => {
 *     app.db = messageType === App.LIFESPAN_STARTUP ? new Map([["a", "1"]]) : null;
 *     return app;
 *   },
 * });
 * const handler = createFetchHandler(app);
 * await handler.startup();
 * const response = await handler.fetch(new globalThis.Request("http://localhost/count"));
 * assertEquals(await response.text(), "1");
 * await handler.shutdown();
 * assertEquals(app.db, null);
 * ```
 */
export const App: AppConstructor = AppBase as unknown as AppConstructor;
