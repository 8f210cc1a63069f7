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
 * - **Request time limit** (`requestTimeLimit`) covers the response. If the handler has not
 *   started its response when the limit passes, the client gets `408` with
 *   `content-type: text/plain; charset=utf-8`, `content-length: 27` and the body
 *   `Request time limit exceeded`; `request.signal` aborts (reason: a `TimeoutError`); whatever
 *   the handler sends later is ignored (logged at debug level), never a second response; and its
 *   background tasks do not run. If the limit passes while a streamed body is
 *   still being sent, the stream is cut off and the connection closed (the server logs one
 *   warning line, `Response cut off: ...`; under `Deno.serve(app.fetch)` or `deno serve`, Deno's
 *   default `onError` also prints the error that cut the stream: pass an `onError` to silence
 *   it). Once
 *   the response is complete the limit no longer applies: the handler may go on, and every task
 *   it registers then runs.
 * - **Client disconnect.** `request.signal` aborts (reason: an `AbortError`) once the client goes
 *   away, `request.receive()` yields `http.disconnect` from then on, and a later `respondWith` is
 *   dropped silently. The signal watches the connection from the moment it is first read; while a
 *   handler has not read a chunk of an upload, a disconnect is noticed when it reads it.
 * - **Background tasks** (`request.registerBackground(task)`) start after the response is sent.
 *   Each runs under `backgroundTaskTimeLimit` and is called with an `AbortSignal` that aborts at
 *   that limit and at shutdown. At most `backgroundTaskLimit` run at once; a registration beyond
 *   that waits for room (back-pressure) and no task is dropped while the app runs. The wait ends,
 *   the task not run, when `request.signal` aborts before the response is complete (time limit,
 *   client gone), when the registration's own `signal` option aborts, and at shutdown; the
 *   registration resolves `false` then, `true` once the task is registered. A task that
 *   registers another should not await the registration: it would wait for room while holding a
 *   slot, and with every slot held so, none would go on until its time limit. Before it responds,
 *   a request may hold at most `backgroundTaskLimit` tasks (a `RangeError` beyond: respond
 *   first). Every task ends in exactly one way, and
 *   each is logged: completed, failed, cut off at its limit, cancelled at shutdown, or not run
 *   (its request never responded: it hit the request time limit, its handler failed, or it
 *   returned without responding; its wait for room ended; or the app was shutting down).
 * - **Errors.** A handler that throws before responding gets a `500` and is logged with its route
 *   and stack; one that returns without responding gets a `500` too, and a value it returned (a
 *   `Response`, as a `Deno.serve` handler returns one) is named in the log line, which points to
 *   `request.respondWith()`. The server keeps serving.
 *
 * ## Shutdown
 *
 * {@linkcode App.shutdown} (called by {@linkcode AsgiServer.shutdown} through lifespan shutdown
 * under `serve(app)`, and on SIGINT or SIGTERM under `deno serve` and `Deno.serve(app.fetch)`):
 * new requests get `503`; registrations waiting for room are released at once and their tasks
 * logged as not run; queued tasks are cancelled; running tasks get their signal aborted; in-flight
 * requests and running tasks then get one `shutdownGracePeriod`, side by side; what still runs is
 * abandoned (and logged): a request still running then has its `request.signal` aborted (an
 * `AbortError`) and, if it has not started its response, gets `503` (a stream still being sent
 * is cut off), as the request time limit answers one; then the lifespan function runs with
 * {@linkcode App.LIFESPAN_SHUTDOWN}, for at most its own `lifespanShutdownTimeLimit` (5 s): if
 * it has not settled by then it is abandoned and the shutdown fails (`lifespan.shutdown.failed`,
 * a `TimeoutError` naming the limit). Under `serve(app)` the server's own `shutdownTimeout` comes
 * first: a request still running then gets `500` from the server, not the App's `503`.
 * The call a server makes for a request ends with its response, so a handler that goes on after
 * responding (waiting for room, say) never holds the server's own shutdown wait.
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
 * await app.shutdown();
 * ```
 *
 * @module
 */
import {
  type AsgiApplication,
  type AsgiFetchHandler,
  createFetchHandler,
  type FetchHandlerOptions,
  type FetchInfo,
  type HttpDisconnectMessage,
  type HttpRequestMessage,
  type HttpScope,
  type Receive,
  type Scope,
  type Send,
} from "./asgi.ts";
import type { AsgiRouter, PathContext, Route } from "./router.ts";
import {
  BackgroundRunner,
  checkedTaskOptions,
  type RegisterBackgroundOptions,
} from "./_web/background.ts";
import { DeadlineQueue } from "./_web/deadline.ts";
import { Exchange, type Host } from "./_web/exchange.ts";
import {
  countOption,
  likelyMilliseconds,
  limitOption,
  seconds,
  secondsOption,
} from "./_web/options.ts";
import { describe, errorText } from "./_common/describe.ts";
import { markFetchHandler } from "./_common/fetch_mark.ts";
import { rejectUnknownKeys } from "./_common/keys.ts";
import { guardLogger } from "./_common/logger.ts";
import { LogLimiter } from "./_common/log_limit.ts";
import { shutdownsDone } from "./_asgi/shutdowns.ts";
import {
  closeSockets,
  denySocket,
  handleSocket,
  sendUpgradeRequired,
  type WebSocketRequest,
} from "./_web/socket.ts";
import {
  NOT_FOUND_RESPONSE,
  type Response,
  sendFixed,
  sendMethodNotAllowed,
  UNAVAILABLE_RESPONSE,
} from "./_web/response.ts";

// One import serves a web app (`App`, `AsgiRouter`, `Route`, `serve`...), and the types the web
// layer's signatures mention are documented from this entry point too.
export * from "./router.ts";
export * from "./asgi.ts";
export { WebSocketRequest } from "./_web/socket.ts";
export type { AcceptOptions, CloseInfo, SocketMessage } from "./_web/socket.ts";
export { Response, type ResponseOptions } from "./_web/response.ts";
export { BodyTooLargeError } from "./_web/body_limit.ts";
export type { RegisterBackgroundOptions } from "./_web/background.ts";

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/**
 * A request handler: answers with `request.respondWith(...)`.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example A handler typed on its own
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { App, AsgiRouter, Response, Route, type WebHandler } from "@stellarator/stellarator/web";
 *
 * const health: WebHandler = async (request) => {
 *   await request.respondWith(new Response({ body: `ok: ${request.method} ${request.path}` }));
 * };
 *
 * const routes = [new Route("/health", { handler: health })];
 * const app = new App({ router: new AsgiRouter({ routes }) });
 * const response = await app.fetch(new globalThis.Request("http://localhost/health"));
 * assertEquals(await response.text(), "ok: GET /health");
 * await app.shutdown();
 * ```
 */
export type WebHandler<A extends object = Record<never, never>> = (
  request: Request<A>,
) => Promise<void> | void;

/**
 * A WebSocket handler, for routes whose methods are `["WEBSOCKET"]`: accepts (or closes to deny),
 * then receives and sends until the socket closes.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example A socket that answers in upper case
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { App, AsgiRouter, Route, serve, type SocketHandler } from "@stellarator/stellarator/web";
 *
 * const shout: SocketHandler = async (socket) => {
 *   await socket.accept();
 *   for await (const message of socket) {
 *     if (typeof message === "string") await socket.send(message.toUpperCase());
 *   }
 * };
 *
 * const routes = [new Route("/shout", { handler: shout, methods: ["WEBSOCKET"] })];
 * await using server = serve(new App({ router: new AsgiRouter({ routes }) }), {
 *   port: 0,
 *   onListen() {},
 * });
 * const client = new WebSocket(`ws://127.0.0.1:${(await server.addr).port}/shout`);
 * client.onopen = () => client.send("hello");
 * const reply = new Promise((resolve) => (client.onmessage = (event) => resolve(event.data)));
 * assertEquals(await reply, "HELLO");
 * const closed = new Promise((resolve) => (client.onclose = resolve));
 * client.close();
 * await closed;
 * ```
 */
