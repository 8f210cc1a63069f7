/**
 * The life of one request in the web layer: the state machine behind the public `Request`.
 * Private: `web.ts` keeps the public API and delegates here.
 *
 * A request goes PENDING (no response yet) → SENDING (`http.response.start` went out) → COMPLETE
 * (the whole response went out, or was dropped with the client). Around that:
 *
 * - **The ASGI call ends with the response.** The bridge's call resolves once the response is
 *   complete, not when the handler returns: a handler that goes on afterwards (typically waiting
 *   for room to register background tasks) is counted by the App, not as a request in flight of
 *   the bridge, so it cannot hold the server's `shutdownTimeout` busy. The App's own shutdown
 *   releases such waits at once (see `BackgroundRunner.close`).
 * - **The request time limit covers the response only.** It is disarmed the moment the response
 *   is complete; it never drops a task registered after a complete response.
 * - **The limit answers for the handler.** When it passes, the exchange aborts `request.signal`,
 *   sends the 408 (or cuts the stream off) and ends the bridge's call; the handler is not raced
 *   but left to settle, which is then logged at debug level. The request stops counting for the
 *   App's shutdown at the 408, so a handler that ignores its signal cannot hold the shutdown.
 * - **Shutdown answers as the limit does.** A request still running when the App's shutdown grace
 *   period ends gets the same treatment with `503` (`Exchange.abandonAll`): the signal aborts, a
 *   response not yet started is answered, a stream is cut off, and the handler is abandoned. The
 *   App reaches those requests through a list linked through the exchanges themselves: two
 *   fields and a few stores per request, no allocation (`deno task bench:profile --targets=app`,
 *   2026-11-25: 0.02–0.04 KB more per request, time within the noise).
 * - **A stream cut off at the limit is intended**: the exchange raises a `ResponseCutOffError`,
 *   which the bridge turns into a closed connection and one warning line, no stack.
 *
 * What a request costs, and why it is shaped so (figures in docs/performance.md):
 *
 * - **A fixed response goes out in the handler's turn.** The bridge's `send` returns one shared
 *   promise, `ACCEPTED`, for a message it took at once; `respondWith` recognises it for the head
 *   and sends the body straight after, so the request completes before the handler's first await
 *   returns, with no async frame of its own. Anything else (a streamed body, middleware whose
 *   `send` answers later) takes the general path, `#stream` or `#finishFixed`.
 * - **The call is a promise only when it must be.** `handle` makes a promise for the bridge's
 *   call only when the handler has not responded by its first await; once the response is
 *   complete, `#run` cannot reject (a later failure is logged), so nobody needs to wait for it.
 * - **No closure per request for the handler**: the handler and its request travel as a pair.
 *
 * @module
 */
import { abortable } from "@std/async/abortable";
import { Detachable } from "./abandon.ts";
import { BodyTooLargeError } from "./body_limit.ts";
import type {
  HttpDisconnectMessage,
  HttpRequestMessage,
  HttpScope,
  Receive,
  ReceiveMessage,
  Send,
  SendMessage,
} from "../_asgi/types.ts";
import { AsgiProtocolError, ResponseCutOffError } from "../asgi.ts";
import { ACCEPTED } from "../_asgi/promises.ts";
import {
  type BackgroundRunner,
  failure,
  type Outcome,
  SUCCESS,
  type Task,
  type TaskEntry,
  type TaskHolder,
  type TaskLogger,
} from "./background.ts";
import type { Deadline, DeadlineQueue } from "./deadline.ts";
import { describe, errorText } from "../_common/describe.ts";
import { logQuoted } from "../_common/log_text.ts";
import { seconds } from "./options.ts";
import {
  EMPTY,
  encodedHeaders,
  lockedStreamError,
  Response,
  sendFixed,
  SERVER_ERROR_RESPONSE,
  TIMEOUT_RESPONSE,
  UNAVAILABLE_RESPONSE,
} from "./response.ts";

/** A handler, called with its request (a pair rather than a closure: one object less). */
export type Handler<R> = (request: R) => Promise<void> | void;

