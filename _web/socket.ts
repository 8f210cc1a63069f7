/**
 * WebSocket routes of the web layer: {@linkcode WebSocketRequest}, what a socket handler gets,
 * and `handleSocket`, which the App calls for `websocket` scopes. A route serves WebSockets when
 * its methods are `["WEBSOCKET"]`.
 *
 * Time limits: the App's `requestTimeLimit` applies to the handshake only. A handler that has not
 * called `accept()` or `close()` when it passes gets its client answered with 408, and its
 * signal aborts with a `TimeoutError`; once accepted, a socket lives as long as both ends want
 * (a chat socket is open for hours), and the handler's signal aborts when it closes.
 *
 * @module
 */
import type {
  ReceiveMessage,
  Send,
  SendMessage,
  WebSocketDisconnectMessage,
  WebSocketScope,
} from "../asgi.ts";
import type { AnyHandler, PathContext, Route } from "../router.ts";
import {
  type BackgroundRunner,
  checkedTaskOptions,
  failure,
  type Outcome,
  type RegisterBackgroundOptions,
  SUCCESS,
  type TaskEntry,
  type TaskHolder,
} from "./background.ts";
import { clearableDeadline } from "./deadline.ts";
import { received } from "./exchange.ts";
import { describe } from "../_common/describe.ts";
import { logQuoted } from "../_common/log_text.ts";
import { rejectUnknownKeys } from "../_common/keys.ts";
import { checkedField, headerPairs } from "./response.ts";
import { closeArguments, connectionEnded, HANDSHAKE_FIELDS } from "../_asgi/websocket.ts";
import { seconds } from "./options.ts";

/** Where socket handlers' failures are logged; the App's logger fits. */
export interface SocketLogger {
  /** Late events: a send after the close, a handler that stopped on its signal. */
  debug(...data: unknown[]): void;
  /** Handlers that failed. */
  error(...data: unknown[]): void;
  /** Handshakes over the time limit; sockets still open at shutdown. */
  warn(...data: unknown[]): void;
}

/** What a socket needs from its App; the App's request host fits. */
export interface SocketHost {
  /** Runs background tasks. */
  readonly runner: BackgroundRunner;
  /** Where log lines go. */
  readonly log: SocketLogger;
  /** Writes a line a client can cause per socket, within the App's log limit. */
  readonly logOf: (level: "warn" | "debug", kind: string, line: string, ...data: unknown[]) => void;
  /** The request time limit in milliseconds, applied to the handshake. */
  readonly limitMs: number | undefined;
}

/**
 * Options of {@linkcode WebSocketRequest.accept}.
 *
 * @example Choosing the newest subprotocol the client offers
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   type AcceptOptions,
 *   App,
 *   AsgiRouter,
 *   Route,
 *   serve,
 *   type WebSocketRequest,
 * } from "@stellarator/stellarator/web";
 *
 * async function chat(socket: WebSocketRequest): Promise<void> {
 *   const subprotocol = ["chat.v2", "chat.v1"].find((p) => socket.subprotocols.includes(p));
 *   if (subprotocol === undefined) return await socket.close(); // denied: the client gets 403
 *   const options: AcceptOptions = { subprotocol, headers: { "x-server": "stellarator" } };
 *   await socket.accept(options);
 *   await socket.send(`speaking ${subprotocol}`);
 * }
 *
 * const routes = [new Route("/chat", { handler: chat, methods: ["WEBSOCKET"] })];
 * await using server = serve(new App({ router: new AsgiRouter({ routes }) }), {
 *   port: 0,
 *   onListen() {},
 * });
 * const url = `ws://127.0.0.1:${(await server.addr).port}/chat`;
 * const client = new WebSocket(url, ["chat.v1", "chat.v2"]);
 * const greeting = new Promise((resolve) => (client.onmessage = (event) => resolve(event.data)));
 * assertEquals([await greeting, client.protocol], ["speaking chat.v2", "chat.v2"]);
 * const closed = new Promise((resolve) => (client.onclose = resolve));
 * client.close();
 * await closed;
 * ```
 */
export interface AcceptOptions {
  /**
   * The subprotocol to speak: one of {@linkcode WebSocketRequest.subprotocols}.
   *
   * @default {undefined (none)}
   */
  subprotocol?: string;
  /**
   * Extra headers of the 101 response, as for a `Response`: a list of pairs can repeat a name
   * (e.g. `set-cookie`). Names are sent in lower case; values must be printable ASCII. The
   * fields the handshake writes itself (`sec-websocket-accept`, `sec-websocket-protocol`,
   * `sec-websocket-extensions`, `upgrade`, `connection`, `content-length`, `transfer-encoding`)
   * are refused with a `TypeError`.
   *
   * @default {no extra headers}
   */
  headers?: Record<string, string> | Iterable<readonly [string, string]>;
}

