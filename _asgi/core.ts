/**
 * The transport-independent half of the ASGI bridge: one request/response cycle (`HttpCycle`) and
 * the state both transports share (`Core`). A transport subclasses `HttpCycle` and fills in how
 * bytes reach the client. Beside it: the scope (`scope.ts`), the field and framing rules
 * (`fields.ts`), the lifespan protocol (`lifespan.ts`), the errors (`errors.ts`).
 *
 * What a request costs, and why it is shaped so (issue 13; figures in docs/performance.md). In
 * Deno a view into a buffer costs some 70 ns and 104 B to make, a closure 64 B, a resolver pair
 * about 300 B, and copying a frozen array takes a slow path (272 ns against 17 for two pairs):
 *
 * - **Header names are shared where Python would share them** (`scope.ts`). They come from a
 *   bounded cache of names seen before (`NameBytes`), checked on every use; values and paths,
 *   which a program might wipe or rewrite in place, are each request's own, copied into one
 *   shared buffer by one packer (`BytePack`), with no record per request.
 * - **A repeated response header list is converted once.** The pairs of the last list and their
 *   text are kept; a list of the same pairs (by identity, the bytes checked) reuses them.
 * - **`send` says when it is done at once**: it returns the shared `ACCEPTED` promise, which the
 *   web layer recognises to send a fixed response whole in one turn.
 * - **The application runs through two callbacks**, not an async function whose frame outlives
 *   its await.
 *
 * @module
 */
import type {
  AsgiApplication,
  AsgiLogger,
  AsgiServerAddr,
  AsgiUnixAddr,
  HttpDisconnectMessage,
  HttpRequestMessage,
  HttpResponseBodyMessage,
  HttpResponseStartMessage,
  HttpScope,
  ReceiveMessage,
  SendMessage,
} from "./types.ts";
import { copyBytes, EMPTY, reserve, SLAB_MAX, textBytes } from "./bytes.ts";
import { AsgiProtocolError, ResponseCutOffError } from "./errors.ts";
import {
  checkCodings,
  checkDeclaredLength,
  checkStatus,
  declaredLength,
  headerName,
  headerPairError,
  headersError,
  headerValue,
  isNullBodyStatus,
  noContentHeaders,
  resetContentHeaders,
  warnCamelMoreBody,
} from "./fields.ts";
import { Lifespan } from "./lifespan.ts";
import { ACCEPTED, RESOLVED, withResolvers } from "./promises.ts";
import { describe } from "../_common/describe.ts";
import { LogLimiter } from "../_common/log_limit.ts";

/**
 * How long a connection that closes after an answer given before the request's body ended reads
 * on and drops what the client still sends: at most `totalMs` from the answer in all, and on
 * `node` at most `idleMs` without a byte (`Deno.serve` cannot give up a read that waits, so on
 * `deno` the total is checked at each chunk that arrives). Closing at once leaves the client's
 * bytes unread, and the kernel answers them with a reset that can throw away the answer itself:
 * a client that sends its whole body before it reads (Python's `http.client`) got "Broken pipe"
 * instead of the answer. The bound keeps a client that goes on sending slowly after its answer
 * (the web layer's 408 to a slow upload) from holding the connection as long as it likes. The
 * figures are nginx's defaults for its lingering close (`lingering_time`, `lingering_timeout`).
 * After a 413 for a body over `maxBodySize`, `node` reads on with no byte bound (what it reads is
 * dropped, as nginx does after its own 413) but gives up after `refusedIdleMs` without a byte: a
 * client told its body is too large has no reason to pause, a proxy relays at line rate, and a
 * stalled one should lose its socket promptly (a 413 whose close draws a reset became nginx's
 * 502). Mutable for tests.
 */
export const drainTiming: { totalMs: number; idleMs: number; refusedIdleMs: number } = {
  totalMs: 30_000,
  idleMs: 5_000,
  refusedIdleMs: 1_000,
};

/** What bounds a server's connections; see `ServeOptions`. */
export interface ConnectionLimits {
  /** Milliseconds from the connection (or previous response) to the end of the request head. */
  headersTimeout: number;
  /** Milliseconds idle between a response and the next request on a kept-alive connection. */
  keepAliveTimeout: number;
  /**
   * Connections served at once; more are closed as soon as they are accepted. `undefined`: the
   * transport's default (node: from the fd limit, see `_asgi/fd_limit.ts`).
   */
  maxConnections: number | undefined;
}

/**
 * Where a transport listens: an interface and port, or a Unix socket's path. `bind`, when given,
 * runs each listen on the path (the first and every one after fd exhaustion), which must bind
 * the socket before it returns: it makes the file with the `mode` option's permission bits (see
 * `_asgi/unix_socket.ts`, `bindWithMode`).
 */
export type ListenAddress = { hostname: string; port: number } | UnixListenAddress;

/** The Unix-socket form of {@linkcode ListenAddress}. */
export type UnixListenAddress = { path: string; bind?: <T>(listen: () => T) => T };

/** A listening transport, as `serve` drives it. */
export interface Listener {
  /** The bound address. */
  readonly addr: AsgiServerAddr | AsgiUnixAddr;
  /** Stops accepting; resolves once the responses in flight are done. */
  close(): Promise<void>;
  /** Drops the connections that are left (after `Core.abortAll`). */
  forceClose(): void;
  /** Settles, with the reason, if the transport stops listening for good by itself. */
  readonly failed: Promise<unknown>;
  /**
   * Called, when set, each time the transport has listened again by itself (a listener that
   * died under fd exhaustion): on a Unix socket that made a new socket file.
   */
  onRebound?: () => void;
}

