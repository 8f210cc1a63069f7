/**
 * The transport-independent half of the ASGI WebSocket protocol: one connection's cycle
 * (`WebSocketCycle`), its scope, and the set of open sockets a server closes at shutdown. A
 * transport subclasses `WebSocketCycle`, fills in how the handshake is answered and frames are
 * written, and reports what the client does with `opened`, `received` and `closed`.
 *
 * States: connecting (until the application accepts or denies); opening (accepted, the transport
 * finishes the handshake); open; denying (a `websocket.http.response` is being collected); closed
 * (the application closed or denied; nothing more may be sent).
 *
 * @module
 */
import type {
  ReceiveMessage,
  SendMessage,
  WebSocketAcceptMessage,
  WebSocketCloseMessage,
  WebSocketDisconnectMessage,
  WebSocketHttpResponseBodyMessage,
  WebSocketHttpResponseStartMessage,
  WebSocketReceiveMessage,
  WebSocketScope,
  WebSocketSendMessage,
} from "./types.ts";
import { EMPTY } from "./bytes.ts";
import type { Core } from "./core.ts";
import { AsgiProtocolError } from "./errors.ts";
import {
  checkDeclaredLength,
  checkStatus,
  declaredLength,
  hasToken,
  headerName,
  headerPairError,
  headersError,
  headerValue,
  isNullBodyStatus,
  isToken,
  noContentHeaders,
  resetContentHeaders,
  trimOws,
  warnCamelMoreBody,
} from "./fields.ts";
import type { RequestHead } from "./scope.ts";
import { unquote } from "./percent.ts";
import { describe } from "../_common/describe.ts";
import { logQuoted } from "../_common/log_text.ts";

/**
 * `send()` was called on a WebSocket whose client has gone (ASGI spec 2.4: a server-specific
 * error, like uvicorn's `ClientDisconnected`). The bridge does not log it when the application
 * lets it escape.
 *
 * @example A broadcast that drops the sockets whose clients left
 * ```ts
 * import { ClientDisconnected, type Send } from "@stellarator/stellarator/asgi";
 *
 * async function broadcast(sockets: Set<Send>, text: string): Promise<void> {
 *   for (const send of sockets) {
 *     try {
 *       await send({ type: "websocket.send", text, bytes: null });
 *     } catch (error) {
 *       if (!(error instanceof ClientDisconnected)) throw error;
 *       sockets.delete(send);
 *     }
 *   }
 * }
 * await broadcast(new Set(), "hello");
 * ```
 */
export class ClientDisconnected extends Error {
  /** The close code the connection ended with. */
  readonly code: number;

  /**
   * Creates the error.
   *
   * @param code The close code the connection ended with.
   *
   * @example Usage
   * ```ts
   * import { ClientDisconnected } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new ClientDisconnected(1006);
   * assertEquals([error.name, error.code], ["ClientDisconnected", 1006]);
   * ```
   */
  constructor(code: number) {
    super(`Cannot send on a closed WebSocket: the client disconnected (code ${code})`);
    this.name = "ClientDisconnected";
    this.code = code;
  }
}

/** The WebSocket spec version the bridge implements (see `WebSocketAsgiVersions`). */
export const WEBSOCKET_SPEC_VERSION = "2.5";
/** What `send` lets a transport hold unsent for one socket before it waits (a slow reader). */
export const SEND_BUFFER_LIMIT = 64 * 1024;
/** uvicorn's default `ws_max_size`. */
export const DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024;
/** Close code for a client whose unread messages outgrow what the transport lets wait. */
const POLICY_VIOLATION = 1008;
/** Close code for a message over `maxMessageSize` (RFC 6455, 7.4.1). */
export const MESSAGE_TOO_BIG = 1009;
/** Close code when the application fails after accepting. */
export const INTERNAL_ERROR = 1011;
/** Close code at server shutdown (IANA registry: Service Restart). */
export const SERVICE_RESTART = 1012;
/** No close frame: the connection was lost. */
export const ABNORMAL_CLOSURE = 1006;

/**
 * How long a close the server started waits for the client's close frame before the connection
 * is dropped and the application's `receive()` gets its `websocket.disconnect`: 10 s, the
 * `close_timeout` of the Python `websockets` library that uvicorn serves WebSockets with (`ws`
 * alone would wait 30 s, and Deno forever). Internal, and mutable only so tests can shorten it:
 * it is read when the close frame goes out.
 */
export const closeTiming: { timeoutMs: number } = { timeoutMs: 10_000 };

/**
 * What a transport has read of a handshake request: a request head without method and version,
 * whose `scheme` is `"ws"` or `"wss"`.
 */
export type HandshakeHead = Omit<RequestHead, "method" | "httpVersion">;

const utf8 = new TextEncoder();

function latin1Bytes(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** Builds the scope of a handshake. */
export function webSocketScope(core: Core, head: HandshakeHead): WebSocketScope {
  const { rawPath, fields } = head;
  const headers: [Uint8Array, Uint8Array][] = [];
  const subprotocols: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    headers.push([latin1Bytes(name), latin1Bytes(value)]);
    if (name === "sec-websocket-protocol") {
      for (const token of value.split(",")) {
        const protocol = trimOws(token);
        if (protocol !== "") subprotocols.push(protocol);
      }
    }
  }
  const path = rawPath.indexOf("%") === -1 ? rawPath : unquote(rawPath);
  const raw = utf8.encode(core.rootPath + rawPath);
  return {
    type: "websocket",
    asgi: { version: "3.0", spec_version: WEBSOCKET_SPEC_VERSION },
    http_version: "1.1",
    scheme: head.scheme,
    path: core.rootPath + path,
    raw_path: raw,
    query_string: utf8.encode(head.query),
    root_path: core.rootPath,
    headers,
    client: head.client,
    server: head.server,
    subprotocols,
    state: { ...core.lifespan.state },
    extensions: { "websocket.http.response": {} },
  };
}