export type SocketHandler<A extends object = Record<never, never>> = (
  socket: WebSocketRequest<App<A> & A>,
) => Promise<void> | void;

/**
 * Any handler of an App's routes: a {@linkcode WebHandler}, or a {@linkcode SocketHandler} for
 * routes whose methods are `["WEBSOCKET"]`. Name it when one router holds both kinds:
 * `new AsgiRouter<AppHandler>({ routes })`.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example A page and its socket in one router
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   type AppHandler,
 *   AsgiRouter,
 *   type Request,
 *   Response,
 *   Route,
 *   type WebSocketRequest,
 * } from "@stellarator/stellarator/web";
 *
 * async function page(request: Request): Promise<void> {
 *   await request.respondWith(new Response({ body: "<p>live</p>", contentType: "text/html" }));
 * }
 *
 * async function live(socket: WebSocketRequest): Promise<void> {
 *   await socket.accept();
 *   await socket.send("connected");
 * }
 *
 * const router = new AsgiRouter<AppHandler>({
 *   routes: [
 *     new Route("/", { handler: page }),
 *     new Route("/live", { handler: live, methods: ["WEBSOCKET"] }),
 *   ],
 * });
 * const app = new App({ router });
 * const response = await app.fetch(new globalThis.Request("http://localhost/"));
 * assertEquals(await response.text(), "<p>live</p>");
 * // A plain HTTP request to a path that has only a WebSocket route asks for an upgrade.
 * const upgrade = await app.fetch(new globalThis.Request("http://localhost/live"));
 * assertEquals(upgrade.status, 426);
 * await upgrade.body?.cancel();
 * await app.shutdown();
 * ```
 */
export type AppHandler<A extends object = Record<never, never>> = WebHandler<A> | SocketHandler<A>;

/**
 * A background task, registered with {@linkcode Request.registerBackground}. It is called with one
 * argument, a signal that aborts when the task reaches its time limit or the app shuts down; a
 * zero-argument function fits too.
 *
 * @example A task made for each request, run after the response
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type BackgroundTask,
 *   type Request,
 *   Response,
 *   Route,
 * } from "@stellarator/stellarator/web";
 *
 * const notified = Promise.withResolvers<string>();
 * // In a real app: `(signal) => fetch(url, { method: "POST", signal })`, which the signal stops.
 * const notify = (id: string): BackgroundTask => (signal) => {
 *   signal.throwIfAborted();
 *   notified.resolve(id);
 * };
 *
 * async function order(request: Request): Promise<void> {
 *   await request.registerBackground(notify(request.context.id!), { name: "notify" });
 *   await request.respondWith(new Response({ status: 202 }));
 * }
 *
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/orders/{id}", { handler: order })] }),
 *   backgroundTaskTimeLimit: 10,
 * });
 * const response = await app.fetch(new globalThis.Request("http://localhost/orders/42"));
 * assertEquals(response.status, 202);
 * await response.body?.cancel();
 * assertEquals(await notified.promise, "42");
 * await app.shutdown();
 * ```
 */
export type BackgroundTask = (signal: AbortSignal) => unknown;

/**
 * The message types the lifespan function is called with: {@linkcode App.LIFESPAN_STARTUP} and
 * {@linkcode App.LIFESPAN_SHUTDOWN}.
 *
 * @example Recording the phases
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type LifespanMessageType,
 *   type Request,
 *   Response,
 *   Route,
 * } from "@stellarator/stellarator/web";
 *
 * const phases: LifespanMessageType[] = [];
 * const app = new App({
 *   router: new AsgiRouter({
 *     routes: [
 *       new Route("/", {
 *         handler: async (request: Request) => {
 *           await request.respondWith(new Response({ body: "up" }));
 *         },
 *       }),
 *     ],
 *   }),
 *   lifespan: (_app, messageType) => {
 *     phases.push(messageType);
 *   },
 * });
 * // The first request runs lifespan startup; shutdown runs the lifespan function once more.
 * await (await app.fetch(new globalThis.Request("http://localhost/"))).body?.cancel();
 * await app.shutdown();
 * assertEquals(phases, ["lifespan.startup", "lifespan.shutdown"]);
 * ```
 */
export type LifespanMessageType = "lifespan.startup" | "lifespan.shutdown";

/**
 * The lifespan function: called with {@linkcode App.LIFESPAN_STARTUP} when the server starts and
 * {@linkcode App.LIFESPAN_SHUTDOWN} when it stops, and awaited. It may set and clear the app's
 * attributes, and may return the app or nothing (the return value is ignored). An exception
 * reports `lifespan.startup.failed` or `lifespan.shutdown.failed` with its message.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example A connection opened at startup and closed at shutdown
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type Lifespan,
 *   type Request,
 *   Response,
 *   Route,
 * } from "@stellarator/stellarator/web";
 *
 * type Attributes = { db: Map<string, string> | null };
 *
 * const lifespan: Lifespan<Attributes> = (app, messageType) => {
 *   if (messageType === App.LIFESPAN_STARTUP) app.db = new Map([["greeting", "hello"]]);
 *   else app.db = null; // a real database would be closed here
 * };
 *
 * async function greet(request: Request<Attributes>): Promise<void> {
 *   await request.respondWith(new Response({ body: request.app.db?.get("greeting") ?? "" }));
 * }
 *
 * const app = new App<Attributes>({
 *   router: new AsgiRouter({ routes: [new Route("/", { handler: greet })] }),
 *   lifespan,
 *   attributes: { db: null },
 * }) as App<Attributes> & Attributes;
 * const response = await app.fetch(new globalThis.Request("http://localhost/"));
 * assertEquals(await response.text(), "hello");
 * await app.shutdown();
 * assertEquals(app.db, null);
 * ```
 */
export type Lifespan<A extends object = Record<never, never>> = (
  app: App<A> & A,
  messageType: LifespanMessageType,
) => Promise<App<A> | void> | App<A> | void;

/**
 * The HTTP scope of a request handled by an App: the bridge's {@linkcode HttpScope} plus `app`, the
 * App itself, so code that holds only the scope (a helper, ASGI middleware) reaches the App and
 * its attributes.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example A helper that needs only the scope
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type Request,
 *   Response,
 *   Route,
 *   type WebScope,
 * } from "@stellarator/stellarator/web";
 *
 * type Attributes = { name: string };
 *
 * function describeRequest(scope: WebScope<Attributes>): string {
 *   return `${scope.app.name}: ${scope.method} ${scope.path}`;
 * }
 *
 * async function show(request: Request<Attributes>): Promise<void> {
 *   await request.respondWith(new Response({ body: describeRequest(request.scope) }));
 * }
 *
 * const app = new App<Attributes>({
 *   router: new AsgiRouter({ routes: [new Route("/show", { handler: show })] }),
 *   attributes: { name: "shop" },
 * });
 * const response = await app.fetch(new globalThis.Request("http://localhost/show"));
 * assertEquals(await response.text(), "shop: GET /show");
 * await app.shutdown();
 * ```
 */
export type WebScope<A extends object = Record<never, never>> = HttpScope & {
  /** The App handling the request, with its attributes. */
  app: App<A> & A;
};

/**
 * Where an App writes its log lines; `console` fits.
 *
 * @example Collecting errors, e.g. in a test
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { App, AsgiRouter, Route, type WebLogger } from "@stellarator/stellarator/web";
 *
 * const errors: unknown[][] = [];
 * const logger: WebLogger = {
 *   debug() {},
 *   info() {},
 *   warn() {},
 *   error: (...data) => errors.push(data),
 * };
 * const fail = () => {
 *   throw new Error("database unreachable");
 * };
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/fail", { handler: fail })] }),
 *   logger,
 * });
 * const response = await app.fetch(new globalThis.Request("http://localhost/fail"));
 * assertEquals(response.status, 500);
 * await response.body?.cancel();
 * assertEquals(errors.length, 1); // the handler's failure, with its route and stack
 * await app.shutdown();
 * ```
 */