/**
 * How a socket ended: the close code and reason, as {@linkcode WebSocketRequest.closed} gives it.
 *
 * @example Logging why a client left
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type CloseInfo,
 *   Route,
 *   serve,
 *   type WebSocketRequest,
 * } from "@stellarator/stellarator/web";
 *
 * const ended = Promise.withResolvers<CloseInfo | undefined>();
 *
 * async function session(socket: WebSocketRequest): Promise<void> {
 *   await socket.accept();
 *   while (await socket.receive() !== null); // `null` once the socket is closed
 *   ended.resolve(socket.closed);
 * }
 *
 * const routes = [new Route("/session", { handler: session, methods: ["WEBSOCKET"] })];
 * await using server = serve(new App({ router: new AsgiRouter({ routes }) }), {
 *   port: 0,
 *   onListen() {},
 * });
 * const client = new WebSocket(`ws://127.0.0.1:${(await server.addr).port}/session`);
 * await new Promise((resolve) => (client.onopen = resolve));
 * const closed = new Promise((resolve) => (client.onclose = resolve));
 * client.close(4000, "logged out");
 * await closed;
 * assertEquals(await ended.promise, { code: 4000, reason: "logged out" });
 * ```
 */
export interface CloseInfo {
  /** The close code: the client's, the one the server closed with, or 1006 when lost. */
  readonly code: number;
  /** The close reason; empty when none was given. */
  readonly reason: string;
}

/**
 * A message: text, or bytes for a binary message.
 *
 * @example Telling text from binary messages
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import type { SocketMessage } from "@stellarator/stellarator/web";
 *
 * function summary(message: SocketMessage): string {
 *   return typeof message === "string"
 *     ? `text: ${message}`
 *     : `binary: ${message.byteLength} bytes`;
 * }
 *
 * assertEquals(summary("hello"), "text: hello");
 * assertEquals(summary(new Uint8Array([1, 2, 3])), "binary: 3 bytes");
 * ```
 */
export type SocketMessage = string | Uint8Array;

const encoder = new TextEncoder();
/**
 * What the limit's side of the race settles with when the handshake was answered in time. (A
 * shared promise that never settles, once used here instead, kept a reaction, and with it every
 * socket's race, for good: 430 B per socket.)
 */
const ANSWERED: unique symbol = Symbol("answered");
const succeeded = (): Outcome => SUCCESS;
const HANDSHAKE = 0;
const OPEN = 1;
const CLOSED = 2;
/** The handler closed (or denied) the socket; the end is on its way. */
const CLOSING = 3;
/** Read ahead of the handler at most this many messages… */
const READ_AHEAD_MESSAGES = 16;
/** …and stop once they add up to this size (a larger message is read ahead alone). */
const READ_AHEAD_SIZE = 64 * 1024;

let createSocket: <App>(
  app: App,
  scope: WebSocketScope & { app: App },
  context: PathContext,
  route: Route<AnyHandler>,
  receive: () => Promise<ReceiveMessage>,
  send: Send,
  host: SocketHost,
) => WebSocketRequest<App>;
let runSocket: (socket: WebSocketRequest<unknown>) => Promise<void>;
let closeSocket: (socket: WebSocketRequest<unknown>) => Promise<void>;

/**
 * One WebSocket, as a socket handler sees it: accept (or close to deny), then receive and send
 * until either end closes. Created by the App for routes whose methods are `["WEBSOCKET"]`.
 *
 * Messages from the client are read ahead of the handler (up to 16 messages or about 64 KiB), so a
 * close is noticed (and `signal` aborts) even while the handler only sends; what the handler does
 * not read beyond that waits in the transport (see docs/asgi.md, "WebSocket", on back-pressure)
 * until the connection ends: the socket then reads on to its end, so `signal` aborts however many
 * messages the handler left unread.
 *
 * @typeParam App The App, e.g. `App<{ rooms: Map<string, Set<WebSocketRequest>> }>`.
 *
 * @example An echo route
 * ```ts
 * import { App, AsgiRouter, Route, type WebSocketRequest } from "@stellarator/stellarator/web";
 *
 * async function echo(socket: WebSocketRequest): Promise<void> {
 *   await socket.accept();
 *   for await (const message of socket) await socket.send(message);
 * }
 *
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/echo", { handler: echo, methods: ["WEBSOCKET"] })] }),
 * });
 * ```
 */