/** What a request needs from its App; shared by all requests of one App. */
export interface Host {
  /** Runs the background tasks. */
  readonly runner: BackgroundRunner;
  /** Where log lines go. */
  readonly log: TaskLogger;
  /**
   * Writes a line a client can cause per request, within the App's log limit (see
   * _common/log_limit.ts); `data` follows the line as given.
   */
  readonly logOf: (level: "warn" | "debug", kind: string, line: string, ...data: unknown[]) => void;
  /** The request time limit in milliseconds, or `undefined` for none. */
  readonly limitMs: number | undefined;
  /** The shutdown grace period in milliseconds, for the messages of requests abandoned then. */
  readonly graceMs: number;
  /** The deadlines of the request time limit, when there is one. */
  readonly deadlines: DeadlineQueue | undefined;
  /** Handlers still running (the tail after a complete response included), awaited at shutdown. */
  active: number;
  /**
   * The newest of the requests counted in `active`; each links to the one before it, so that
   * shutdown can reach those still running when its grace period ends (`Exchange.abandonAll`).
   */
  newest: Exchange | undefined;
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

/**
 * A handler's success that returned a value. The value is ignored, but named when no response
 * was given: a handler written as for `Deno.serve` or Hono returns its response.
 */
type Returned = { ok: true; returned: unknown };

/** What a handler that never responded did, and the fix when it returned a value. */
function withoutResponding(returned: unknown): string {
  if (returned === undefined) {
    return "returned without responding; await request.respondWith() before the handler returns";
  }
  if (returned instanceof Response) {
    return "returned a Response without responding; pass it to request.respondWith() instead";
  }
  if (returned instanceof globalThis.Response) {
    return "returned a Fetch Response without responding; pass a Response from the web layer " +
      "to request.respondWith() instead";
  }
  return `returned ${
    describe(returned)
  } without responding; pass a Response to request.respondWith() instead`;
}

/** An error of a request whose response is complete, when even the App's logger failed. */
function reportLate(error: unknown): void {
  console.error("Unreported error after a complete response:", error);
}

/**
 * What `receive()` gives, as a promise, whatever the callable does: ASGI middleware's may throw
 * or return a message. Called bare, a throw escaped `bytes()`, `receive()` and the `signal`
 * getter (and a socket's `accept()`, its handshake answered all the same), and left the reader
 * marked as pulling for good, so that the next `receive()` never settled.
 *
 * @param receive The ASGI `receive` callable.
 * @returns Its message, or its failure, as a promise.
 */
export function received(receive: Receive): Promise<ReceiveMessage> {
  try {
    return Promise.resolve(receive());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The outcome of a response that went out whole in one turn. */
const SENT: Promise<Outcome> = Promise.resolve(SUCCESS);

const encoder = new TextEncoder();
const DISCONNECT: HttpDisconnectMessage = Object.freeze({ type: "http.disconnect" });
/**
 * The bridge's `http.disconnect` of each request it ended with its client still there (a body
 * over `maxBodySize`, stalled, malformed, or a failed `Request` stream), by the reason
 * `request.signal` aborted with (`Exchange.#leaving`): what `request.receive()` then passes on,
 * and what the log lines name. Filled only then: nothing per request.
 */
const farewells = new WeakMap<object, HttpDisconnectMessage>();

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

/** The request time limit passed before the response was complete: 408, or the stream cut off. */
const TIME_LIMIT = 1;
/** Shutdown's grace period ended before the response was complete: 503, or the stream cut off. */
const SHUTDOWN = 2;

/** One request's state: receiving, responding, its time limit and its pending tasks. */
export class Exchange implements TaskHolder {
  /** The request's scope. */
  readonly scope: HttpScope;
  /** The pattern of the route that matched, for log lines. */
  readonly routePath: string;
  #receive: Receive;
  #sendRaw: Send;
  #host: Host;
  #phase: typeof PENDING | typeof SENDING | typeof COMPLETE = PENDING;
  /**
   * The handler's whole response is in `send`'s hands: a fixed body from `respondWith` on, a
   * stream from its final message on. The time limit has nothing left to wait for then, and a
   * disconnect is no news to the handler.
   */
  #lastChunk = false;
  /** The head of a streamed response, while a `send` that takes its time has it. */
  #head: Promise<void> | undefined;
  /** Settles when a response started by `respondWith` is fully sent (or fails). */
  #sending: Promise<Outcome> | undefined;
  /** No more sending: the request is over (the 408 went out, or the handler has returned). */
  #ended = false;
  /** Why the exchange answered in the handler's stead (`TIME_LIMIT`, `SHUTDOWN`), if it did. */
  #overruled: typeof TIME_LIMIT | typeof SHUTDOWN | undefined;
  /** What the client got when the exchange was overruled, for the line of a late response. */
  #overruledGot: string | undefined;
  /** The request counts in the App's `active` (see #uncount). */
  #counted = false;
  /**
   * The request counted before this one, in the list `host.newest` heads; `#newer` the one after.
   * A list through the requests themselves rather than a `Set`: linking and unlinking are a few
   * stores, with nothing allocated per request (see `Exchange.abandonAll`).
   */
  #older: Exchange | undefined;
  #newer: Exchange | undefined;
  #disconnected = false;
  /** The App answered 500 in the handler's stead: the bridge's http.disconnect then is no leaving. */
  #servedError = false;
  #controller: AbortController | undefined;
  #abortReason: unknown;
  /** The request time limit while it is armed. */
  #limit: Deadline | undefined;
  /** The bridge's call: resolved once the response is complete or the handler is done. */
  #call: PromiseWithResolvers<void> | undefined;
  /** Settles once the time limit's 408 (or cut-off) has settled the call; never rejects. */
  #answered: Promise<void> | undefined;
  /** Tasks registered before the response was sent; they hold reservations. */
  #pending: TaskEntry[] = NO_TASKS;
  // Receiving: one underlying receive() call at a time, at most one message read ahead.
  #pulling = false;
  #buffered: HttpRequestMessage | undefined;
  #readers: PromiseWithResolvers<HttpRequestMessage | HttpDisconnectMessage>[] = NO_READERS;
  #watching = false;
  #bodyRead = false;
  /** `receive()` handed out part of the body: `bytes()` can no longer return all of it. */
  #chunksTaken = false;
  /** The body `bytes()` reads or has read: every call gets this one promise. */
  #body: Promise<Uint8Array> | undefined;

  /**
   * Creates the state of one request.
   *
   * @param host The App's shared state.
   * @param scope The scope.
   * @param routePath The matched route's pattern.
   * @param receive The bridge's `receive`.
   * @param send The bridge's `send`.
   */
  constructor(host: Host, scope: HttpScope, routePath: string, receive: Receive, send: Send) {
    this.#host = host;
    this.scope = scope;
    this.routePath = routePath;
    this.#receive = receive;
    this.#sendRaw = send;
  }

  /**
   * The request's signal, made on first use.
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
   * The next ASGI message of the request; see `Request.receive()`.
   *
   * @returns The message.
   */
  receive(): Promise<HttpRequestMessage | HttpDisconnectMessage> {
    const body = this.#body;
    if (!this.#bodyRead) {
      // The body belongs to bytes() once it has been called: a chunk taken here would be missing
      // from what it returns. What follows the body is anyone's.
      if (body !== undefined) return body.then(() => this.#next(), () => this.#next());
      this.#chunksTaken = true;
    }
    return this.#next();
  }

  /** The next message, for `receive()` and `bytes()`. */
  #next(): Promise<HttpRequestMessage | HttpDisconnectMessage> {
    const buffered = this.#buffered;
    if (buffered !== undefined) {
      this.#buffered = undefined;
      this.#readAhead();
      return Promise.resolve(buffered);
    }
    if (this.#disconnected) return Promise.resolve(this.#farewell());
    if (!this.#pulling && this.#readers.length === 0) {
      // The common case: one reader, nothing read ahead. The bridge's own promise serves it,
      // without a queued reader and a promise of ours (some 0.2 µs of a POST's server CPU).
      this.#pulling = true;
      return received(this.#receive).then((message) => this.#took(message), (error) => {
        this.#failed(error);
        throw error;
      });
    }
    const reader = Promise.withResolvers<HttpRequestMessage | HttpDisconnectMessage>();
    if (this.#readers.length === 0) this.#readers = [reader];
    else this.#readers.push(reader);
    this.#pull();
    return reader.promise;
  }

  /**
   * The whole request body; see `Request.bytes()`.
   *
   * @returns The body.
   */
  bytes(): Promise<Uint8Array> {
    // A call while an earlier one still reads gets the same promise: two readers would split
    // the chunks between them.
    if (this.#body !== undefined) return this.#body;
    if (this.#chunksTaken) {
      return Promise.reject(
        new TypeError(
          `Cannot read the body of ${this.#label} with bytes() or text(): it was consumed ` +
            `with receive(); keep the chunks or call bytes() or text() instead of receive()`,
        ),
      );
    }
    // A small body comes in one message: no async frame and no list of chunks for it.
    return this.#body = this.#next().then((message) => {
      if (message.type === "http.disconnect") throw this.#disconnectReason();
      if (!message.more_body) return message.body;
      return this.#restOfBody([message.body], message.body.length);
    });
  }

  /** Reads the messages after the first of a body that came in several, and joins them all. */
  async #restOfBody(chunks: Uint8Array[], size: number): Promise<Uint8Array> {
    for (;;) {
      const message = await this.#next();
      if (message.type === "http.disconnect") throw this.#disconnectReason();
      chunks.push(message.body);
      size += message.body.length;
      if (!message.more_body) break;
    }
    const body = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      body.set(chunk, offset);
      offset += chunk.length;
    }
    return body;
  }

  /**
   * Sends the response; see `Request.respondWith()`.
   *
   * @param response The response.
   * @returns Resolves when the response is sent, dropped or ignored.
   */
  respondWith(response: Response): Promise<void> {
    if (!(response instanceof Response)) {
      // Response is also a global: the likeliest slip is the Fetch one, so name it.
      const fetchResponse = (response as unknown) instanceof globalThis.Response;
      return Promise.reject(
        new TypeError(
          `Invalid response ${fetchResponse ? "a Fetch Response" : describe(response)}: pass a ` +
            `Response from the web layer${
              fetchResponse ? ' (import { Response } from "@stellarator/stellarator/web")' : ""
            }`,
        ),
      );
    }
    if (this.#overruled !== undefined) {
      // A body the bridge refused before the limit passed: it answered, and no 408 or 503 went.
      const refused = this.#abortReason;
      const got = !(refused instanceof BodyTooLargeError)
        ? this.#overruledGot
        : `the client got ${this.#phase === PENDING ? 413 : "a response cut off"} (its body ` +
          `exceeded maxBodySize ${refused.maxBodySize})`;
      this.#host.logOf(
        "debug",
        "Late response ignored",
        `Ignored the response of route "${this.routePath}" to ${this.#label}: it came after ` +
          `${this.#overruledBy}; ${got}`,
      );
      this.#closeUnsent(response.body);
      return Promise.resolve();
    }
    if (this.#phase !== PENDING || this.#ended) {
      this.#closeUnsent(response.body);
      // The handler ended without responding after its client left: nothing was sent, and a
      // response to a client that has gone is dropped silently.
      if (this.#phase === PENDING && this.#disconnected && !this.#servedError) {
        return Promise.resolve();
      }
      return Promise.reject(
        new Error(
          this.#phase === PENDING
            ? `Cannot respond to ${this.#label} after route "${this.routePath}"'s handler ` +
              `ended without responding (the client got 500): await respondWith() in the handler`
            : `Cannot respond to ${this.#label} twice: route "${this.routePath}" already responded`,
        ),
      );
    }
    if (this.#disconnected) {
      this.#complete();
      this.#closeUnsent(response.body);
      return Promise.resolve();
    }
    const body = response.body;
    if (!(body instanceof Uint8Array)) {
      if (streamedBodies.has(body)) {
        return Promise.reject(
          new TypeError(
            "Cannot send the streamed body of this Response again: a stream is read once; " +
              "make a new Response (and body) for each request",
          ),
        );
      }
      // Locked after the Response was made (which refuses one locked then): found out by the
      // stream's first read, after the head, it got the client a 200 cut off. Looked at after
      // the check above: a stream the App is still sending is locked by the App's own reader.
      if (body instanceof ReadableStream && body.locked) return Promise.reject(lockedStreamError());
      streamedBodies.add(body);
    }
    this.#phase = SENDING;
    if (body instanceof Uint8Array) {
      // A fixed body: head and body go out in this turn when the bridge takes each at once
      // (`ACCEPTED`), with no async frame and no await; otherwise the rest waits its turn.
      let start: Promise<void>;
      let end: Promise<void>;
      this.#lastChunk = true;
      try {
        start = this.#sendRaw({
          type: "http.response.start",
          status: response.status,
          headers: encodedHeaders(response),
        });
        if (start !== ACCEPTED) return this.#track(this.#finishFixed(start, body));
        end = this.#sendRaw({ type: "http.response.body", body, more_body: false });
      } catch (error) {
        // A send that throws (middleware's, say) fails the response as a rejected send would.
        return this.#track(Promise.reject(error));
      }
      if (end !== ACCEPTED) return this.#track(Promise.resolve(end).then(() => this.#sent()));
      this.#sent();
      this.#sending = SENT;
      return ACCEPTED;
    }
    return this.#track(this.#stream(response, body));
  }

  /**
   * Closes the streamed body of a response that will not be sent (ignored, dropped or refused):
   * no one else reads it, and left open it held what it reads (a file's `readable` kept its
   * file descriptor, one per late response). A stream already sent, perhaps still being sent to
   * another request, is left alone.
   */
  #closeUnsent(body: Response["body"]): void {
    if (body instanceof Uint8Array || streamedBodies.has(body)) return;
    streamedBodies.add(body);
    this.#closeStream(body);
  }

  /** Closes a streamed body without waiting for it; a failure to close is logged (debug). */
  #closeStream(body: AsyncIterable<unknown>): void {
    try {
      Promise.resolve(body[Symbol.asyncIterator]().return?.()).catch((error) =>
        this.#host.log.debug(`The unsent streamed body of ${this.#label} failed to close:`, error)
      );
    } catch (error) {
      // A locked ReadableStream refuses a second iterator: its reader is the one to close it.
      this.#host.log.debug(`The unsent streamed body of ${this.#label} failed to close:`, error);
    }
  }

  /** Asks a body no one reads any more to close, without waiting; a failure is logged. */
  #closeDetached(source: Detachable<unknown>): void {
    source.return().catch((error) =>
      this.#host.log.debug(`The streamed body of ${this.#label} failed to close:`, error)
    );
  }

  /** Keeps the outcome of a response being sent, for `#run`. */
  #track(sent: Promise<void>): Promise<void> {
    // This handles a rejection, so a handler that does not await the result leaves no
    // unhandled rejection behind; the App reports a failure either way.
    this.#sending = sent.then(succeeded, failure);
    return sent;
  }

  /**
   * Schedules a background task; see `Request.registerBackground()`.
   *
   * @param task The task.
   * @param name Its name for log lines.
   * @param signal Ends a wait for room.
   * @returns `true` once the task is accepted, `false` when it ended (logged) without running.
   */
  registerBackground(
    task: Task,
    name: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    return this.#host.runner.register(this, task, name, signal);
  }

  /**
   * Tasks registered before the response was complete, waiting for it (`TaskHolder`).
   *
   * @returns How many.
   */
  heldTasks(): number {
    return this.#pending.length;
  }

  /**
   * Why a task registered now would not run (`TaskHolder`).
   *
   * @returns The reason, or `undefined`.
   */
  refusal(): string | undefined {
    return this.#overruled !== undefined ? this.#overruledReason : undefined;
  }

  /**
   * Takes a task that holds a reservation (`TaskHolder`): it starts once the response is
   * complete, and never runs if the request times out or ends without responding.
   *
   * @param entry The task.
   * @returns Whether it was taken (held or started) rather than discarded.
   */
  place(entry: TaskEntry): boolean {
    const runner = this.#host.runner;
    if (this.#overruled !== undefined) {
      runner.discard(entry, this.#overruledReason, true);
      return false;
    }
    if (this.#phase === COMPLETE) runner.start(entry);
    else if (this.#ended) {
      runner.discard(entry, `${this.#label} never responded`, true);
      return false;
    } else {
      runner.hold(entry);
      if (this.#pending.length === 0) this.#pending = [entry];
      else this.#pending.push(entry);
    }
    return true;
  }

  /**
   * The error of a registration beyond `backgroundTaskLimit` before responding (`TaskHolder`).
   *
   * @param held The tasks the request holds.
   * @returns The error.
   */
  tooManyTasks(held: number): RangeError {
    return new RangeError(
      `Cannot register another background task for ${this.#label} before it responds: it ` +
        `already holds ${held}, the backgroundTaskLimit; respond first, or raise ` +
        `backgroundTaskLimit`,
    );
  }

  /**
   * Why a registration should not wait for room (`TaskHolder`): `request.signal` has aborted.
   * Before the response is complete that is the time limit, the client leaving, or shutdown;
   * after it, only shutdown, which releases every wait anyway.
   *
   * @returns The reason, or `undefined`.
   */
  cancellation(): string | undefined {
    if (this.#overruled !== undefined) return this.#overruledReason;
    if (this.#abortReason === undefined) return undefined;
    if (!this.#disconnected) return `its request ${this.#label} was abandoned at shutdown`;
    const reason = this.#abortReason;
    if (reason instanceof BodyTooLargeError) {
      return `the body of its request ${this.#label} exceeded maxBodySize before room freed`;
    }
    return farewells.has(reason as object)
      ? `its request ${this.#label} ended before room freed: ${this.#endedAfter}`
      : `the client of its request ${this.#label} went away before room freed`;
  }

  /**
   * Aborts when a registration waiting for room should give up (`TaskHolder`): it is
   * `request.signal`. Asking for it watches the connection, as reading `request.signal` does, so
   * a client that leaves ends the wait even if the handler never looked at the signal.
   *
   * @returns The signal.
   */
  waitSignal(): AbortSignal {
    return this.signal;
  }

  /**
   * Runs the handler under the request time limit.
   *
   * @param handler The route's handler.
   * @param request What the handler is called with.
   * @returns The bridge's call: resolves once the response is complete (the handler may still
   *   run; the App counts it) or the handler is done; rejects only with a `ResponseCutOffError` or
   *   when a started response fails.
   */
  handle<R>(handler: Handler<R>, request: R): Promise<void> {
    const run = this.#run(handler, request);
    // The handler ran up to its first await. If it responded in that stretch (most do), the
    // call is over already, and once complete #run never rejects: no promise to make for it.
    if (this.#phase === COMPLETE) return ACCEPTED;
    const done = Promise.withResolvers<void>();
    this.#call = done;
    run.then(done.resolve, done.reject);
    return done.promise;
  }

  /**
   * How log lines and error messages name the request. Built only when one is written: the
   * percent-decoded path is client text, rendered by `logQuoted` (see `_common/log_text.ts`).
   */
  get #label(): string {
    return logQuoted(`${this.scope.method} ${this.scope.path}`);
  }

  get #where(): string {
    return `Route "${this.routePath}" on ${this.#label}`;
  }

  /** What ran out when the exchange answered in the handler's stead. */
  get #overruledBy(): string {
    return this.#overruled === SHUTDOWN
      ? `the shutdown grace period of ${seconds(this.#host.graceMs)}`
      : `the request time limit of ${seconds(this.#host.limitMs ?? 0)}`;
  }

  get #overruledReason(): string {
    return `its request ${this.#label} hit ${this.#overruledBy}`;
  }

  #disconnectReason(): unknown {
    if (this.#abortReason !== undefined) return this.#abortReason;
    // The bridge ends the request with its response: the body is no longer there to read, and
    // the client did nothing (an AbortError, "The client disconnected", blamed it).
    if (this.#phase === COMPLETE || this.#lastChunk) {
      return new TypeError(
        `Cannot read the body of ${this.#label} after its response: the request ended with the ` +
          `response; read the body with bytes() or text() before responding`,
      );
    }
    return new DOMException("The client disconnected", "AbortError");
  }

  /**
   * Why the bridge says `http.disconnect` before the response is complete: the client left, or
   * the bridge ended the request over its body and answered for the handler (it says why in
   * `reason`: a body over `maxBodySize`, stalled, malformed or failed). Read only then, on the
   * message that ends the request: nothing per request.
   */
  #leaving(message: HttpDisconnectMessage): Error | DOMException {
    const limit = message.exceeded_max_body_size;
    const why = message.reason ??
      (typeof limit === "number" ? "exceeded_max_body_size" : undefined);
    if (why === undefined) return new DOMException("The client disconnected", "AbortError");
    const answered = (status: string) =>
      this.#phase === PENDING
        ? `the server answered ${status} for the handler`
        : "the server cut the response off";
    const label = this.#label;
    let reason: Error | DOMException;
    if (why === "exceeded_max_body_size" && typeof limit === "number") {
      reason = new BodyTooLargeError(
        limit,
        `The body of ${label} exceeds maxBodySize ${limit} bytes, and ` +
          `${answered("413 (Content Too Large)")}: raise maxBodySize (an option of serve(), or ` +
          `of the App's fetchOptions) to accept larger bodies`,
      );
    } else if (why === "body_stalled") {
      reason = new DOMException(
        `The body of ${label} stalled: nothing arrived for stallTimeout, and ` +
          `${answered("408 (Request Timeout)")}: raise stallTimeout (an option of serve()) to ` +
          `wait longer for slow clients`,
        "TimeoutError",
      );
    } else if (why === "body_malformed") {
      reason = new TypeError(
        `The body of ${label} could not be parsed (its chunked framing is malformed), and ` +
          `${answered("400 (Bad Request)")}: the client must send a well-formed body`,
      );
    } else if (why === "body_failed") {
      reason = new TypeError(
        `The body stream of ${label} failed, and ${answered("500")}: the bridge logged the ` +
          `stream's error; give app.fetch() a Request whose body can be read`,
      );
    } else {
      // A reason this layer does not know (another bridge's): a client that left, as before.
      return new DOMException("The client disconnected", "AbortError");
    }
    farewells.set(reason, Object.freeze({ ...message, type: "http.disconnect" }));
    return reason;
  }

  /**
   * The `http.disconnect` a reader gets: the bridge's `reason` (and `exceeded_max_body_size`)
   * kept when the bridge ended the request (`#leaving`), so a handler reading with `receive()`
   * learns why as an ASGI application does. Built only on a disconnect: nothing per request.
   */
  #farewell(): HttpDisconnectMessage {
    const reason = this.#abortReason;
    if (typeof reason !== "object" || reason === null) return DISCONNECT;
    return farewells.get(reason) ?? DISCONNECT;
  }

  /**
   * Why the request ended before its response was complete, for log lines: the client went
   * away, or the bridge ended it (`#leaving`). Built only when a line is written.
   */
  get #endedAfter(): string {
    const reason = this.#abortReason;
    if (reason instanceof BodyTooLargeError) {
      return `its request body exceeded maxBodySize ${reason.maxBodySize}`;
    }
    const why = typeof reason === "object" && reason !== null
      ? farewells.get(reason)?.reason
      : undefined;
    if (why === "body_stalled") return "its request body stalled past stallTimeout";
    if (why === "body_malformed") return "its request body was malformed";
    if (why === "body_failed") return "its request body stream failed";
    return "the client went away";
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
    received(this.#receive).then(
      (message) => this.#deliver(message),
      (error) => this.#failed(error),
    );
  }

  /** The bridge's receive() failed: so does every waiting reader. */
  #failed(error: unknown): void {
    this.#pulling = false;
    for (const reader of this.#readers.splice(0)) reader.reject(error);
  }

  /**
   * Records what a message from the bridge means for the request and returns it as a reader
   * gets it; wakes no reader.
   *
   * @throws {TypeError} For a message an HTTP scope cannot carry.
   */
  #accept(message: ReceiveMessage): HttpRequestMessage | HttpDisconnectMessage {
    this.#pulling = false;
    if (message.type === "http.disconnect") {
      this.#disconnected = true;
      // After a complete response the bridge reports the end of the exchange the same way (and
      // may do so before the final send() resolves); the client did nothing wrong then, so the
      // signal stays as it is and a body chunk already received can still be read. So it does
      // once the handler has ended (`#ended`): a 500 or a stream the App cut off after a failure
      // closes the connection itself, and that close is no client leaving.
      if (this.#phase !== COMPLETE && !this.#lastChunk && !this.#servedError && !this.#ended) {
        this.#buffered = undefined;
        this.#abort(this.#leaving(message));
      }
      return DISCONNECT;
    }
    if (message.type !== "http.request") {
      throw new TypeError(
        `Unexpected ${
          describe((message as { type: unknown }).type)
        } message in an HTTP scope: expected "http.request" or "http.disconnect"`,
      );
    }
    if (!message.more_body) this.#bodyRead = true;
    return message;
  }

  /** A message the queued readers wait for (`#pull`). */
  #deliver(message: ReceiveMessage): void {
    let taken: HttpRequestMessage | HttpDisconnectMessage;
    try {
      taken = this.#accept(message);
    } catch (error) {
      for (const reader of this.#readers.splice(0)) reader.reject(error);
      return;
    }
    if (taken === DISCONNECT) {
      const farewell = this.#farewell();
      for (const reader of this.#readers.splice(0)) reader.resolve(farewell);
      return;
    }
    const reader = this.#readers.shift();
    if (reader === undefined) this.#buffered = taken as HttpRequestMessage;
    else reader.resolve(taken);
    this.#readOn();
  }

  /**
   * The message a reader asked the bridge for directly (`receive`). Readers that queued up
   * meanwhile are served as `#deliver` serves them.
   */
  #took(message: ReceiveMessage): HttpRequestMessage | HttpDisconnectMessage {
    let taken: HttpRequestMessage | HttpDisconnectMessage;
    try {
      taken = this.#accept(message);
    } catch (error) {
      for (const reader of this.#readers.splice(0)) reader.reject(error);
      throw error;
    }
    if (taken === DISCONNECT) {
      const farewell = this.#farewell();
      for (const reader of this.#readers.splice(0)) reader.resolve(farewell);
      return farewell;
    }
    this.#readOn();
    return taken;
  }

  /** Pulls again for readers still waiting, else reads ahead if the signal is watched. */
  #readOn(): void {
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

  /** The rest of a fixed response whose head the bridge did not take at once. */
  async #finishFixed(start: Promise<void>, body: Uint8Array): Promise<void> {
    await start;
    await this.#send({ type: "http.response.body", body, more_body: false });
    this.#sent();
  }

  /** The whole response went out (unless the time limit or shutdown took over meanwhile). */
  #sent(): void {
    if (this.#overruled === undefined) this.#complete();
  }

  /** A streamed response: the head, then each chunk as the body's iterator yields it. */
  async #stream(response: Response, body: AsyncIterable<unknown>): Promise<void> {
    const head = this.#send({
      type: "http.response.start",
      status: response.status,
      headers: encodedHeaders(response),
    });
    this.#head = head;
    try {
      await head;
    } catch (error) {
      // Nothing reads the body now: close it, as an unsent response's (see #closeUnsent).
      this.#closeStream(body);
      throw error;
    }
    if (this.scope.method === "HEAD") {
      // No one gets the body of a HEAD response (the GET route serves it): it is not made. A
      // stream is cancelled, a generator closed, and not waited for: awaited, a cancel() that
      // took its time held the finished head until the time limit cut it off (for ever without
      // one), and one that failed cut it off as a failed response (fault probe, 2026-11-29).
      this.#closeStream(body);
    } else {
      // Each wait for a chunk stops when the time limit passes or the client goes away
      // (abortable() over that one promise); Detachable lets the close that follows skip a
      // chunk still on its way (_web/abandon.ts). Not abortable() over the iterable: it races
      // every chunk against one promise that settles only at the abort, and each race left a
      // reaction on it, holding its chunk until the stream ended (a 500 MB stream took the
      // server to 508 MB RSS; fault probe, 2026-11-29).
      const source = new Detachable(body);
      const signal = this.signal;
      // A high surrogate that ended the last text chunk, held for the low one that may start the
      // next: encoded apart, a pair split across chunks went out as two U+FFFD (fault probe,
      // 2026-11-29), where a TextEncoderStream keeps it whole. One charCodeAt per text chunk.
      let held = "";
      try {
        for (;;) {
          signal.throwIfAborted();
          const step = await abortable(source.next(), signal);
          if (step.done) break;
          const chunk: unknown = step.value;
          let bytes: Uint8Array;
          if (typeof chunk === "string") {
            let text = held === "" ? chunk : held + chunk;
            held = "";
            const last = text.charCodeAt(text.length - 1);
            if (last >= 0xd800 && last <= 0xdbff) {
              held = text.slice(-1);
              text = text.slice(0, -1);
            }
            bytes = encoder.encode(text);
          } else if (chunk instanceof Uint8Array) {
            if (held !== "") {
              // No low half can follow now: the high one goes out alone, as U+FFFD.
              await this.#send(textChunk(held));
              held = "";
            }
            bytes = chunk;
          } else {
            throw new TypeError(
              `Invalid body chunk ${describe(chunk)}: send a string or a Uint8Array`,
            );
          }
          await this.#send({ type: "http.response.body", body: bytes, more_body: true });
        }
        if (held !== "") await this.#send(textChunk(held));
      } finally {
        // Closes the iterator however the loop ended: the signal aborted, the body failed, a
        // send to a client that left, a chunk of the wrong type. Idle at a yield, it closes
        // now (its finally runs); producing a chunk, it is asked to close and not waited for.
        // Once the client has left or the time limit passed, nobody waits for the close either,
        // as for HEAD: awaited, a cancel() that never settled (a proxied upstream body) or a
        // finally awaiting for ever held the handler for good (review, 2026-11-29).
        if (signal.aborted) this.#closeDetached(source);
        else await source.return();
      }
    }
    this.#lastChunk = true;
    await this.#send({ type: "http.response.body", body: EMPTY, more_body: false });
    this.#sent();
  }

  #send(message: SendMessage): Promise<void> {
    return this.#ended ? Promise.resolve() : this.#sendRaw(message);
  }

  /**
   * The response is out (or dropped with the client): the time limit no longer applies, the
   * tasks go to the runner, and the bridge's call ends.
   */
  #complete(): void {
    this.#phase = COMPLETE;
    this.#limit?.clear();
    const pending = this.#pending;
    if (pending.length > 0) {
      this.#pending = NO_TASKS;
      const runner = this.#host.runner;
      for (const entry of pending) runner.start(entry);
    }
    this.#call?.resolve();
  }

  #discardPending(reason: string): void {
    const runner = this.#host.runner;
    for (const entry of this.#pending) runner.discard(entry, reason, true);
    this.#pending = NO_TASKS;
  }

  async #run<R>(handler: Handler<R>, request: R): Promise<void> {
    const host = this.#host;
    host.active++;
    this.#counted = true;
    const newest = host.newest;
    if (newest !== undefined) newest.#newer = this;
    this.#older = newest;
    host.newest = this;
    try {
      const deadlines = host.deadlines;
      // Armed before the handler is called, so the limit is never later than promised; cleared
      // once the response is complete (#complete) or the handler and its response are done. The
      // expiry answers in the handler's stead (#expire): nothing races the handler, so a limit
      // costs a queue entry and a closure per request, and no promise.
      if (deadlines !== undefined) this.#limit = deadlines.arm(() => this.#expire());
      let result: Outcome;
      try {
        const returned: unknown = await handler(request);
        result = returned === undefined ? SUCCESS : { ok: true, returned } as Returned;
      } catch (error) {
        result = failure(error);
      }
      // The handler may return before the response it started is fully sent.
      const sending = this.#sending;
      if (sending !== undefined && sending !== SENT) result = outcomeOf(result, await sending);
      if (this.#overruled !== undefined) {
        // The limit's answer settles the bridge's call (#expire), and the handler's end must not
        // settle it first: behind a `send` that takes its time, the bridge would see the call
        // end with no response and send a 500 instead of the 408. So the log line waits for it
        // too: a logger that throws must not end the run early either.
        await this.#answered;
        return this.#late(result);
      }
      this.#limit?.clear();
      this.#limit = undefined;
      this.#ended = true;
      if (result.ok && this.#phase === COMPLETE) return;
      return await this.#conclude(result);
    } catch (error) {
      // Once the response is complete, or the limit answered, nobody awaits this run (see
      // handle() and #expire()): report, not reject.
      if (this.#phase !== COMPLETE && this.#overruled === undefined) throw error;
      reportLate(error);
    } finally {
      this.#uncount();
    }
  }

  /** The request stops counting as running for the App's shutdown; once per request. */
  #uncount(): void {
    if (!this.#counted) return;
    this.#counted = false;
    const host = this.#host;
    const older = this.#older;
    const newer = this.#newer;
    if (newer === undefined) host.newest = older;
    else newer.#older = older;
    if (older !== undefined) older.#newer = newer;
    this.#older = undefined;
    this.#newer = undefined;
    if (--host.active === 0) host.idle?.resolve();
  }

  /** The request time limit passed before the response was complete. */
  #expire(): void {
    this.#limit = undefined;
    const call = this.#call;
    // #complete() clears the limit, and handle() makes the call whenever the response is not
    // complete after the handler's first stretch, which no timer can interrupt. A response the
    // handler gave whole in time is not timed out while a slow `send` (middleware's) passes it
    // on: cutting it off there answered 500 or dropped a complete body.
    if (this.#phase === COMPLETE || call === undefined || this.#lastChunk) return;
    // The bridge's call ends with the 408 (or the cut-off stream), and so does the request's
    // count: a handler that ignores its signal must not hold the App's shutdown.
    this.#answered = this.#overrule(TIME_LIMIT).then(call.resolve, call.reject).finally(() =>
      this.#uncount()
    );
  }

  /**
   * Answers the requests still running when shutdown's grace period ends, as the request time
   * limit answers one: each signal aborts (an `AbortError` saying the app shut down), a request
   * whose response has not started gets `503`, a stream still being sent is cut off; a handler
   * that goes on is abandoned, and stops counting in `host.active`.
   *
   * @param host The App's shared state.
   * @returns How many requests were abandoned.
   */
  static abandonAll(host: Host): number {
    const running: Exchange[] = [];
    for (let exchange = host.newest; exchange !== undefined; exchange = exchange.#older) {
      running.push(exchange);
    }
    for (const exchange of running) exchange.#abandon();
    return running.length;
  }

  /** Shutdown's grace period ended with the request still counted; see `abandonAll`. */
  #abandon(): void {
    // The time limit answers already; the request stops counting once its 408 is out.
    if (this.#overruled !== undefined) return;
    this.#limit?.clear();
    this.#limit = undefined;
    const call = this.#call;
    if (this.#phase === COMPLETE || call === undefined || this.#lastChunk || this.#ended) {
      // The response is out, or in send's hands (the bridge's shutdown bounds that), or the
      // handler has ended and its 500 is on its way (a second http.response.start, the 503,
      // once followed it): only the handler runs on. It is asked to stop, and abandoned.
      this.#abort(shutDownReason(this.#host.graceMs));
      this.#uncount();
      return;
    }
    this.#answered = this.#overrule(SHUTDOWN).then(call.resolve, call.reject).finally(() =>
      this.#uncount()
    );
  }

  /** The handler, and the response it started, settled after the time limit: a log line. */
  #late(result: Outcome): void {
    if (result.ok) return;
    const where = this.#where;
    const after = this.#overruled === SHUTDOWN ? "the shutdown grace period" : "the time limit";
    // A client's slow upload makes a handler late: within the App's log limit.
    if (result.error === this.#abortReason) {
      this.#host.logOf(
        "debug",
        "Late handler stopped",
        `${where} stopped on its signal after ${after}`,
      );
    } else {
      const its = this.#overruled === SHUTDOWN ? after : "its time limit";
      this.#host.logOf(
        "debug",
        "Late handler failed",
        `${where} failed after ${its}; ignored:`,
        result.error,
      );
    }
  }

  /** Ends a request that did not simply respond: 500, cut-off stream or log line. */
  async #conclude(result: Outcome): Promise<void> {
    const { log } = this.#host;
    const where = this.#where;
    if (result.ok) {
      this.#discardPending(`${this.#label} never responded`);
      if (this.#disconnected) return;
      log.error(`${where} ${withoutResponding((result as Partial<Returned>).returned)}; sent 500`);
      this.#servedError = true;
      return await sendFixed(this.#sendRaw, SERVER_ERROR_RESPONSE);
    }
    const error = result.error;
    if (this.#disconnected && this.#phase !== COMPLETE) {
      // The bridge refused a body over maxBodySize: it answered, and logged a warning for it.
      // Neither the client's leaving nor a failure of the handler, which may well rethrow the
      // error its read got: one debug line, as for a client that left.
      const reason = this.#abortReason;
      const after = this.#endedAfter;
      this.#discardPending(`${this.#label} never responded: ${after}`);
      // The signal's own reason, rethrown by a read or a stream of the handler, says nothing the
      // line does not, and its stack runs through this file only: 30 clients leaving mid-upload
      // and mid-stream printed 7 lines each under the default logger (probe of 2026-11-29).
      // Once per client that leaves (or sends too much): within the App's log limit.
      const kind = reason instanceof BodyTooLargeError
        ? "Handler stopped after its body exceeded maxBodySize"
        : farewells.has(reason as object)
        ? "Handler stopped after the server ended its request"
        : "Handler stopped after its client left";
      if (error === reason) this.#host.logOf("debug", kind, `${where} stopped after ${after}`);
      else this.#host.logOf("debug", kind, `${where} stopped after ${after}:`, error);
      return;
    }
    if (this.#phase === PENDING) {
      this.#discardPending(`the handler of ${this.#label} failed`);
      log.error(`${where} failed; sent 500:`, error);
      this.#servedError = true;
      return await sendFixed(this.#sendRaw, SERVER_ERROR_RESPONSE);
    }
    if (this.#phase === SENDING) {
      this.#discardPending(`the response to ${this.#label} failed`);
      if (error instanceof AsgiProtocolError) {
        // The bridge refused a message of the response (a streamed body longer or shorter than
        // its content-length) and logged the error, stack and all, at the send; it logs the
        // same error rethrown no second time. Wrapped, it was printed twice. The route goes in a
        // line of its own, which the bridge's line cannot name.
        log.error(
          `${where} failed while sending its response; the response is cut off: ${
            errorText(error)
          }`,
        );
        throw error;
      }
      // Too late for a 500: failing the ASGI call makes the bridge cut the stream off, so the
      // client cannot take a truncated body for a whole one.
      throw new Error(`${where} failed while sending its response; the response is cut off`, {
        cause: error,
      });
    }
    // Only shutdown aborts the signal of a request whose response is complete.
    if (error === this.#abortReason) {
      log.debug(`${where} stopped on its signal after the shutdown grace period`);
      return;
    }
    log.error(`${where} failed after its response was sent:`, error);
  }

  /**
   * Answers in the handler's stead: its time limit passed (408) or shutdown's grace period ended
   * (503) before the response was complete.
   */
  async #overrule(why: typeof TIME_LIMIT | typeof SHUTDOWN): Promise<void> {
    this.#overruled = why;
    this.#ended = true;
    const by = this.#overruledBy;
    this.#abort(
      why === SHUTDOWN ? shutDownReason(this.#host.graceMs) : new DOMException(
        `Request time limit of ${seconds(this.#host.limitMs ?? 0)} exceeded`,
        "TimeoutError",
      ),
    );
    this.#discardPending(this.#overruledReason);
    // Said by the line of a response that comes later: "the client got 408" once stood for a
    // client that had left before the limit, to which nothing was sent (task Q2).
    if (this.#disconnected) {
      this.#overruledGot = "its client had left before it, and got nothing";
      return;
    }
    // What the App sent: whether the client took it, neither layer may know (one that left
    // while its handler did not watch its signal is only found gone when it is written to).
    this.#overruledGot = this.#phase !== PENDING
      ? "its response was cut off then"
      : `it was answered ${why === SHUTDOWN ? 503 : 408} then`;
    if (this.#phase === PENDING) {
      // An operator must see timeouts (a cut-off stream, below, the bridge reports); shutdown's
      // 503s are counted in one line by the App.
      if (why === TIME_LIMIT) {
        // A client that uploads slowly causes it: within the App's log limit.
        this.#host.logOf(
          "warn",
          // One kind per route (a pattern of the App's, so they are few): the first 408 of
          // each is written, however many another route had.
          `Route "${this.routePath}" over the request time limit: answered 408`,
          `${this.#where} did not respond within ${by}; answered 408`,
        );
      }
      return await sendFixed(
        this.#sendRaw,
        why === SHUTDOWN ? UNAVAILABLE_RESPONSE : TIMEOUT_RESPONSE,
      );
    }
    // A slow `send` may still hold the head: the bridge must see it before the call fails, or
    // it takes the failure for a handler that never responded and answers 500.
    await this.#head?.catch(() => {});
    // Still sending: cutting the stream off is what the limit promises, not a failure. The
    // bridge closes the connection, so the client cannot take the truncated body for a whole one,
    // and logs this error as one warning line instead of an exception with a stack.
    throw new ResponseCutOffError(
      `${this.#where} was still sending its response at ${
        why === SHUTDOWN ? "the end of " : ""
      }${by}`,
    );
  }
}

/** A body message of more to come holding `text`, UTF-8 encoded. */
function textChunk(text: string): SendMessage {
  return { type: "http.response.body", body: encoder.encode(text), more_body: true };
}

/**
 * The streamed bodies sent so far: a second response with one would read an iterator already
 * used up (a generator yields nothing more), and its client got an empty 200.
 */
const streamedBodies = new WeakSet<object>();

/** The reason `request.signal` aborts with when shutdown abandons the request. */
function shutDownReason(graceMs: number): DOMException {
  return new DOMException(
    `The app shut down: the request was still running at the end of the shutdown grace ` +
      `period of ${seconds(graceMs)}`,
    "AbortError",
  );
}