export interface WebLogger {
  /** Ignored late responses, abandoned results: things worth seeing while debugging. */
  debug(...data: unknown[]): void;
  /** Background tasks that completed; a shutdown on a signal. */
  info(...data: unknown[]): void;
  /** Background tasks cut off, cancelled or not run; a shutdown that ran out of time. */
  warn(...data: unknown[]): void;
  /** Handlers and tasks that failed, failed lifespan phases. */
  error(...data: unknown[]): void;
}

/**
 * Options of {@linkcode App}. Time limits are in seconds, fractions allowed.
 *
 * @typeParam A The app's attributes, see {@linkcode App}.
 *
 * @example Limits for a small API, and the 408 a slow handler gets
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { delay } from "@std/async";
 * import {
 *   App,
 *   type AppOptions,
 *   AsgiRouter,
 *   type Request,
 *   Response,
 *   Route,
 * } from "@stellarator/stellarator/web";
 *
 * async function report(request: Request): Promise<void> {
 *   // Passing the signal on stops the wait once the client has its 408.
 *   await delay(10_000, { signal: request.signal }).catch(() => {});
 *   if (!request.signal.aborted) await request.respondWith(new Response({ body: "done" }));
 * }
 *
 * const options: AppOptions = {
 *   router: new AsgiRouter({ routes: [new Route("/report", { handler: report })] }),
 *   requestTimeLimit: 0.05, // seconds
 *   backgroundTaskTimeLimit: 30,
 *   backgroundTaskLimit: 100,
 *   shutdownGracePeriod: 2,
 *   lifespanShutdownTimeLimit: 2,
 *   logger: { debug() {}, info() {}, warn() {}, error: console.error },
 * };
 * const app = new App(options);
 * const response = await app.fetch(new globalThis.Request("http://localhost/report"));
 * assertEquals([response.status, await response.text()], [408, "Request time limit exceeded"]);
 * await app.shutdown();
 * ```
 */