/** Settings shared by every request of one server or fetch handler. */
export interface CoreOptions {
  /** See `FetchHandlerOptions.rootPath`. */
  rootPath: string;
  /** See `FetchHandlerOptions.maxBodySize`. */
  maxBodySize: number;
  /** See `FetchHandlerOptions.logger`. */
  logger: AsgiLogger;
  /** See `FetchHandlerOptions.lifespan`. */
  lifespan: "auto" | "on" | "off";
}

/** Stall checks per `stallTimeout`: a wait is given up between 1 and 1.25 times the limit. */
export const STALL_CHECKS = 4;
/** The shortest period between two stall checks, in milliseconds. */
const MIN_STALL_CHECK_MS = 10;

/**
 * The period of the stall checks for `stallTimeout` (finite): one wait is given up once more
 * than `STALL_CHECKS` of them have passed since it began.
 */
export function stallCheckPeriod(stallTimeout: number): number {
  return Math.max(MIN_STALL_CHECK_MS, Math.floor(stallTimeout / STALL_CHECKS));
}

/** The application, its lifespan and the cycles in flight: everything a transport needs. */
export class Core {
  /** The ASGI application. */
  readonly app: AsgiApplication;
  /** The `root_path` of every scope. */
  readonly rootPath: string;
  /** `rootPath` as bytes, prefixed to `raw_path` as uvicorn does. */
  readonly rootPathBytes: Uint8Array;
  /** The body size limit in bytes. */
  readonly maxBodySize: number;
  /** Where log lines go. */
  readonly logger: AsgiLogger;
  /** The bound on the warnings a client can cause (see `warnOf`). */
  readonly logLimit: LogLimiter = new LogLimiter(
    undefined,
    (_level, line) => this.logger.warn(line),
  );
  /** The lifespan protocol runner. */
  readonly lifespan: Lifespan;
  /**
   * Cycles whose application task or response is still running, as an intrusive doubly linked
   * list through the cycles' `previous`/`next`: cheaper per request than a Set.
   */
  #inflight: HttpCycle | null = null;
  #inflightCount = 0;
  #idleWaiters: (() => void)[] = [];
  /**
   * How long a request may wait on its client with nothing moving; `Infinity`: no limit. Set by
   * `serve()` before it listens.
   */
  stallTimeout: number;
  /**
   * `serve()`'s shutdown has begun (set as `shutdown()` is called, before the listener closes):
   * answers say `connection: close`, and the connections close after them. `Deno.serve`'s
   * shutdown closes them without saying so (see `#connectionFields` in the deno transport).
   */
  draining = false;
  /** Stall checks so far: the clock of waits on clients (see `waitBegins`). */
  #tick = 0;
  /** The periodic stall check, while any request may be waiting on its client. */
  #stallCheck: ReturnType<typeof setInterval> | undefined;

  /**
   * Creates the core.
   *
   * @param app The application.
   * @param options Settings.
   */
  constructor(app: AsgiApplication, options: CoreOptions) {
    this.app = app;
    this.rootPath = options.rootPath;
    this.rootPathBytes = textBytes(options.rootPath);
    this.maxBodySize = options.maxBodySize;
    this.logger = options.logger;
    this.lifespan = new Lifespan(app, options.lifespan, options.logger);
    this.stallTimeout = Infinity;
  }

  /**
   * Writes a warning that a client can cause once per request or connection, within the bound of
   * `logLimit` (see _common/log_limit.ts): the first lines of each kind in full, then one now and
   * then that counts those held back.
   *
   * @param kind What the line is about, in words, the same for every line of its kind. Each
   *   outcome is a kind of its own (a 413, a response cut off), so that the first of each is
   *   written however many of another came before; a line that never varies is its own kind.
   * @param line The line.
   */
  warnOf(kind: string, line: string): void {
    const note = this.logLimit.admit(kind);
    if (note !== null) this.logger.warn(line + note);
  }

  /** Writes how many lines `warnOf` held back and has not told of yet (at shutdown). */
  warnHeldBack(): void {
    for (const { line } of this.logLimit.summary()) this.logger.warn(line);
  }

  /**
   * A request begins to wait on its client (a body read, or a chunk the client must take first):
   * returns the mark its wait carries, and makes sure the stall check runs. One interval for all
   * requests, started here and stopped by a check that finds no request waiting: a timer per
   * wait would cost every small upload a timer armed and cleared (the `POST` hot path), where a
   * mark costs a field.
   */
  waitBegins(): number {
    if (this.#stallCheck === undefined && this.stallTimeout < Infinity) {
      const check = setInterval(this.#checkStalls, stallCheckPeriod(this.stallTimeout));
      // Never the reason a process stays up: whatever waits has a connection that does.
      if (typeof check === "number") Deno.unrefTimer(check);
      else (check as { unref?: () => void }).unref?.();
      this.#stallCheck = check;
    }
    return this.#tick;
  }

  readonly #checkStalls = (): void => {
    const tick = ++this.#tick;
    let waiting = false;
    /** Pairs of a cycle and whether its body (else its response) stalled. */
    let stalled: (HttpCycle | boolean)[] | null = null;
    for (let cycle = this.#inflight; cycle !== null; cycle = cycle.next) {
      const { readMark, writeMark } = cycle;
      if (readMark < 0 && writeMark < 0) continue;
      // Past STALL_CHECKS whole periods: a wait that began just after a check is given up at
      // the fifth check after it, so between 1 and 1.25 times stallTimeout.
      if (readMark >= 0 && tick - readMark > STALL_CHECKS) (stalled ??= []).push(cycle, true);
      else if (writeMark >= 0 && tick - writeMark > STALL_CHECKS) {
        if (!cycle.queued()) (stalled ??= []).push(cycle, false);
        else {
          // A response queued behind another waits on that one, not on its client: its clock
          // starts again when it may go out.
          cycle.writeMark = tick;
          waiting = true;
        }
      } else waiting = true;
    }
    if (!waiting) this.stopStallChecks();
    if (stalled === null) return;
    for (let i = 0; i < stalled.length; i += 2) {
      try {
        (stalled[i] as HttpCycle).stalled(stalled[i + 1] as boolean);
      } catch (error) {
        this.logger.error("Could not end a stalled request:", error);
      }
    }
  };