/**
 * Checks the parts of a handshake request the transports do not: returns `null` when it can be
 * upgraded, or the status and reason to refuse it with (before the application is called, as
 * the Python `websockets` library does for uvicorn).
 */
export function checkHandshake(fields: string[]): { status: number; reason: string } | null {
  let key = "";
  let keys = 0;
  let version = "";
  let versions = 0;
  let upgrade = "";
  let upgrades = 0;
  let protocols: string[] | null = null;
  let framed = false;
  let host = false;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i];
    if (name === "host") host = true;
    else if (name === "content-length" || name === "transfer-encoding") framed = true;
    else if (name === "upgrade") {
      // A list (RFC 9110, 7.8) over every Upgrade field, whose empty elements are ignored
      // (5.6.1.2): "websocket," is one offer, as Python's `websockets` reads it.
      for (const part of fields[i + 1]!.split(",")) {
        const element = trimOws(part);
        if (element === "") continue;
        upgrade = element.toLowerCase();
        upgrades++;
      }
    } else if (name === "sec-websocket-key") {
      key = trimOws(fields[i + 1]!);
      keys++;
    } else if (name === "sec-websocket-version") {
      version = trimOws(fields[i + 1]!);
      versions++;
    } else if (name === "sec-websocket-protocol") (protocols ??= []).push(fields[i + 1]!);
  }
  // A handshake is HTTP/1.1 (RFC 6455, 4.1), which requires a Host (RFC 9112, 3.2): deno answered
  // one without it 101 (not knowing the version, but HTTP/1.0 may not upgrade either), where node
  // refuses it as its HTTP side does.
  if (!host) return { status: 400, reason: "Missing Host" };
  // `ws` takes "websocket" alone, as uvicorn's `websockets` does: an offer of several protocols
  // ran the application on node, which `ws` then refused with 400 once it had accepted, where
  // Deno answered 101. Two Upgrade fields of "websocket" each are the list "websocket, websocket",
  // refused too (`websockets` answers 426).
  if (upgrades !== 1 || upgrade !== "websocket") {
    return { status: 400, reason: 'Invalid Upgrade: offer "websocket" alone' };
  }
  // A handshake has no body: on node one was answered 101, and its bytes were dropped or read as
  // WebSocket frames depending on whether they came in the head's TCP segment. Deno.serve refuses
  // any such field (even "content-length: 0") with 400 itself; uvicorn answers 101.
  if (framed) return { status: 400, reason: "A WebSocket handshake has no body" };
  // Each at most once in a request (RFC 6455, 11.3.1 and 11.3.5); Deno hands repeated fields
  // over joined by ", ". Only the last of each was looked at on node, where `ws` then refused the
  // request with 400 after the application had been called and had accepted it.
  if (keys > 1 || key.includes(",")) {
    return { status: 400, reason: "More than one Sec-WebSocket-Key" };
  }
  if (versions > 1 || version.includes(",")) {
    return { status: 400, reason: "More than one Sec-WebSocket-Version" };
  }
  if (version !== "13") return { status: 426, reason: "Unsupported WebSocket version" };
  // 16 random bytes in base64 (RFC 6455, 4.1).
  if (!/^[A-Za-z0-9+/]{22}==$/.test(key)) {
    return { status: 400, reason: "Invalid Sec-WebSocket-Key" };
  }
  // Refused here, not after the application accepted: `ws` refuses such an offer with 400 only
  // once the 101 is due, and Deno answers it 101 (WebSocket probe, 2026-11-25).
  if (protocols !== null && !validSubprotocols(protocols)) {
    return { status: 400, reason: "Invalid Sec-WebSocket-Protocol" };
  }
  return null;
}

/**
 * The fields of a 426 to a version the bridge does not speak: the protocol to upgrade to (RFC
 * 9110, 15.5.22: a 426 MUST name it, and 7.8: with the `upgrade` connection option), and the
 * version it does speak (RFC 6455, 4.4); like every refusal, it asks for the connection to close.
 */
export const UPGRADE_REQUIRED: Readonly<Record<string, string>> = {
  upgrade: "websocket",
  connection: "upgrade, close",
  "sec-websocket-version": "13",
};

/**
 * `true` when the `sec-websocket-protocol` values are comma-separated tokens, none empty and none
 * offered twice (RFC 6455, 4.1): what `ws` parses the header with.
 */
function validSubprotocols(values: string[]): boolean {
  const seen = new Set<string>();
  for (const value of values) {
    for (const part of value.split(",")) {
      const protocol = trimOws(part);
      // Each a token (RFC 6455, 4.1).
      if (!isToken(protocol) || seen.has(protocol)) return false;
      seen.add(protocol);
    }
  }
  return true;
}