export interface AppOptions<A extends object = Record<never, never>> {
  /**
   * Routes requests to handlers; routes whose methods are `["WEBSOCKET"]` take a
   * {@linkcode SocketHandler}. A router made empty, its routes added later with `addRoute()`,
   * needs its handler type written out, `new AsgiRouter<AppHandler>()` (`AppHandler<A>` for an
   * App with attributes): `new AsgiRouter()` alone is a router of any handlers, which
   * TypeScript refuses here.
   */
  router: AsgiRouter<AppHandler<A>>;
  /**
   * The longest a handler may take to start its response, in seconds; then the client gets 408.
   * A streamed response still being sent then is cut off; a complete one is no longer limited.
   * Any positive number up to 2147483.647 (fractions allowed); `0` is refused, as it would
   * answer every handler that awaits anything with a 408 (the bridge's timeouts, unlike this,
   * take `0` for no limit). A whole number of thousands from 1000 on (`5000`) reads like
   * milliseconds: it is taken as seconds, with one warning at construction (so for every time
   * limit of the App).
   *
   * @default {undefined (no limit)}
   */
  requestTimeLimit?: number;
  /**
   * The longest one background task may run, in seconds; then it is cut off. Any positive
   * number up to 2147483.647; `0` is refused, as `requestTimeLimit`'s is.
   *
   * @default {undefined (no limit)}
   */
  backgroundTaskTimeLimit?: number;
  /**
   * How many background tasks may be registered and unfinished at once, counting those still
   * held until their request's response as well as those running; a registration beyond it waits
   * for room. A request that already holds a task it registered before responding does not wait
   * for its next ones (they could only wait for its own tasks, which start with its response), so
   * those may pass the limit; at most this many run at once all the same.
   *
   * @default {1000}
   */
  backgroundTaskLimit?: number;
  /**
   * How long shutdown waits, in seconds, for in-flight requests to finish and, at the same time,
   * for running background tasks to stop once their signal is aborted. What is still running then
   * is abandoned (and logged). The lifespan function then gets its own
   * `lifespanShutdownTimeLimit`. `0`: abandon what still runs at once.
   *
   * @default {5}
   */
  shutdownGracePeriod?: number;
  /**
   * How long the lifespan function may take at shutdown, in seconds: still running then, it is
   * abandoned and the shutdown fails. Its own limit, not the grace period's: with
   * `shutdownGracePeriod: 0` (do not wait for requests) a lifespan function that closes a
   * database still gets its time.
   *
   * @default {5}
   */
  lifespanShutdownTimeLimit?: number;
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
   * Where log lines go. Lines a client can cause once per request (a 408, a handler that stopped
   * after its client left) are bounded: the first 10 of each kind in full, then one a minute
   * that counts those held back, and a count at shutdown (docs/asgi.md, "Serving an
   * application"). Handler errors are not bounded.
   *
   * @default {console}
   */
  logger?: WebLogger;
  /**
   * Whether a server that calls `app.fetch` (`deno serve`, `Deno.serve(app.fetch)`) makes the app
   * shut down gracefully on SIGINT and SIGTERM and then exit: with code 0, or 1 when the lifespan
   * function failed or ran out of time at shutdown, or failed at startup (every request then got
   * 503). A second signal exits at once (code 130 or
   * 143), except one within 0.5 s of the first: that is one signal sent to a process group and
   * passed on by a wrapper (npm's `deno`, a task runner), not a second Ctrl+C. Turn it off to
   * call {@linkcode App.shutdown} yourself.
   *
   * It has no effect under {@linkcode serve}, which never calls `app.fetch`: there nothing
   * handles the signals, and SIGINT or SIGTERM ends the process at once (exit code 130 or 143)
   * with no lifespan shutdown, unless the program aborts `serve()`'s `signal` option on them (see
   * `examples/web_app.ts`). The server then waits up to its `shutdownTimeout` for requests in
   * flight before the app's own shutdown starts, so the bound is that timeout plus the app's.
   *
   * @default {true}
   */
  handleSignals?: boolean;
  /**
   * Limits of the bridge behind `app.fetch`, for when the app is served that way (`deno serve`,
   * `Deno.serve(app.fetch)`, `export default app`): `maxBodySize` (bytes; a larger
   * `content-length` gets 413, and so does a body that grows past it as it is read, whose
   * handler's read then rejects with a {@linkcode BodyTooLargeError}), `maxMessageSize` (bytes
   * of one WebSocket message) and `rootPath` (the mount point), each as
   * {@linkcode FetchHandlerOptions} documents it. Without them `app.fetch` takes request bodies of any size. Under {@linkcode serve} they
   * have no effect: pass the same options to `serve(app, { maxBodySize })` there.
   *
   * @default {{} (no body limit, 16 MiB messages, no mount point)}
   */
  fetchOptions?: AppFetchOptions;
}

/**
 * The options of the bridge behind `app.fetch`; see {@linkcode AppOptions.fetchOptions}.
 *
 * @example A body limit under `deno serve`
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { App, AsgiRouter, Request, Response, Route } from "@stellarator/stellarator/web";
 *
 * const app = new App({
 *   router: new AsgiRouter({
 *     routes: [
 *       new Route("/upload", {
 *         methods: ["POST"],
 *         handler: async (request: Request) => {
 *           const body = await request.bytes();
 *           await request.respondWith(new Response({ body: `${body.length} bytes` }));
 *         },
 *       }),
 *     ],
 *   }),
 *   fetchOptions: { maxBodySize: 1024 },
 * });
 * const upload = (size: number) =>
 *   app.fetch(new globalThis.Request("http://localhost/upload", {
 *     method: "POST",
 *     body: new Uint8Array(size),
 *   }));
 * assertEquals(await (await upload(1024)).text(), "1024 bytes");
 * const tooLarge = await upload(1025);
 * assertEquals(tooLarge.status, 413);
 * await tooLarge.body?.cancel();
 * await app.shutdown();
 * ```
 */
export type AppFetchOptions = Pick<
  FetchHandlerOptions,
  "maxBodySize" | "maxMessageSize" | "rootPath"
>;

const FETCH_OPTION_NAMES: readonly string[] = ["maxBodySize", "maxMessageSize", "rootPath"];

/** Every key of `AppOptions`. */
const APP_OPTION_KEYS: readonly string[] = [
  "router",
  "requestTimeLimit",
  "backgroundTaskTimeLimit",
  "backgroundTaskLimit",
  "shutdownGracePeriod",
  "lifespanShutdownTimeLimit",
  "lifespan",
  "attributes",
  "logger",
  "handleSignals",
  "fetchOptions",
];

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

let createRequest: <A extends object>(
  exchange: Exchange,
  app: App<A> & A,
  scope: WebScope<A>,
  context: PathContext,
  route: Route<WebHandler<A>>,
) => Request<A>;

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
 * await app.shutdown();
 * ```
 */
export class Request<A extends object = Record<never, never>> {
  static {
    createRequest = (exchange, app, scope, context, route) =>
      new Request(exchange, app, scope, context, route);
  }

  /** The ASGI scope of the request, with `app` added. */
  readonly scope: WebScope<A>;
  /** The path variables the router matched, e.g. `{ user: "bob" }` for `/info/{user}`. */
  readonly context: PathContext;
  /** The App handling the request, with its attributes. */
  readonly app: App<A> & A;
  /** The route that matched. */
  readonly route: Route<WebHandler<A>>;
  #exchange: Exchange;

  /** @ignore Requests are made by the App. */
  private constructor(
    exchange: Exchange,
    app: App<A> & A,
    scope: WebScope<A>,
    context: PathContext,
    route: Route<WebHandler<A>>,
  ) {
    this.#exchange = exchange;
    this.app = app;
    this.scope = scope;
    this.context = context;
    this.route = route;
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
   * Aborts when the request time limit passes before the response is complete (reason: a
   * `TimeoutError` `DOMException`), the client goes away (reason: an `AbortError`
   * `DOMException`, "The client disconnected"), the server refuses a body that grew past
   * `maxBodySize` and answers 413 itself (reason: a {@linkcode BodyTooLargeError}), the server
   * gives up a body that stalled for `stallTimeout` and answers 408 (reason: a `TimeoutError`
   * `DOMException` that names `stallTimeout`), the body cannot be parsed and the client gets
   * 400, or the body stream of a `Request` given to `app.fetch` fails (reason: a `TypeError`
   * each, saying which), or the handler is still running when shutdown's grace period ends
   * (reason: an `AbortError` saying the app shut down). Pass it on, e.g. to `delay(ms, { signal })` or
   * `fetch(url, { signal })`, so that work really stops.
   *
   * @returns The signal.
   */
  get signal(): AbortSignal {
    return this.#exchange.signal;
  }

  /**
   * Returns the next ASGI message: `http.request` chunks of the body (`more_body` false on the
   * last), then, once the response is complete or the client is gone, `http.disconnect`
   * (carrying the bridge's `reason` when the server ended the request itself, and
   * `exceeded_max_body_size`, the limit, when it refused a body that grew past `maxBodySize`, as
   * `request.signal` then aborts with a {@linkcode BodyTooLargeError}; see docs/asgi.md, "Why a
   * request ended").
   * After a disconnect it returns `http.disconnect` at once. Once {@linkcode bytes} has been
   * called, the body is its: `receive()` waits until it is read and returns what follows it.
   *
   * @returns The message.
   */
  receive(): Promise<HttpRequestMessage | HttpDisconnectMessage> {
    return this.#exchange.receive();
  }

  /**
   * Reads the whole request body. A second call returns the same bytes, also while the first is
   * still reading.
   *
   * @returns The body.
   * @throws {DOMException} The signal's reason, when the client goes away while the body is read.
   * @throws {BodyTooLargeError} The signal's reason, when the body grows past `maxBodySize`: the
   *   server has answered 413 for the handler, and what it sends afterwards is dropped.
   * @throws {DOMException} The signal's reason, a `TimeoutError`, when the body stalls for the
   *   server's `stallTimeout`: the server has answered 408 for the handler.
   * @throws {TypeError} The signal's reason, when the body cannot be parsed (the server has
   *   answered 400) or the stream of a `Request` given to `app.fetch` fails (500).
   * @throws {TypeError} When `receive()` has taken part or all of the body, or the response was
   *   complete before the body was read (the request ends with its response: read it first).
   */
  bytes(): Promise<Uint8Array> {
    return this.#exchange.bytes();
  }

  /**
   * Reads the whole request body as UTF-8 text (invalid bytes become U+FFFD).
   *
   * @returns The text.
   * @throws {DOMException} The signal's reason, when the client goes away while the body is read.
   * @throws {BodyTooLargeError} The signal's reason, when the body grows past `maxBodySize`.
   * @throws {DOMException} A `TimeoutError`, when the body stalls for `stallTimeout` (408).
   * @throws {TypeError} The signal's reason, when the body is malformed (400) or its stream fails
   *   under `app.fetch` (500).
   * @throws {TypeError} When `receive()` has taken part or all of the body, or the response was
   *   complete before the body was read (the request ends with its response: read it first).
   */
  async text(): Promise<string> {
    return new TextDecoder().decode(await this.#exchange.bytes());
  }

  /**
   * Sends the response. Resolves once the whole body is sent.
   *
   * After the request time limit has passed (the client got 408) the response is ignored and a
   * debug line logged; after the client went away it is dropped silently. A streamed body that is
   * not sent so, or because the request already responded, is closed (a `ReadableStream`
   * cancelled, a generator closed), so that what it reads is let go. When the client goes
   * away while a streamed body is being sent, the stream is closed and this rejects with
   * `request.signal`'s reason (an `AbortError` `DOMException`).
   *
   * @param response The response.
   * @returns Resolves when the response is sent, dropped or ignored.
   * @throws {TypeError} When `response` is not a {@linkcode Response}, its streamed body was
   *   sent before (a stream is read once), or its body is a `ReadableStream` that a reader took
   *   after the Response was made; nothing is sent then, and a handler that lets it propagate
   *   gets its client a 500.
   * @throws {Error} When the handler already responded, or a streamed body fails.
   * @throws {DOMException} When the client goes away during a streamed body.
   */
  respondWith(response: Response): Promise<void> {
    return this.#exchange.respondWith(response);
  }

  /**
   * Schedules a background task. It starts once the response is sent, runs under the app's
   * `backgroundTaskTimeLimit`, and is called with a signal that aborts at that limit and at
   * shutdown. Bind arguments beforehand: `() => sendMail("bob")`.
   *
   * When `backgroundTaskLimit` tasks are running or waiting, this waits for room first
   * (back-pressure); no task is dropped while the app runs, and a task registered after a
   * complete response always runs, whatever the request time limit. Tasks registered by a
   * request that hits the request time limit, whose handler fails, or that returns without
   * responding do not run. A registration waits only while its request can still use the task:
   * it ends, its task not run, when `request.signal` aborts before the response is complete
   * (the request time limit passes, or the client goes away), when `options.signal` aborts, and
   * at shutdown; once `request.signal` has aborted, a registration that finds no room returns at
   * once. Each task that does not run is logged.
   *
   * It resolves in every case, with whether the task was registered: `false` means it will not
   * run (and was logged so). That answers what `request.signal.aborted` cannot: whether a task
   * went in just before the signal aborted. An `options.signal` already aborted registers
   * nothing, even with room free.
   *
   * Inside a background task, register without awaiting (`void request.registerBackground(next)`):
   * the running task holds a slot while it waits for one, so with every slot held by tasks that
   * await a registration, none goes on until `backgroundTaskTimeLimit` cuts them off (for ever
   * without one). Unawaited, the new task waits its turn in the queue and starts once a slot is
   * free.
   *
   * @example Waiting at most 2 s for room, then answering 503
   * ```ts
   * import { assertEquals } from "@std/assert";
   * import { App, AsgiRouter, type Request, Response, Route } from "@stellarator/stellarator/web";
   *
   * async function order(request: Request): Promise<void> {
   *   const registered = await request.registerBackground(() => console.log("receipt sent"), {
   *     name: "receipt",
   *     signal: AbortSignal.timeout(2000),
   *   });
   *   if (!registered) {
   *     return await request.respondWith(new Response({ status: 503, body: "Try again later" }));
   *   }
   *   await request.respondWith(new Response({ status: 201, body: "Ordered" }));
   * }
   *
   * const router = new AsgiRouter({ routes: [new Route("/order", { handler: order })] });
   * const app = new App({ router, backgroundTaskLimit: 10 });
   * const response = await app.fetch(new globalThis.Request("http://localhost/order"));
   * assertEquals([response.status, await response.text()], [201, "Ordered"]);
   * await app.shutdown();
   * ```
   *
   * @param task The task.
   * @param options The task's name for log lines, and a signal that ends the wait for room.
   *   Optional: defaults to `{}` (the function's name, no signal).
   * @returns `true` once the task is registered, `false` when it was not (logged as not run).
   * @throws {TypeError} When `task` is not a function, or `options` is not `{ name, signal }`
   *   with a string name and an `AbortSignal`.
   * @throws {RangeError} When the request has not responded yet and already holds
   *   `backgroundTaskLimit` tasks: respond first, or raise the limit.
   */
  async registerBackground(
    task: BackgroundTask,
    options?: RegisterBackgroundOptions,
  ): Promise<boolean> {
    const checked = checkedTaskOptions(task, options);
    return await this.#exchange.registerBackground(task, checked?.name, checked?.signal);
  }
}

// ---------------------------------------------------------------------------------------------
// App
// ---------------------------------------------------------------------------------------------

/** What the grace period's timer resolves to, unlike anything a lifespan function returns. */
const TIMED_OUT: unique symbol = Symbol("timed out");
/**
 * A second signal within this many milliseconds of the first is the same one passed on by a
 * wrapper (as is, or turned from SIGINT into SIGTERM), not a second Ctrl+C; a later one exits at
 * once.
 */
const REPEAT_WINDOW_MS = 500;

const SIGNAL_NUMBERS: Partial<Record<Deno.Signal, number>> = { SIGINT: 2, SIGTERM: 15 };
/**
 * How long a signal's shutdown, once done, leaves the process to end by itself before it exits:
 * long enough for a `deno serve` worker's event loop to drain, short enough not to be noticed.
 */
const FORCED_EXIT_MS = 100;
/**
 * The shutdowns that signals started in this process (a worker has its own), for every App that
 * handles them: the last to finish exits, with the worst code, once no serve() shutdown is in
 * progress either (see _asgi/shutdowns.ts). Each App once exited as soon as
 * its own shutdown was done, so an idle App (a metrics port beside the main one) ended the
 * process while the main App's requests were still running, its lifespan shutdown never run.
 */
const signalShutdowns = { running: 0, code: 0 };
/** Whether this code runs in a worker, where `Deno.exit()` ends the whole process. */
const IN_WORKER = typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope ===
  "function";

/**
 * Checks `fetchOptions` where the App is made, rather than at its first request: the bridge's
 * own checks run on a handler made for the purpose and dropped (it holds no resources).
 */
function checkFetchOptions(
  asgi: AsgiApplication,
  options: AppFetchOptions | undefined,
): AppFetchOptions | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `Invalid fetchOptions ${describe(options)}: pass an object, e.g. { maxBodySize: 1048576 }`,
    );
  }
  // serve()'s other options (port, say) belong to serve(), not to app.fetch.
  rejectUnknownKeys(options, FETCH_OPTION_NAMES, "fetchOptions");
  createFetchHandler(asgi, options);
  return { ...options };
}

/**
 * The path the App routes on: `scope.path` without the `root_path` the application is mounted at
 * (as Starlette routes), so that `serve(app, { rootPath: "/api" })`, or a proxy that sets
 * `root_path`, leaves the routes as written. ASGI's `path` includes `root_path`; routing on it
 * made every route unreachable under a mount point. A path outside the mount point, or one that
 * only shares its first letters (`/apiary` under `/api`), is routed as it is; the mount point
 * itself routes as `/`.
 */
function routePath(scope: { path: string; root_path?: string }): string {
  const root = scope.root_path;
  const path = scope.path;
  if (root === undefined || root === "" || !path.startsWith(root)) return path;
  if (path.length === root.length) return "/";
  return path.charCodeAt(root.length) === 0x2f ? path.slice(root.length) : path;
}

/**
 * An app: a router, time limits, a lifespan function and typed attributes. See the module
 * documentation for the semantics of the limits, of cancellation and of shutdown.
 *
 * The attributes `A` are set on the app itself (`app.db`). TypeScript cannot give a class members
 * named by a type parameter, so the app is typed with them, as `App<A> & A`, where it is handed to
 * your code: `request.app` and the lifespan function's `app`. Attributes must not reuse the name of
 * a member of the App.
 *
 * @typeParam A The attributes, e.g. `{ db: Map<string, unknown> | null }`.
 *
 * @example Attributes set by the lifespan function, read by a handler
 * ```ts
 * import { assertEquals } from "@std/assert";
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
 * let db: Map<string, string> | null = null;
 * const app = new App<Attributes>({
 *   router: new AsgiRouter({ routes: [new Route("/count", { handler: count })] }),
 *   requestTimeLimit: 1,
 *   backgroundTaskTimeLimit: 3,
 *   lifespan: (app, messageType) => {
 *     app.db = messageType === App.LIFESPAN_STARTUP ? new Map([["a", "1"]]) : null;
 *     db = app.db;
 *   },
 * });
 * const response = await app.fetch(new globalThis.Request("http://localhost/count"));
 * assertEquals(await response.text(), "1");
 * await app.shutdown();
 * assertEquals(db, null);
 * ```
 */
export class App<A extends object = Record<never, never>> {
  /** The message type the lifespan function is called with at startup. */
  static readonly LIFESPAN_STARTUP: "lifespan.startup" = "lifespan.startup";
  /** The message type the lifespan function is called with at shutdown. */
  static readonly LIFESPAN_SHUTDOWN: "lifespan.shutdown" = "lifespan.shutdown";

  /** Routes requests to handlers. */
  readonly router: AsgiRouter<AppHandler<A>>;
  /** The request time limit in seconds, or `undefined` for none. */
  readonly requestTimeLimit: number | undefined;
  /** The time limit of each background task in seconds, or `undefined` for none. */
  readonly backgroundTaskTimeLimit: number | undefined;
  /** How many background tasks may run at once. */
  readonly backgroundTaskLimit: number;
  /** How long shutdown waits for requests and background tasks, in seconds. */
  readonly shutdownGracePeriod: number;
  /** How long the lifespan function may take at shutdown, in seconds. */
  readonly lifespanShutdownTimeLimit: number;
  /**
   * The app as an ASGI application: serves `http`, `websocket` and `lifespan` scopes. It is bound
   * to the app, so it can be passed on alone: `serve(app.asgi)` works as well as `serve(app)`.
   */
  readonly asgi: AsgiApplication;
  /**
   * Serves one Fetch request, so `Deno.serve(app.fetch)` and `export default app` under
   * `deno serve` work. Lifespan startup runs before the first request. Called by a server (with
   * `info`), it also makes the app shut down on SIGINT and SIGTERM, see `handleSignals`.
   *
   * @param request The request.
   * @param info Connection facts, such as the client's address.
   * @returns The response.
   */
  readonly fetch: (request: globalThis.Request, info?: FetchInfo) => Promise<globalThis.Response> =
    markFetchHandler((request, info) => {
      if (info !== undefined) {
        if (!this.#signalsWatched) this.#watchSignals();
        if (this.#handleSignals) this.#track(info);
      }
      return (this.#fetchHandler ??= createFetchHandler(this.#fetchAsgi, {
        ...this.#fetchOptions,
        logger: this.#log,
      })).fetch(request, info);
    }, "the App itself (serve(app)) or app.asgi");

  #lifespan: Lifespan<A> | undefined;
  #fetchOptions: AppFetchOptions | undefined;
  #log: WebLogger;
  #runner: BackgroundRunner;
  #host: Host;
  readonly #logLimit: LogLimiter = new LogLimiter(
    undefined,
    (level, line) => this.#log[level](line),
  );
  #graceMs: number;
  readonly #lifespanLimitMs: number;
  #handleSignals: boolean;
  /**
   * A server has called `app.fetch` (with `info`): the signals are watched, and the Fetch
   * handler's lifespan connection holds the App as a server's does.
   */
  #signalsWatched = false;
  #fetchHandler: AsgiFetchHandler | undefined;
  /** Lifespan startup ran, and shutdown has not. */
  #started = false;
  /** Lifespan connections (servers, the Fetch handler) that started the App and still serve. */
  #holders = 0;
  /** The Fetch handler's lifespan connection is one of `#holders`. */
  #fetchHolds = false;
  /** The startup the first of them ran, which the others share. */
  #starting: Promise<void> | undefined;
  /** The last lifespan startup failed: requests got 503, and a signal's exit code is 1. */
  #startupFailed = false;
  /** Shutdown has begun: new requests get 503. */
  #closing = false;
  /** The shutdown in progress or done, run once per startup. */
  #stopping: Promise<void> | undefined;
  /** Responses `app.fetch` returned that the server has not finished writing yet. */
  #undelivered = 0;
  /** Resolved when `#undelivered` drops to 0 while a signal's shutdown waits to exit. */
  #delivered: PromiseWithResolvers<void> | undefined;
  readonly #onDelivered = (): void => {
    if (--this.#undelivered === 0) this.#delivered?.resolve();
  };