export class WebSocketRequest<App = unknown> {
  static {
    createSocket = (app, scope, context, route, receive, send, host) =>
      new WebSocketRequest(app, scope, context, route, receive, send, host);
    runSocket = (socket) => socket.#run();
    closeSocket = (socket) => socket.#shutdown();
  }

  /** The ASGI scope of the handshake, with `app` added. */
  readonly scope: WebSocketScope & { app: App };
  /** The path variables the router matched. */
  readonly context: PathContext;
  /** The App handling the socket, with its attributes. */
  readonly app: App;
  /** The route that matched. */
  readonly route: Route<AnyHandler>;

  #receive: () => Promise<ReceiveMessage>;
  #send: Send;
  #host: SocketHost;
  #state = HANDSHAKE;
  #answered = false;
  /** Resolves when the handshake is answered: that ends the time limit. */
  #answer = Promise.withResolvers<void>();
  /**
   * An answer (`accept()`, or `close()` before it) on its way to the bridge: resolves `true`
   * once it went out (or the client left), `false` when the bridge refused it and the handshake
   * is still to be answered.
   */
  #attempt: Promise<boolean> | undefined;
  #timedOut = false;
  #controller = new AbortController();
  #closeInfo: CloseInfo | undefined;
  #buffered: SocketMessage[] = [];
  /** The size of the messages in `#buffered`: bytes, or UTF-16 code units for text. */
  #bufferedSize = 0;
  #readers: PromiseWithResolvers<SocketMessage | null>[] = [];
  #pulling = false;
  #pending: TaskEntry[] = [];
  #holder: TaskHolder | undefined;
  /**
   * Aborts at the handshake's time limit, or when its client leaves before it is answered; made
   * only for a registration waiting for room.
   */
  #cancel: AbortController | undefined;
  /** Messages dropped since the socket closed. */
  #dropped = 0;
  /**
   * `#pull` reads on past the read-ahead's bound, to the disconnect behind the handler's unread
   * messages: the bridge says the connection has ended, or this side has sent its close (the
   * handler's `close()`, the App's shutdown), after which the bridge takes no message. Without
   * it, 16 messages unread hid the end of the socket for good when the server closed it:
   * `signal` never aborted, and the shutdown waited its whole time limit for the handler. The
   * close is its own reason because `connectionEnded()` knows only the bridge's own `receive`,
   * not one that ASGI middleware wraps (review of 2026-11-29).
   */
  #readToEnd = false;
  /** `close()` answered the handshake: the client got 403. */
  #denied = false;
  #ended = Promise.withResolvers<void>();