/**
 * `true` when the fields ask to upgrade the connection to a WebSocket: an `Upgrade` that names
 * `websocket` and `Connection: upgrade`. Without the latter the request is plain HTTP (RFC 9110,
 * 7.8), as `node:http` also decides. The `Upgrade` is only looked at loosely here, so that any
 * request that means a WebSocket is refused by `checkHandshake` when its offer is not
 * `websocket` alone (`websocket\xa0`, `h2c, websocket`), rather than served as HTTP: an element
 * of its list that is `websocket` padded with any whitespace. Other protocols that merely
 * contain the word (`websocket/13`, `x-websocket-tunnel`) are served as HTTP, as any other
 * upgrade offer is (a first version matched the word anywhere and refused them with 400).
 */
export function isUpgrade(fields: string[], count: number = fields.length): boolean {
  let upgrade = false;
  let connection = false;
  for (let i = 0; i + 1 < count; i += 2) {
    const name = fields[i]!;
    if (name.length === 7 && name === "upgrade") {
      // Any of them, as Deno merges them: `checkHandshake` then refuses more than one.
      upgrade ||= WEBSOCKET.test(fields[i + 1]!);
    } else if (name.length === 10 && name === "connection") {
      connection ||= hasToken(fields[i + 1]!, "upgrade");
    }
  }
  return upgrade && connection;
}

const WEBSOCKET = /(?:^|,)\s*websocket\s*(?:,|$)/i;

/** The open sockets of one server, so shutdown can close them and wait for their applications. */
class SocketSet {
  readonly cycles: Set<WebSocketCycle> = new Set();
  maxMessageSize = DEFAULT_MAX_MESSAGE_SIZE;
  /** Shutdown has closed the open sockets: one accepted from now on is closed as it opens. */
  closing = false;
  #idleWaiters: (() => void)[] = [];