  /**
   * Creates an app.
   *
   * @param options The router, limits, lifespan function, attributes and logger.
   * @throws {TypeError} When an option has the wrong type, or an attribute would hide a member.
   * @throws {RangeError} When a time limit is negative, NaN, infinite or too long, or
   *   `backgroundTaskLimit` is not a whole number of at least 1.
   */
  constructor(options: AppOptions<A>) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`Invalid options ${describe(options)}: pass { router, ... }`);
    }
    // A router has no keys of its own for the check below to refuse: it passed, and the message
    // said the router was undefined.
    if (typeof (options as { match?: unknown }).match === "function") {
      throw new TypeError(
        "Invalid options an AsgiRouter: pass it as { router }, e.g. new App({ router })",
      );
    }
    rejectUnknownKeys(options, APP_OPTION_KEYS, "new App()");
    const { router, lifespan, attributes, logger = console, handleSignals = true } = options;
    if (router === null || typeof router !== "object" || typeof router.match !== "function") {
      throw new TypeError(
        `Invalid router ${describe(router)}: pass an AsgiRouter, e.g. ` +
          `new AsgiRouter({ routes: [new Route("/", { handler })] })`,
      );
    }
    if (lifespan !== undefined && typeof lifespan !== "function") {
      throw new TypeError(
        `Invalid lifespan ${describe(lifespan)}: pass a function (app, messageType), sync or async`,
      );
    }
    if (
      logger === null || typeof logger !== "object" || typeof logger.debug !== "function" ||
      typeof logger.info !== "function" || typeof logger.warn !== "function" ||
      typeof logger.error !== "function"
    ) {
      throw new TypeError(
        `Invalid logger ${describe(logger)}: use an object with debug, info, warn and error ` +
          `methods, e.g. console`,
      );
    }
    if (typeof handleSignals !== "boolean") {
      throw new TypeError(
        `Invalid handleSignals ${describe(handleSignals)}: pass true or false`,
      );
    }
    const limitMs = limitOption("requestTimeLimit", options.requestTimeLimit);
    const taskLimitMs = limitOption("backgroundTaskTimeLimit", options.backgroundTaskTimeLimit);
    this.#graceMs = secondsOption("shutdownGracePeriod", options.shutdownGracePeriod, 5);
    this.#lifespanLimitMs = secondsOption(
      "lifespanShutdownTimeLimit",
      options.lifespanShutdownTimeLimit,
      5,
    );
    this.router = router;
    this.requestTimeLimit = options.requestTimeLimit;
    this.backgroundTaskTimeLimit = options.backgroundTaskTimeLimit;
    this.backgroundTaskLimit = countOption(
      "backgroundTaskLimit",
      options.backgroundTaskLimit,
      1000,
    );
    this.shutdownGracePeriod = this.#graceMs / 1000;
    this.lifespanShutdownTimeLimit = this.#lifespanLimitMs / 1000;
    this.#lifespan = lifespan;
    // Wrapped: a logger that throws must not turn a 408 into a 500, keep a task's slot taken for
    // good or crash the process (see _common/logger.ts).
    const log = guardLogger(logger, ["debug", "info", "warn", "error"]);
    this.#log = log;
    // Valid, and so not refused, but almost always milliseconds written for seconds.
    for (
      const option of [
        "requestTimeLimit",
        "backgroundTaskTimeLimit",
        "shutdownGracePeriod",
        "lifespanShutdownTimeLimit",
      ] as const
    ) {
      const warning = likelyMilliseconds(option, options[option]);
      if (warning !== null) log.warn(warning);
    }
    this.#handleSignals = handleSignals;
    this.#runner = new BackgroundRunner(this.backgroundTaskLimit, taskLimitMs, log);
    // What clients can cause once per request (a 408 to a slow upload) is bounded in the log:
    // see _common/log_limit.ts.
    const logLimit = this.#logLimit;
    this.#host = {
      runner: this.#runner,
      log,
      logOf: (level, kind, line, ...data) => {
        const note = logLimit.admit(kind, level);
        if (note !== null) log[level](line + note, ...data);
      },
      limitMs,
      graceMs: this.#graceMs,
      deadlines: limitMs === undefined ? undefined : new DeadlineQueue(limitMs),
      active: 0,
      newest: undefined,
      idle: undefined,
    };
    this.asgi = this.#asgi.bind(this);
    this.#fetchOptions = checkFetchOptions(this.asgi, options.fetchOptions);
    if (attributes !== undefined) {
      if (attributes === null || typeof attributes !== "object") {
        throw new TypeError(`Invalid attributes ${describe(attributes)}: pass an object`);
      }
      for (const key of Object.keys(attributes)) {
        if (key in this) {
          throw new TypeError(
            `Invalid attribute ${describe(key)}: it would hide the App member of that name; ` +
              `choose another name`,
          );
        }
      }
      Object.assign(this, attributes);
    }
  }

  /**
   * Shuts the app down, as lifespan shutdown does: new requests get 503, waiting task
   * registrations are released, queued tasks are cancelled, running tasks get their signal
   * aborted, and in-flight requests and running tasks get one `shutdownGracePeriod`; then the
   * lifespan function runs with {@linkcode App.LIFESPAN_SHUTDOWN}, for at most
   * `lifespanShutdownTimeLimit`. Every task ends logged.
   *
   * Under `deno serve` and `Deno.serve(app.fetch)` SIGINT and SIGTERM call it (see
   * `handleSignals`); under {@linkcode serve}, `server.shutdown()` calls it after the server
   * stops accepting. Calling it again waits for the same shutdown; it does nothing before startup,
   * nor after a startup whose lifespan function failed (as ASGI sends no lifespan shutdown then).
   *
   * @returns Resolves once the lifespan function has run.
   * @throws {LifespanError} When the lifespan function fails at shutdown or has not settled
   *   within `lifespanShutdownTimeLimit` (through the Fetch handler); otherwise the function's
   *   error, or a `TimeoutError` `DOMException` naming `lifespanShutdownTimeLimit`.
   */
  shutdown(): Promise<void> {
    const handler = this.#fetchHandler;
    // The Fetch handler's lifespan shutdown stops the App only if no server holds it too.
    if (handler !== undefined) return handler.shutdown().then(() => this.#stop());
    return this.#stop();
  }

  get #self(): App<A> & A {
    return this as unknown as App<A> & A;
  }

  /** `#asgi` for the Fetch handler, which tells its lifespan connection apart (see #lifespanLoop). */
  #fetchAsgi = (scope: Scope, receive: Receive, send: Send): Promise<void> =>
    scope.type === "lifespan"
      ? this.#lifespanLoop(receive, send, true)
      : this.#asgi(scope, receive, send);

  #asgi(scope: Scope, receive: Receive, send: Send): Promise<void> {
    if (scope.type === "http") return this.#http(scope, receive, send);
    if (scope.type === "lifespan") return this.#lifespanLoop(receive, send);
    if (scope.type === "websocket") {
      const match = this.router.match(routePath(scope));
      const route = match?.routeFor("WEBSOCKET");
      if (route === undefined) return denySocket(receive, send, match === undefined ? 404 : 403);
      // Shutting down: no new socket (it would get no 1012, and be dropped with the process).
      if (this.#closing) return denySocket(receive, send, 503);
      return handleSocket(this.#self, scope, match!.context, route, receive, send, this.#host);
    }
    // Deno.serve(app.asgi) calls it with a Fetch Request: say which handler that server takes.
    const message = typeof globalThis.Request === "function" &&
        (scope as unknown) instanceof globalThis.Request
      ? `Cannot serve a Fetch Request: app.asgi is an ASGI application (scope, receive, send); ` +
        `pass app.fetch to Deno.serve, or the App itself to serve()`
      : `Cannot serve a ${describe((scope as { type?: unknown }).type)} scope: an App serves ` +
        `"http", "websocket" and "lifespan" scopes`;
    return Promise.reject(new TypeError(message));
  }

  #http(scope: HttpScope, receive: Receive, send: Send): Promise<void> {
    // The hot path: answer 404 and 405 from the match itself, with no exception thrown. Not an
    // async function: the exchange's own run is the only async frame the App adds.
    const match = this.router.match(routePath(scope));
    if (match === undefined) return sendFixed(send, NOT_FOUND_RESPONSE);
    // HEAD is GET without the body (RFC 9110, 9.3.2); the bridge drops the body.
    const route = match.routeFor(scope.method) ??
      (scope.method === "HEAD" ? match.routeFor("GET") : undefined);
    if (route === undefined) {
      // WEBSOCKET is not an HTTP method: a path with only a WebSocket route asks for an upgrade.
      const allowed = match.allowed.filter((method) => method !== "WEBSOCKET");
      return allowed.length === 0 ? sendUpgradeRequired(send) : sendMethodNotAllowed(send, allowed);
    }
    if (this.#closing) return sendFixed(send, UNAVAILABLE_RESPONSE);
    const webScope = scope as WebScope<A>;
    const app = this.#self;
    webScope.app = app;
    const exchange = new Exchange(this.#host, scope, route.path, receive, send);
    // An HTTP method never selects a WEBSOCKET route (the router refuses other names).
    const request = createRequest(
      exchange,
      app,
      webScope,
      match.context,
      route as Route<WebHandler<A>>,
    );
    const handler = route.handler as WebHandler<A>;
    return exchange.handle(handler, request);
  }

  /**
   * One lifespan connection: a server's, or the Fetch handler's. One App may be served by
   * several servers at once (HTTP and HTTPS, two ports): the first startup runs the lifespan
   * function and the others wait for it and share it, and the lifespan function runs at
   * shutdown only when the last of them shuts down. Each once ran it on its own: the second
   * startup overwrote the first's attributes, and the first server's shutdown shut the App down
   * under the others (503 for all their requests).
   */
  async #lifespanLoop(receive: Receive, send: Send, fetchHandler = false): Promise<void> {
    let holding = false;
    for (;;) {
      const message = await receive();
      if (message.type === "lifespan.startup") {
        const joining = this.#holders > 0 && this.#stopping === undefined;
        this.#holders++;
        holding = true;
        if (fetchHandler) this.#fetchHolds = true;
        if (!joining) this.#starting = this.#startUp();
        try {
          await this.#starting;
        } catch (error) {
          this.#holders--;
          holding = false;
          if (fetchHandler) this.#fetchHolds = false;
          await send({ type: "lifespan.startup.failed", message: errorText(error) });
          return;
        }
        await send({ type: "lifespan.startup.complete" });
      } else if (message.type === "lifespan.shutdown") {
        if (holding) {
          this.#holders--;
          if (fetchHandler) this.#fetchHolds = false;
        }
        // A Fetch handler no server calls (app.fetch in process: a warm-up request, a test) is
        // no server to wait for: counted as one, it kept the App running for ever after the
        // last real server's shutdown, its lifespan function never run with LIFESPAN_SHUTDOWN.
        const idleFetchHandler = this.#fetchHolds && !this.#signalsWatched ? 1 : 0;
        if (holding && this.#holders > idleFetchHandler) {
          await send({ type: "lifespan.shutdown.complete" });
          return;
        }
        try {
          await this.#stop();
        } catch (error) {
          this.#log.error("Lifespan shutdown failed:", error);
          await send({ type: "lifespan.shutdown.failed", message: errorText(error) });
          return;
        }
        await send({ type: "lifespan.shutdown.complete" });
        return;
      }
    }
  }

  /** Opens the App and runs the lifespan function with LIFESPAN_STARTUP; throws its error. */
  async #startUp(): Promise<void> {
    try {
      this.#runner.open();
      this.#closing = false;
      this.#stopping = undefined;
      this.#started = true;
      this.#startupFailed = false;
      await this.#lifespan?.(this.#self, App.LIFESPAN_STARTUP);
    } catch (error) {
      // Nothing started, so there is nothing to shut down: ASGI sends no lifespan.shutdown
      // after startup.failed, and a program's own `app.shutdown()` must not call the
      // lifespan function with App.LIFESPAN_SHUTDOWN either.
      this.#started = false;
      this.#startupFailed = true;
      void this.#runner.close(0);
      this.#log.error("Lifespan startup failed:", error);
      throw error;
    }
  }

  /**
   * Drains, then runs the lifespan function; once per startup. A startup still running is
   * awaited first: `app.shutdown()` during it once ran LIFESPAN_SHUTDOWN beside LIFESPAN_STARTUP,
   * which then finished after it, leaving open what it opened.
   */
  #stop(): Promise<void> {
    if (!this.#started) return Promise.resolve();
    const started = this.#starting?.then(() => true, () => false) ?? Promise.resolve(true);
    return this.#stopping ??= started.then((ok) => {
      // A startup that failed meanwhile left nothing to shut down.
      if (!ok || !this.#started) return;
      return this.#drain().then(() => this.#shutDownLifespan()).then(() => {
        this.#started = false;
      });
    });
  }

  /**
   * Runs the lifespan function with LIFESPAN_SHUTDOWN for at most `lifespanShutdownTimeLimit`.
   *
   * Its own limit, not what the drain left: a task that ignores its signal uses up the drain's
   * whole period, and the lifespan function (closing a database, flushing a log) would then get
   * none, for no fault of its own. Nor the grace period itself: `shutdownGracePeriod: 0` once
   * failed every lifespan function that awaited anything. Hypercorn bounds lifespan shutdown
   * separately too (its `shutdown_timeout`). Running out of time is a failure (`lifespan.shutdown.failed`, exit code
   * 1 after a signal), as in Hypercorn: the shutdown cannot tell whether the work got done.
   *
   * @throws {DOMException} A `TimeoutError` when the function has not settled within the period.
   */
  async #shutDownLifespan(): Promise<void> {
    const lifespan = this.#lifespan;
    if (lifespan === undefined) return;
    const limit = this.#lifespanLimitMs;
    const done = Promise.resolve().then(() => lifespan(this.#self, App.LIFESPAN_SHUTDOWN));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(resolve, limit, TIMED_OUT);
    });
    try {
      if (await Promise.race([done, expired]) !== TIMED_OUT) return;
    } finally {
      clearTimeout(timer);
    }
    done.then(
      () => this.#log.debug("The lifespan function finished after its shutdown time limit"),
      (error) =>
        this.#log.debug("The lifespan function failed after its shutdown time limit:", error),
    );
    throw new DOMException(
      `The lifespan function did not finish shutting down within lifespanShutdownTimeLimit ${
        seconds(limit)
      }: it was abandoned`,
      "TimeoutError",
    );
  }

  /**
   * Stops the tasks and lets in-flight requests finish, side by side, within one grace period:
   * running tasks get the whole period whatever the requests do.
   */
  async #drain(): Promise<void> {
    this.#closing = true;
    const host = this.#host;
    const grace = this.#graceMs;
    // Closing the runner first releases registrations waiting for room, so handlers blocked in
    // registerBackground() return at once instead of using up the grace period.
    const tasks = this.#runner.close(grace);
    const sockets = closeSockets(host, grace);
    if (host.active > 0) {
      host.idle = Promise.withResolvers();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<boolean>((resolve) => {
        timer = setTimeout(resolve, grace, false);
      });
      try {
        const idle = await Promise.race([host.idle.promise.then(() => true), expired]);
        if (!idle) {
          this.#log.warn(
            `${host.active} request(s) still running after the shutdown grace period of ` +
              `${seconds(grace)}; shutting down without them: their signals abort, and a ` +
              `client still waiting for a response gets 503`,
          );
          Exchange.abandonAll(host);
        }
      } finally {
        clearTimeout(timer);
        host.idle = undefined;
      }
    }
    await Promise.all([tasks, sockets]);
    for (const { level, line } of this.#logLimit.summary()) this.#log[level](line);
  }

  /**
   * Counts a response until the server has written it (`info.completed`, which `Deno.serve` and
   * `deno serve` give): exiting as soon as the handler is done would drop the bytes still on
   * their way (seen in the end-to-end test: the in-flight request got an empty reply).
   */
  #track(info: FetchInfo): void {
    const completed = (info as { completed?: unknown }).completed;
    if (!(completed instanceof Promise)) return;
    this.#undelivered++;
    completed.then(this.#onDelivered, this.#onDelivered);
  }

  /** Resolves once every tracked response is written, or after `ms`. */
  async #allDelivered(ms: number): Promise<void> {
    if (this.#undelivered > 0) {
      this.#delivered = Promise.withResolvers();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<void>((resolve) => timer = setTimeout(resolve, ms));
      try {
        await Promise.race([this.#delivered.promise, expired]);
      } finally {
        clearTimeout(timer);
        this.#delivered = undefined;
      }
    }
    // `completed` resolves a little before the bytes leave: Deno 2.9 exiting in the same turn
    // lost the response (curl: empty reply), one timer turn later it arrived. 20 ms is margin.
    await new Promise((resolve) => setTimeout(resolve, 20));
  }

  /**
   * Under a server that calls `app.fetch`, SIGINT and SIGTERM shut the app down and exit with
   * code 0 (1 when the shutdown failed): `deno serve` only stops its listener (and Deno's
   * default for a signal kills the process), so nothing else would run lifespan shutdown or stop
   * the tasks. Responses still being
   * written are awaited until the grace period that began with the signal ends. A second signal
   * exits at once, with 128 + the signal's number.
   */
  #watchSignals(): void {
    this.#signalsWatched = true;
    if (!this.#handleSignals || typeof Deno?.addSignalListener !== "function") return;
    const signals: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
    let first: Deno.Signal | undefined;
    let firstAt = 0;
    for (const signal of signals) {
      Deno.addSignalListener(signal, () => {
        if (first !== undefined) {
          // One signal sent to a process group reaches a wrapper (npm's deno, a task runner)
          // and this process both, and the wrapper passes its copy on: the same signal twice
          // within milliseconds. Taken for "exit now", it cut off every request in flight.
          // Some wrappers also turn the Ctrl+C they get into a SIGTERM for their children:
          // any second signal that close to the first is the same request to stop.
          if (performance.now() - firstAt < REPEAT_WINDOW_MS) {
            this.#log.debug(
              `Received ${signal} within ${REPEAT_WINDOW_MS} ms of ${first}: taken as the same ` +
                `one (a process group and a wrapper both deliver it)`,
            );
            return;
          }
          this.#log.warn(`Received ${signal} again: exiting without waiting`);
          Deno.exit(128 + (SIGNAL_NUMBERS[signal] ?? 0));
        }
        first = signal;
        firstAt = performance.now();
        this.#log.info(`Received ${signal}: shutting down`);
        // In a Worker, Deno.exit() would end the whole process, cutting off the other workers'
        // shutdowns: a Worker closes itself instead. `deno serve --parallel` runs its workers
        // with a main-thread global (no WorkerGlobalScope to tell them by), so there the exit
        // code is set and the process left to end by itself: deno serve closed its listener on
        // the signal, and exits, with Deno.exitCode, once every worker has nothing left to run.
        // Calling Deno.exit() there ended the process as soon as the first worker was done: a
        // request still running in another worker got no response, its App no lifespan
        // shutdown. The exit is only forced, after FORCED_EXIT_MS, when something still keeps
        // this thread alive: the listener of Deno.serve(app.fetch), work that was abandoned, or
        // any timer or socket of the program's own. Under --parallel that forced exit still ends
        // the other workers, mid-request (a worker has no way to end alone: close() exits too).
        const exit = IN_WORKER
          ? () => (globalThis as { close?: () => void }).close?.()
          : (code: number) => {
            if (code > (Deno.exitCode ?? 0)) Deno.exitCode = code;
            const timer = setTimeout(() => Deno.exit(Deno.exitCode), FORCED_EXIT_MS);
            Deno.unrefTimer(timer);
          };
        // One deadline from the signal on: the responses still being written share the grace
        // period of the requests they answer. (Waiting a whole period more for them once the
        // drain had used one made a shutdown take twice the period.) They are awaited after a
        // failed shutdown too: the failure is the lifespan function's, not theirs.
        const deadline = performance.now() + this.#graceMs;
        signalShutdowns.running++;
        this.shutdown().then(() => {
          if (!this.#startupFailed) return 0;
          // A failed startup left nothing to shut down, but the process did not serve: exiting
          // 0 told a supervisor all was well (uvicorn exits 3 when startup fails).
          this.#log.error(
            "Exiting with code 1: lifespan startup failed, so the app answered every request 503",
          );
          return 1;
        }, (error) => {
          this.#log.error("Shutdown failed:", error);
          return 1;
        }).then((code) =>
          this.#allDelivered(Math.max(0, deadline - performance.now())).then(() => {
            signalShutdowns.code = Math.max(signalShutdowns.code, code);
            if (--signalShutdowns.running > 0) return;
            // A serve() that the same signal stops (its `signal` option) finishes first.
            shutdownsDone().then(() => {
              if (signalShutdowns.running === 0) exit(signalShutdowns.code);
            });
          })
        );
      });
    }
  }
}
