/**
 * The WebSocket half of the node transport, on the npm package `ws` (the standard WebSocket
 * server for Node.js), which is loaded only when a node-transport server starts. `ws` parses
 * frames, answers pings and enforces `maxMessageSize` (as its `maxPayload`) before a message is
 * buffered; this file connects it to the cycle.
 *
 * @module
 */
import { type IncomingMessage, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { Core } from "./core.ts";
import { originForm, targetNamesAnotherHost } from "./scope.ts";
import { isHostValue } from "./fields.ts";
import {
  checkHandshake,
  ClientDisconnected,
  closeTiming,
  type HandshakeHead,
  isUpgrade,
  MESSAGE_TOO_BIG,
  SEND_BUFFER_LIMIT,
  UPGRADE_REQUIRED,
  WebSocketCycle,
  webSocketScope,
} from "./websocket.ts";

/**
 * What is read and dropped at most after `ws` refused a client's input: see
 * `NodeWebSocketCycle.#boundDrain`. The same 16 MiB as HTTP's bounds on unread input.
 */
const DRAIN_LIMIT = 16 * 1024 * 1024;

/** `ws`'s readyState of an open connection. */
const OPEN_STATE = 1;

/** The part of a `ws` WebSocket this file uses. */
interface WsSocket {
  readonly bufferedAmount: number;
  /** 1 while open; 2 once a close frame went either way. */
  readonly readyState: number;
  send(
    data: string | Uint8Array,
    options: { binary: boolean },
    callback: (error?: Error | null) => void,
  ): void;
  close(code: number, reason: string): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  ping(): void;
  on(event: "message", listener: (data: Uint8Array, isBinary: boolean) => void): void;
  on(event: "pong", listener: () => void): void;
  on(event: "close", listener: (code: number, reason: Uint8Array) => void): void;
  on(event: "error", listener: (error: Error & { code?: string }) => void): void;
}

/** The part of a `ws` WebSocketServer this file uses. */
interface WsServer {
  handleUpgrade(
    request: IncomingMessage,
    socket: Duplex,
    head: Uint8Array,
    callback: (socket: WsSocket) => void,
  ): void;
  on(event: "headers", listener: (lines: string[], request: IncomingMessage) => void): void;
}

interface WsModule {
  WebSocketServer: new (options: Record<string, unknown>) => WsServer;
}

/** What the application chose in `websocket.accept`, read by `ws` during `handleUpgrade`. */
interface Answer {
  subprotocol: string | null;
  headers: [string, string][];
}

/**
 * How often a client is pinged; one that has not answered the previous ping by the next is
 * dropped (1006). 20 s is uvicorn's default interval; Deno's `upgradeWebSocket` pings by itself.
 * Internal, and mutable only so tests can shorten it: it is read when a socket opens.
 */
export const pingTiming: { intervalMs: number } = { intervalMs: 20_000 };

/**
 * The most frames one message may come in (ws refuses more with 1008): each frame costs a Buffer
 * until the message is whole, and a 20 KB message in one-byte frames is 20,000 of them.
 */
const MAX_FRAGMENTS = 16_384;
/** RFC 6455's "policy violation", what ws closes with past `MAX_FRAGMENTS`. */
const POLICY_VIOLATION = 1008;

/**
 * Queue lengths at which reading from the client stops and starts again (and sizes, twice and
 * once `maxMessageSize`: see `queueChanged`).
 */
const PAUSE_AT = 16;
const RESUME_AT = 4;

const utf8 = new TextDecoder();

class NodeWebSocketCycle extends WebSocketCycle {
  #request: IncomingMessage;
  #socket: Duplex;
  #head: Uint8Array;
  #server: WsServer;
  #answers: WeakMap<IncomingMessage, Answer>;
  #ws: WsSocket | null = null;
  #paused = false;
  /** Whether the client answered the last ping (or no ping is outstanding). */
  #alive = true;
  /** Until the upgrade, a closed TCP socket is how the client leaves; then ws reports it. */
  #onSocketClose = () => {
    this.closed(1006, "");
    this.#socket.destroy();
  };

  constructor(
    core: Core,
    head: HandshakeHead,
    request: IncomingMessage,
    socket: Duplex,
    firstBytes: Uint8Array,
    server: WsServer,
    answers: WeakMap<IncomingMessage, Answer>,
  ) {
    super(core, webSocketScope(core, head));
    this.#request = request;
    this.#socket = socket;
    this.#head = firstBytes;
    this.#server = server;
    this.#answers = answers;
    // node:http keeps its sockets half-open: a client that leaves shows as "end" first.
    socket.on("end", this.#onSocketClose);
    socket.on("close", this.#onSocketClose);
    socket.on("error", () => {});
  }

  /**
   * Stops reading the socket once `DRAIN_LIMIT` bytes have come after `ws` refused the client's
   * input (a message over `maxMessageSize`, too many fragments, a protocol error). From then on
   * `ws` parses nothing and lets the socket flow, dropping what comes until the close completes
   * or `closeTiming.timeoutMs` passes, so that a client still sending the message it was refused
   * gets to read the close frame. A client that went on sending had 20 GiB read and dropped in
   * those 10 s, the server going from 55 to 590 MiB (claims audit, 2026-11-29). Past the limit
   * its sends wait in its own buffers until `ws` gives up the connection.
   */
  #boundDrain(): void {
    const socket = this.#socket;
    let left = DRAIN_LIMIT;
    const count = (chunk: { length: number }) => {
      left -= chunk.length;
      if (left >= 0) return;
      socket.off("data", count);
      socket.pause();
    };
    socket.on("data", count);
  }

  protected override acceptHandshake(
    subprotocol: string | null,
    headers: [string, string][],
  ): void {
    this.#answers.set(this.#request, { subprotocol, headers });
    this.#server.handleUpgrade(this.#request, this.#socket, this.#head, (ws) => {
      this.#socket.off("end", this.#onSocketClose);
      this.#socket.off("close", this.#onSocketClose);
      this.#ws = ws;
      ws.on("message", (data, isBinary) => {
        // ws hands out Buffers, often views of a pooled buffer: the ASGI message gets its own.
        this.received(isBinary ? new Uint8Array(data) : utf8.decode(data));
      });
      ws.on("error", (error) => {
        this.#boundDrain();
        // A length past 2^53 - 1 is a message over any maxMessageSize too, and `ws` closes it
        // with 1009 as well; its own code left the application with 1006 and no log line.
        if (
          error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH" ||
          error.code === "WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH"
        ) {
          this.core.warnOf(
            "WebSocket message exceeds maxMessageSize",
            `WebSocket message exceeds maxMessageSize ${this.maxMessageSize}: closed with 1009`,
          );
          this.closed(MESSAGE_TOO_BIG, "");
        } else if (error.code === "WS_ERR_TOO_MANY_BUFFERED_PARTS") {
          // ws's guard against a message in countless tiny frames (each costs a Buffer): it
          // closes with 1008, which the application heard of as 1006, with no log line.
          // One code for two guards: too many fragments, or too many buffered chunks.
          this.core.warnOf(
            "WebSocket message in too many fragments",
            `WebSocket message refused (${error.message}; at most ${MAX_FRAGMENTS} fragments): ` +
              `closed with 1008`,
          );
          this.closed(POLICY_VIOLATION, "");
        }
      });
      ws.on("pong", () => (this.#alive = true));
      const pinger = setInterval(() => {
        // While reading is paused the client's pong waits unread behind its messages, so a
        // missing pong proves nothing: healthy clients of a lagging app were dropped after
        // 20-40 s (WebSocket probe, 2026-11-25). The check starts afresh on resume.
        if (this.#paused) return;
        if (!this.#alive) return ws.terminate();
        this.#alive = false;
        ws.ping();
      }, pingTiming.intervalMs);
      ws.on("close", (code, reason) => {
        clearInterval(pinger);
        this.closed(code, utf8.decode(reason));
      });
      this.opened();
    });
  }

  protected override denyHandshake(
    status: number,
    headers: [string, string][],
    body: Uint8Array,
  ): void {
    const socket = this.#socket;
    if (socket.destroyed) return;
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Unknown"}\r\n`;
    let lengthGiven = false;
    for (const [name, value] of headers) {
      const lower = name.toLowerCase();
      if (lower === "content-length") lengthGiven = true;
      // The connection closes after a denial whatever the application said: one field, not two.
      if (lower === "connection") continue;
      head += `${name}: ${value}\r\n`;
    }
    // A 204 or 304 states no length (RFC 9110 §8.6); the core gave a 205 its "0" already.
    if (!lengthGiven && status !== 204 && status !== 304) {
      head += `content-length: ${body.length}\r\n`;
    }
    head += "connection: close\r\n\r\n";
    socket.write(head, "latin1");
    endAndClose(socket, body);
  }

  protected override sendFrame(data: string | Uint8Array): Promise<boolean> | undefined {
    const ws = this.#ws;
    if (ws === null) return;
    // ws reports a lost connection, or a closing handshake coming to its end, only through its
    // "close" event, and until then takes frames it drops and resolves at once: an application
    // sending in a loop never let that event in (the server answered nothing else and its
    // memory grew by 400 MB). A connection known lost fails the send now; on a closing one ws
    // drops the message, and the send rejects with the "close" event (it resolved after a turn
    // of the event loop, reporting sent a message that never went out).
    if (this.#socket.destroyed) {
      this.closed(1006, "");
      return Promise.reject(new ClientDisconnected(1006));
    }
    if (ws.readyState !== OPEN_STATE) return Promise.resolve(false);
    const binary = typeof data !== "string";
    if (ws.bufferedAmount <= SEND_BUFFER_LIMIT) {
      ws.send(data, { binary }, noop);
      return;
    }
    // The callback runs once ws has written the frame out: the slow reader has caught up. With
    // an error the connection ended first and the frame never went out (it resolved all the
    // same); the "close" event, which comes after, gives the code the send rejects with.
    return new Promise((resolve) =>
      ws.send(data, { binary }, (error) => resolve(error === undefined || error === null))
    );
  }

  protected override closeFrame(code: number, reason: string): void {
    this.#ws?.close(code, reason);
  }

  protected override dropConnection(): void {
    if (this.#ws !== null) this.#ws.terminate();
    else this.#socket.destroy();
  }

  protected override queueChanged(length: number, size: number): void {
    const ws = this.#ws;
    if (ws === null) return;
    // The size too, as deno bounds it (where it closes): by count alone, 16 messages of
    // maxMessageSize could wait (three clients sending 16 MB messages to an application that did
    // not receive took a server from 66 to 915 MiB; probe, 2026-11-28).
    if (!this.#paused && (length >= PAUSE_AT || size > 2 * this.maxMessageSize)) {
      this.#paused = true;
      ws.pause();
    } else if (this.#paused && length <= RESUME_AT && size <= this.maxMessageSize) {
      this.#paused = false;
      // The pong to a ping sent before the pause may still be unread: give it a full interval.
      this.#alive = true;
      ws.resume();
    }
  }
}

function noop(): void {}

/**
 * `true` for a request the node transport upgrades: a GET asking for a WebSocket, as the deno
 * transport decides. Given to `node:http` as `shouldUpgradeCallback`, so any other `Upgrade`
 * (`h2c` from `curl --http2`, say) is served as plain HTTP, as RFC 9110 §7.8 allows.
 */
export function isWebSocketUpgrade(request: IncomingMessage): boolean {
  if (request.method !== "GET") return false;
  const raw = request.rawHeaders;
  const fields: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) fields.push(raw[i]!.toLowerCase(), raw[i + 1]!);
  return isUpgrade(fields);
}

/**
 * The most request header fields the node transport passes on; a request with more gets 431.
 * Node's own default (`maxHeadersCount`), far above what browsers send (the deno transport's
 * `Deno.serve` refuses more than 128 with 400). Node does not refuse more: it drops those past
 * the limit, so a `content-length` after them was lost and the application read an empty body.
 * Shared by the HTTP side and the upgrade handler, which check it alike.
 */
export const MAX_HEADER_FIELDS = 1000;

/** Takes the `upgrade` requests of one node-transport server. */
export type UpgradeHandler = (request: IncomingMessage, socket: Duplex, head: Uint8Array) => void;

/**
 * The scope's parts of an upgrade request (the HTTP side reads its requests the same way).
 * `unixServer` is the scope's `server` on a Unix socket, whose ends have no address.
 */
function handshakeHead(
  request: IncomingMessage,
  scheme: string,
  unixServer: [string, null] | null,
): HandshakeHead {
  const target = originForm(request.url ?? "/");
  const queryStart = target.indexOf("?");
  const raw = request.rawHeaders;
  const fields: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) fields.push(raw[i]!.toLowerCase(), raw[i + 1]!);
  const socket = request.socket;
  return {
    scheme,
    rawPath: queryStart === -1 ? target : target.slice(0, queryStart),
    query: queryStart === -1 ? "" : target.slice(queryStart + 1),
    fields,
    client: socket.remoteAddress === undefined ? null : [socket.remoteAddress, socket.remotePort!],
    server: socket.localAddress === undefined
      ? unixServer
      : [socket.localAddress, socket.localPort!],
  };
}

/**
 * Answers a connection node:http handed over without a response (an upgrade, a CONNECT) with a
 * plain-text status, then closes it (lingering: see `endAndClose`).
 */
export function refuse(
  socket: Duplex,
  status: number,
  reason: string,
  fields: Readonly<Record<string, string>> = { connection: "close" },
): void {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n`;
  for (const name in fields) head += `${name}: ${fields[name]}\r\n`;
  endAndClose(
    socket,
    `${head}content-type: text/plain; charset=utf-8\r\ncontent-length: ${reason.length}\r\n` +
      `\r\n${reason}`,
  );
}

/**
 * How long a refused handshake's connection waits, once the answer is written, for the client to
 * close its side; then it is closed. Mutable for tests.
 */
export const lingerTiming: { ms: number } = { ms: 2_000 };

/**
 * Writes the last of a handshake's answer and closes the connection, as node:http closes one
 * after a `connection: close` response. Half-closing alone (`end()`) left the fd open for as long
 * as the client kept its side open: an upgrade socket is out of the server's connection tracking,
 * so no timeout ever reached it (200 denied handshakes held 200 fds, a few held `maxConnections`
 * for good, and shutdown waited its whole `shutdownTimeout` for them). Closing at once is no
 * better: bytes the client sent meanwhile, unread, make the kernel answer the close with a reset
 * that throws away what is still unsent (a 3 MB denial arrived as 128 KB). So this is a lingering
 * close: the answer and a FIN go out, what the client still sends is read and dropped, and the
 * connection closes when the client closes its side, or `lingerTiming.ms` after the answer is
 * written (a client that reads none of it is dropped after `closeTiming.timeoutMs`).
 */
export function endAndClose(socket: Duplex, data: string | Uint8Array): void {
  const destroy = () => socket.destroy();
  // A client that resets the connection (it left without reading) makes the socket emit an
  // error; unheard, that error ended the whole server process.
  socket.on("error", destroy);
  // Until the answer is written, a client that does not read gets what an unanswered close
  // gets; once it is written, lingerTiming.ms to close its side.
  let timer = setTimeout(destroy, closeTiming.timeoutMs);
  socket.once("close", () => clearTimeout(timer));
  // The client's FIN ends the wait, but not the answer still being written to it.
  socket.once("end", () => socket.writableFinished ? destroy() : socket.once("finish", destroy));
  socket.resume();
  socket.end(data, () => {
    clearTimeout(timer);
    timer = setTimeout(destroy, lingerTiming.ms);
  });
}

/**
 * Loads `ws` and returns what serves upgrades with it; when `ws` cannot be loaded, one that
 * refuses them with 501 (logged once), so HTTP keeps working.
 *
 * @param core The shared state.
 * @param maxMessageSize `ws`'s `maxPayload`.
 * @param scheme `"ws"`, or `"wss"` over TLS.
 * @param unixServer The scopes' `server` on a Unix socket (`[path, null]`), else `null`.
 * @returns The upgrade handler.
 */
export async function nodeUpgradeHandler(
  core: Core,
  maxMessageSize: number,
  scheme: string,
  unixServer: [string, null] | null = null,
): Promise<UpgradeHandler> {
  let module: WsModule;
  try {
    module = await import("ws") as unknown as WsModule;
    if (typeof module.WebSocketServer !== "function") {
      module = (module as unknown as { default: WsModule }).default;
    }
  } catch (error) {
    core.logger.warn(
      `WebSocket support needs the npm package "ws", which cannot be loaded (${
        error instanceof Error ? error.message : String(error)
      }): WebSocket handshakes get 501`,
    );
    return (_request, socket) => refuse(socket, 501, 'WebSockets need the npm package "ws"');
  }
  const answers = new WeakMap<IncomingMessage, Answer>();
  const server = new module.WebSocketServer({
    noServer: true,
    // ws 8.23's default, written out so that the warning's figure holds whatever ws does next.
    maxFragments: MAX_FRAGMENTS,
    // ws reads 0 as no limit: with `maxMessageSize: 0` a message was buffered whole (200 MiB took
    // RSS from 54 to 663 MiB) before the bridge closed it. At 1, ws refuses any larger from the
    // length its frame declares, and the bridge a message of one byte (`received`), both 1009.
    maxPayload: Number.isFinite(maxMessageSize)
      ? Math.max(1, maxMessageSize)
      : Number.MAX_SAFE_INTEGER,
    // Compression costs memory per socket and is a known source of trouble; uvicorn's
    // websockets implementation offers it, browsers cope without it.
    perMessageDeflate: false,
    // For the closes ws starts by itself (a message over maxPayload): the same wait as ours,
    // where ws versions before the option keep 30 s.
    closeTimeout: closeTiming.timeoutMs,
    handleProtocols: (_offered: Set<string>, request: IncomingMessage) =>
      answers.get(request)?.subprotocol ?? false,
  });
  server.on("headers", (lines, request) => {
    for (const [name, value] of answers.get(request)?.headers ?? []) {
      lines.push(`${name}: ${value}`);
    }
  });
  return (request, socket, head) => {
    // The HTTP side's checks hold for handshakes too: Node dropped the fields past its count (a
    // key or version among them, misread as 426), and two Hosts are refused as on deno (400).
    if (request.rawHeaders.length > 2 * MAX_HEADER_FIELDS) {
      return refuse(socket, 431, "Too many header fields");
    }
    const handshake = handshakeHead(request, scheme, unixServer);
    let hosts = 0;
    let host = "";
    for (let i = 0; i < handshake.fields.length; i += 2) {
      if (handshake.fields[i] === "host") {
        hosts++;
        host = handshake.fields[i + 1]!;
      }
    }
    if (hosts > 1) return refuse(socket, 400, "More than one Host field");
    if (hosts === 1 && !isHostValue(host)) return refuse(socket, 400, "A Host that is no host");
    if (hosts === 1 && targetNamesAnotherHost(request.url ?? "/", host)) {
      return refuse(socket, 400, "The target names another host than the Host field");
    }
    // node:http checks neither of these for a request it hands over as an upgrade, and the
    // handshake was answered 101: its HTTP side answers 505 and, over HTTP/1.1, 400 without a
    // Host (RFC 9112 3.2). RFC 6455 4.1 asks for HTTP/1.1, and RFC 9110 15.2 forbids a 101 to an
    // HTTP/1.0 client.
    if (request.httpVersionMajor !== 1) return refuse(socket, 505, "HTTP version not supported");
    if (request.httpVersionMinor === 0) {
      return refuse(socket, 400, "A WebSocket handshake needs HTTP/1.1");
    }
    if (hosts === 0) return refuse(socket, 400, "Missing Host");
    // Only where node:http ignores shouldUpgradeCallback (Deno before it had the option).
    if (request.method !== "GET" || !isUpgrade(handshake.fields)) {
      return refuse(socket, 501, "Only WebSocket upgrades are served");
    }
    const refused = checkHandshake(handshake.fields);
    if (refused !== null) {
      return refuse(
        socket,
        refused.status,
        refused.reason,
        refused.status === 426 ? UPGRADE_REQUIRED : undefined,
      );
    }
    // `ws` wants the value "websocket" itself, and refused an offer `checkHandshake` has taken
    // ("websocket, ", whose empty element RFC 9110 5.6.1.2 ignores) with 400 once the application
    // had accepted; Deno answers it 101.
    request.headers.upgrade = "websocket";
    new NodeWebSocketCycle(core, handshake, request, socket, head, server, answers).run();
  };
}