  remove(cycle: WebSocketCycle): void {
    if (!this.cycles.delete(cycle) || this.cycles.size > 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  idle(): Promise<void> {
    if (this.cycles.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }
}

const socketSets = new WeakMap<Core, SocketSet>();

function socketsOf(core: Core): SocketSet {
  let set = socketSets.get(core);
  if (set === undefined) socketSets.set(core, set = new SocketSet());
  return set;
}

/** Sets the server's `maxMessageSize` (see `FetchHandlerOptions`). */
export function configureWebSockets(core: Core, maxMessageSize: number): void {
  socketsOf(core).maxMessageSize = maxMessageSize;
}

/** The server's `maxMessageSize`. */
export function maxMessageSizeOf(core: Core): number {
  return socketsOf(core).maxMessageSize;
}

/**
 * Closes every open socket of a server with 1012 (service restart); resolves once each has
 * finished its closing handshake (or was lost). Handshakes the application has not answered yet
 * are left to it; one it accepts from now on is closed with 1012 as it opens (it stayed open
 * until `shutdownTimeout`, then was dropped with 1001 on deno and no close frame on node).
 */
export async function closeWebSockets(core: Core): Promise<void> {
  const set = socketSets.get(core);
  if (set === undefined) return;
  set.closing = true;
  const cycles = [...set.cycles];
  for (const cycle of cycles) cycle.shutdown();
  await Promise.all(cycles.map((cycle) => cycle.ended));
}

/** Resolves once the applications of every socket of a server have returned. */
export function webSocketsIdle(core: Core): Promise<void> {
  return socketSets.get(core)?.idle() ?? Promise.resolve();
}

/** Drops every socket of a server now (forced shutdown): the applications see code 1006. */
export function abortWebSockets(core: Core): void {
  const set = socketSets.get(core);
  if (set === undefined) return;
  for (const cycle of [...set.cycles]) cycle.abort();
}

/** The number of sockets (and handshakes) in flight, for tests and the load benchmark. */
export function openWebSocketCount(core: Core): number {
  return socketSets.get(core)?.cycles.size ?? 0;
}

const CONNECTING = 0;
const OPENING = 1;
const OPEN = 2;
const DENYING = 3;
const CLOSED = 4;

/** Close codes an endpoint may send (RFC 6455, 7.4, and the IANA registry). */
function sendableCode(code: number): boolean {
  return code === 1000 || (code >= 1001 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
}

/**
 * Fields of the 101 that the transports write, each with why the application may not add its
 * own. They went out beside the transport's: a second `sec-websocket-accept` failed the
 * handshake, and a `sec-websocket-extensions` made a client that offered compression compress
 * frames the server cannot read (WebSocket re-probe, 2026-11-27); `content-length` and
 * `transfer-encoding` went out on node and were dropped on deno.
 */
export const HANDSHAKE_FIELDS: ReadonlyMap<string, string> = new Map([
  ["sec-websocket-protocol", 'give the subprotocol as "subprotocol" instead'],
  ["sec-websocket-accept", "remove it: the server answers the client's key itself"],
  [
    "sec-websocket-extensions",
    "remove it: the bridge negotiates no extension, so it can announce none",
  ],
  ["upgrade", "remove it: the server writes the handshake's upgrade fields itself"],
  ["connection", "remove it: the server writes the handshake's upgrade fields itself"],
  ["content-length", "remove it: a 101 response has no body"],
  ["transfer-encoding", "remove it: a 101 response has no body"],
]);

/** The most offered subprotocols a message lists, and the most characters it quotes of each. */
const OFFERED_SHOWN = 8;
const OFFERED_QUOTED = 64;

/**
 * The error for a `websocket.accept` whose subprotocol the client did not offer. Both the
 * subprotocol (the application's, maybe the client's) and the offers (the client's, as many as a
 * handshake holds) are quoted by `logQuoted` and bounded: the message is logged.
 *
 * @param subprotocol The subprotocol the application chose.
 * @param offered The scope's `subprotocols`.
 * @returns The error, e.g. `Invalid "subprotocol" "zz" in "websocket.accept": the client
 *   offered "a", "b"; pick one of them or null`.
 */
export function unofferedSubprotocol(
  subprotocol: string,
  offered: readonly string[],
): AsgiProtocolError {
  const shown = offered.slice(0, OFFERED_SHOWN).map((p) => logQuoted(p, OFFERED_QUOTED));
  const more = offered.length - shown.length;
  return new AsgiProtocolError(
    `Invalid "subprotocol" ${logQuoted(subprotocol, OFFERED_QUOTED)} in "websocket.accept": ` +
      (shown.length === 0
        ? "the client offered none; accept with null (no subprotocol)"
        : `the client offered ${shown.join(", ")}${more > 0 ? ` and ${more} more` : ""}; ` +
          "pick one of them or null"),
  );
}

function validateHeaders(
  raw: unknown,
  type: string,
  forbidden: ReadonlyMap<string, string> | null,
): [string, string][] {
  const headers: [string, string][] = [];
  if (raw === undefined) return headers;
  if (raw === null || typeof (raw as Iterable<unknown>)[Symbol.iterator] !== "function") {
    throw headersError(raw, type);
  }
  for (const pair of raw as Iterable<unknown[]>) {
    const name = pair?.[0];
    const value = pair?.[1];
    if (!(name instanceof Uint8Array) || !(value instanceof Uint8Array) || pair.length !== 2) {
      throw headerPairError(pair, type);
    }
    const text = headerName(name);
    const why = forbidden?.get(text.toLowerCase());
    if (why !== undefined) {
      throw new AsgiProtocolError(`Invalid header "${text}" in "${type}": ${why}`);
    }
    headers.push([text, headerValue(text, value)]);
  }
  return headers;
}

/**
 * One WebSocket connection. Implements `receive` and `send` for the application and turns its
 * messages into calls of the abstract methods, which a transport implements.
 */
export abstract class WebSocketCycle {
  /** The scope the application is called with. */
  readonly scope: WebSocketScope;
  /** Where the cycle belongs. */
  protected readonly core: Core;
  /** The largest message accepted from the client, in bytes. */
  protected readonly maxMessageSize: number;
  #state = CONNECTING;
  #connectSent = false;
  /** Messages from the client the application has not received yet. */
  #queue: WebSocketReceiveMessage[] = [];
  /** Their size: bytes, or UTF-16 code units of text. */
  #queuedSize = 0;
  #waiters: PromiseWithResolvers<ReceiveMessage>[] = [];
  /** Set once the connection is over; delivered to the application exactly once. */
  #disconnect: WebSocketDisconnectMessage | null = null;
  #disconnectDelivered = false;
  /** The code and reason the server closed with, reported instead of the client's echo. */
  #serverClose: WebSocketDisconnectMessage | null = null;
  #opened: PromiseWithResolvers<void> | null = null;
  #ended = Promise.withResolvers<void>();
  /** Resolves once the connection is over (`websocket.disconnect` is due). */
  readonly ended: Promise<void> = this.#ended.promise;
  #appDone = false;
  /** The application sent `websocket.close` or denied: anything more it sends is its mistake. */
  #appClosed = false;
  #finished = false;
  #denyStatus = 0;
  #denyHeaders: [string, string][] = [];
  #denyBody: Uint8Array[] = [];
  /** The denial's `content-length`, or -1: its body is checked against it, as for HTTP. */
  #denyDeclared = -1;
  #denySize = 0;
  /** The last error `send` raised, so it is not logged again when the app rethrows it. */
  #reported: unknown = undefined;
  /** Bounds the wait for the client's close frame once the server has sent its own. */
  #closeTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  /**
   * The sends waiting for the transport to take their message (a slow reader): each settles when
   * the transport takes it, and at the latest when the connection ends (see `closed`).
   */
  #waiting: Set<WaitingSend> = new Set();

  /**
   * Creates a cycle.
   *
   * @param core The shared state.
   * @param scope The scope.
   */
  constructor(core: Core, scope: WebSocketScope) {
    this.core = core;
    this.scope = scope;
    this.maxMessageSize = socketsOf(core).maxMessageSize;
    cyclesByReceive.set(this.receive, this);
  }

  /** Completes the handshake (101) with the chosen subprotocol and extra headers. */
  protected abstract acceptHandshake(subprotocol: string | null, headers: [string, string][]): void;
  /** Answers the handshake with an HTTP response and ends the connection. */
  protected abstract denyHandshake(
    status: number,
    headers: [string, string][],
    body: Uint8Array,
  ): void;
  /**
   * Writes one message. Returns `undefined` when the transport took it at once; otherwise a
   * promise (a slow reader, or a connection ending) that resolves `true` once the transport has
   * taken the message, or `false` when it dropped it because the connection is ending. It may
   * also stay pending until the connection ends: `closed` then settles the send.
   */
  protected abstract sendFrame(data: string | Uint8Array): Promise<boolean> | undefined;
  /** Starts the closing handshake. */
  protected abstract closeFrame(code: number, reason: string): void;
  /** Drops the connection without a closing handshake. */
  protected abstract dropConnection(): void;

  /** Runs the application for this connection. */
  run(): void {
    socketsOf(this.core).cycles.add(this);
    let result: unknown;
    try {
      result = this.core.app(this.scope, this.receive, this.send);
    } catch (error) {
      this.#raised(error);
      return;
    }
    const settled = result instanceof Promise ? result : Promise.resolve(result);
    settled.then(() => this.#returned(), (error) => this.#raised(error));
  }

  // ---- Events from the transport -----------------------------------------------------------

  /** The handshake completed: frames may flow. */
  opened(): void {
    if (this.#state === OPENING) this.#state = OPEN;
    this.#opened?.resolve();
  }

  /** A whole message arrived. */
  received(data: string | Uint8Array): void {
    if (this.#disconnect !== null || this.#state === CLOSED) return;
    const size = typeof data === "string"
      ? (data.length * 3 <= this.maxMessageSize ? 0 : utf8.encode(data).length)
      : data.length;
    if (size > this.maxMessageSize) {
      this.core.warnOf(
        "WebSocket message exceeds maxMessageSize",
        `WebSocket message of ${size} bytes exceeds maxMessageSize ${this.maxMessageSize}: closed with 1009`,
      );
      this.#closeBy(MESSAGE_TOO_BIG, "");
      return;
    }
    const message: WebSocketReceiveMessage = typeof data === "string"
      ? { type: "websocket.receive", bytes: null, text: data }
      : { type: "websocket.receive", bytes: data, text: null };
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) return waiter.resolve(message);
    this.#queuedSize += data.length;
    if (this.#queue.length >= this.unreadCountLimit) {
      // Counting bytes alone let empty messages through: each still costs a queued object, and
      // 5 million of them took a deno server to 1.3 GB in 10 s (probe, 2026-11-28).
      this.core.warnOf(
        "WebSocket messages unread over the limit",
        `WebSocket client sent over ${this.unreadCountLimit} messages the application has ` +
          `not received: closed with 1008`,
      );
      this.#queue.length = 0;
      this.#queuedSize = 0;
      this.#closeBy(POLICY_VIOLATION, "");
      return;
    }
    if (this.#queuedSize > this.unreadLimit) {
      // A transport that cannot stop reading (a Deno WebSocket) queued every message a client
      // sent to an application that did not receive them: 1.3 GB of server memory in 5 s from
      // one client (2026-11-28). Dropped, and the socket closed, as for a message too big.
      this.core.warnOf(
        "WebSocket bytes unread over the limit",
        `WebSocket client sent over ${this.unreadLimit} bytes the application has not ` +
          `received (twice maxMessageSize): closed with 1008`,
      );
      this.#queue.length = 0;
      this.#queuedSize = 0;
      this.#closeBy(POLICY_VIOLATION, "");
      return;
    }
    this.queueChanged(this.#queue.push(message), this.#queuedSize);
  }

  /**
   * Called with the number of messages waiting for the application, and their size (as
   * `unreadLimit` counts it), whenever they change: a transport that can stop reading the socket
   * does so while the application lags behind.
   */
  protected queueChanged(_length: number, _size: number): void {}

  /**
   * How much unread messages may hold (bytes, or UTF-16 code units of text) before the socket is
   * closed with 1008: unbounded for a transport that stops reading instead (`queueChanged`).
   */
  protected get unreadLimit(): number {
    return Infinity;
  }

  /** How many unread messages may wait before the socket is closed with 1008, as for bytes. */
  protected get unreadCountLimit(): number {
    return Infinity;
  }

  /**
   * The connection is over: the closing handshake finished, or the connection was lost.
   *
   * The sends still waiting for the transport to take their message reject with
   * `ClientDisconnected(code)`: their messages never went out. Unless `delivered`: the transport
   * wrote everything it had taken before the connection ended (Deno, which cannot tell which
   * message went out, knows this from a clean close: its own close frame, written after them,
   * went out); the sends it had dropped reject all the same.
   */
  closed(code: number, reason: string, delivered = false): void {
    if (this.#disconnect !== null) return;
    clearTimeout(this.#closeTimer);
    // Deno reports 0 for a lost connection.
    const ended = code === 0 ? ABNORMAL_CLOSURE : code;
    const server = this.#serverClose;
    this.#disconnect = server ?? { type: "websocket.disconnect", code: ended, reason };
    if (this.#waiting.size > 0) {
      const waiting = [...this.#waiting];
      this.#waiting.clear();
      for (const send of waiting) {
        clearTimeout(send.timer);
        if (delivered && !send.dropped) send.resolve();
        else send.reject(new ClientDisconnected(ended));
      }
    }
    this.#opened?.resolve();
    this.#ended.resolve();
    this.#wake();
    this.#finish();
  }

  /** Server shutdown: close an open socket with 1012. */
  shutdown(): void {
    if (this.#state === OPEN || this.#state === OPENING) {
      this.#closeBy(SERVICE_RESTART, "Service restart");
    }
  }

  /** Forced shutdown: drop the connection; the application sees 1006. */
  abort(): void {
    if (this.#disconnect === null) {
      if (this.#state === CONNECTING || this.#state === DENYING) this.#internalError();
      else this.dropConnection();
    }
    this.closed(ABNORMAL_CLOSURE, "");
    this.#appDone = true;
    this.#finish();
  }

  // ---- The application's callables ---------------------------------------------------------

  /** The `receive` callable of this connection. */
  readonly receive = (): Promise<ReceiveMessage> => {
    if (!this.#connectSent) {
      this.#connectSent = true;
      return Promise.resolve({ type: "websocket.connect" });
    }
    const queued = this.#queue.shift();
    if (queued !== undefined) {
      this.#queuedSize -= queued.text?.length ?? queued.bytes?.length ?? 0;
      this.queueChanged(this.#queue.length, this.#queuedSize);
      return Promise.resolve(queued);
    }
    if (this.#disconnect !== null && this.#waiters.length === 0) {
      if (this.#disconnectDelivered) {
        return Promise.reject(
          new AsgiProtocolError(
            `Cannot receive after "websocket.disconnect" (code ${this.#disconnect.code}): the connection is closed`,
          ),
        );
      }
      this.#disconnectDelivered = true;
      return Promise.resolve(this.#disconnect);
    }
    const waiter = Promise.withResolvers<ReceiveMessage>();
    this.#waiters.push(waiter);
    return waiter.promise;
  };

  /** The `send` callable of this connection. */
  readonly send = (message: SendMessage): Promise<void> => {
    try {
      return this.#send(message) ?? Promise.resolve();
    } catch (error) {
      this.#reported = error;
      if (!(error instanceof ClientDisconnected)) this.core.logger.error(error);
      return Promise.reject(error);
    }
  };

  #send(message: SendMessage): Promise<void> | undefined {
    if (typeof message !== "object" || message === null) {
      throw new AsgiProtocolError(
        `Invalid message ${describe(message)}: send an object with a "type" key`,
      );
    }
    const type = message.type;
    if (this.#appClosed) {
      throw new AsgiProtocolError(
        `Cannot send ${
          describe(type)
        } after the connection was closed or denied: nothing may follow "websocket.close"`,
      );
    }
    const ended = this.#serverClose ?? this.#disconnect;
    if (ended !== null) {
      // A malformed message is the application's mistake whether or not its client is still
      // there: checked first, it no longer shows only when the client happens to stay.
      if (type === "websocket.send") sendData(message as WebSocketSendMessage);
      else if (type === "websocket.close") closeArguments(message as WebSocketCloseMessage);
      else if (type === "websocket.accept") this.#subprotocol(message as WebSocketAcceptMessage);
      throw new ClientDisconnected(ended.code);
    }
    if (this.#state === CONNECTING) {
      if (type === "websocket.accept") return this.#accept(message as WebSocketAcceptMessage);
      if (type === "websocket.close") {
        closeArguments(message as WebSocketCloseMessage);
        this.#appClosed = true;
        this.#deny(403, [["content-length", "0"]], EMPTY);
        return;
      }
      if (type === "websocket.http.response.start") {
        return this.#denyStart(message as WebSocketHttpResponseStartMessage);
      }
      throw new AsgiProtocolError(
        `Cannot send ${describe(type)} before the handshake is answered: send ` +
          `"websocket.accept", "websocket.close" or "websocket.http.response.start" first`,
      );
    }
    if (this.#state === DENYING) {
      if (type === "websocket.http.response.body") {
        return this.#denyBodyChunk(message as WebSocketHttpResponseBodyMessage);
      }
      throw new AsgiProtocolError(
        `Cannot send ${
          describe(type)
        } while denying the handshake: expected "websocket.http.response.body"`,
      );
    }
    // OPENING or OPEN.
    if (type === "websocket.send") {
      const data = sendData(message as WebSocketSendMessage);
      if (this.#state === OPENING) {
        return this.#opened!.promise.then(() => {
          if (this.#disconnect !== null) throw new ClientDisconnected(this.#disconnect.code);
          return this.#watchTaken(this.sendFrame(data));
        });
      }
      return this.#watchTaken(this.sendFrame(data));
    }
    if (type === "websocket.close") {
      const { code, reason } = closeArguments(message as WebSocketCloseMessage);
      this.#appClosed = true;
      this.#closeBy(code, reason);
      return;
    }
    if (type === "websocket.accept") {
      throw new AsgiProtocolError(
        'Cannot send "websocket.accept" twice: the connection is already accepted',
      );
    }
    throw new AsgiProtocolError(
      `Cannot send ${
        describe(type)
      } on an open WebSocket: expected "websocket.send" or "websocket.close"`,
    );
  }

  /** The subprotocol of a `websocket.accept`, checked: null, or one the client offered. */
  #subprotocol(message: WebSocketAcceptMessage): string | null {
    const subprotocol = message.subprotocol ?? null;
    if (subprotocol !== null) {
      if (typeof subprotocol !== "string") {
        throw new AsgiProtocolError(
          `Invalid "subprotocol" ${
            describe(subprotocol)
          } in "websocket.accept": use a string or null`,
        );
      }
      if (!this.scope.subprotocols.includes(subprotocol)) {
        throw unofferedSubprotocol(subprotocol, this.scope.subprotocols);
      }
    }
    return subprotocol;
  }

  /**
   * A send's wait for the transport to take its message (a slow reader). It resolves when the
   * transport has taken it; when the connection ends first, `closed` rejects it with
   * `ClientDisconnected`, as every send still waiting then: its message never went out. (They
   * resolved, but for the one whose stall clock ran out: 300 of 300 when the client left;
   * waiting-sends probe, 2026-11-28.)
   *
   * It is given up after `stallTimeout`, as an HTTP send's is: the connection is dropped and
   * the application's `receive()` says 1006. Without it a client that completed the handshake
   * and read nothing held the send, the application and the connection for good on `deno`
   * (Deno pings only once what is queued before its ping is written) and for as long as it sent
   * a pong every 5 s on `node` (WebSocket stall probe, 2026-11-28). A timer per wait, not the
   * core's shared interval: only a client that lags makes a send wait.
   */
  #watchTaken(wait: Promise<boolean> | undefined): Promise<void> | undefined {
    if (wait === undefined) return undefined;
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    const send: WaitingSend = { resolve, reject, timer: undefined, dropped: false };
    this.#waiting.add(send);
    const limit = this.core.stallTimeout;
    if (limit !== Infinity) send.timer = setTimeout(() => this.#stalled(limit), limit);
    wait.then((taken) => {
      // Dropped: it waits for the end of the connection, which gives the code to reject with.
      if (!taken) send.dropped = true;
      else if (this.#waiting.delete(send)) {
        clearTimeout(send.timer);
        resolve();
      }
    }, (error) => {
      if (this.#waiting.delete(send)) {
        clearTimeout(send.timer);
        reject(error);
      }
    });
    return promise;
  }

  /**
   * The client took nothing for `stallTimeout` while the transport held bytes for it that no send
   * waits for any more (they resolved once taken): it is dropped as for a send that waited.
   */
  protected stalled(): void {
    this.#stalled(this.core.stallTimeout);
  }

  /** The client took nothing for `limit` ms while a send waited: it is dropped (see above). */
  #stalled(limit: number): void {
    if (this.#disconnect !== null) return;
    this.core.warnOf(
      "WebSocket send stalled",
      `WebSocket send stalled: the client took nothing for stallTimeout ${limit} ms; disconnected`,
    );
    this.dropConnection();
    this.closed(ABNORMAL_CLOSURE, "");
  }

  #accept(message: WebSocketAcceptMessage): undefined {
    const subprotocol = this.#subprotocol(message);
    const headers = validateHeaders(message.headers, "websocket.accept", HANDSHAKE_FIELDS);
    this.#state = OPENING;
    this.#opened = Promise.withResolvers();
    this.acceptHandshake(subprotocol, headers);
    if (socketsOf(this.core).closing && this.#disconnect === null) this.shutdown();
    return undefined;
  }

  #denyStart(message: WebSocketHttpResponseStartMessage): undefined {
    const status = checkStatus(message.status, "websocket.http.response.start", message);
    const headers = validateHeaders(message.headers, "websocket.http.response.start", null);
    let declared = -1;
    for (const [name, value] of headers) {
      if (name.length === 14 && name.toLowerCase() === "content-length") {
        declared = declaredLength(declared, value, "websocket.http.response.start");
      }
    }
    this.#denyHeaders = headers;
    // A null-body status goes out without the body (and deno without the length) either way.
    this.#denyDeclared = isNullBodyStatus(status) ? -1 : declared;
    this.#denyStatus = status;
    this.#state = DENYING;
    return undefined;
  }

  #denyBodyChunk(message: WebSocketHttpResponseBodyMessage): undefined {
    const body = message.body ?? EMPTY;
    if (!(body instanceof Uint8Array)) {
      throw new AsgiProtocolError(
        `Invalid "body" ${describe(body)} in "websocket.http.response.body": use a Uint8Array` +
          (typeof body === "string" ? "; encode text with textBytes()" : ""),
      );
    }
    let more = message.more_body;
    if (more === undefined) {
      more = false;
      warnCamelMoreBody(this.core, message, "websocket.http.response.body");
    } else if (typeof more !== "boolean") {
      throw new AsgiProtocolError(
        `Invalid "more_body" ${
          describe(more)
        } in "websocket.http.response.body": use true or false`,
      );
    }
    // A wrong length went out as given on node (the client saw a cut or extra bytes) and was
    // replaced on deno; the HTTP path refuses it (WebSocket probe, 2026-11-25, point 3).
    if (this.#denyDeclared >= 0) {
      this.#denySize = checkDeclaredLength(this.#denyDeclared, this.#denySize + body.length, more);
    }
    // Kept until the last chunk, so the denial goes out as one plain response.
    if (body.length > 0) this.#denyBody.push(body.slice());
    if (more) return;
    this.#appClosed = true;
    this.#deny(this.#denyStatus, this.#denyHeaders, concat(this.#denyBody));
    return undefined;
  }

  /** Answers the handshake with HTTP; the application then sees 1006, as in uvicorn. */
  #deny(status: number, headers: [string, string][], body: Uint8Array): void {
    this.#state = CLOSED;
    if (isNullBodyStatus(status)) {
      // As for an HTTP response: no body, and a 205 states an empty one (node sent both).
      body = EMPTY;
      if (status === 205) headers = resetContentHeaders(headers);
      else if (status === 204) headers = noContentHeaders(headers);
    }
    this.denyHandshake(status, headers, body);
    this.#serverClose = { type: "websocket.disconnect", code: ABNORMAL_CLOSURE, reason: "" };
    this.closed(ABNORMAL_CLOSURE, "");
  }

  /** The server closes: the application will see this code, whatever the client echoes. */
  #closeBy(code: number, reason: string): void {
    const wasOpening = this.#state === OPENING;
    this.#state = CLOSED;
    this.#serverClose = { type: "websocket.disconnect", code, reason };
    if (wasOpening) {
      void this.#opened!.promise.then(() => {
        if (this.#disconnect === null) this.#sendClose(code, reason);
      });
    } else this.#sendClose(code, reason);
  }

  /**
   * Sends the close frame and gives the client `closeTiming.timeoutMs` to answer it. A client
   * that never does held its connection, the application's pending `receive()` and its place
   * among the server's open sockets for good on `deno` (WebSocket probe, 2026-11-25).
   */
  #sendClose(code: number, reason: string): void {
    this.closeFrame(code, reason);
    this.#closeTimer = setTimeout(() => {
      if (this.#disconnect !== null) return;
      this.dropConnection();
      this.closed(ABNORMAL_CLOSURE, "");
    }, closeTiming.timeoutMs);
  }

  #wake(): void {
    const disconnect = this.#disconnect;
    if (disconnect === null) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) {
      if (this.#disconnectDelivered) {
        waiter.reject(
          new AsgiProtocolError(
            `Cannot receive after "websocket.disconnect" (code ${disconnect.code}): the connection is closed`,
          ),
        );
      } else {
        this.#disconnectDelivered = true;
        waiter.resolve(disconnect);
      }
    }
  }

  // ---- The application's end ---------------------------------------------------------------

  #returned(): void {
    this.#appDone = true;
    const state = this.#state;
    if ((state === CONNECTING || state === DENYING) && this.#disconnect === null) {
      this.core.logger.error(
        state === CONNECTING
          ? "ASGI callable returned without sending handshake"
          : "ASGI callable returned without completing the denial response",
      );
      this.#internalError();
    } else if ((state === OPEN || state === OPENING) && this.#disconnect === null) {
      // As uvicorn: an application that returns without closing has finished normally.
      this.#closeBy(1000, "");
    }
    this.#finish();
  }