  private constructor(
    app: App,
    scope: WebSocketScope & { app: App },
    context: PathContext,
    route: Route<AnyHandler>,
    receive: () => Promise<ReceiveMessage>,
    send: Send,
    host: SocketHost,
  ) {
    this.app = app;
    this.scope = scope;
    this.context = context;
    this.route = route;
    this.#receive = receive;
    this.#send = send;
    this.#host = host;
    void connectionEnded(receive)?.then(() => {
      this.#readToEnd = true;
      // Before the answer the handshake's own paths see a client that left.
      if (this.#answered) this.#pull();
    });
  }

  /** The request path, percent-decoded (`scope.path`). */
  get path(): string {
    return this.scope.path;
  }

  /** The subprotocols the client offered, in its order. */
  get subprotocols(): readonly string[] {
    return this.scope.subprotocols;
  }

  /**
   * Aborts when the socket closes, from either end (reason: an `AbortError` `DOMException`), or
   * when the handshake was not answered within the request time limit (a `TimeoutError`).
   *
   * @returns The signal.
   */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** How the socket ended, or `undefined` while it is open (or the handshake is pending). */
  get closed(): CloseInfo | undefined {
    return this.#closeInfo;
  }

  /**
   * Accepts the handshake: the client's `open` event fires.
   *
   * @param options The subprotocol and extra response headers. Optional: defaults to `{}` (no
   *   subprotocol, no extra headers).
   * @returns Resolves once the bridge has the answer.
   * @throws {TypeError} When `options` is not an object of `subprotocol` and `headers`, a header
   *   name or value is invalid, or a header is one the server writes in the handshake itself
   *   (`sec-websocket-accept`, `sec-websocket-protocol`, `sec-websocket-extensions`, `upgrade`,
   *   `connection`, `content-length`, `transfer-encoding`).
   * @throws {Error} When the handshake was already answered, or the time limit has passed.
   * @throws {AsgiProtocolError} When the subprotocol was not offered.
   */
  async accept(options: AcceptOptions = {}): Promise<void> {
    // A list of pairs went out as headers named "0", "1"...; a Map's went missing; a misspelt
    // key (`subprotocols`), or the subprotocol given bare (`accept("chat")`), was ignored.
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `Invalid options ${describe(options)}: pass { subprotocol, headers }, e.g. ` +
          `{ subprotocol: ${typeof options === "string" ? describe(options) : '"chat"'} }`,
      );
    }
    rejectUnknownKeys(options, ["subprotocol", "headers"], "accept()");
    const headers: (readonly [Uint8Array, Uint8Array])[] = [];
    if (options.headers !== undefined) {
      for (const pair of headerPairs(options.headers)) {
        const [name, value] = checkedField(pair);
        // Refused here, where the mistake is, not by the bridge after the call (logged there with
        // a stack, and named after "websocket.accept", which the handler never wrote).
        const why = HANDSHAKE_FIELDS.get(name);
        if (why !== undefined) {
          throw new TypeError(`Invalid header "${name}" for accept(): ${why}`);
        }
        headers.push([encoder.encode(name), encoder.encode(value)]);
      }
    }
    if (this.#answered) {
      throw new Error(
        `Cannot accept ${this.#label} ${
          this.#timedOut
            ? "after the request time limit: the client got 408"
            : this.#denied
            ? "after close() denied it (the client got 403)"
            : "twice"
        }`,
      );
    }
    await this.#answerWith({
      type: "websocket.accept",
      subprotocol: options.subprotocol ?? null,
      headers,
    }, HANDSHAKE);
    if (this.#state === HANDSHAKE) this.#state = OPEN;
    this.#startTasks();
    this.#pull();
  }

  /**
   * The next message, or `null` once the socket is closed (then {@linkcode closed} says why).
   *
   * @returns The message.
   * @throws {Error} Before `accept()`.
   */
  receive(): Promise<SocketMessage | null> {
    if (!this.#answered) {
      return Promise.reject(new Error(`Cannot receive on ${this.#label}: accept() it first`));
    }
    const buffered = this.#buffered.shift();
    if (buffered !== undefined) {
      this.#bufferedSize -= buffered.length;
      this.#pull();
      return Promise.resolve(buffered);
    }
    if (this.#state === CLOSED) return Promise.resolve(null);
    const reader = Promise.withResolvers<SocketMessage | null>();
    this.#readers.push(reader);
    this.#pull();
    return reader.promise;
  }

  /**
   * Sends a message: a string as text, bytes as a binary message. Resolves once the bridge has
   * handed it to the transport (it waits while a slow client has 64 KiB unread, 256 KiB on
   * `deno`). On a closed socket it sends nothing and resolves, so a broadcast loop needs no
   * try/catch; a send still waiting when the socket closes is dropped so too (see docs/asgi.md,
   * WebSocket). A dropped message leaves `signal` aborted (and `closed` set) by the time its
   * send resolves: a send that resolves with `signal` not aborted has handed its message over.
   *
   * @param message The message.
   * @returns Resolves when sent or dropped.
   * @throws {TypeError} When `message` is neither a string nor a Uint8Array.
   * @throws {Error} Before `accept()`.
   */
  async send(message: SocketMessage): Promise<void> {
    if (typeof message !== "string" && !(message instanceof Uint8Array)) {
      throw new TypeError(`Invalid message ${describe(message)}: send a string or a Uint8Array`);
    }
    if (this.#state === HANDSHAKE || !this.#answered) {
      throw new Error(`Cannot send on ${this.#label}: accept() it first`);
    }
    if (this.#state === CLOSED || this.#state === CLOSING) {
      // Once per socket: a handler pushing in a loop would log each of millions.
      if (this.#dropped++ === 0) {
        this.#host.logOf(
          "debug",
          "Message dropped for a closed socket",
          `Dropped a message to ${this.#label}: the socket is closed`,
        );
      }
      // Resolving at once lets a broadcast loop skip a closed socket for free; a handler that
      // sends to its closed socket in a loop without looking at its signal would never let the
      // event loop turn (the whole server starved). Every 64th dropped send waits for a turn.
      if (this.#dropped % 64 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
      return;
    }
    try {
      await this.#send(
        typeof message === "string"
          ? { type: "websocket.send", text: message }
          : { type: "websocket.send", bytes: message },
      );
    } catch (error) {
      if (!this.#lost(error)) throw error;
    }
  }

  /**
   * Closes the socket; before `accept()`, denies the handshake (HTTP 403).
   *
   * @param code 1000 (normal closure); a registered code an endpoint may send (1001-1003,
   *   1007-1014); or 3000 to 4999 for the application's own codes. Optional: defaults to `1000`.
   * @param reason At most 123 bytes of UTF-8. Optional: defaults to `""` (no reason).
   * @returns Resolves once the close is under way.
   * @throws {AsgiProtocolError} For a code or reason the protocol does not allow, whether the
   *   socket is open, closing or closed; the socket stays as it was.
   */
  async close(code = 1000, reason = ""): Promise<void> {
    // Checked first: the bridge checks only a close it is sent, so on a socket the client had
    // left, or after a first close(), a bad code resolved silently.
    closeArguments({ type: "websocket.close", code, reason });
    if (this.#state === CLOSED && !this.#answered) {
      // The client left before the answer (seen by a registration waiting for room): there is
      // no one to deny, but the handler did answer, so its tasks start (see below).
      this.#denied = true;
      this.#markAnswered();
      return this.#startTasks();
    }
    if (this.#state === CLOSED || this.#state === CLOSING || this.#timedOut) return;
    const wasOpen = this.#answered;
    const state = this.#state;
    // Nothing may follow the close: not a second close when the handler returns, not a message.
    this.#state = CLOSING;
    const message: SendMessage = { type: "websocket.close", code, reason };
    if (!wasOpen) {
      // Denied from now on (an accept() made meanwhile must say so), unless the bridge refuses.
      this.#denied = true;
      // A client gone meanwhile is answered all the same: its tasks start, as after an accept()
      // it missed. Left held, each kept its reservation until shutdown (review of 2026-11-29).
      if (!await this.#answerWith(message, state)) return this.#startTasks();
    } else {
      try {
        await this.#send(message);
      } catch (error) {
        if (this.#lost(error)) return;
        // Refused (a code or reason the protocol does not allow): nothing was sent.
        if (this.#state === CLOSING) this.#state = state;
        throw error;
      }
      this.#readToEnd = true;
      this.#pull();
    }
    if (!wasOpen) {
      this.#startTasks();
      this.#ending({ code: 1006, reason: "" });
    }
  }

  /**
   * Schedules a background task, as `Request.registerBackground` does: it starts once the
   * handshake is answered (accepted or denied), runs under the App's `backgroundTaskTimeLimit`,
   * and is not run when the handler fails, times out or returns before answering. Inside a
   * background task, register without awaiting, for the reason given there.
   *
   * A registration waiting for room ends, its task not run, when the handshake's time limit
   * passes, its client leaves before it is answered, or `options.signal` aborts; an accepted
   * socket that closes does not end it, as a complete response does not end a request's.
   *
   * @param task The task.
   * @param options The task's name for log lines, and a signal that ends the wait for room.
   * @returns `true` once the task is registered, `false` when it was not (logged as not run).
   * @throws {TypeError} When `task` is not a function, or `options` is not `{ name, signal }`
   *   with a string name and an `AbortSignal`.
   * @throws {RangeError} When the handshake is not answered yet and the socket already holds
   *   `backgroundTaskLimit` tasks: accept (or close) first, or raise the limit.
   */
  async registerBackground(
    task: (signal: AbortSignal) => unknown,
    options?: RegisterBackgroundOptions,
  ): Promise<boolean> {
    const checked = checkedTaskOptions(task, options);
    return await this.#host.runner.register(
      this.#holder ??= this.#makeHolder(),
      task,
      checked?.name,
      checked?.signal,
    );
  }

  /** The socket as the tasks it registers see it (a `TaskHolder`), made on first use. */
  #makeHolder(): TaskHolder {
    const runner = this.#host.runner;
    return {
      heldTasks: () => this.#pending.length,
      refusal: () => this.#timedOut ? this.#timedOutReason : undefined,
      place: (entry) => {
        if (this.#timedOut) {
          runner.discard(entry, this.#timedOutReason, true);
          return false;
        }
        if (this.#answered) runner.start(entry);
        else {
          runner.hold(entry);
          this.#pending.push(entry);
        }
        return true;
      },
      cancellation: () => this.#cancellation(),
      waitSignal: () => {
        const cancel = this.#cancel ??= new AbortController();
        // Nothing is read before accept(), so a client that left went unnoticed and the handler
        // waited as long as the slots stayed taken (review of 2026-11-29). Before an answer the
        // bridge has no message to give but the disconnect.
        if (!this.#answered) this.#pull();
        if (this.#cancellation() !== undefined) cancel.abort();
        return cancel.signal;
      },
      tooManyTasks: (held) =>
        new RangeError(
          `Cannot register another background task for ${this.#label} before it is ` +
            `answered: it already holds ${held}, the backgroundTaskLimit; accept or close it ` +
            `first, or raise backgroundTaskLimit`,
        ),
    };
  }

  /** Why a registration should not wait for room now (`TaskHolder.cancellation`). */
  #cancellation(): string | undefined {
    if (this.#timedOut) return this.#timedOutReason;
    if (!this.#answered && this.#state === CLOSED) {
      return `the client of ${this.#label} went away before its handshake was answered`;
    }
    return undefined;
  }

  /** The messages, until the socket closes. */
  async *[Symbol.asyncIterator](): AsyncGenerator<SocketMessage, void, undefined> {
    for (;;) {
      const message = await this.receive();
      if (message === null) return;
      yield message;
    }
  }

  #markAnswered(): void {
    this.#answered = true;
    this.#answer.resolve();
  }

  /**
   * Sends the handler's answer to the handshake. A second answer is refused from the start (see
   * `accept()`), but one the bridge refuses (a subprotocol not offered, a code not allowed) did
   * not answer: the state goes back to `state` and the handler may answer again, within the
   * time limit.
   *
   * @returns `false` when the client left meanwhile.
   */
  async #answerWith(message: SendMessage, state: number): Promise<boolean> {
    this.#answered = true;
    const attempt = Promise.withResolvers<boolean>();
    this.#attempt = attempt.promise;
    let sent = true;
    try {
      await this.#send(message);
    } catch (error) {
      // A client that left during the handshake is no failure of the handler: the socket is
      // closed, as `closed` and `signal` say, and sends are dropped.
      if (!this.#lost(error)) {
        this.#answered = false;
        this.#denied = false;
        if (this.#state === CLOSING) this.#state = state;
        attempt.resolve(false);
        throw error;
      }
      sent = false;
    }
    this.#answer.resolve();
    attempt.resolve(true);
    return sent;
  }

  /** How log lines and error messages name the socket; the path rendered by `logQuoted`. */
  get #label(): string {
    return `WebSocket ${logQuoted(this.scope.path)}`;
  }

  get #timedOutReason(): string {
    return `its handshake ${this.#label} hit the request time limit of ${
      seconds(this.#host.limitMs ?? 0)
    }`;
  }

  /**
   * Keeps one receive() pending while open and the read-ahead has room: messages are read ahead
   * of the handler, a close seen at once. Reading ahead one message only, a handler that never
   * reads (it only pushes) missed the close of a client that had sent it one message.
   */
  #pull(): void {
    if (this.#pulling || this.#state === CLOSED) return;
    // Once the connection has ended, or this side has closed, the bridge takes no more
    // messages: reading on to its disconnect costs nothing more, and without it a socket with
    // the read-ahead full never saw its end (see `#readToEnd`).
    if (
      !this.#readToEnd &&
      (this.#buffered.length >= READ_AHEAD_MESSAGES || this.#bufferedSize >= READ_AHEAD_SIZE)
    ) {
      return;
    }
    this.#pulling = true;
    received(this.#receive).then((message) => {
      this.#pulling = false;
      if (message.type === "websocket.receive") {
        const data = message.text ?? message.bytes!;
        const reader = this.#readers.shift();
        if (reader !== undefined) reader.resolve(data);
        else {
          this.#buffered.push(data);
          this.#bufferedSize += data.length;
        }
        this.#pull();
      } else if (message.type === "websocket.disconnect") {
        this.#ending(message as WebSocketDisconnectMessage);
      }
    }, (error) => {
      this.#pulling = false;
      for (const reader of this.#readers.splice(0)) reader.reject(error);
    });
  }

  /**
   * Whether `error` says the client is gone (`ClientDisconnected`, from a send); the socket then
   * ends as if its disconnect had been read, and `signal` aborts.
   */
  #lost(error: unknown): boolean {
    if ((error as Error)?.name !== "ClientDisconnected") return false;
    const code = (error as { code?: unknown }).code;
    this.#ending({ code: typeof code === "number" ? code : 1006, reason: "" });
    return true;
  }

  #ending(info: CloseInfo): void {
    if (this.#state === CLOSED) return;
    this.#state = CLOSED;
    this.#closeInfo = { code: info.code, reason: info.reason };
    this.#controller.abort(new DOMException(`The WebSocket closed (${info.code})`, "AbortError"));
    for (const reader of this.#readers.splice(0)) reader.resolve(null);
    if (!this.#answered) this.#cancel?.abort();
    this.#ended.resolve();
  }

  #startTasks(): void {
    const runner = this.#host.runner;
    for (const entry of this.#pending.splice(0)) runner.start(entry);
  }

  #discardTasks(reason: string): void {
    const runner = this.#host.runner;
    for (const entry of this.#pending.splice(0)) runner.discard(entry, reason, true);
  }

  async #run(): Promise<void> {
    const limitMs = this.#host.limitMs;
    const work = (async () => await this.route.handler(this))();
    const outcome = work.then(succeeded, failure);
    let result: Outcome | undefined;
    if (limitMs === undefined) result = await outcome;
    else {
      // The limit covers the handshake: it is cleared as soon as the handler answers it.
      const limited = clearableDeadline(this.#answer.promise, limitMs);
      const denied = limited.promise.then(
        (): typeof ANSWERED => ANSWERED,
        () => this.#timeOut(limitMs),
      );
      let first: Outcome | typeof ANSWERED | undefined;
      try {
        first = await Promise.race([outcome, denied]);
      } finally {
        limited.clear();
      }
      result = first === ANSWERED ? await outcome : first;
      if (this.#timedOut || result === undefined) {
        // The 408 ends the ASGI call, as it does for HTTP requests: a handler that ignores its
        // signal must not hold the server's shutdown. Its end is only logged. (A handler that
        // returned while the 408 was going out waits for it, or the bridge would see the call
        // end mid-answer.)
        await denied;
        void outcome.then((late) => {
          if (late.ok) return;
          this.#host.logOf(
            "debug",
            "Late socket handler stopped",
            `Route "${this.route.path}" on ${this.#label} stopped after its time limit:`,
            late.error,
          );
        });
        return;
      }
    }
    if (!result.ok) {
      this.#discardTasks(`the handler of ${this.#label} failed`);
      this.#host.log.error(`Route "${this.route.path}" on ${this.#label} failed:`, result.error);
      if (!this.#answered) {
        this.#markAnswered();
        return await this.#deny(500, "Internal Server Error");
      }
      if (this.#state === OPEN) await this.#send({ type: "websocket.close", code: 1011 });
      return;
    }
    if (!this.#answered) {
      this.#markAnswered();
      this.#discardTasks(`${this.#label} was never accepted`);
      this.#host.log.error(
        `Route "${this.route.path}" on ${this.#label} returned without accepting; sent 500`,
      );
      return await this.#deny(500, "Internal Server Error");
    }
    if (this.#state === OPEN) await this.#send({ type: "websocket.close", code: 1000 });
  }

  /** The handshake was not answered within the request time limit: 408, signal aborted. */
  async #timeOut(limitMs: number): Promise<undefined | typeof ANSWERED> {
    // An answer on its way when the limit passed counts, unless the bridge refuses it (then
    // #answered is false again, unless the handler answered anew meanwhile).
    if (this.#answered) await this.#attempt;
    if (this.#answered) return ANSWERED;
    this.#timedOut = true;
    this.#markAnswered();
    this.#host.logOf(
      "warn",
      `Route "${this.route.path}" not accepted within the request time limit: answered 408`,
      `${this.#label} was not accepted within the request time limit of ${
        seconds(limitMs)
      }; answered 408`,
    );
    this.#controller.abort(
      new DOMException(`Request time limit of ${seconds(limitMs)} exceeded`, "TimeoutError"),
    );
    this.#discardTasks(this.#timedOutReason);
    this.#cancel?.abort();
    try {
      await this.#deny(408, "Request time limit exceeded");
    } catch (error) {
      // The client left meanwhile, say: nobody is left to answer.
      this.#host.logOf(
        "debug",
        "WebSocket 408 not sent",
        `Could not answer ${this.#label} with 408:`,
        error,
      );
    }
    return undefined;
  }

  async #deny(status: number, text: string): Promise<void> {
    const body = encoder.encode(text);
    await this.#send({
      type: "websocket.http.response.start",
      status,
      headers: [
        [encoder.encode("content-type"), encoder.encode("text/plain; charset=utf-8")],
        [encoder.encode("content-length"), encoder.encode(String(body.length))],
      ],
    });
    await this.#send({ type: "websocket.http.response.body", body });
    this.#ending({ code: 1006, reason: "" });
  }

  /** App shutdown: close with 1012 and wait for the end of the socket. */
  async #shutdown(): Promise<void> {
    if (this.#state === OPEN) {
      await this.#send({ type: "websocket.close", code: 1012, reason: "Service restart" })
        .catch(() => {});
      this.#readToEnd = true;
      this.#pull();
    }
    await this.#ended.promise;
  }
}