  /** Stops the stall check (the server has finished); the next wait starts it again. */
  stopStallChecks(): void {
    clearInterval(this.#stallCheck);
    this.#stallCheck = undefined;
  }

  /** Registers a cycle as in flight. */
  track(cycle: HttpCycle): void {
    const head = this.#inflight;
    cycle.next = head;
    if (head !== null) head.previous = cycle;
    this.#inflight = cycle;
    this.#inflightCount++;
  }

  /** Removes a cycle registered with `track` (once). */
  untrack(cycle: HttpCycle): void {
    const { previous, next } = cycle;
    if (previous !== null) previous.next = next;
    else this.#inflight = next;
    if (next !== null) next.previous = previous;
    cycle.previous = cycle.next = null;
    if (--this.#inflightCount === 0 && this.#idleWaiters.length > 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  /**
   * Whether a request in flight has a body not yet read to its end (`Deno.serve`'s shutdown
   * would fail the read).
   */
  receivingBodies(): boolean {
    for (let cycle = this.#inflight; cycle !== null; cycle = cycle.next) {
      if (cycle.receivingBody) return true;
    }
    return false;
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    if (this.#inflightCount === 0) return RESOLVED;
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Ends every request in flight now: the applications see `http.disconnect`. */
  abortAll(reason: unknown): void {
    const cycles: HttpCycle[] = [];
    for (let cycle = this.#inflight; cycle !== null; cycle = cycle.next) cycles.push(cycle);
    for (const cycle of cycles) {
      // One response the transport cannot end must not stop shutdown from ending the others
      // (a 204 whose end threw once left shutdown() rejected and the lifespan never shut down).
      try {
        cycle.abort(reason);
      } catch (error) {
        this.logger.error("Could not end a request at shutdown:", error);
      }
    }
  }
}

const AWAIT_START = 0;
const STARTED = 1;
const STREAMING = 2;
const DONE = 3;

/** A body stream to read. */
const BODY_PENDING = 0;
/** No body: the first receive() gets one empty http.request. */
const BODY_EMPTY = 1;
const BODY_DONE = 2;
/**
 * The body grew past `maxBodySize` and the server refused it: every `receive` from then on says
 * so (`exceeded_max_body_size`), so that the application does not take the 413 for a client
 * that left. A state of `#body` rather than a field of its own: nothing more per request.
 */
const BODY_REFUSED = 3;
/**
 * The states below say why the server ended a request whose client did not leave, as
 * `BODY_REFUSED` does (`HttpDisconnectMessage.reason`): the body stalled for `stallTimeout` (408)…
 */
const BODY_STALLED = 4;
/** …could not be parsed (a bad chunk size: 400)… */
const BODY_MALFORMED = 5;
/** …or the stream of a `Request` a program built for `createFetchHandler` failed (500). */
const BODY_FAILED = 6;

/** Why a body read failed, as a transport tells (`HttpCycle.readFailed`). */
export type BodyFailure = "client_left" | "body_malformed" | "body_failed";

function disconnect(): HttpDisconnectMessage {
  return { type: "http.disconnect" };
}

/**
 * One HTTP request/response cycle. Implements `receive` and `send` for the application and turns
 * its messages into calls of the abstract methods, which a transport implements.
 *
 * Phases of the response: awaiting `http.response.start`; started (head held back until the first
 * body message, so a single-message body becomes one plain response); streaming; done.
 */
export abstract class HttpCycle {
  /** The scope the application is called with. */
  readonly scope: HttpScope;
  /** Where the cycle belongs. */
  protected readonly core: Core;
  /**
   * The `Core.waitBegins()` mark of the body read the application waits for, or -1: a read
   * settles with each chunk, so a mark this old means nothing arrived since.
   */
  readMark = -1;
  /** Likewise for a chunk of the response the client must take before `send` resolves. */
  writeMark = -1;
  /** The neighbours in `Core`'s list of cycles in flight. */
  previous: HttpCycle | null = null;
  /** See `previous`. */
  next: HttpCycle | null = null;
  #phase = AWAIT_START;
  /** The client is gone (or the server gave up on it): `send` is a no-op, `receive` disconnects. */
  #gone = false;
  #appDone = false;
  /** HEAD or a null-body status: body chunks are accepted and dropped. */
  #discard = false;
  #status = 0;
  #headers: [string, string][] = [];
  #declaredLength = -1;
  #sentLength = 0;
  #body: number;
  #expectedLength: number;
  #receivedLength = 0;
  /**
   * Whether a body that ends short of its `content-length` means the client left: so for a
   * request a server read off the wire. A `Request` a program built for `createFetchHandler` may
   * carry a length its body does not have (headers copied beside a changed body): its body is
   * passed on as it is, as before.
   */
  protected shortBodyIsDisconnect = true;
  /** What the receive that reads the body resolves to, from its read until that read settles. */
  #reading: Promise<ReceiveMessage> | null = null;
  #readWaiter: ((message: ReceiveMessage) => void) | null = null;
  #finished = false;
  #waiters: ((message: HttpDisconnectMessage) => void)[] | null = null;
  /** The last protocol error `send` logged, so it is not logged again when the app rethrows it. */
  #reported: unknown = undefined;
  /**
   * The server ended the response in the application's stead (it raised or returned early, or
   * the body was too large): what a task of the application still sends is dropped, as for a
   * client that has gone, and not reported as sent after completion.
   */
  #endedByServer = false;

  /**
   * Creates a cycle.
   *
   * @param core The shared state.
   * @param scope The scope.
   * @param hasBody Whether the request may carry a body.
   * @param expectedLength The `content-length` of the request, or -1.
   */
  constructor(core: Core, scope: HttpScope, hasBody: boolean, expectedLength: number) {
    this.core = core;
    this.scope = scope;
    this.#body = hasBody && expectedLength !== 0 ? BODY_PENDING : BODY_EMPTY;
    this.#expectedLength = expectedLength;
  }

  /**
   * Sends a complete response. `body` is `null` when the response must not carry one. For HEAD,
   * `body` is what a GET would get: the transport states its length and sends no body.
   */
  protected abstract sendWhole(
    status: number,
    headers: [string, string][],
    body: Uint8Array | null,
  ): void;
  /** Sends the head of a streamed response. */
  protected abstract openStream(status: number, headers: [string, string][]): void;
  /** Writes a chunk; returns a promise when the client has not taken the previous ones yet. */
  protected abstract writeChunk(chunk: Uint8Array): Promise<void> | undefined;
  /** Writes the last chunk, if any, and ends the streamed response. */
  protected abstract endStream(last: Uint8Array): void;
  /**
   * Ends the exchange abruptly: the connection is closed without completing the response. `status`
   * is 0 when no head was sent or held.
   */
  protected abstract abortResponse(
    reason: unknown,
    status: number,
    headers: [string, string][],
  ): void;
  /** Reads the next request body chunk; `null` at the end; rejects when the client has gone. */
  protected abstract readChunk(): Promise<Uint8Array | null>;
  /**
   * Why `readChunk` rejected with `error`: the client left (the default), or it is still there
   * and the body could not be parsed, or (a `Request` built by a program) its stream failed.
   * Asked only when a read fails.
   */
  protected readFailed(_error: unknown): BodyFailure {
    return "client_left";
  }
  /**
   * Closes the connection at once, unsent bytes and all: the client took none of the response
   * for `stallTimeout`, so a close that waits for them to go out would wait for good.
   */
  protected dropConnection(): void {}
  /**
   * Throws an `AsgiProtocolError` for a response `transfer-encoding` value the transport cannot
   * send as it says. Every value passes by default.
   */
  protected checkTransferCoding(_coding: string): void {}
  /**
   * Whether the response waits behind an earlier one of its connection (pipelined), so that its
   * sends wait on that answer and not on the client. Never, by default.
   */
  queued(): boolean {
    return false;
  }
  /** Starts watching for the client going away; called before `receive` waits for the end. */
  protected watchClient(): void {}
  /** Releases what the transport holds once the cycle is over. */
  protected closeExchange(): void {}
  /**
   * The application has completed its response and still runs. It can no longer read the request
   * body (`receive` disconnects from now on), so the transport may drop what is left of it now
   * rather than once the application returns: a client that sends its whole body before it reads
   * would otherwise wait, or be cut off, for as long as the application goes on.
   */
  protected responseComplete(): void {}
  /**
   * The request body exceeded `maxBodySize`: the transport closes the connection once the 413 is
   * out, without handing the application any more of the body (`node` drops what still arrives
   * for a while first, see `drainTiming`).
   */
  protected refuseBody(): void {}
  /**
   * The request is to reach the application: its stated length, if any, is within `maxBodySize`.
   * A transport whose client waits for `100 Continue` before sending the body sends it now; one
   * over the limit gets the 413 without it, so the client never sends the body (RFC 9110
   * §10.1.1).
   */
  protected bodyAccepted(): void {}

  /** `true` once the response head has been handed to the transport. */
  protected get headSent(): boolean {
    return this.#phase === STREAMING || this.#phase === DONE;
  }

  /** Runs the application for this request. */
  run(): void {
    const core = this.core;
    core.track(this);
    if (this.#expectedLength > core.maxBodySize) {
      this.#tooLarge();
      this.#appDone = true;
      this.#finish();
      return;
    }
    this.bodyAccepted();
    // Callbacks rather than an async function: the frame an async function keeps across its
    // await costs more garbage per request than these two functions.
    let result: unknown;
    try {
      result = core.app(this.scope, this.receive, this.send);
    } catch (error) {
      return this.#onRaised(error);
    }
    // An application that is not an async function may return anything; what it returns is
    // awaited as `await` would.
    const settled = result instanceof Promise ? result : Promise.resolve(result);
    settled.then(this.#onReturned, this.#onRaised);
  }

  readonly #onReturned = (): void => {
    this.#appDone = true;
    try {
      this.#returned();
    } catch (error) {
      this.#endFailed(error);
    }
    this.#finish();
  };

  readonly #onRaised = (error: unknown): void => {
    this.#appDone = true;
    try {
      this.#raised(error);
    } catch (failure) {
      this.#endFailed(failure);
    }
    this.#finish();
  };

  /**
   * The transport could not end a response the application left unfinished. Thrown here, the
   * error would reject a promise nobody awaits and end the whole process (a 204 did, once).
   */
  #endFailed(error: unknown): void {
    this.#phase = DONE;
    this.core.logger.error("Could not end the response of an unfinished request:", error);
  }

  /** Whether the request's body is still to be read to its end. */
  get receivingBody(): boolean {
    return this.#body === BODY_PENDING && !this.#gone && this.#phase !== DONE;
  }

  /** The `receive` callable of this request. */
  readonly receive = (): Promise<ReceiveMessage> => {
    if (this.#gone || this.#phase === DONE) return Promise.resolve(this.#disconnectMessage());
    const body = this.#body;
    if (body === BODY_EMPTY) {
      this.#body = BODY_DONE;
      const message: HttpRequestMessage = { type: "http.request", body: EMPTY, more_body: false };
      return Promise.resolve(message);
    }
    if (body === BODY_DONE) return this.#waitForEnd();
    if (this.#reading !== null) {
      // A second concurrent receive(): serve it after the receive in progress, which settles
      // when its read does or when the server gives up (its read may pend on: see #read).
      return this.#reading.then(this.#receiveAfter);
    }
    return this.#read();
  };

  /**
   * A receive chained behind another, once that one has settled. If that one was woken while
   * its read pends on, `#reading` is still its settled promise, and calling `receive` again would
   * chain on it once more, for ever: a loop of microtasks that freezes the whole process (a
   * streamed 204 did, until only an exchange that is over may wake a read: see #sendBody). Such
   * a receive says what the one before it said.
   */
  readonly #receiveAfter = (): Promise<ReceiveMessage> | ReceiveMessage => {
    if (this.#reading !== null && this.#readWaiter === null) return this.#disconnectMessage();
    return this.receive();
  };

  /** The `send` callable of this request. */
  readonly send = (message: SendMessage): Promise<void> => {
    if (this.#gone) return ACCEPTED;
    try {
      return this.#send(message) ?? ACCEPTED;
    } catch (error) {
      this.#reported = error;
      this.core.logger.error(error);
      return Promise.reject(error);
    }
  };

  /** The client has gone: wake every waiting `receive`, make `send` a no-op. */
  clientGone(): void {
    if (this.#gone || this.#phase === DONE) return;
    this.#gone = true;
    this.#wakeWaiters();
    if (this.#appDone) this.#finish();
  }

  /** The server gives up on this request (forced shutdown). */
  abort(reason: unknown): void {
    if (!this.#gone && this.#phase !== DONE) {
      if (this.#phase === AWAIT_START) this.#internalError();
      else this.abortResponse(reason, this.#status, this.#headers);
      this.#phase = DONE;
    }
    this.#gone = true;
    this.#wakeWaiters();
    this.#appDone = true;
    this.#finish();
  }

  #read(): Promise<ReceiveMessage> {
    // No watchClient() here: a body read itself fails when the client goes away mid-upload.
    const { promise, resolve } = withResolvers<ReceiveMessage>();
    this.#readWaiter = resolve;
    this.readMark = this.core.waitBegins();
    this.readChunk().then(
      (chunk) => {
        this.readMark = -1;
        this.#reading = null;
        this.#readWaiter = null;
        if (this.#gone || this.#phase === DONE) return resolve(this.#disconnectMessage());
        resolve(this.#chunkMessage(chunk));
      },
      (error) => {
        this.readMark = -1;
        this.#reading = null;
        this.#readWaiter = null;
        this.#readFailedWith(error);
        this.clientGone();
        resolve(this.#disconnectMessage());
      },
    );
    // The receive, not the read: a request given up (stallTimeout) wakes the receive while its
    // read pends on (deno cannot give one up; node's lingers after the 408), and a receive
    // chained on the read waited that long too (30 s on node, until shutdownTimeout).
    this.#reading = promise;
    return promise;
  }

  #chunkMessage(chunk: Uint8Array | null): ReceiveMessage {
    if (chunk === null) {
      if (this.#receivedLength < this.#expectedLength && this.shortBodyIsDisconnect) {
        // The body ended short of its content-length: over HTTP/2, Deno ends the body of a
        // request the client reset (RST_STREAM) as if it were complete, and a cut-off upload
        // once reached the application as a whole one. As HTTP/1.1 does, it is a disconnect.
        this.clientGone();
        return disconnect();
      }
      this.#body = BODY_DONE;
      return { type: "http.request", body: EMPTY, more_body: false };
    }
    const received = this.#receivedLength += chunk.length;
    if (received > this.core.maxBodySize) {
      this.#tooLarge();
      return this.#disconnectMessage();
    }
    const expected = this.#expectedLength;
    const more = expected < 0 || received < expected;
    if (!more) this.#body = BODY_DONE;
    const message: HttpRequestMessage = { type: "http.request", body: chunk, more_body: more };
    return message;
  }

  /**
   * The `http.disconnect` of a request that is over: with the limit when the server refused its
   * body, so the application can tell the 413 from a client that left.
   */
  #disconnectMessage(): HttpDisconnectMessage {
    switch (this.#body) {
      case BODY_REFUSED:
        return {
          type: "http.disconnect",
          reason: "exceeded_max_body_size",
          exceeded_max_body_size: this.core.maxBodySize,
        };
      case BODY_STALLED:
        return { type: "http.disconnect", reason: "body_stalled" };
      case BODY_MALFORMED:
        return { type: "http.disconnect", reason: "body_malformed" };
      case BODY_FAILED:
        return { type: "http.disconnect", reason: "body_failed" };
      default:
        return disconnect();
    }
  }

  /**
   * Why a read of the body failed, as the transport tells: nothing to note for a client that
   * left; else the state that makes every `http.disconnect` from now on say so, and a log line.
   */
  #readFailedWith(error: unknown): void {
    if (this.#gone || this.#phase === DONE) return;
    this.bodyUnreadable(this.readFailed(error), error);
  }

  /**
   * The body cannot be read to its end, for `failure`: unless the client left, every
   * `http.disconnect` from now on says why, and a line is logged. For a transport that learns
   * of a malformed body before its read fails (node's parser error); else see `readFailed`.
   *
   * @param failure Why.
   * @param error What the read failed with, if known.
   */
  protected bodyUnreadable(failure: BodyFailure, error?: unknown): void {
    if (failure === "client_left" || this.#body !== BODY_PENDING) return;
    if (failure === "body_malformed") {
      this.#body = BODY_MALFORMED;
      const line =
        "Request body malformed: it could not be read; the request ends and the connection closes";
      // The client's doing, and any client can do it: within the log limit.
      this.core.warnOf(line, line);
    } else {
      this.#body = BODY_FAILED;
      // The program that built the Request gave a body that fails: its own fault, not a client's.
      this.core.logger.error("Request body stream failed; answered 500:", error);
    }
  }

  #waitForEnd(): Promise<ReceiveMessage> {
    // A HEAD (or 204, 304) response is whole once its head is out, whatever the application
    // still sends: the transports stop watching the client then, so waiting would be for good.
    if (this.#phase === STREAMING && this.#discard) return Promise.resolve(disconnect());
    this.watchClient();
    return new Promise((resolve) => (this.#waiters ??= []).push(resolve));
  }

  #wakeWaiters(): void {
    const reader = this.#readWaiter;
    if (reader !== null) {
      this.#readWaiter = null;
      reader(this.#disconnectMessage());
    }
    this.#wakeEndWaiters();
  }

  /** Wakes every `receive` waiting, after the body, for the end of the exchange. */
  #wakeEndWaiters(): void {
    const waiters = this.#waiters;
    if (waiters === null) return;
    this.#waiters = null;
    for (const wake of waiters) wake(this.#disconnectMessage());
  }

  #send(message: SendMessage): Promise<void> | undefined {
    if (typeof message !== "object" || message === null) {
      throw new AsgiProtocolError(
        `Invalid message ${describe(message)}: send an object with a "type" key`,
      );
    }
    const type = message.type;
    const phase = this.#phase;
    if (phase === AWAIT_START) {
      if (type === "http.response.start") {
        this.#start(message as HttpResponseStartMessage);
        return;
      }
      if (type === "http.response.body") {
        throw new AsgiProtocolError(
          'Cannot send "http.response.body" before "http.response.start": start the response first',
        );
      }
      throw new AsgiProtocolError(
        `Cannot send ${describe(type)} on an HTTP connection: expected "http.response.start"`,
      );
    }
    if (phase === DONE) {
      if (this.#endedByServer) return;
      throw new AsgiProtocolError(
        `Cannot send ${
          describe(type)
        } after the response completed: the last body message had "more_body" false`,
      );
    }
    if (type === "http.response.body") return this.#sendBody(message as HttpResponseBodyMessage);
    if (type === "http.response.start") {
      throw new AsgiProtocolError(
        'Cannot send "http.response.start" twice: the response has already started',
      );
    }
    throw new AsgiProtocolError(
      `Cannot send ${describe(type)} on an HTTP connection: expected "http.response.body"`,
    );
  }

  #start(message: HttpResponseStartMessage): void {
    const status = checkStatus(message.status, "http.response.start", message);
    if (message.trailers !== undefined && message.trailers !== false) {
      throw new AsgiProtocolError(
        `Invalid "trailers" ${
          describe(message.trailers)
        } in "http.response.start": response trailers are not supported, leave the key out`,
      );
    }
    const raw = message.headers;
    let headers: [string, string][] = [];
    let declared = -1;
    /** The values of the `transfer-encoding` fields, if any. */
    let codings: string[] | null = null;
    /** A pair left out of `headers`: the list is then not one `sameHeaderList` can reuse. */
    let dropped = false;
    if (Array.isArray(raw) && sameHeaderList(raw)) {
      headers = lastHeaders;
      declared = lastDeclared;
      codings = lastCodings;
    } else if (raw !== undefined) {
      if (raw === null || typeof (raw as Iterable<unknown>)[Symbol.iterator] !== "function") {
        throw headersError(raw, "http.response.start");
      }
      for (const pair of raw) {
        const name = pair?.[0];
        const value = pair?.[1];
        if (!(name instanceof Uint8Array) || !(value instanceof Uint8Array) || pair.length !== 2) {
          throw headerPairError(pair, "http.response.start");
        }
        let nameText = headerNames.get(name);
        if (nameText === undefined) headerNames.set(name, nameText = headerName(name));
        let valueText = headerValues.get(value);
        if (valueText === undefined) {
          headerValues.set(value, valueText = headerValue(nameText, value));
        }
        if (nameText.length === 14 && nameText.toLowerCase() === "content-length") {
          const repeated = declared !== -1;
          declared = declaredLength(declared, valueText, "http.response.start");
          // One field for equal repeats, as h11 (uvicorn) sends: node:http wrote both, and
          // Node.js clients refused the response ("Duplicate Content-Length").
          if (repeated) {
            dropped = true;
            continue;
          }
        } else if (nameText.length === 17 && nameText.toLowerCase() === "transfer-encoding") {
          (codings ??= []).push(valueText);
        }
        headers.push([nameText, valueText]);
      }
      // A transfer-encoding wins over a content-length, which both transports drop (RFC 9112
      // §6.3): the body is not held to it. It once was, and a body longer than the dropped
      // length ended in a protocol error and a truncated chunked response.
      if (codings !== null) declared = -1;
      if (Array.isArray(raw) && !dropped) {
        lastPairs = raw.slice();
        lastHeaders = headers;
        lastDeclared = declared;
        lastCodings = codings;
      }
    }
    // A 204's and a 205's framing fields are replaced below whatever they say: no coded body can
    // go out.
    if (codings !== null && status !== 204 && status !== 205) {
      checkCodings(codings);
      for (const coding of codings) this.checkTransferCoding(coding);
    }
    this.#status = status;
    this.#headers = status === 205
      ? resetContentHeaders(headers)
      : status === 204
      ? noContentHeaders(headers)
      : headers;
    this.#declaredLength = declared;
    this.#discard = this.scope.method === "HEAD" || isNullBodyStatus(status);
    this.#phase = STARTED;
  }

  #sendBody(message: HttpResponseBodyMessage): Promise<void> | undefined {
    const body = message.body === undefined ? EMPTY : message.body;
    if (!(body instanceof Uint8Array)) {
      throw new AsgiProtocolError(
        `Invalid "body" ${describe(body)} in "http.response.body": use a Uint8Array` +
          (typeof body === "string" ? "; encode text with textBytes()" : ""),
      );
    }
    let more = message.more_body;
    if (more === undefined) {
      more = false;
      warnCamelMoreBody(this.core, message, "http.response.body");
    } else if (typeof more !== "boolean") {
      throw new AsgiProtocolError(
        `Invalid "more_body" ${describe(more)} in "http.response.body": use true or false`,
      );
    }
    const discard = this.#discard;
    const declared = this.#declaredLength;
    if (declared >= 0 && !discard) {
      this.#sentLength = checkDeclaredLength(declared, this.#sentLength + body.length, more);
    }
    if (this.#phase === STARTED) {
      if (discard) {
        this.#phase = more ? STREAMING : DONE;
        // A HEAD response given whole, without a content-length, goes out with its body so the
        // transport states the length a GET would get (RFC 9110 §9.3.2); both transports drop
        // the bytes themselves. Else no body, and no length unless the application set one.
        const whole = !more && declared < 0 && body.length > 0 && !isNullBodyStatus(this.#status);
        this.sendWhole(this.#status, this.#headers, whole ? body : null);
      } else if (!more) {
        this.#phase = DONE;
        this.sendWhole(this.#status, this.#headers, body);
      } else {
        this.#phase = STREAMING;
        this.openStream(this.#status, this.#headers);
        return body.length === 0 ? undefined : this.#watchTaken(this.writeChunk(copyBytes(body)));
      }
    } else if (discard) {
      if (more) return;
      this.#phase = DONE;
    } else if (more) {
      // A copy: both transports hold a streamed chunk until the client takes it, and `send`
      // resolves before that, when the application may change its array (reading a file into one
      // buffer does). The spec has the data in the server's send buffer once `send` returns; a
      // stream of one reused 16 KiB buffer reached the client with 64 of 64 chunks overwritten
      // on deno, 48 on node (tests/asgi_send_copy_test.ts).
      return body.length === 0 ? undefined : this.#watchTaken(this.writeChunk(copyBytes(body)));
    } else {
      this.#phase = DONE;
      this.endStream(body.length === 0 ? body : copyBytes(body));
    }
    if (this.#phase !== DONE) {
      // A HEAD, 204 or 304 response the application streams went out whole: a receive waiting
      // for the end learns it (see #waitForEnd), but a body read goes on. Waking it too told the
      // application of a disconnect while the client was still sending, lost the chunk the read
      // then got, and left a receive chained behind it looping (review, 2026-11-28).
      this.#wakeEndWaiters();
      return;
    }
    this.#wakeWaiters();
    if (this.#appDone) this.#finish();
    else this.responseComplete();
  }

  /**
   * `send`'s wait for the client to take what was written before, watched for a stall. The
   * transports resolve it when the client has taken those chunks (a drain, a pull), so a mark
   * this old means the client took nothing since.
   */
  #watchTaken(wait: Promise<void> | undefined): Promise<void> | undefined {
    if (wait === undefined || this.core.stallTimeout === Infinity) return wait;
    if (this.writeMark < 0) this.writeMark = this.core.waitBegins();
    // A closure made here, on a wait, and not one per cycle made with it: as a field it cost
    // every request, GET included, some 70 B (8.56 -> 8.63 KB per GET in bench:profile).
    return wait.then(() => {
      this.writeMark = -1;
    });
  }

  /**
   * The client kept this request waiting for `stallTimeout` with nothing moving: no byte of the
   * body the application waits for arrived, or the client took no byte of the response `send`
   * waits to write. The server gives up on it as on a client that left (the application's
   * `receive` says `http.disconnect`, its sends are dropped) and closes the connection: with a
   * 408 when the body stalled before the response began (nginx's `client_body_timeout` answers
   * so), else by cutting the response off.
   *
   * @param bodyStalled Whether the body stalled (else the response).
   */
  stalled(bodyStalled: boolean): void {
    const sendWaits = this.writeMark >= 0;
    this.readMark = this.writeMark = -1;
    if (this.#gone || this.#phase === DONE) return;
    const timeout = this.core.stallTimeout;
    let outcome: string;
    if (bodyStalled) {
      this.#body = BODY_STALLED;
      this.refuseBody();
      if (this.#phase === AWAIT_START) {
        this.#closingAnswer(408, "Request Timeout");
        outcome = "answered 408 and disconnected";
      } else {
        this.abortResponse(new Error("Request body stalled"), this.#status, this.#headers);
        // A send waits on this client too, which takes nothing either: a close that waits for
        // those bytes to go out held the send and the connection until the client read (node).
        if (sendWaits) this.dropConnection();
        outcome = "cut the response off and disconnected";
      }
      const line =
        `Request body stalled: nothing arrived for stallTimeout ${timeout} ms; ${outcome}`;
      this.core.warnOf(line, line);
    } else {
      this.abortResponse(new Error("Response stalled"), this.#status, this.#headers);
      this.dropConnection();
      const line = `Response stalled: the client took nothing for stallTimeout ${timeout} ms; ` +
        "cut the response off and disconnected";
      this.core.warnOf(line, line);
    }
    this.#giveUp();
    this.#finish();
  }

  #returned(): void {
    const phase = this.#phase;
    // A client that went away explains an unfinished response, as in uvicorn: nothing to report.
    if (phase === DONE || this.#gone) return;
    if (phase === STREAMING && this.#discard) {
      // A HEAD (or 204, 304) response is whole once its head is out (receive() then says
      // http.disconnect): an application that stops streaming the body nobody gets has left
      // nothing unfinished on the wire. (uvicorn logs it as returning mid-response.)
      this.#phase = DONE;
      return;
    }
    this.#endedByServer = true;
    if (phase === AWAIT_START) {
      this.core.logger.error("ASGI callable returned without starting response");
      this.#internalError();
    } else {
      const message = "ASGI callable returned without completing response";
      this.core.logger.error(message);
      this.abortResponse(new Error(message), this.#status, this.#headers);
    }
    this.#phase = DONE;
  }

  #raised(error: unknown): void {
    if (error instanceof ResponseCutOffError) {
      // Intended, and said so by the application: one line, no stack (issue 10, point 7).
      this.core.warnOf("Response cut off", `Response cut off: ${error.message}`);
    } else if (error !== this.#reported) {
      this.core.logger.error("Exception in ASGI application\n", error);
    }
    const phase = this.#phase;
    if (phase === DONE) return;
    this.#endedByServer = true;
    if (!this.#gone) {
      if (phase === AWAIT_START) this.#internalError();
      else this.abortResponse(error, this.#status, this.#headers);
    }
    this.#phase = DONE;
  }

  #internalError(): void {
    this.sendWhole(500, [
      ["content-type", "text/plain; charset=utf-8"],
      ["content-length", "21"],
    ], textBytes("Internal Server Error"));
  }

  #tooLarge(): void {
    this.#body = BODY_REFUSED;
    // First, while the transport can still act before the 413 is on its way.
    this.refuseBody();
    const exceeds = `Request body exceeds maxBodySize ${this.core.maxBodySize}`;
    // The log says what the client got: a response begun (its head sent, or held back here) is
    // cut off, not replaced by a 413.
    let outcome: string;
    if (this.#phase === AWAIT_START) {
      this.#closingAnswer(413, "Content Too Large");
      outcome = ": answered 413 and disconnected";
    } else if (this.#phase !== DONE) {
      this.abortResponse(new RangeError(exceeds), this.#status, this.#headers);
      outcome = " after the response started: cut the response off (no 413) and disconnected";
    } else {
      outcome = " after the response ended: disconnected";
    }
    const line = exceeds + outcome;
    this.core.warnOf(line, line);
    this.#giveUp();
  }

  /** The server's own answer to a request whose body it refuses, closing the connection. */
  #closingAnswer(status: number, text: string): void {
    this.sendWhole(status, [
      ["content-type", "text/plain; charset=utf-8"],
      ["content-length", String(text.length)],
      ["connection", "close"],
    ], textBytes(text));
  }

  /**
   * The server has ended the exchange in the application's stead: what it still sends is
   * dropped, and `receive` says `http.disconnect`.
   */
  #giveUp(): void {
    this.#endedByServer = true;
    this.#phase = DONE;
    this.#gone = true;
    this.#wakeWaiters();
  }

  /** Called when the app has returned and after each event that may end the cycle. */
  #finish(): void {
    if (this.#finished || !this.#appDone || (this.#phase !== DONE && !this.#gone)) return;
    this.#finished = true;
    this.#wakeWaiters();
    this.closeExchange();
    this.core.untrack(this);
  }
}

/**
 * The last few header names or values converted to text, by the identity of their bytes:
 * applications send the same arrays again and again (constant header lists, the web layer's
 * cached fields), and comparing the bytes with a copy of those converted costs less than making
 * the text again (some 13 ns against 80 for a 25-byte value on this machine). A hit is checked
 * byte by byte, so an array written into since is converted afresh; what is cached passed
 * validation already.
 */
class TextCache {
  static readonly SIZE = 16;
  readonly #keys: (Uint8Array | null)[] = new Array(TextCache.SIZE).fill(null);
  /** The bytes each key held when it was converted (in a shared buffer: no ArrayBuffer each). */
  readonly #copies: Uint8Array[] = new Array(TextCache.SIZE).fill(EMPTY);
  readonly #texts: string[] = new Array(TextCache.SIZE).fill("");
  #next = 0;

  get(bytes: Uint8Array): string | undefined {
    const keys = this.#keys;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] !== bytes) continue;
      // Bytes against bytes: twice as fast as against the text's char codes.
      const copy = this.#copies[i]!;
      const length = bytes.length;
      if (copy.length !== length) return undefined;
      for (let j = 0; j < length; j++) {
        if (bytes[j] !== copy[j]) return undefined;
      }
      return this.#texts[i];
    }
    return undefined;
  }

  set(bytes: Uint8Array, text: string): void {
    if (bytes.length > SLAB_MAX) return;
    const { buffer, bytes: slab, offset } = reserve(bytes.length);
    slab.set(bytes, offset);
    const at = this.#next;
    this.#keys[at] = bytes;
    this.#copies[at] = new Uint8Array(buffer, offset, bytes.length);
    this.#texts[at] = text;
    this.#next = (at + 1) % TextCache.SIZE;
  }
}

/**
 * The pairs of the last response header list converted, and what they were converted to: an
 * application that sends the same pairs again (one constant list, or a fresh list of shared
 * pairs, as the web layer sends) gets the converted list again, without a new array and pairs
 * per response. A hit is checked pair by pair by identity and, through the text caches, byte by
 * byte; a pair or array changed since is converted afresh. Transports only read the list they
 * are given.
 */
let lastPairs: unknown[] = [];
let lastHeaders: [string, string][] = [];
let lastDeclared = -1;
let lastCodings: string[] | null = null;

function sameHeaderList(raw: unknown): boolean {
  const list = raw as readonly (readonly unknown[])[];
  const pairs = lastPairs;
  if (list.length !== pairs.length) return false;
  const headers = lastHeaders;
  for (let i = 0; i < pairs.length; i++) {
    const pair = list[i]!;
    if (pair !== pairs[i] || pair.length !== 2) return false;
    const converted = headers[i]!;
    if (headerNames.get(pair[0] as Uint8Array) !== converted[0]) return false;
    if (headerValues.get(pair[1] as Uint8Array) !== converted[1]) return false;
  }
  return true;
}

const headerNames = new TextCache();
const headerValues = new TextCache();