  #raised(error: unknown): void {
    this.#appDone = true;
    if (error !== this.#reported && !(error instanceof ClientDisconnected)) {
      this.core.logger.error("Exception in ASGI application\n", error);
    }
    const state = this.#state;
    if ((state === CONNECTING || state === DENYING) && this.#disconnect === null) {
      this.#internalError();
    } else if ((state === OPEN || state === OPENING) && this.#disconnect === null) {
      this.#closeBy(INTERNAL_ERROR, "Internal error");
    }
    this.#finish();
  }

  #internalError(): void {
    this.#deny(500, [
      ["content-type", "text/plain; charset=utf-8"],
      ["content-length", "21"],
    ], utf8.encode("Internal Server Error"));
  }

  #finish(): void {
    if (this.#finished || !this.#appDone || this.#disconnect === null) return;
    this.#finished = true;
    socketsOf(this.core).remove(this);
  }
}

/** Each cycle by its `receive` callable, for `connectionEnded`. */
const cyclesByReceive = new WeakMap<() => Promise<ReceiveMessage>, WebSocketCycle>();

/**
 * Resolves once the connection of the socket whose ASGI `receive` callable this is has ended
 * (its `websocket.disconnect` is due, behind the messages the application has not received);
 * `undefined` for a callable the bridge did not make. For the web layer, which reads a bounded
 * number of messages ahead of its handler and must still see a socket end behind more.
 */
