/**
 * The transport-independent half of the ASGI bridge: one request/response cycle (`HttpCycle`), the
 * lifespan protocol (`Lifespan`) and the state both transports share (`Core`). A transport
 * subclasses `HttpCycle` and fills in how bytes reach the client.
 *
 * What a request costs, and why it is shaped so (issue 13; figures in docs/performance.md). In
 * Deno a view into a buffer costs some 70 ns and 104 B to make, a closure 64 B, a resolver pair
 * about 300 B, and copying a frozen array takes a slow path (272 ns against 17 for two pairs):
 *
 * - **Header names are shared where Python would share them.** They come from a bounded cache of
 *   names seen before (`NameBytes`), checked on every use; values and paths, which a program
 *   might wipe or rewrite in place, are each request's own, copied into one shared buffer by one
 *   packer (`BytePack`), with no record per request.
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
  HttpDisconnectMessage,
  HttpRequestMessage,
  HttpResponseBodyMessage,
  HttpResponseStartMessage,
  HttpScope,
  LifespanScope,
  ReceiveMessage,
  SendMessage,
} from "./types.ts";
import { copyBytes, latin1Text, reserve, SLAB_MAX, textBytes } from "./bytes.ts";
import { unquote } from "./percent.ts";
import { describe, errorText } from "../_common/describe.ts";
import { logQuoted, logText } from "../_common/log_text.ts";

/**
 * A `send()` call broke the ASGI protocol: the application's mistake, raised by that `send()`,
 * with the message it sent and the fix in its text. If the application lets it escape, the
 * request ends as for any exception (a 500 when nothing was sent yet) and it is logged.
 *
 * @example A body sent before the response's start
 * ```ts
 * import { AsgiProtocolError, createFetchHandler } from "@stellarator/stellarator/asgi";
 * import { assertEquals, assertInstanceOf } from "@std/assert";
 *
 * let raised: unknown;
 * const handler = createFetchHandler(async (scope, _receive, send) => {
 *   if (scope.type !== "http") return;
 *   try {
 *     await send({ type: "http.response.body", body: new Uint8Array() });
 *   } catch (error) {
 *     raised = error;
 *     throw error;
 *   }
 * }, { lifespan: "off", logger: { error() {}, warn() {}, info() {} } });
 * const response = await handler.fetch(new Request("http://localhost/"));
 * assertEquals(response.status, 500);
 * assertInstanceOf(raised, AsgiProtocolError);
 * ```
 */
export class AsgiProtocolError extends Error {
  /**
   * Creates the error.
   *
   * @param message What broke the protocol.
   *
   * @example Usage
   * ```ts
   * import { AsgiProtocolError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new AsgiProtocolError('Cannot send "http.response.body" before "http.response.start"');
   * assertEquals(error.name, "AsgiProtocolError");
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "AsgiProtocolError";
  }
}

/**
 * Raised by an application to cut its own response off on purpose, a time limit say: the bridge
 * ends the exchange as for any exception (500 before the start; after it, the connection closed
 * without completing the response), but logs one warning line, `Response cut off: <message>`,
 * instead of "Exception in ASGI application" with a stack. The web layer raises it when a stream
 * outlives the request time limit.
 */
export class ResponseCutOffError extends Error {
  /**
   * Creates the error.
   *
   * @param message Why the response is cut off; it is logged as the warning.
   * @param options The underlying cause, if any.
   *
   * @example A stream cut at a deadline
   * ```ts
   * import { ResponseCutOffError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new ResponseCutOffError("GET /feed was still streaming at its limit of 1 s");
   * assertEquals(error.name, "ResponseCutOffError");
   * ```
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ResponseCutOffError";
  }
}

/**
 * Lifespan startup or shutdown failed: the application said so, or raised with lifespan `"on"`.
 * `serve()`'s `addr` and `finished` reject with it when startup fails; `phase` says which.
 *
 * @example Telling a failed startup from a port that is taken
 * ```ts
 * import { LifespanError } from "@stellarator/stellarator/asgi";
 *
 * function explain(error: unknown): string {
 *   if (error instanceof LifespanError) return `lifespan ${error.phase} failed: ${error.message}`;
 *   return `could not serve: ${error}`;
 * }
 * console.assert(explain(new LifespanError("startup", "no database")).startsWith("lifespan"));
 * ```
 */
export class LifespanError extends Error {
  /** The phase that failed. */
  readonly phase: "startup" | "shutdown";