/** The open sockets of each App (by its host), closed at shutdown. */
const socketsByHost = new WeakMap<SocketHost, Set<WebSocketRequest<unknown>>>();

/**
 * Serves a `websocket` scope with the route's handler; resolves when the handler is done.
 *
 * @param app The App.
 * @param scope The scope, to which `app` is added.
 * @param context The matched path variables.
 * @param route The route, whose handler takes a {@linkcode WebSocketRequest}.
 * @param receive The ASGI receive callable.
 * @param send The ASGI send callable.
 * @param host What the socket needs from the App.
 * @returns Resolves when the handler has returned and the socket is closed.
 */
export async function handleSocket<App>(
  app: App,
  scope: WebSocketScope,
  context: PathContext,
  route: Route<AnyHandler>,
  receive: () => Promise<ReceiveMessage>,
  send: Send,
  host: SocketHost,
): Promise<void> {
  await receive(); // websocket.connect
  const webScope = scope as WebSocketScope & { app: App };
  webScope.app = app;
  const socket = createSocket(app, webScope, context, route, receive, send, host);
  let sockets = socketsByHost.get(host);
  if (sockets === undefined) socketsByHost.set(host, sockets = new Set());
  sockets.add(socket as WebSocketRequest<unknown>);
  try {
    await runSocket(socket as WebSocketRequest<unknown>);
  } finally {
    sockets.delete(socket as WebSocketRequest<unknown>);
  }
}