export function connectionEnded(receive: unknown): Promise<void> | undefined {
  return cyclesByReceive.get(receive as () => Promise<ReceiveMessage>)?.ended;
}

/** A send waiting for the transport to take its message (see `WebSocketCycle.#watchTaken`). */
interface WaitingSend {
  resolve(): void;
  reject(error: unknown): void;
  /** Its stall clock, when `stallTimeout` is finite. */
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The transport dropped its message: it rejects when the connection ends, whatever else. */
  dropped: boolean;
}

function sendData(message: WebSocketSendMessage): string | Uint8Array {
  const { bytes, text } = message;
  const hasBytes = bytes !== undefined && bytes !== null;
  const hasText = text !== undefined && text !== null;
  if (hasBytes === hasText) {
    throw new AsgiProtocolError(
      `Invalid "websocket.send" with ${
        hasBytes ? "both" : "neither"
      } of "text" and "bytes": give exactly one of them`,
    );
  }
  if (hasText) {
    if (typeof text !== "string") {
      throw new AsgiProtocolError(
        `Invalid "text" ${describe(text)} in "websocket.send": use a string`,
      );
    }
    return text;
  }
  if (!(bytes instanceof Uint8Array)) {
    throw new AsgiProtocolError(
      `Invalid "bytes" ${describe(bytes)} in "websocket.send": use a Uint8Array` +
        (typeof bytes === "string" ? ', or send text as "text"' : ""),
    );
  }
  return bytes;
}