  /**
   * Creates the error.
   *
   * @param phase The phase that failed.
   * @param message The application's message, or a description of what went wrong.
   * @param options The underlying error, if the application raised.
   *
   * @example Usage
   * ```ts
   * import { LifespanError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new LifespanError("startup", "Database unreachable");
   * assertEquals(error.phase, "startup");
   * ```
   */
  constructor(phase: "startup" | "shutdown", message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LifespanError";
    this.phase = phase;
  }
}

/** A zero-length array; safe to share because it holds nothing to mutate. */
export const EMPTY: Uint8Array = new Uint8Array(0);
const RESOLVED: Promise<void> = Promise.resolve();

/**
 * What `send` returns for a message it took at once, whole (or dropped because the client is
 * gone): this very promise, already resolved. A caller that recognises it knows, without an
 * await, that the message is done with; the web layer sends a fixed response's body right after
 * its head that way, and completes the request in the same turn.
 */
export const ACCEPTED: Promise<void> = Promise.resolve();

/** `Promise.withResolvers`, which Node.js 20 lacks; the node transport runs there too. */
export function withResolvers<T>(): PromiseWithResolvers<T> {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const utf8Encoder = new TextEncoder();

/**
 * Copies the byte strings of one request (raw path, query, header names and values) into a
 * shared buffer and hands out views of it (see `bytes.ts` for why, and what it costs). One packer
 * serves every request: `httpScope` opens it and fills it without yielding, so no request's
 * packing interleaves with another's, and none allocates a packer of its own.
 */
class BytePack {
  #buffer: ArrayBuffer = new ArrayBuffer(0);
  #bytes: Uint8Array = EMPTY;
  #offset = 0;

  /** Makes room for `size` bytes, the sum of the lengths of what is to be packed. */
  open(size: number): void {
    if (size > SLAB_MAX) {
      this.#bytes = new Uint8Array(size);
      this.#buffer = this.#bytes.buffer as ArrayBuffer;
      this.#offset = 0;
      return;
    }
    const space = reserve(size);
    this.#buffer = space.buffer;
    this.#bytes = space.bytes;
    this.#offset = space.offset;
  }

  /** A string of code units below 0x100 (a WebIDL ByteString, as headers are) as its bytes. */
  latin1(text: string): Uint8Array {
    const bytes = this.#bytes;
    const start = this.#offset;
    for (let i = 0; i < text.length; i++) bytes[start + i] = text.charCodeAt(i);
    this.#offset = start + text.length;
    return new Uint8Array(this.#buffer, start, text.length);
  }

  /** `prefix` then `text` as UTF-8; request targets are ASCII nearly always. */
  target(prefix: Uint8Array, text: string): Uint8Array {
    // Most requests have no query (and no root path): no view to make for it.
    if (text.length === 0 && prefix.length === 0) return EMPTY;
    const bytes = this.#bytes;
    const start = this.#offset;
    const from = start + prefix.length;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code >= 0x80) {
        // Rare: a raw non-ASCII target. Its own array; the space reserved for it stays unused.
        const encoded = utf8Encoder.encode(text);
        const out = new Uint8Array(prefix.length + encoded.length);
        out.set(prefix);
        out.set(encoded, prefix.length);
        return out;
      }
      bytes[from + i] = code;
    }
    if (prefix.length > 0) bytes.set(prefix, start);
    this.#offset = from + text.length;
    return new Uint8Array(this.#buffer, start, this.#offset - start);
  }
}

const pack = new BytePack();

/** Header names up to this long are kept as bytes for the next request that repeats them. */
const NAME_CACHE_LENGTH = 64;
/** Beyond this many names the cache starts over, so made-up names cannot grow it. */
const NAME_CACHE_ENTRIES = 256;
/** The cached bytes live in buffers of this size, apart from the requests' own bytes. */
const NAME_ARENA_SIZE = 4 * 1024;

/**
 * The bytes of request header names seen before. A request's names nearly all repeat the last
 * one's, and a view into a shared buffer costs Deno some 70 ns and 104 B to make, more than
 * finding the name in a map: a repeated name then costs no view and no copy. The scopes of
 * requests that repeat a name share its array, as Python shares equal immutable `bytes`.
 *
 * Only names: a value (a token, a cookie) or a path is what a program might rewrite or wipe in
 * place, and a shared array would carry that into other requests; nobody writes into a header
 * name. Even so, a hit is checked against the text, so a name written into is replaced rather
 * than handed on. Cached bytes live in small buffers of their own, so a cached view never keeps
 * a request's 16 KiB buffer alive.
 */
class NameBytes {
  readonly #map = new Map<string, Uint8Array>();
  #arena = new ArrayBuffer(NAME_ARENA_SIZE);
  #arenaBytes = new Uint8Array(this.#arena);
  #offset = 0;

  /** The bytes of `name`, a ByteString of at most `NAME_CACHE_LENGTH` code units. */
  get(name: string): Uint8Array {
    const cached = this.#map.get(name);
    if (cached !== undefined && same(cached, name)) return cached;
    if (this.#map.size >= NAME_CACHE_ENTRIES) this.#map.clear();
    const length = name.length;
    if (this.#offset + length > NAME_ARENA_SIZE) {
      this.#arena = new ArrayBuffer(NAME_ARENA_SIZE);
      this.#arenaBytes = new Uint8Array(this.#arena);
      this.#offset = 0;
    }
    const start = this.#offset;
    const bytes = this.#arenaBytes;
    for (let i = 0; i < length; i++) bytes[start + i] = name.charCodeAt(i);
    this.#offset = start + length;
    const view = new Uint8Array(this.#arena, start, length);
    this.#map.set(name, view);
    return view;
  }
}

/** Whether `bytes` still hold the code units of `text`. */
function same(bytes: Uint8Array, text: string): boolean {
  if (bytes.length !== text.length) return false;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== text.charCodeAt(i)) return false;
  }
  return true;
}

const nameBytes = new NameBytes();

/** What a transport has read of a request before the application runs. */
export interface RequestHead {
  /** The method, as sent. */
  method: string;
  /** `"http"` or `"https"`. */
  scheme: string;
  /** `"1.0"`, `"1.1"`… */
  httpVersion: string;
  /** The path of the request target, still percent-encoded. */
  rawPath: string;
  /** The query after `?`, or `""`. */
  query: string;
  /** Header fields as `[name, value, name, value…]`, names lower case, values as ByteStrings. */
  fields: string[];
  /** The client's address. */
  client: [string, number] | null;
  /** The listening address. */
  server: [string, number] | null;
}

/**
 * The origin form (path and query) of a request target: an absolute-form target
 * (`http://host/path`, which proxies send) loses its scheme and authority.
 */
export function originForm(target: string): string {
  if (target.charCodeAt(0) === 47 /* "/" */) return target;
  const authority = target.indexOf("://");
  if (authority === -1) return target;
  const end = authorityEnd(target, authority + 3);
  // "http://host?q" has an empty path, which origin form writes "/".
  return end === target.length || target.charCodeAt(end) !== 47
    ? "/" + target.slice(end)
    : target.slice(end);
}

/**
 * Where the authority of a URL that starts at `start` ends: at the first "/", "?" or "#"
 * (RFC 3986 §3.2), or at its end. Taking the first "/" alone once read
 * "http://host?next=/admin" as path "/admin".
 */
export function authorityEnd(url: string, start: number): number {
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 /* "/" */ || c === 63 /* "?" */ || c === 35 /* "#" */) return i;
  }
  return url.length;
}

/**
 * Builds the HTTP scope of a request. The head's fields come as arguments rather than in a
 * `RequestHead` record: the transports call this once per request, and the record was garbage.
 *
 * @param core The shared state.
 * @param method The method, as sent.
 * @param scheme `"http"` or `"https"`.
 * @param httpVersion `"1.0"`, `"1.1"`…
 * @param rawPath The path of the request target, still percent-encoded.
 * @param query The query after `?`, or `""`.
 * @param fields Header fields as `[name, value, name, value…]`, names lower case.
 * @param count How many entries of `fields` are the request's (a transport may reuse a longer
 *   array from request to request).
 * @param client The client's address.
 * @param server The listening address: a frozen pair shared by the listener's requests, as
 *   uvicorn shares one tuple between the requests of a connection.
 * @returns The scope.
 */
export function httpScope(
  core: Core,
  method: string,
  scheme: string,
  httpVersion: string,
  rawPath: string,
  query: string,
  fields: string[],
  count: number,
  client: [string, number] | null,
  server: [string, number] | null,
): HttpScope {
  const root = core.rootPathBytes;
  let size = root.length + rawPath.length + query.length;
  for (let i = 0; i < count; i += 2) {
    const length = fields[i]!.length;
    if (length > NAME_CACHE_LENGTH) size += length;
    size += fields[i + 1]!.length;
  }
  pack.open(size);
  // Sized up front: an empty array grown by push() gets room for 17 pairs.
  const headers = new Array<[Uint8Array, Uint8Array]>(count >> 1);
  for (let i = 0; i + 1 < count; i += 2) {
    const name = fields[i]!;
    headers[i >> 1] = [
      name.length > NAME_CACHE_LENGTH ? pack.latin1(name) : nameBytes.get(name),
      pack.latin1(fields[i + 1]!),
    ];
  }
  const path = rawPath.indexOf("%") === -1 ? rawPath : unquote(rawPath);
  return {
    type: "http",
    asgi: { version: "3.0", spec_version: "2.1" },
    http_version: httpVersion,
    method,
    scheme,
    path: core.rootPath === "" ? path : core.rootPath + path,
    raw_path: pack.target(root, rawPath),
    query_string: pack.target(EMPTY, query),
    root_path: core.rootPath,
    headers,
    client,
    server,
    state: { ...core.lifespan.state },
    extensions: {},
  };
}

/** 1 for the bytes RFC 9110 allows in a header name (`tchar`). */
const TOKEN: Uint8Array = (() => {
  const table = new Uint8Array(256);
  const extra = "!#$%&'*+-.^_`|~";
  for (let c = 0x30; c <= 0x39; c++) table[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) table[c] = 1;
  for (let c = 0x61; c <= 0x7a; c++) table[c] = 1;
  for (const ch of extra) table[ch.charCodeAt(0)] = 1;
  return table;
})();

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

/** A listening transport, as `serve` drives it. */
export interface Listener {
  /** The bound address. */
  readonly addr: AsgiServerAddr;
  /** Stops accepting; resolves once the responses in flight are done. */
  close(): Promise<void>;
  /** Drops the connections that are left (after `Core.abortAll`). */
  forceClose(): void;
  /** Settles, with the reason, if the transport stops listening for good by itself. */
  readonly failed: Promise<unknown>;
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
const STALL_CHECKS = 4;
/** The shortest period between two stall checks, in milliseconds. */
const MIN_STALL_CHECK_MS = 10;

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
   * A request begins to wait on its client (a body read, or a chunk the client must take first):
   * returns the mark its wait carries, and makes sure the stall check runs. One interval for all
   * requests, started here and stopped by a check that finds no request waiting: a timer per
   * wait would cost every small upload a timer armed and cleared (the `POST` hot path), where a
   * mark costs a field.
   */
  waitBegins(): number {
    if (this.#stallCheck === undefined && this.stallTimeout < Infinity) {
      const period = Math.max(MIN_STALL_CHECK_MS, Math.floor(this.stallTimeout / STALL_CHECKS));
      const check = setInterval(this.#checkStalls, period);
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
 * The `status` of a response start message, checked: an integer from 200 to 599 (1xx answers are
 * the server's to send, and nothing outside 100-599 is a status).
 *
 * @param status The message's `status`, as the application gave it.
 * @param type The message type, for the error.
 * @returns The status.
 */
export function checkStatus(status: unknown, type: string): number {
  if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
    throw new AsgiProtocolError(
      `Invalid "status" ${describe(status)} in ${
        JSON.stringify(type)
      }: use an integer from 200 to 599`,
    );
  }
  return status;
}

/** Statuses whose responses carry no body: HTTP forbids one and Fetch refuses one. */
export function isNullBodyStatus(status: number): boolean {
  return status === 204 || status === 205 || status === 304;
}

/**
 * A 205 carries no content, but unlike 204 and 304 its framing still counts (RFC 9112 §6.3): it
 * states `content-length: 0` (RFC 9110 §15.3.6), whatever framing the application declared. A
 * `transfer-encoding` goes too: never both (RFC 9112 §6.1); node:http sent both, and closed.
 */
export function resetContentHeaders(headers: [string, string][]): [string, string][] {
  const kept = headers.filter(([name]) => {
    const lower = name.toLowerCase();
    return lower !== "content-length" && lower !== "transfer-encoding";
  });
  kept.push(["content-length", "0"]);
  return kept;
}

/**
 * A 204 states no framing at all (RFC 9110 §8.6, RFC 9112 §6.1: a server MUST NOT send
 * `content-length` or `transfer-encoding` with one). node:http passed an application's on, and
 * closed the connection after a `transfer-encoding`; Deno.serve drops them itself.
 */
export function noContentHeaders(headers: [string, string][]): [string, string][] {
  return headers.filter(([name]) => {
    const lower = name.toLowerCase();
    return lower !== "content-length" && lower !== "transfer-encoding";
  });
}

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
    if (this.#gone || this.#phase === DONE) return Promise.resolve(disconnect());
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
    if (this.#reading !== null && this.#readWaiter === null) return disconnect();
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
        if (this.#gone || this.#phase === DONE) return resolve(disconnect());
        resolve(this.#chunkMessage(chunk));
      },
      () => {
        this.readMark = -1;
        this.#reading = null;
        this.#readWaiter = null;
        this.clientGone();
        resolve(disconnect());
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
      return disconnect();
    }
    const expected = this.#expectedLength;
    const more = expected < 0 || received < expected;
    if (!more) this.#body = BODY_DONE;
    const message: HttpRequestMessage = { type: "http.request", body: chunk, more_body: more };
    return message;
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
      reader(disconnect());
    }
    this.#wakeEndWaiters();
  }

  /** Wakes every `receive` waiting, after the body, for the end of the exchange. */
  #wakeEndWaiters(): void {
    const waiters = this.#waiters;
    if (waiters === null) return;
    this.#waiters = null;
    for (const wake of waiters) wake(disconnect());
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
    const status = checkStatus(message.status, "http.response.start");
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
    if (Array.isArray(raw) && sameHeaderList(raw)) {
      headers = lastHeaders;
      declared = lastDeclared;
      codings = lastCodings;
    } else if (raw !== undefined) {
      if (raw === null || typeof (raw as Iterable<unknown>)[Symbol.iterator] !== "function") {
        throw new AsgiProtocolError(
          `Invalid "headers" ${
            describe(raw)
          } in "http.response.start": use an array of [Uint8Array, Uint8Array] pairs`,
        );
      }
      for (const pair of raw) {
        const name = pair?.[0];
        const value = pair?.[1];
        if (!(name instanceof Uint8Array) || !(value instanceof Uint8Array) || pair.length !== 2) {
          throw new AsgiProtocolError(
            `Invalid header ${
              describe(pair)
            } in "http.response.start": each header is a [Uint8Array, Uint8Array] pair`,
          );
        }
        let nameText = headerNames.get(name);
        if (nameText === undefined) headerNames.set(name, nameText = headerName(name));
        let valueText = headerValues.get(value);
        if (valueText === undefined) {
          headerValues.set(value, valueText = headerValue(nameText, value));
        }
        if (nameText.length === 14 && nameText.toLowerCase() === "content-length") {
          declared = declaredLength(declared, valueText, "http.response.start");
        } else if (nameText.length === 17 && nameText.toLowerCase() === "transfer-encoding") {
          (codings ??= []).push(valueText);
        }
        headers.push([nameText, valueText]);
      }
      // A transfer-encoding wins over a content-length, which both transports drop (RFC 9112
      // §6.3): the body is not held to it. It once was, and a body longer than the dropped
      // length ended in a protocol error and a truncated chunked response.
      if (codings !== null) declared = -1;
      if (Array.isArray(raw)) {
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
        `Invalid "body" ${describe(body)} in "http.response.body": use a Uint8Array`,
      );
    }
    const more = message.more_body === undefined ? false : message.more_body;
    if (typeof more !== "boolean") {
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
      this.core.logger.warn(
        `Request body stalled: nothing arrived for stallTimeout ${timeout} ms; ${outcome}`,
      );
    } else {
      this.abortResponse(new Error("Response stalled"), this.#status, this.#headers);
      this.dropConnection();
      this.core.logger.warn(
        `Response stalled: the client took nothing for stallTimeout ${timeout} ms; cut the response off and disconnected`,
      );
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
      this.core.logger.warn(`Response cut off: ${error.message}`);
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
    this.core.logger.warn(exceeds + outcome);
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

export function headerName(bytes: Uint8Array): string {
  if (bytes.length === 0) {
    throw new AsgiProtocolError(
      'Invalid header name "": a header name is one or more token characters',
    );
  }
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (TOKEN[byte] !== 1) {
      throw new AsgiProtocolError(
        // Quoted by logQuoted: the name is the application's (maybe a client's) text, of any
        // length, and the message is logged.
        `Invalid header name ${logQuoted(latin1Text(bytes))}: byte 0x${
          byte.toString(16)
        } is not allowed in a header name; use letters, digits and !#$%&'*+-.^_\`|~ only`,
      );
    }
  }
  return latin1Text(bytes);
}

export function headerValue(name: string, bytes: Uint8Array): string {
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    // RFC 9110 5.5: tab, visible ASCII, space and obs-text (0x80-0xff). CR and LF would split the
    // response; any other control byte made Deno's writer panic and end the whole process.
    if ((byte < 0x20 && byte !== 0x09) || byte === 0x7f) {
      throw new AsgiProtocolError(
        `Invalid value for header ${describe(name)}: byte 0x${
          byte.toString(16).padStart(2, "0")
        } is a control character; a header value holds tab, space, visible ASCII and bytes ` +
          `0x80-0xff only (CR and LF would split the response): percent-encode the text`,
      );
    }
  }
  return latin1Text(bytes);
}

/**
 * Checks the body bytes sent so far against the `content-length` a response declared: throws
 * `AsgiProtocolError` once they exceed it, or when the last chunk leaves them short. Returns
 * `total`.
 */
export function checkDeclaredLength(declared: number, total: number, more: boolean): number {
  if (total > declared) {
    throw new AsgiProtocolError(
      `Response body is longer than its content-length ${declared}: ${total} bytes sent, fix the header or the body`,
    );
  }
  if (!more && total < declared) {
    throw new AsgiProtocolError(
      `Response body is shorter than its content-length ${declared}: ${total} bytes sent, fix the header or the body`,
    );
  }
  return total;
}

/**
 * Adds a `content-length` value to what a response's earlier ones declared (-1 for none), for
 * `http.response.start` and a WebSocket denial alike.
 *
 * @param declared The length declared so far, or -1.
 * @param value The header's value.
 * @param type The message type, for the error.
 * @returns The declared length.
 * @throws {AsgiProtocolError} When the value is not a byte count, or differs from an earlier
 *   one: two framings of one response put a proxy that reads the other out of step with the
 *   connection (RFC 9112 6.3; h11 refuses this too).
 */
export function declaredLength(declared: number, value: string, type: string): number {
  const length = contentLength(value);
  if (declared !== -1 && length !== declared) {
    throw new AsgiProtocolError(
      `Invalid header "content-length: ${
        logText(value)
      }" in "${type}": an earlier content-length says ` +
        `${declared}; send one length`,
    );
  }
  return length;
}

/**
 * Whether `text` is a token (RFC 9110, 5.6.2): what a header name, or an offered WebSocket
 * subprotocol, must be.
 */
export function isToken(text: string): boolean {
  if (text.length === 0) return false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0xff || TOKEN[code] !== 1) return false;
  }
  return true;
}

/** Parses a response's `content-length`; throws `AsgiProtocolError` unless it is a byte count. */
function contentLength(value: string): number {
  // The usual value is a few plain digits: read them without trim() and a regex.
  if (value.length > 0 && value.length <= 15) {
    let n = 0;
    let i = 0;
    for (; i < value.length; i++) {
      const digit = value.charCodeAt(i) - 0x30;
      if (digit < 0 || digit > 9) break;
      n = n * 10 + digit;
    }
    if (i === value.length) return n;
  }
  // Only SP and HTAB may surround it (RFC 9110 5.6.3): trim() also passed NBSP, which node then
  // wrote out ("content-length: 5\xa0"), a length strict clients refuse (uvicorn's h11: 500).
  const digits = /^[ \t]*([0-9]{1,15})[ \t]*$/.exec(value);
  if (digits === null) {
    throw new AsgiProtocolError(
      `Invalid value ${describe(value)} for header "content-length": use a decimal byte count`,
    );
  }
  return Number(digits[1]);
}

/** Parses a request's `content-length`; -1 when absent or unusable. */
export function parseContentLength(value: string | null | undefined): number {
  if (value === null || value === undefined) return -1;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : -1;
}

/**
 * `text` without leading and trailing optional whitespace: SP and HTAB only (RFC 9110, 5.6.3).
 * `trim()` also strips NBSP (0xA0) and the like, which `ws` and Deno's `upgradeWebSocket` keep:
 * `Upgrade: websocket\xa0` passed the WebSocket checks, and the application was called and accepted
 * before the transport refused the handshake (a 500 and a logged error on deno).
 */
export function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text.charCodeAt(start) === 0x20 || text.charCodeAt(start) === 0x09)) {
    start++;
  }
  while (end > start && (text.charCodeAt(end - 1) === 0x20 || text.charCodeAt(end - 1) === 0x09)) {
    end--;
  }
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/**
 * Whether a comma-separated field value (`connection`, `upgrade`) lists `token`, compared without
 * regard to case and optional whitespace.
 *
 * @param value The field value.
 * @param token The token, lower case.
 */
export function hasToken(value: string, token: string): boolean {
  return value.toLowerCase().split(",").some((part) => trimOws(part) === token);
}

/**
 * Refuses a response `transfer-encoding` list with an element that is not a bare coding name, or
 * that names `chunked` more than once (RFC 9112 §6.1: a sender applies it once). node:http frames
 * the body by its own reading of the list: it sent `transfer-encoding: chunked, chunked` over a
 * body chunked once, which a client that follows the header decodes twice; `chunked,` (an empty
 * element, which a sender must not write: RFC 9110 §5.6.1) over the raw body, which curl read as
 * chunked and refused; `chunked` followed by a byte of no token over a chunked body whose stated
 * final coding is not chunked. h11 (uvicorn) refuses all of them too. A parameter is refused with
 * them: no registered transfer coding takes one.
 */
function checkCodings(codings: string[]): void {
  let chunked = 0;
  for (const value of codings) {
    for (const element of value.split(",")) {
      const coding = trimOws(element);
      if (!isToken(coding)) {
        throw new AsgiProtocolError(
          `Invalid "transfer-encoding" ${describe(value)} in "http.response.start": ${
            describe(coding)
          } is not a transfer coding; name each coding once, separated by commas ("gzip, chunked")`,
        );
      }
      if (coding.length === 7 && coding.toLowerCase() === "chunked") chunked++;
    }
  }
  if (chunked < 2) return;
  throw new AsgiProtocolError(
    `Invalid "transfer-encoding" ${
      describe(codings.join(", "))
    } in "http.response.start": it names "chunked" ${chunked} times, and a body is chunked once; name it once`,
  );
}

/**
 * Whether a request's `transfer-encoding` is `chunked` alone, the one transfer coding the
 * transports undo. Both parsers take one before it ("gzip, chunked"), which handed the
 * application the still-coded bytes as its body: such a request gets 501 instead (RFC 9112 §6.1:
 * a server SHOULD answer 501 to a transfer coding it does not understand; uvicorn answers 400).
 */
export function isChunkedOnly(coding: string): boolean {
  // Only SP and HTAB around it (RFC 9110 5.6.3): trim() took "chunked\xa0", which node's parser
  // does not, so the application was called and then the client got node's 400.
  return (coding.length === 7 ? coding : trimOws(coding)).toLowerCase() === "chunked";
}

// ---------------------------------------------------------------------------------------------
// Lifespan
// ---------------------------------------------------------------------------------------------

type LifespanPhase =
  | "idle"
  | "starting"
  | "started"
  | "stopping"
  | "stopped"
  | "off";

/**
 * Runs the lifespan protocol: one long-lived call of the application with a lifespan scope.
 * `startup()` and `shutdown()` each run once; later calls return the first call's promise.
 */
export class Lifespan {
  /** The lifespan scope's `state`; HTTP scopes get a shallow copy. */
  readonly state: Record<string, unknown> = {};
  readonly #app: AsgiApplication;
  readonly #mode: "auto" | "on" | "off";
  readonly #logger: AsgiLogger;
  #phase: LifespanPhase = "idle";
  #startup: Promise<void> | null = null;
  #shutdown: Promise<void> | null = null;
  #receives = 0;
  #shutdownRequested = withResolvers<void>();
  #outcome: PromiseWithResolvers<void> | null = null;
  #ready = false;