const DENIALS = { 403: "Forbidden", 404: "Not Found", 503: "Service Unavailable" } as const;

/**
 * Denies a handshake no route serves: 404 for an unknown path, 403 for a path without a
 * WebSocket route (as the ASGI spec's plain `websocket.close`), 503 while the App shuts down.
 *
 * @param receive The ASGI receive callable.
 * @param send The ASGI send callable.
 * @param status 404, 403 or 503.
 * @returns Resolves once the denial is sent.
 */
export async function denySocket(
  receive: () => Promise<ReceiveMessage>,
  send: Send,
  status: keyof typeof DENIALS,
): Promise<void> {
  await receive();
  const body = encoder.encode(DENIALS[status]);
  await send({
    type: "websocket.http.response.start",
    status,
    headers: [
      [encoder.encode("content-type"), encoder.encode("text/plain; charset=utf-8")],
      [encoder.encode("content-length"), encoder.encode(String(body.length))],
    ],
  });
  await send({ type: "websocket.http.response.body", body });
}

/**
 * Closes every open socket of an App with 1012 and waits, within `graceMs`, for them to end.
 *
 * @param host The App's host.
 * @param graceMs How long to wait.
 * @returns Resolves when they have ended or the time is up (logged).
 */
export async function closeSockets(host: SocketHost, graceMs: number): Promise<void> {
  const sockets = socketsByHost.get(host);
  if (sockets === undefined || sockets.size === 0) return;
  const all = Promise.all([...sockets].map((socket) => closeSocket(socket)));
  const limited = clearableDeadline(all, graceMs);
  try {
    await limited.promise;
  } catch {
    host.log.warn(
      `${sockets.size} WebSocket(s) still open after the shutdown grace period of ${
        seconds(graceMs)
      }; shutting down without them`,
    );
  } finally {
    limited.clear();
  }
}

/**
 * Answers an HTTP request to a path served only by a WebSocket route: 426 Upgrade Required.
 *
 * @param send The ASGI send callable.
 * @returns Resolves once the response is sent.
 */
export async function sendUpgradeRequired(send: Send): Promise<void> {
  const body = encoder.encode("Upgrade Required");
  await send({
    type: "http.response.start",
    status: 426,
    headers: [
      [encoder.encode("content-type"), encoder.encode("text/plain; charset=utf-8")],
      [encoder.encode("content-length"), encoder.encode(String(body.length))],
      [encoder.encode("upgrade"), encoder.encode("websocket")],
    ],
  });
  await send({ type: "http.response.body", body });
}