/**
 * The code and reason of a `websocket.close`, checked.
 *
 * @param message The message.
 * @returns Its code (1000 when left out) and reason ("" when left out).
 * @throws {AsgiProtocolError} For a code an endpoint may not send, or a reason that is no
 *   string or longer than 123 bytes of UTF-8.
 */
export function closeArguments(
  message: WebSocketCloseMessage,
): { code: number; reason: string } {
  const code = message.code ?? 1000;
  if (typeof code !== "number" || !Number.isInteger(code) || !sendableCode(code)) {
    throw new AsgiProtocolError(
      `Invalid "code" ${
        describe(code)
      } in "websocket.close": use 1000, 1001 to 1003, 1007 to 1014 or 3000 to 4999`,
    );
  }
  const reason = message.reason ?? "";
  if (typeof reason !== "string") {
    throw new AsgiProtocolError(
      `Invalid "reason" ${describe(reason)} in "websocket.close": use a string`,
    );
  }
  const length = utf8.encode(reason).length;
  if (length > 123) {
    throw new AsgiProtocolError(
      `Invalid "reason" of ${length} bytes in "websocket.close": use at most 123 bytes of UTF-8`,
    );
  }
  return { code, reason };
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 0) return EMPTY;
  if (chunks.length === 1) return chunks[0]!;
  let size = 0;
  for (const chunk of chunks) size += chunk.length;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}