  /**
   * Creates the runner.
   *
   * @param app The application.
   * @param mode The lifespan mode.
   * @param logger Where log lines go.
   */
  constructor(app: AsgiApplication, mode: "auto" | "on" | "off", logger: AsgiLogger) {
    this.#app = app;
    this.#mode = mode;
    this.#logger = logger;
  }

  /** Runs startup once. Rejects with `LifespanError` when it fails. */
  startup(): Promise<void> {
    return this.#startup ??= this.#runStartup();
  }

  /** Runs shutdown once (after startup, if startup is running). */
  shutdown(): Promise<void> {
    return this.#shutdown ??= this.#runShutdown();
  }

  async #runStartup(): Promise<void> {
    if (this.#mode === "off") {
      this.#phase = "off";
      this.#ready = true;
      return;
    }
    this.#phase = "starting";
    this.#outcome = withResolvers<void>();
    const scope: LifespanScope = {
      type: "lifespan",
      asgi: { version: "3.0", spec_version: "2.0" },
      state: this.state,
    };
    this.#main(scope);
    await this.#outcome.promise;
    this.#ready = true;
  }

  /** `true` once startup has succeeded and requests may be served. */
  get ready(): boolean {
    return this.#ready;
  }

  async #main(scope: LifespanScope): Promise<void> {
    try {
      await this.#app(scope, this.#receive, this.#send);
    } catch (error) {
      this.#raised(error);
      return;
    }
    this.#returned();
  }

  async #runShutdown(): Promise<void> {
    if (this.#startup !== null) {
      try {
        await this.#startup;
      } catch {
        return;
      }
    }
    if (this.#phase !== "started") {
      if (this.#phase === "idle") this.#phase = "stopped";
      return;
    }
    this.#phase = "stopping";
    this.#outcome = withResolvers<void>();
    this.#shutdownRequested.resolve();
    await this.#outcome.promise;
  }

  #receive = (): Promise<ReceiveMessage> => {
    this.#receives++;
    if (this.#receives === 1) return Promise.resolve({ type: "lifespan.startup" });
    if (this.#receives === 2) {
      return this.#shutdownRequested.promise.then(() => ({ type: "lifespan.shutdown" }));
    }
    // The protocol has no third event: the application waits for ever, as in uvicorn.
    return new Promise<ReceiveMessage>(() => {});
  };

  #send = (message: SendMessage): Promise<void> => {
    try {
      this.#handle(message);
      return RESOLVED;
    } catch (error) {
      return Promise.reject(error);
    }
  };

  #handle(message: SendMessage): void {
    if (typeof message !== "object" || message === null) {
      throw new AsgiProtocolError(
        `Invalid message ${describe(message)}: send an object with a "type" key`,
      );
    }
    const type = message.type;
    const phase = this.#phase;
    switch (type) {
      case "lifespan.startup.complete":
      case "lifespan.startup.failed":
        if (phase !== "starting") {
          throw new AsgiProtocolError(
            `Cannot send ${JSON.stringify(type)} ${
              phase === "stopping" ? "during shutdown" : "after startup"
            }: startup messages answer "lifespan.startup" once`,
          );
        }
        if (type === "lifespan.startup.complete") {
          this.#phase = "started";
          this.#outcome!.resolve();
        } else {
          this.#phase = "stopped";
          this.#failed("startup", message.message);
        }
        return;
      case "lifespan.shutdown.complete":
      case "lifespan.shutdown.failed":
        if (phase !== "stopping") {
          throw new AsgiProtocolError(
            `Cannot send ${
              JSON.stringify(type)
            } before "lifespan.shutdown" was received: shutdown messages answer it once`,
          );
        }
        this.#phase = "stopped";
        if (type === "lifespan.shutdown.complete") {
          this.#outcome!.resolve();
        } else {
          this.#failed("shutdown", message.message);
        }
        return;
      default:
        throw new AsgiProtocolError(
          `Cannot send ${
            describe(type)
          } on the lifespan connection: expected a "lifespan.startup.*" or "lifespan.shutdown.*" message`,
        );
    }
  }

  /**
   * The application reported a failure: it takes effect whatever its `message`. One that is no
   * string also fails the `send` (a protocol error), and is named in the failure; it once made
   * the `send` fail alone, so a startup failure in "auto" mode served as if lifespan were
   * unsupported, and a shutdown failure waited for `lifespanTimeout`.
   */
  #failed(phase: "startup" | "shutdown", message: unknown): void {
    if (message === undefined || typeof message === "string") {
      this.#outcome!.reject(new LifespanError(phase, message || `Lifespan ${phase} failed`));
      return;
    }
    const error = new AsgiProtocolError(
      `Invalid "message" ${describe(message)} in "lifespan.${phase}.failed": use a string`,
    );
    this.#outcome!.reject(new LifespanError(phase, `Lifespan ${phase} failed; ${error.message}`));
    throw error;
  }

  #raised(error: unknown): void {
    const phase = this.#phase;
    if (phase === "starting") {
      this.#phase = "off";
      if (this.#mode === "auto") {
        this.#logger.info("ASGI 'lifespan' protocol appears unsupported");
        this.#outcome!.resolve();
      } else {
        this.#logger.error("Exception in 'lifespan' protocol\n", error);
        this.#outcome!.reject(
          new LifespanError("startup", `Exception in lifespan startup: ${errorText(error)}`, {
            cause: error,
          }),
        );
      }
    } else if (phase === "stopping") {
      this.#phase = "stopped";
      this.#logger.error("Exception in 'lifespan' protocol\n", error);
      this.#outcome!.reject(
        new LifespanError("shutdown", `Exception in lifespan shutdown: ${errorText(error)}`, {
          cause: error,
        }),
      );
    } else if (phase !== "stopped") {
      // "stopped": the application already reported startup.failed or shutdown.*; uvicorn is
      // silent about an exception after that too.
      this.#phase = "off";
      this.#logger.error("Exception in 'lifespan' protocol\n", error);
    }
  }

  #returned(): void {
    const phase = this.#phase;
    if (phase === "starting") {
      this.#phase = "off";
      // The usual way for an application without lifespan support to say so (`if (scope.type
      // !== "http") return;`): in "auto" mode as quiet as raising, as uvicorn is.
      if (this.#mode === "auto") {
        this.#logger.info(
          "ASGI 'lifespan' protocol appears unsupported (the application returned without " +
            "completing startup)",
        );
      } else this.#logger.warn("ASGI lifespan callable returned without completing startup");
      this.#outcome!.resolve();
    } else if (phase === "stopping") {
      this.#phase = "stopped";
      this.#outcome!.resolve();
    } else if (phase === "started") {
      this.#phase = "off";
    }
  }
}
