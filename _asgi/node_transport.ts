/**
 * The `node:http` transport of the ASGI bridge. Loaded lazily by `serve` when `transport: "node"`
 * is chosen. Unlike `Deno.serve` it delivers GET and HEAD request bodies and keeps repeated
 * request headers apart, in the order the client sent them. It uses only `node:http` and the core,
 * so the bridge also runs on Node.js itself (bundled to JavaScript, for Node.js versions that
 * cannot strip types).
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse, STATUS_CODES } from "node:http";
import { createServer as createTlsServer } from "node:https";
import { type AddressInfo, connect, Server as NetServer, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { HttpScope } from "./types.ts";
import {
  type BodyFailure,
  type ConnectionLimits,
  type Core,
  drainTiming,
  HttpCycle,
  type ListenAddress,
  type Listener,
  type UnixListenAddress,
} from "./core.ts";
import { hasToken, isChunkedOnly, isHostValue, parseContentLength } from "./fields.ts";
import { withResolvers } from "./promises.ts";
import { httpScope, originForm, targetNamesAnotherHost } from "./scope.ts";
import { copyBytes, EMPTY } from "./bytes.ts";
import { defaultMaxConnections, softFdLimit } from "./fd_limit.ts";
import {
  endAndClose,
  isWebSocketUpgrade,
  lingerTiming,
  MAX_HEADER_FIELDS,
  nodeUpgradeHandler,
  refuse as refuseSocket,
} from "./node_websocket.ts";
import { closeTiming, maxMessageSizeOf } from "./websocket.ts";
import { TlsBacklog } from "./node_tls_backlog.ts";
import { watchUnreadAnswers, written } from "./node_unread_answers.ts";

/** Shared by the cycles of one server, so responses finished during shutdown close their sockets. */
interface ServerState {
  closing: boolean;
  /** `"https"` over TLS. */
  scheme: string;
  connections: Connections;
  /**
   * Requests that asked for an Upgrade the transport does not take (see `declineUpgrade`),
   * made on the first: a connection closes after the answer to one.
   */
  declinedUpgrades: WeakSet<IncomingMessage> | null;
  /** The scopes' `server` on a Unix socket, `[path, null]`: its ends have no address. */
  unixServer: [string, null] | null;
}

/** What serves a request once its turn on the connection has come (see `Connections.begin`). */
type Serve = (request: IncomingMessage, response: ServerResponse) => void;

/** A request read behind the one in progress on its connection, waiting for its turn. */
interface Waiting {
  request: IncomingMessage;
  response: ServerResponse;
  serve: Serve;
}

/**
 * The open connections of one server, each with how many of its requests are in progress: from
 * the request's "request" event until its response closes.
 *
 * Node's `closeIdleConnections()` counts a connection whose request head is half read as busy, so
 * one client that stopped in the middle of a head held graceful shutdown for the whole
 * `shutdownTimeout` (5010 ms of 5000 measured, where uvicorn and the deno transport close such a
 * connection at once). Here it counts as idle: no application has seen it. So does a TLS
 * connection still in its handshake, which `node:http` does not see at all: one held shutdown for
 * twice `shutdownTimeout`, and `closeAllConnections()` left it open.
 */
class Connections {
  /** Connections the HTTP server serves (upgraded ones are the WebSocket layer's). */
  readonly #busy = new Map<Socket, number>();
  /**
   * TCP connections of a TLS server until their handshake ends, by address pair: the TLS socket
   * that follows reports the same pair, and Node offers no public link from one to the other.
   */
  readonly #handshaking = new Map<string, Socket>();
  /** Set by `closeWhenIdle()`: from then on a connection closes once its last request is done. */
  #closing = false;
  /**
   * Connections whose answer closes them (see `closeAfter`), or closing while the client may
   * still send (see `lingerOnClose`): no new requests.
   */
  readonly #lingering = new WeakSet<Socket>();
  /**
   * What to do once a connection has at most `left` requests in progress: see `whenIdle` and
   * `whenLastOnly`. One at a time per connection: node:http parses nothing more on a connection
   * it handed over or whose bytes it could not read.
   */
  readonly #waiters = new Map<Socket, { left: number; run: () => void }>();
  /**
   * Connections node:http handed over for a handshake or a CONNECT, until they close: node:http no
   * longer tracks them, so its `closeAllConnections()` misses them, whether they wait, were
   * dropped, carry a WebSocket, or close lingering after a refusal (`refuse()` in
   * node_websocket.ts).
   */
  readonly #handedOver = new Set<Socket>();

  /**
   * The last request each connection began, with its response, while one is in progress: see
   * `refuseUnreadable`. Dropped once none is (see `end`).
   */
  readonly #latest = new Map<Socket, [IncomingMessage, ServerResponse]>();

  /**
   * The requests of each connection read behind the one in progress, oldest first, whose
   * applications have not begun: see `begin`.
   */
  readonly #waiting = new Map<Socket, Waiting[]>();

  /**
   * Connections node:http is kept from reading (see `#hold`): they have `MAX_PIPELINED` requests
   * in progress or more. Each with the `destroySoon` it was given meanwhile (see `#closeHeld`).
   */
  readonly #held = new WeakMap<Socket, () => void>();

  /**
   * What tells each connection's queued requests that it closed (see `watchQueued`), with their
   * responses (see `held`).
   */
  readonly #queued = new Map<Socket, Map<() => void, ServerResponse>>();

  /**
   * The request of `socket` still in progress whose bytes node:http read last, with its
   * response; `undefined` when none is in progress.
   */
  inProgress(socket: Socket): [IncomingMessage, ServerResponse] | undefined {
    return (this.#busy.get(socket) ?? 0) > 0 ? this.#latest.get(socket) : undefined;
  }

  /** The connections node:http serves now: see `watchUnreadAnswers`. */
  served(): IterableIterator<Socket> {
    return this.#busy.keys();
  }

  /** Closes `socket` now, given up for a client that takes nothing (see `watchUnreadAnswers`). */
  drop(socket: Socket): void {
    socket.destroy();
    // Now, not on "close", as in NodeCycle.dropConnection.
    this.closeQueued(socket);
  }

  /** Starts tracking a connection requests come on, until it closes or is upgraded. */
  add(socket: Socket): void {
    this.#busy.set(socket, 0);
    socket.once("close", () => {
      this.#busy.delete(socket);
      this.#waiters.delete(socket);
      this.#latest.delete(socket);
      // Their applications never run: the client, gone, can take no answer.
      this.#waiting.delete(socket);
      this.closeQueued(socket);
    });
  }

  /**
   * Calls `gone` when `socket` closes, for a request whose response is queued behind another's
   * (pipelined): node:http emits "close" only on a response that has the socket, so a client
   * that pipelined streams behind a large answer and left held their applications in send(),
   * and one waiting in receive() for the end, until shutdown (4 of 5, 5 s after it left). One
   * listener per connection, not per request: a client may queue thousands of them.
   *
   * @returns What stops watching, once the response has the socket (its own "close" tells).
   */
  watchQueued(socket: Socket, response: ServerResponse, gone: () => void): () => void {
    let queued = this.#queued.get(socket);
    if (queued === undefined) this.#queued.set(socket, queued = new Map());
    queued.set(gone, response);
    return () => void queued.delete(gone);
  }

  /**
   * The bytes node:http holds for the responses of `socket` queued behind the one that has it
   * (pipelined): none of them has reached the socket. Those of the answer being sent are left
   * out: it waits on the client by itself, and a slow client may take a large one.
   */
  queuedBytes(socket: Socket): number {
    let held = 0;
    const queued = this.#queued.get(socket);
    if (queued === undefined) return held;
    for (const response of queued.values()) {
      held += (response as { outputSize?: number }).outputSize ?? 0;
    }
    return held;
  }

  /** Tells every request queued on `socket` that it closed (see `watchQueued`). */
  closeQueued(socket: Socket): void {
    const queued = this.#queued.get(socket);
    if (queued === undefined) return;
    this.#queued.delete(socket);
    for (const gone of queued.keys()) gone();
  }

  /**
   * Calls `then` once no request of `socket` is in progress: at once if none is, else when the
   * response of the last one closes. Not if the connection closes first, nor if it is closing
   * by then (see `#servesMore`): it is closed instead.
   */
  whenIdle(socket: Socket, then: () => void): void {
    this.#handOver(socket);
    const count = this.#busy.get(socket);
    if (count === undefined || count === 0) {
      if (this.#servesMore(socket)) return then();
      // No error listener is left on it (see below).
      socket.on("error", () => socket.destroy());
      return socket.destroySoon();
    }
    this.#wait(socket, 0, then, true);
  }

  /**
   * Calls `then` once at most one request of `socket` is in progress: the last one, whose body
   * node:http could not read (see `refuseUnreadable`). Those before it are answered first; not
   * if the connection closes meanwhile.
   */
  whenLastOnly(socket: Socket, then: () => void): void {
    if ((this.#busy.get(socket) ?? 0) <= 1) return then();
    this.#wait(socket, 1, then, false);
  }

  /**
   * Runs `then` once `socket` has `left` requests in progress, or, with `onlyServing`, closes it
   * instead if it takes no more requests by then (see `#servesMore`).
   */
  #wait(socket: Socket, left: number, then: () => void, onlyServing: boolean): void {
    // node:http takes its error listener off a socket it hands over (and off one whose bytes it
    // could not read), and `then` sets its own: a client that reset the connection meanwhile
    // ended the whole process (ECONNRESET unheard).
    const destroy = () => socket.destroy();
    socket.on("error", destroy);
    this.#waiters.set(socket, {
      left,
      run: () => {
        // Dropped, the socket keeps the error listener.
        if (onlyServing && !this.#servesMore(socket)) return socket.destroySoon();
        socket.off("error", destroy);
        then();
      },
    });
  }

  /**
   * Tracks `socket`, which node:http has given up, until it closes. A handshake waiting behind a
   * response the client does not read, or the close of a dropped one, can take as long as the
   * client likes: at the end of shutdownTimeout nothing else closed it, and shutdown() resolved
   * with it open (the process then lived on for as long as the client did). Served, it stays
   * tracked: a refused handshake or CONNECT closes lingering, 2 s after its answer or up to
   * closeTiming's 10 s while the client reads none of it, and shutdown() took twice
   * shutdownTimeout for one, then resolved with it open (a WebSocket is aborted by then).
   */
  #handOver(socket: Socket): void {
    const handedOver = this.#handedOver;
    handedOver.add(socket);
    socket.once("close", () => handedOver.delete(socket));
  }

  /** Closes at once every connection `closeAllConnections()` does not see (see `#handedOver`). */
  destroyHandedOver(): void {
    for (const socket of this.#handedOver) socket.destroy();
  }

  /**
   * Whether a request that comes now on `socket` is served. Not once the answer before it closes
   * the connection ("connection: close", which node:http ends the socket for, a lingering close
   * included) or shutdown has begun: `begin` drops a plain request there, but node:http hands a
   * handshake or a CONNECT over all the same, and the application got a websocket scope on a closed socket,
   * or a WebSocket opened during shutdown.
   */
  #servesMore(socket: Socket): boolean {
    return !this.#closing && socket.writable && !this.#lingering.has(socket);
  }

  /** Tracks a TCP connection of a TLS server until `secured` reports its TLS socket. */
  addHandshake(socket: Socket): void {
    const key = addressPair(socket);
    const handshaking = this.#handshaking;
    handshaking.set(key, socket);
    socket.once("close", () => {
      if (handshaking.get(key) === socket) handshaking.delete(key);
    });
  }

  /** A TLS handshake has ended: its connection is tracked as its TLS socket from now on. */
  secured(socket: Socket): void {
    this.#handshaking.delete(addressPair(socket));
    this.add(socket);
  }

  /** Stops tracking an upgraded connection: closing WebSockets is not the HTTP server's job. */
  forget(socket: Duplex): void {
    // node:http hands the upgraded connection over as a Duplex; it is the Socket added.
    this.#busy.delete(socket as Socket);
  }

  /**
   * A request of `socket` is in progress from now until `end` is called for it, when its response
   * closes. `serve` runs its application: now if no other request of the connection is in
   * progress, else once the response of the one before it has closed (see `end`), as uvicorn and
   * Deno.serve serve a connection's requests one at a time. node:http hands over every request a
   * client pipelines as soon as it reads it, and each application then ran at once, its whole
   * answer held in memory behind the one being sent: 200 clients that each pipelined 50 GETs for
   * 64 KiB answers and read nothing took a server to 653 MiB (the deno transport: 136 MiB).
   *
   * Not served: a request that comes on a connection closing after an answer. Once a connection
   * has `MAX_PIPELINED` requests in progress, node:http reads no more of it until it has fewer
   * (see `#hold`).
   */
  begin(socket: Socket, request: IncomingMessage, response: ServerResponse, serve: Serve): void {
    // A request the parser found after a body that ended while its connection closes: the answer
    // said "connection: close", so the client sent it unasked for.
    if (this.#lingering.has(socket)) return;
    const count = this.#busy.get(socket);
    if (count === undefined) return serve(request, response);
    this.#busy.set(socket, count + 1);
    if (count + 1 >= MAX_PIPELINED && !this.#held.has(socket)) this.#hold(socket);
    this.#latest.set(socket, [request, response]);
    if (count === 0) return serve(request, response);
    const waiting = this.#waiting.get(socket);
    if (waiting === undefined) this.#waiting.set(socket, [{ request, response, serve }]);
    else waiting.push({ request, response, serve });
  }

  /**
   * Stops reading `socket` until `#release`: the requests node:http has already read from it (all
   * those of the read it is parsing now, one read's worth) wait their turn, and the client's
   * next ones wait in the kernel, whose buffers fill and stop it sending. node:http resumes a
   * socket by itself: after each request it has read whole, and once the answers it holds for it
   * drain. Those resumes wait too: until released, `resume()` on this socket does nothing.
   *
   * A request head the read ended in the middle of stays half read meanwhile, and node:http's
   * `headersTimeout` runs on: held for longer, it is answered 408 once the requests before it
   * are (200 GETs of 20 ms each with a head split after them, `headersTimeout` 1 s: 200 answers,
   * then 408). A client that does not pipeline never meets this. Over
   * TLS, Deno reads on beneath a paused socket: `TlsBacklog` bounds what waits there.
   */
  #hold(socket: Socket): void {
    const close = () => this.#closeHeld(socket);
    this.#held.set(socket, close);
    socket.pause();
    socket.resume = keepPaused;
    // How node:http closes it after an answer that closes it, and `#next` once it serves no more.
    // A body's lingering close (see lingerOnClose) is never set here: the request whose body is
    // being read is the last one read, so the only one in progress.
    if (!Object.hasOwn(socket, "destroySoon")) socket.destroySoon = close;
  }

  /**
   * Closes a held `socket` (see `#hold`) without a reset over its answers: the client's next
   * requests wait unread in the kernel, and a socket closed over unread bytes makes the kernel
   * answer with a reset, which throws away the answers the client has not read yet (3,000 GETs in
   * one write, the 101st answered "connection: close": 34 answers, then ECONNRESET). So the FIN
   * goes out after the answers, and the socket closes `lingerTiming.ms` after they are written
   * (within `closeTiming.timeoutMs` for a client that takes none of them), as after a refused
   * handshake. It is read no further meanwhile: node:http's parser reads a plain socket's handle
   * itself, past any "data" listener, and would make a request of each, served by nobody (a client
   * that went on sending GETs held the process at full CPU with its memory growing).
   */
  #closeHeld(socket: Socket): void {
    this.#held.delete(socket);
    // The close is this one from now on: `#next` calls it again once the answer closes, and
    // node:http's own would destroy the socket as soon as the answers are written.
    socket.destroySoon = closing;
    // Its `resume` stays the no-op `#hold` gave it.
    this.#lingering.add(socket);
    if (socket.destroyed) return;
    const destroy = () => socket.destroy();
    // A client that resets the connection makes the socket emit an error: unheard, it would end
    // the process.
    socket.on("error", destroy);
    let timer = setTimeout(destroy, closeTiming.timeoutMs);
    socket.once("close", () => clearTimeout(timer));
    socket.end(() => {
      clearTimeout(timer);
      timer = setTimeout(destroy, lingerTiming.ms);
    });
  }

  /**
   * Lets node:http read `socket` again (see `#hold`), unless it paused the socket itself for
   * the answers it holds (its `_paused`: it resumes once they drain) or handed it over (an
   * Upgrade or a CONNECT read behind the held requests: its new owner reads it, and bytes read
   * before it listens would be lost).
   */
  #release(socket: Socket): void {
    const close = this.#held.get(socket);
    if (close === undefined) return;
    this.#held.delete(socket);
    delete (socket as { resume?: unknown }).resume;
    if (socket.destroySoon === close) delete (socket as { destroySoon?: unknown }).destroySoon;
    if ((socket as { _paused?: boolean })._paused || this.#handedOver.has(socket)) return;
    if (!socket.destroyed) socket.resume();
  }

  /** `socket` is closing under a client that may still be sending: it takes no new requests. */
  linger(socket: Socket): void {
    this.#lingering.add(socket);
  }

  /**
   * `response`, whose head is written, closes `socket` once it is: no request read from now on
   * reaches the application. node:http parses on and hands each one over, though its answer can
   * never be sent (RFC 9112 §9.6: the server must not process it): a GET sent while a closing
   * answer streamed, or pipelined behind a request refused with 400, ran the application (uvicorn
   * runs neither). One pipelined before that head is written is already in progress: it sees
   * `http.disconnect` when the connection closes.
   */
  closeAfter(socket: Socket, response: ServerResponse): void {
    // node:http's own decision, taken in writeHead(): an application's "connection: close" leaves
    // shouldKeepAlive true, and an HTTP/1.0 body that ends at the close sets only this.
    if ((response as { _last?: boolean })._last) this.#lingering.add(socket);
  }

  /** A request of `socket` is done: the next one read on it, if any, begins. */
  end(socket: Socket): void {
    const busy = this.#busy;
    const count = busy.get(socket);
    if (count === undefined) return;
    busy.set(socket, count - 1);
    // Fewer than MAX_PIPELINED in progress now: node:http may read on (see `#hold`).
    if (count === MAX_PIPELINED) this.#release(socket);
    // Nothing is in progress: `inProgress` has nothing to answer, and the pair, kept, held the
    // finished request's cycle, scope and last body chunk (6 to 70 KB) for as long as the
    // connection idled.
    if (count === 1) this.#latest.delete(socket);
    const waiter = this.#waiters.get(socket);
    if (waiter !== undefined && waiter.left === count - 1) {
      this.#waiters.delete(socket);
      return waiter.run();
    }
    // Only with requests waiting: a connection that does not pipeline pays no lookup here.
    if (count > 1) return this.#next(socket);
    // A response whose head said keep-alive before shutdown began: Deno's node:http then closes
    // the connection by itself, Node.js 20 keeps it until shutdownTimeout (measured: 3004 ms).
    if (count === 1 && this.#closing) {
      // On the next turn: Node may first take a request it holds (pipelined) off the connection.
      setImmediate(() => {
        if (busy.get(socket) === 0) socket.destroySoon();
      });
    }
  }

  /**
   * Serves the oldest request waiting on `socket`, unless the connection takes no more (see
   * `#servesMore`): after an answer that closes it, its waiting requests are not served, as RFC
   * 9112 §9.6 asks, and once shutdown has begun neither, as uvicorn (0.17.6, h11) closes the
   * connection after the answer in progress without running those pipelined behind it. Their
   * clients send them again on another connection, as after any close.
   */
  #next(socket: Socket): void {
    const waiting = this.#waiting.get(socket);
    const next = waiting?.shift();
    if (next === undefined) return;
    if (waiting!.length === 0) this.#waiting.delete(socket);
    if (!this.#servesMore(socket)) {
      this.#waiting.delete(socket);
      return socket.destroySoon();
    }
    next.serve(next.request, next.response);
  }

  /**
   * Closes every connection with no request in progress now (idle, or in the middle of a head or
   * of a TLS handshake), and each other one once its requests are done.
   */
  closeWhenIdle(): void {
    this.#closing = true;
    for (const [socket, count] of this.#busy) {
      // destroySoon, not destroy: the end of a response that just finished may still be queued.
      if (count === 0) socket.destroySoon();
    }
    for (const socket of this.#handshaking.values()) socket.destroy();
  }
}

/**
 * How many requests one connection may have in progress (the one served and those waiting for
 * their turn, see `Connections.begin`) before node:http stops reading it. Deno's `node:http`
 * hands over every request a client pipelines as soon as it reads it: a client that sent a
 * million GETs and read none of the responses grew the server by 400 MiB per connection, and a
 * waiting request holds its request and response (1.5 KB of heap, as on a bare node:http server
 * that keeps them: its scope and cycle are built only when its turn comes, so one read's worth
 * holds 3.5 MB, 2026-11-29). Past this many, the connection was once
 * closed at once; but node:http parses every request of one read together, so a client that
 * wrote 65 small GETs in one write (`wrk` with a pipelining script, `h2load --h1 -m 100`) got
 * no answer at all, where uvicorn and the deno transport answer every one, in order. Now the
 * connection is held instead (see `Connections.#hold`): the requests of the read being parsed
 * still wait their turn, so one connection holds at most one read's worth (2,149 GETs of 30
 * bytes, measured), and the client's next ones wait in the kernel until fewer than this many
 * are in progress. A client that sent GETs without end and read nothing got 4 MiB of them into
 * the kernel's buffers and then waited, where the server read on without bound before the
 * connection was closed (raw-socket probes, 2026-11-29).
 */
const MAX_PIPELINED = 64;

/**
 * The most the answers queued on one connection behind the one being sent may hold, in bytes
 * (see `NodeCycle.#boundQueued`): those of the requests a client pipelined are written as soon
 * as their applications give them, whole, and wait in memory behind the first. 20 clients that each
 * pipelined 60 GETs for 1 MiB answers and read nothing took a server from 58 to 1,281 MiB (the
 * deno transport, which answers one request of a connection at a time: 84 MiB). Past it, the
 * connection is closed. The same bound as a TLS connection's unread
 * input (`HTTP_LIMIT` of node_tls_backlog.ts).
 *
 * Since the requests of a connection run one at a time (2026-11-29), an application begins only
 * once node:http has handed its response the socket, so no answer queues and Deno 2.9.6 never
 * reaches this bound (those 20 clients: 142 MiB, the deno transport 127 MiB, no connection
 * closed). It stays, with `Connections.watchQueued` and `NodeCycle.queued()`, for a `node:http`
 * that would hand the socket over only after the response before has closed.
 */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;

/** Both ends of a connection, which identify it among the open ones. */
function addressPair(socket: Socket): string {
  return `${socket.remoteAddress} ${socket.remotePort} ${socket.localAddress} ${socket.localPort}`;
}

/** The application framed its response with neither `content-length` nor `transfer-encoding`. */
const UNFRAMED = 0;
/** By a `content-length`. */
const BY_LENGTH = 1;
/** By a `transfer-encoding` whose final coding is chunked, which Node then applies itself. */
const BY_CHUNKS = 2;
/** By a `transfer-encoding` with another final coding: RFC 9112 §6.3 ends the body at close. */
const BY_CLOSE = 3;

/**
 * Copies an application's response head into `flat` as `writeHead()` takes it, with at most one
 * framing, and says which. A `content-length` beside a `transfer-encoding` is dropped (RFC 9112
 * §6.2 forbids sending both; uvicorn's h11 and Deno.serve drop it too and send the body chunked);
 * so is a `transfer-encoding` to an HTTP/1.0 client (§6.1: it cannot decode one; h11 drops it too),
 * whose body then ends at the close, the `content-length` dropped as well: the core does not hold
 * the body to it, as h11 and Deno.serve do not.
 */
function flattenFramed(
  headers: [string, string][],
  flat: string[],
  chunkable: boolean,
): typeof UNFRAMED | typeof BY_LENGTH | typeof BY_CHUNKS | typeof BY_CLOSE {
  let length = false;
  let coding: string | null = null;
  for (const [name, value] of headers) {
    if (name.length === 17 && name.toLowerCase() === "transfer-encoding") {
      // To HTTP/1.0 the body then ends at the close (below), with neither field.
      coding = chunkable ? value.slice(value.lastIndexOf(",") + 1).trim().toLowerCase() : "";
      if (!chunkable) continue;
    } else if (name.length === 14 && name.toLowerCase() === "content-length") {
      length = true;
    }
    flat.push(name, value);
  }
  if (coding === null) return length ? BY_LENGTH : UNFRAMED;
  if (length) {
    let kept = 0;
    for (let i = 0; i < flat.length; i += 2) {
      const name = flat[i]!;
      if (name.length === 14 && name.toLowerCase() === "content-length") continue;
      flat[kept++] = name;
      flat[kept++] = flat[i + 1]!;
    }
    flat.length = kept;
  }
  return coding === "chunked" ? BY_CHUNKS : BY_CLOSE;
}

/** A flattened head without its `trailer` fields. */
function withoutTrailer(flat: string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (name.length === 7 && name.toLowerCase() === "trailer") continue;
    kept.push(name, flat[i + 1]!);
  }
  return kept;
}

/**
 * Whether a flattened head has a `connection` field and none of them says `close`: node:http
 * then keeps the connection, whatever the request asked for.
 */
function keepsAlive(flat: string[]): boolean {
  let found = false;
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (name.length !== 10 || name.toLowerCase() !== "connection") continue;
    if (hasToken(flat[i + 1]!, "close")) return false;
    found = true;
  }
  return found;
}

/** A cycle whose exchange is a Node.js request and response. */
class NodeCycle extends HttpCycle {
  #request: IncomingMessage;
  #response: ServerResponse;
  #state: ServerState;
  #iterator: AsyncIterator<Uint8Array> | null = null;
  /** What the sends waiting for a drain share (see `ChunkSource` of the deno transport). */
  #drained: PromiseWithResolvers<void> | null = null;
  /** The body exceeded maxBodySize: its connection closes at once (see `refuseBody`). */
  #refused = false;
  /** What is left of the body is being dropped: see `#discardBody`. */
  #discarding = false;
  /** The client waits for `100 Continue` before it sends the body: see `bodyAccepted`. */
  #expectsContinue: boolean;
  /** What the connection had written out when `queued()` last looked: see there. */
  #taken = 0;
  /** A body given whole still goes out a slice at a time: see `#writeWhole`. */
  #writingWhole = false;

  constructor(
    core: Core,
    request: IncomingMessage,
    response: ServerResponse,
    state: ServerState,
    scope: HttpScope,
    hasBody: boolean,
    expectedLength: number,
    expectsContinue: boolean,
  ) {
    super(core, scope, hasBody, expectedLength);
    this.#request = request;
    this.#response = response;
    this.#state = state;
    this.#expectsContinue = expectsContinue;
    response.on("drain", () => this.#wakeWriter());
    const socket = request.socket;
    // Pipelined behind another response, this one would have no socket yet, and no "close" if
    // the connection closed first (see Connections.watchQueued): not since requests wait their
    // turn (see Connections.begin), but kept for a node:http that assigns it later.
    const unwatch = response.socket === null
      ? state.connections.watchQueued(socket, response, () => this.#closed())
      : null;
    response.on("close", () => {
      // Here rather than in a "close" listener of its own: one fewer per request on the hot path.
      state.connections.end(socket);
      unwatch?.();
      this.#closed();
    });
  }

  /** The response closed, or the connection of a queued one did. */
  #closed(): void {
    this.#wakeWriter();
    // "close" follows "finish" after a complete response; without it the client went away, or
    // the parser refused the body (see `refuseUnreadable`).
    if (this.#response.writableFinished) return;
    if (malformedBodies.has(this.#request)) this.bodyUnreadable("body_malformed");
    this.clientGone();
  }

  protected override readFailed(): BodyFailure {
    return malformedBodies.has(this.#request) ? "body_malformed" : "client_left";
  }

  #wakeWriter(): void {
    const drained = this.#drained;
    if (drained !== null) {
      this.#drained = null;
      drained.resolve();
    }
  }

  /**
   * Writes the head. `length`, when given, is the length of the whole body, stated as its
   * `content-length` unless the application framed the response with one or with a
   * `transfer-encoding`.
   */
  #writeHead(status: number, headers: [string, string][], length?: number): void {
    const response = this.#response;
    // Shutdown has begun (`draining`, from the call on) or the listener is closing, or the
    // request asked for an Upgrade the transport does not take (see `declineUpgrade`).
    const state = this.#state;
    if (
      this.core.draining || state.closing ||
      (state.declinedUpgrades !== null && state.declinedUpgrades.has(this.#request))
    ) {
      response.shouldKeepAlive = false;
    }
    // The core may hand the same list to several responses: extend a copy, never the list.
    const flat: string[] = [];
    const framing = flattenFramed(headers, flat, this.#request.httpVersion !== "1.0");
    if (framing === BY_CLOSE) response.shouldKeepAlive = false;
    // node:http's own decision: false when the client asked to close (HTTP/1.0 without
    // keep-alive, or its "Connection: close"), the server is shutting down, or the body ends
    // with the connection.
    const closes = !response.shouldKeepAlive;
    // An application's own "connection" field without "close" (keep-alive, or the names of
    // hop-by-hop fields) makes node:http keep the connection, against that decision: a client
    // that asked to close waited for the close until keepAliveTimeout (RFC 9112 §9.6 asks the
    // server to close), and after a body that ends at the close the next request's answer went
    // out on the same connection, read by the client as more of that body. A "close" beside
    // it, as deno and uvicorn add one, keeps the decision.
    if (closes && keepsAlive(flat)) flat.push("connection", "close");
    if (framing === UNFRAMED && length !== undefined) {
      flat.push("content-length", String(length));
    }
    try {
      response.writeHead(status, flat);
    } catch (error) {
      // node:http refuses a "trailer" field in a response it does not send chunked (a whole
      // body, a 204 or 304, HEAD, HTTP/1.0), and the client got no response at all. With no
      // trailer section (the bridge sends none) the field says nothing: it is left out there.
      if ((error as { code?: unknown }).code !== "ERR_HTTP_TRAILER_INVALID") throw error;
      response.writeHead(status, withoutTrailer(flat));
    }
    const request = this.#request;
    if (request.socket !== null) this.#state.connections.closeAfter(request.socket, response);
    // node:http chunks the body when "chunked" appears anywhere in the field ("chunked, gzip",
    // "chunked-x"): a body the head says ends at the close went out in chunks of its own, which
    // the client took for the body's bytes. Its flag is read at each write, so clearing it here
    // sends the body as given.
    if (framing === BY_CLOSE) (response as { chunkedEncoding?: boolean }).chunkedEncoding = false;
    if (!request.complete && request.socket !== null) {
      const idleMs = this.#refused ? drainTiming.refusedIdleMs : drainTiming.idleMs;
      lingerOnClose(request.socket, request, this.#state.connections, idleMs);
    }
  }

  protected override refuseBody(): void {
    // node:http closes the connection once the 413 ("connection: close") is written. Closed at
    // once, the body bytes still arriving drew a reset that could overtake the 413: behind nginx
    // it became a 502 (proxy probe, 2026-11-28). So the close lingers (see lingerOnClose), with
    // no byte bound but a short idle one.
    this.#refused = true;
  }

  protected override bodyAccepted(): void {
    if (this.#expectsContinue) this.#response.writeContinue();
  }

  protected override sendWhole(
    status: number,
    headers: [string, string][],
    body: Uint8Array | null,
  ): void {
    // writeHead() fixes the head, so Node would otherwise chunk even a body it holds whole.
    this.#writeHead(status, headers, body?.length);
    // A copy, as for a streamed chunk (see the core's #sendBody): node:http holds the array until
    // the client takes it, after send() resolved; an 8 MiB body changed by the application then
    // reached a client that read late half changed. Deno's Response copies a body by itself.
    if (body === null || body.length <= WHOLE_SLICE || this.scope.method === "HEAD") {
      this.#response.end(body === null ? undefined : copyBytes(body));
    } else {
      this.#writingWhole = true;
      slicedAnswers.add(this.#response);
      this.#writeWhole(copyBytes(body), 0);
    }
    this.#boundQueued();
  }

  /**
   * Closes the connection if this response waits behind another and what the answers queued so
   * hold is over `MAX_QUEUED_BYTES`. Looked at after a write to a queued response given whole, or
   * one that filled its buffer: smaller writes hold little, and a response that has the socket
   * waits for the client to drain it.
   */
  #boundQueued(): void {
    if (this.#response.socket !== null) return;
    const connection = this.#request.socket;
    if (connection === null || connection.destroyed) return;
    const connections = this.#state.connections;
    const held = connections.queuedBytes(connection);
    if (held <= MAX_QUEUED_BYTES) return;
    connection.destroy();
    // Now, not on "close", as in dropConnection: the queued requests learn that it closed.
    connections.closeQueued(connection);
    this.core.warnOf(
      "Pipelined answers over the queue limit",
      `A client pipelined requests whose answers queued behind the one it is sent hold ${held} ` +
        `bytes, over the limit of ${MAX_QUEUED_BYTES} (${
          mib(MAX_QUEUED_BYTES)
        } MiB): closed the connection (the ` +
        `requests still in progress on it see http.disconnect)`,
    );
  }

  /**
   * Writes a large body given whole (or a stream's large last chunk) from `at` on, a slice at a
   * time, each once the one before is out. One write of it all completes only once the client has taken nearly all of it, and a
   * response pipelined behind it judges its client by completed writes (see `queued()`): a
   * client reading a 16 MiB answer at 4.6 MB/s, with a stream pipelined behind it, was cut off
   * after 5.4 MB as one that took nothing for stallTimeout 400 ms.
   */
  #writeWhole(body: Uint8Array, at: number): void {
    const response = this.#response;
    while (!response.destroyed) {
      const end = at + WHOLE_SLICE;
      if (end >= body.length) {
        this.#writingWhole = false;
        slicedAnswers.delete(response);
        response.end(body.subarray(at));
        return;
      }
      const room = response.write(body.subarray(at, end));
      at = end;
      if (!room) {
        response.once("drain", () => this.#writeWhole(body, at));
        return;
      }
    }
  }

  protected override openStream(status: number, headers: [string, string][]): void {
    this.#writeHead(status, headers);
  }

  protected override writeChunk(chunk: Uint8Array): Promise<void> | undefined {
    const response = this.#response;
    if (response.destroyed || response.writableEnded) return;
    if (response.write(chunk)) return;
    this.#boundQueued();
    // Closed for holding too much: the core learnt it (clientGone), no drain will come.
    if (this.#request.socket?.destroyed) return;
    // A wait begins (the core marks it next): what the connection has written out so far is
    // where queued() measures the client's progress from.
    if (this.writeMark < 0 && response.socket === null) this.#taken = written(this.#request.socket);
    return (this.#drained ??= withResolvers()).promise;
  }

  protected override endStream(last: Uint8Array): void {
    const response = this.#response;
    if (response.destroyed || response.writableEnded || this.#writingWhole) return;
    if (last.length <= WHOLE_SLICE || this.scope.method === "HEAD") {
      response.end(last.length > 0 ? last : undefined);
      return;
    }
    // Sliced as a body given whole, and for the same reason: once the application has given
    // its last chunk only completed writes tell watchUnreadAnswers that the client takes some,
    // and a 16 MiB one written at once dropped a client reading it at 6 MB/s (stallTimeout 400).
    this.#writingWhole = true;
    slicedAnswers.add(response);
    this.#writeWhole(last, 0);
  }

  protected override abortResponse(
    _reason: unknown,
    status: number,
    headers: [string, string][],
  ): void {
    const response = this.#response;
    if (response.destroyed) return;
    if (!response.headersSent && status !== 0) {
      this.#writeHead(status, headers);
      // Not flushHeaders(): Deno's node:http (2.9.6) writes a head flushed so as UTF-8, which
      // turned a Latin-1 byte of a header value into two ("caf\xe9" went out as "caf\xc3\xa9").
      // Written with bytes, it goes out as Latin-1; node:http ignores bytes written to a response
      // that has no body (HEAD, 204, 304), so such a head, which is all of it, is ended instead.
      if (this.scope.method === "HEAD" || status === 204 || status === 304) response.end();
      else response.write(EMPTY);
    }
    // Flush what was written, then close without finishing the response: the client sees a
    // truncated body, as after uvicorn's transport.close().
    const socket = response.socket;
    if (socket !== null) socket.destroySoon();
    else response.destroy();
  }

  protected override dropConnection(): void {
    // abortResponse's destroySoon() waits for the written bytes to go out: a client that reads
    // nothing would hold the connection for good.
    const response = this.#response;
    const socket = response.socket;
    if (socket !== null) {
      socket.destroy();
      return;
    }
    response.destroy();
    // Queued behind another answer (see queued()): node:http would destroy the connection only
    // once this response had it, that is once the client had taken the answers before it.
    const connection = this.#request.socket;
    if (connection === null) return;
    connection.destroy();
    // Now, not on "close": the requests queued beside this one, given up by the same check,
    // are then gone, and not each reported as stalled.
    this.#state.connections.closeQueued(connection);
  }

  override queued(): boolean {
    // Never so since the requests of a connection run one at a time (see MAX_QUEUED_BYTES).
    // node:http hands over each pipelined request as it reads it, and holds its response, with no
    // socket, until the answers before it are done: a stream queued so waits on them for a drain.
    // Watched as a wait on the client, one behind a slow answer the client read as it came was
    // cut off as stalled, and the warning said the client took nothing. But it waits on the
    // client all the same when the connection has bytes the client does not take: a client that
    // pipelined streams behind a 16 MiB answer it never read held 20 of them, their applications
    // and their chunks, until shutdown. So it is queued only while nothing waits unsent on the
    // connection (the answers before it wait on their applications), or while the client takes
    // some of what does (a write of it completed since the last look).
    if (this.#response.socket !== null) return false;
    const connection = this.#request.socket;
    if (connection === null || connection.destroyed) return false;
    const taken = written(connection);
    const moved = taken !== this.#taken;
    this.#taken = taken;
    return moved || connection.writableLength === 0;
  }

  protected override readChunk(): Promise<Uint8Array | null> {
    const iterator = this.#iterator ??= this.#request[Symbol.asyncIterator]();
    return iterator.next().then((result) => {
      if (result.done) return null;
      // Bytes parsed before the parser refused the rest of the body: its 400 is written (or
      // waits for the requests before it), so this body ends here, as malformed. Handed on, a
      // chunk that took the body past maxBodySize was answered "413" to a client that got the
      // 400, and its application told "exceeded_max_body_size" (seen 2026-11-29).
      if (malformedBodies.has(this.#request)) throw new Error("Request body malformed");
      const chunk = result.value;
      // Node hands out Buffers; the ASGI body is a plain Uint8Array.
      return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    });
  }

  protected override closeExchange(): void {
    this.#wakeWriter();
    const response = this.#response;
    if (!response.writableEnded && !this.#writingWhole) response.destroy();
    else if (!this.#request.complete) this.#discardBody();
  }

  protected override responseComplete(): void {
    // node:http begins its lingering close (see lingerOnClose) as soon as a closing response is
    // written, and it ends after drainTiming.idleMs without a byte read: with nobody reading
    // until the application returned, one that went on working for longer had the connection
    // closed under a client still sending ("Broken pipe" instead of the answer).
    const ended = this.#response.writableEnded || this.#writingWhole;
    if (ended && !this.#request.complete) this.#discardBody();
  }

  /**
   * Reads the rest of a body the application answered without reading, and drops it, as Node's
   * own server does (`req._dump()`) and uvicorn does. Deno's node:http leaves it in the socket:
   * past ~128 KiB the connection's next request then waited forever. At most `maxBodySize` bytes
   * are dropped: a chunked body that goes on past that (or for ever) closes the connection, as
   * one the application read would have (413). A body already refused for its size is dropped
   * with no byte bound: its connection is closing, within `lingerOnClose`'s time bounds.
   */
  #discardBody(): void {
    if (this.#discarding) return;
    this.#discarding = true;
    const request = this.#request;
    let left = this.#refused ? Infinity : this.core.maxBodySize;
    const drop = (chunk: Uint8Array): boolean => {
      left -= chunk.byteLength;
      if (left >= 0) return true;
      request.socket?.destroy();
      return false;
    };
    const iterator = this.#iterator;
    if (iterator === null) {
      request.on("data", drop);
      request.resume();
      return;
    }
    // The iterator reads with "readable" events, which resume() does not override.
    const next = (): void => {
      iterator.next().then((result) => {
        if (!result.done && drop(result.value)) next();
      }, () => {});
    };
    next();
  }
}

/**
 * The responses whose body, given whole, or whose last chunk goes out a slice at a time (see
 * `NodeCycle.#writeWhole`): not ended yet, but their applications have finished giving them (see
 * `watchUnreadAnswers`).
 */
const slicedAnswers = new WeakSet<ServerResponse>();

/** Whether an application is still giving `response`: see `watchUnreadAnswers`. */
function giving(response: ServerResponse): boolean {
  return !response.writableEnded && !slicedAnswers.has(response);
}

/**
 * The largest write of a body given whole or of a last chunk (see `NodeCycle.#writeWhole`): what a client must take
 * within `stallTimeout` for a response pipelined behind it to count it as taking something.
 */
const WHOLE_SLICE = 1024 * 1024;

/** `bytes` in MiB, to one decimal. */
function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

/** `destroySoon()` of a socket whose lingering close is under way (see `Connections.#closeHeld`). */
function closing(): void {}

/** `resume()` of a socket that node:http must not read yet (see `Connections.#hold`). */
function keepPaused<T>(this: T): T {
  return this;
}

/**
 * Makes node:http's close of `socket` after the response being written a lingering one, should
 * the request's body still be arriving then. node:http closes the connection after a response that
 * says `connection: close` (the web layer's 408, an application's own, one written during
 * shutdown, the bridge's 413) by destroying it once the response is written: the bytes the client
 * still sent went unread, the kernel answered them with a reset, and a client that sends its whole
 * body before it reads (Python's `http.client`, nginx relaying a buffered upload) got "Broken
 * pipe" instead of the answer. Here the answer and a FIN go out, the rest of the body is read and
 * dropped (`#discardBody`, within `maxBodySize` unless the body was refused for its size), and
 * the connection closes once the body has ended, `idleMs` (`drainTiming.idleMs`, or
 * `drainTiming.refusedIdleMs` after a 413) after the client last sent a byte, or
 * `drainTiming.totalMs` after the answer, whichever comes first: a slow uploader that
 * has its answer no longer holds the socket as long as it likes.
 * A connection that stays open after the response is not concerned: node:http closes no other way.
 */
function lingerOnClose(
  socket: Socket,
  request: IncomingMessage,
  connections: Connections,
  idleMs: number,
): void {
  socket.destroySoon = () => {
    // Once: the prototype's again from now on, for the close that ends the lingering too.
    delete (socket as { destroySoon?: unknown }).destroySoon;
    if (request.complete) return socket.destroySoon();
    connections.linger(socket);
    const destroy = () => socket.destroy();
    const timer = setTimeout(destroy, drainTiming.totalMs);
    socket.once("close", () => clearTimeout(timer));
    // Any activity restarts it; the server's own timeout, if any, is of no more use here.
    socket.setTimeout(idleMs, destroy);
    // The body has ended: the client has sent what it meant to, and reads the answer, which is
    // written first.
    request.once("end", () => socket.writableFinished ? destroy() : socket.once("finish", destroy));
    socket.end();
  };
}

/**
 * The last element of a `transfer-encoding` list, empty elements skipped (RFC 9110 §5.6.1), with
 * its whitespace. Scanned by hand: a regular expression with two whitespace runs around it
 * backtracks quadratically on a long value.
 */
function finalCoding(codings: string): string {
  let end = codings.length;
  while (end > 0) {
    const c = codings.charCodeAt(end - 1);
    if (c !== 32 && c !== 9 && c !== 44 /* "," */) break;
    end--;
  }
  return codings.slice(codings.lastIndexOf(",", end - 1) + 1, end);
}

/** Answers a request the application must not see, and closes its connection. */
function refuse(
  state: ServerState,
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
): void {
  const socket = request.socket;
  response.once("close", () => state.connections.end(socket));
  const text = STATUS_CODES[status]!;
  response.shouldKeepAlive = false;
  response.writeHead(status, [
    "content-type",
    "text/plain; charset=utf-8",
    "content-length",
    String(text.length),
  ]);
  state.connections.closeAfter(socket, response);
  response.end(text);
}

/**
 * Notes a request whose Upgrade the transport does not take (`h2c` from `curl --http2`, say),
 * served as plain HTTP: the connection closes after its answer. Deno's `node:http` (2.9.6) loses
 * the bytes it read behind such a head, so a request pipelined there was never answered, and the
 * client, told "keep-alive", waited `keepAliveTimeout` for the close (head differential of
 * 2026-11-29). A request sent once the answer has come is served, but the transport cannot tell
 * which the client will do.
 *
 * @param state The server's state.
 * @param request The request.
 * @returns `false`: no upgrade.
 */
function declineUpgrade(state: ServerState, request: IncomingMessage): false {
  (state.declinedUpgrades ??= new WeakSet()).add(request);
  return false;
}

/**
 * Serves one request. `expectsContinue` when it came by the "checkContinue" event: its client
 * waits for `100 Continue`, which is then the cycle's to send (see `NodeCycle.bodyAccepted`).
 */
function handleNode(
  core: Core,
  state: ServerState,
  request: IncomingMessage,
  response: ServerResponse,
  expectsContinue: boolean,
): void {
  // node:http's parser takes "HTTP/2.0" in a request line, and "GET /x" alone as HTTP/0.9: the
  // scope would say "2.0" or "0.9", which ASGI does not have. 505 (RFC 9110 §15.6.6); Deno.serve
  // answers 400.
  if (request.httpVersionMajor !== 1) return refuse(state, request, response, 505);
  const target = originForm(request.url ?? "/");
  const queryStart = target.indexOf("?");
  const raw = request.rawHeaders;
  // Node drops the fields past maxHeadersCount, set one above the limit: a request over it may
  // have lost some, so it never reaches the application.
  if (raw.length > 2 * MAX_HEADER_FIELDS) return refuse(state, request, response, 431);
  const fields: string[] = [];
  let expectedLength = -1;
  let hasBody = false;
  let hosts = 0;
  let host: string | undefined;
  let codings = 0;
  let lastCodings = "";
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    if (name === "content-length") {
      expectedLength = parseContentLength(value);
      hasBody = true;
    } else if (name === "transfer-encoding") {
      hasBody = true;
      // Two fields make one list of codings (RFC 9110 §5.3), so chunked is then not alone.
      codings += isChunkedOnly(value) ? 1 : 2;
      lastCodings = value;
    } else if (name === "host") {
      hosts++;
      host = value;
    }
    fields.push(name, value);
  }
  // RFC 9112 §3.2 requires 400 for more than one Host, as uvicorn and Deno.serve answer: node:http
  // passes them on, and two parties that each read a different one disagree on the target.
  if (hosts > 1) return refuse(state, request, response, 400);
  // An absolute-form target whose authority is not the Host: see namesAnotherHost (node:http
  // passed the Host on, and the application never saw the target's host).
  if (
    host !== undefined &&
    // A Host that is no host (RFC 9112 §3.2: 400): see isHostValue. node:http passed any on.
    (!isHostValue(host) || targetNamesAnotherHost(request.url ?? "/", host))
  ) {
    return refuse(state, request, response, 400);
  }
  // RFC 9112 §6.1: a transfer-encoding in an HTTP/1.0 request means faulty framing (an HTTP/1.0
  // hop before us knows no chunked coding and read the body another way), and the connection
  // must close. node:http decoded it and kept a keep-alive connection open; Deno.serve answers
  // 400 and closes, as here.
  if (codings > 0 && request.httpVersionMinor === 0) return refuse(state, request, response, 400);
  // RFC 9112 §6.3 (4): unless chunked is the final coding, the body's length cannot be known:
  // 400 and close, as Deno.serve and uvicorn answer ("xchunked" once got the 501 below).
  if (codings > 0 && !isChunkedOnly(finalCoding(lastCodings))) {
    return refuse(state, request, response, 400);
  }
  if (codings > 1) return refuse(state, request, response, 501);
  const socket = request.socket;
  const scope = httpScope(
    core,
    request.method ?? "GET",
    state.scheme,
    request.httpVersion,
    queryStart === -1 ? target : target.slice(0, queryStart),
    queryStart === -1 ? "" : target.slice(queryStart + 1),
    fields,
    fields.length,
    socket.remoteAddress === undefined ? null : [socket.remoteAddress, socket.remotePort!],
    socket.localAddress === undefined ? state.unixServer : [socket.localAddress, socket.localPort!],
  );
  new NodeCycle(core, request, response, state, scope, hasBody, expectedLength, expectsContinue)
    .run();
}

/** The least time a client is given for its TLS handshake, in milliseconds. */
const MIN_HANDSHAKE_TIMEOUT = 1_000;

/**
 * Starts a `node:http` server for the core.
 *
 * @param core The shared state.
 * @param where The interface and port, or the path of a Unix socket.
 * @param limits How long a connection may take to send its request head and stay idle
 *   between requests, in milliseconds (0: no limit), and how many are served at once.
 * @param tls The certificate chain and key (PEM), for HTTPS through `node:https`.
 * @returns The listener, once it listens.
 */
export async function listenNode(
  core: Core,
  where: ListenAddress,
  limits: ConnectionLimits,
  tls?: { cert: string; key: string },
): Promise<Listener> {
  const path = "path" in where ? where.path : undefined;
  const unixServer = path === undefined ? null : Object.freeze([path, null]) as [string, null];
  const state: ServerState = {
    closing: false,
    scheme: tls === undefined ? "http" : "https",
    connections: new Connections(),
    declinedUpgrades: null,
    unixServer,
  };
  const { headersTimeout, keepAliveTimeout } = limits;
  const maxConnections = limits.maxConnections ?? defaultMaxConnections(softFdLimit());
  const serverOptions = {
    headersTimeout,
    keepAliveTimeout,
    // Any other Upgrade is a plain HTTP request, as on deno (RFC 9110 §7.8), not a 501.
    shouldUpgradeCallback: (request: IncomingMessage) =>
      isWebSocketUpgrade(request) || declineUpgrade(state, request),
    // Node's 300 s cap on a whole request would cut long uploads off; uvicorn and the deno
    // transport have none: the application bounds how long it reads.
    requestTimeout: 0,
    // Node checks headersTimeout on this period (30 s by default): a shorter limit needs a
    // shorter period to be kept within a quarter of itself.
    connectionsCheckingInterval: headersTimeout > 0
      ? Math.min(30_000, Math.max(50, Math.floor(headersTimeout / 4)))
      : 30_000,
  };
  const { connections } = state;
  const serveNow: Serve = (request, response) => handleNode(core, state, request, response, false);
  const serveContinue: Serve = (request, response) =>
    handleNode(core, state, request, response, true);
  const handler = (request: IncomingMessage, response: ServerResponse) => {
    connections.begin(request.socket, request, response, serveNow);
  };
  const server = tls === undefined ? createServer(serverOptions, handler) : createTlsServer({
    ...serverOptions,
    ...tls,
    // A TLS handshake comes before the head: a client that stalls in it is held to the same
    // limit as one that stalls in the head (node's own default held it for 120 s), but to 1 s
    // at least: node applies this one exactly, where it checks headersTimeout only every quarter
    // of itself, and a short headersTimeout failed every handshake over a slow link.
    ...(headersTimeout > 0
      ? { handshakeTimeout: Math.max(headersTimeout, MIN_HANDSHAKE_TIMEOUT) }
      : {}),
  }, handler);
  // One above the limit, so that a request Node cut short is over it, never exactly at it.
  server.maxHeadersCount = MAX_HEADER_FIELDS + 1;
  // Unheard, node:http sends "100 Continue" itself before the request is seen: a client
  // announcing 100 MB against a maxBodySize of 1000 began sending them, and the connection read
  // and dropped them for up to drainTiming.totalMs after the 413.
  server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => {
    connections.begin(request.socket, request, response, serveContinue);
  });
  // Any other expectation goes on to the application, as uvicorn and Deno.serve do. Unheard,
  // node:http answered 417 with "keep-alive" and left the body sent behind the head unread
  // (Deno's node:http dumps none): past ~128 KiB the next request waited for good.
  server.on("checkExpectation", handler);
  if (tls === undefined) {
    server.on("connection", (socket: Socket) => connections.add(socket));
  } else {
    // Requests come on the TLS socket, which exists once the handshake on the TCP one has ended.
    server.on("connection", (socket: Socket) => connections.addHandshake(socket));
  }
  const maxMessageSize = maxMessageSizeOf(core);
  // Deno's node:https reads a TLS connection whatever its application takes: see TlsBacklog.
  const backlog = tls === undefined ? null : new TlsBacklog(core, maxMessageSize);
  if (backlog !== null) {
    server.on("secureConnection", (socket: Socket) => {
      connections.secured(socket);
      backlog.watch(socket);
    });
  }
  const upgrade = await nodeUpgradeHandler(
    core,
    maxMessageSize,
    tls === undefined ? "ws" : "wss",
    unixServer,
  );
  // node:http hands the socket of an upgrade or a CONNECT over as soon as it has parsed its head,
  // while requests a client pipelined before it may still be unanswered: their responses go
  // first, as on deno, or the 101 or 501 went out as the answer to a GET before it, whose own
  // answer was lost.
  server.on("upgrade", (request: IncomingMessage, socket: Duplex, head: Uint8Array) => {
    connections.whenIdle(socket as Socket, () => {
      connections.forget(socket);
      backlog?.upgraded(socket);
      upgrade(request, socket, head);
    });
  });
  // CONNECT asks for a tunnel, which ASGI has no way to serve (and whose authority-form target
  // is no path): 501, as on deno. Unheard, node:http closed the connection without a word.
  server.on("connect", (_request: IncomingMessage, socket: Duplex) => {
    connections.whenIdle(socket as Socket, () => {
      connections.forget(socket);
      refuseSocket(socket, 501, "Not Implemented");
    });
  });
  const refused = new WeakSet<Duplex>();
  server.on("clientError", (error: Error & { code?: string }, socket: Duplex) => {
    // node:http's parser fails again on every later chunk: the first failure decides.
    if (refused.has(socket)) return dropRepeatedListener(socket);
    refused.add(socket);
    refuseUnreadable(connections, error, socket as Socket);
  });
  // Closing what comes beyond it keeps accept() from running out of fds, after which Deno's
  // node:http stops accepting for good (measured on Deno 2.9.6): hence a default from the fd limit.
  // It is not proof on a busy machine, so watchListener() below binds a dead listener again.
  if (maxConnections !== Infinity) server.maxConnections = maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    const listening = () => {
      server.off("error", reject);
      resolve();
    };
    // node:http binds a Unix socket before listen() returns (Deno 2.9.6).
    if ("path" in where) {
      const listen = () => server.listen(where.path, listening);
      if (where.bind === undefined) listen();
      else where.bind(listen);
    } else server.listen(where.port, where.hostname, listening);
  });
  // An accept error (EMFILE under an fd limit) must never end the process: log it; the server
  // keeps listening, and the timeouts free the fds of idle connections.
  const info = path === undefined ? server.address() as AddressInfo : null;
  const place = info === null ? `unix:${path}` : `${info.address}:${info.port}`;
  let lastLogged = -Infinity;
  server.on("error", (error: Error) => {
    const now = performance.now();
    if (now - lastLogged < 1000) return;
    lastLogged = now;
    core.logger.error(`Cannot accept a connection on ${place}: ${error.message}`);
  });
  const watchdog = watchListener(
    core,
    server,
    info ?? (where as UnixListenAddress),
    maxConnections,
    softFdLimit(),
    () => listener.onRebound?.(),
  );
  const unread = watchUnreadAnswers(core, {
    served: () => connections.served(),
    giving,
    drop: (socket) => connections.drop(socket),
  });
  const listener: Listener = {
    addr: info === null
      ? { transport: "unix", path: path! }
      : { transport: "tcp", hostname: info.address, port: info.port },
    close: () =>
      new Promise<void>((resolve) => {
        state.closing = true;
        watchdog.stop();
        // Not `unread`: it goes on dropping clients that hold the close up by taking nothing.
        server.close(() => {
          unread.stop();
          resolve();
        });
        connections.closeWhenIdle();
      }),
    forceClose: () => {
      unread.stop();
      server.closeAllConnections();
      connections.destroyHandedOver();
    },
    failed: new Promise(() => {}),
  };
  return listener;
}

/** Requests whose body node:http's parser refused: see `refuseUnreadable`. */
const malformedBodies = new WeakSet<IncomingMessage>();

/** The status node:http answers bytes it cannot read as a request with, by its error's code. */
const UNREADABLE_STATUS: Readonly<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

/**
 * Answers bytes node:http could not read as a request (a malformed head, one over
 * `maxHeaderSize`, one not complete within `headersTimeout`, or anything sent after a request
 * that closes the connection), in place of node:http's own handling. That wrote its answer and
 * destroyed the socket at once, even while the application still worked on a request pipelined
 * before those bytes: the client read the 400, 431 or 408 as the answer to that request, whose
 * own answer was lost (`deno` and uvicorn answer it first). Now the requests in progress are
 * answered first, then the bytes are refused and the connection closes, lingering for a client
 * that still sends; or, after an answer that closed the connection, nothing more is written
 * (RFC 9112 §9.6: a client must send nothing after a request that closes it). With no request in
 * progress, the answer is node:http's own, as before; so it is when the bytes are the body of the
 * last request (a malformed chunk), once the requests before it are answered: its application
 * then sees `http.disconnect` with `reason: "body_malformed"`, or never runs if it was still waiting for its turn (see
 * `Connections.begin`). Any other socket error (a reset) destroys the socket at once, as
 * node:http does: the requests in progress see `http.disconnect`.
 */
function refuseUnreadable(
  connections: Connections,
  error: Error & { code?: string },
  socket: Socket,
): void {
  const code = error.code ?? "";
  const status = UNREADABLE_STATUS[code] ?? 400;
  const reason = STATUS_CODES[status]!;
  const unreadable = code.startsWith("HPE_") || code === "ERR_HTTP_REQUEST_TIMEOUT";
  const current = connections.inProgress(socket);
  // A malformed chunk of the body of the request in progress: its application is told so, not
  // that its client left (see `NodeCycle.readFailed`).
  if (unreadable && current !== undefined && !current[0].complete) malformedBodies.add(current[0]);
  // Bytes after the whole of the last request: that request, and any before it, is answered
  // first. Bytes of its body (a malformed chunk) are its own failure: its application, if its
  // turn has come, sees http.disconnect once the requests before it are answered. Refused at once,
  // the 400 went out in place of their answers or into the middle of one being streamed.
  if (unreadable && socket.writable && current !== undefined && current[0].complete) {
    connections.whenIdle(socket, () => refuseSocket(socket, status, reason));
    return;
  }
  if (unreadable && socket.writable && current !== undefined) {
    connections.whenLastOnly(socket, () => refuseNow(unreadable, status, reason, socket, current));
    return;
  }
  refuseNow(unreadable, status, reason, socket, current);
}

/**
 * node:http's own answer to unreadable bytes: its 400 (431, 408) unless a response has begun on
 * the connection (`current`, the only request still in progress, if any), then the close.
 */
function refuseNow(
  unreadable: boolean,
  status: number,
  reason: string,
  socket: Socket,
  current: [IncomingMessage, ServerResponse] | undefined,
): void {
  if (unreadable && socket.writable && (current === undefined || !current[1].headersSent)) {
    const answer = `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n\r\n`;
    // Over TLS Deno's node:https (2.9.6) dropped an answer destroyed in the turn it was written,
    // still being encrypted: the client saw the connection close without a word, up to 20 times
    // of 20 for a raw UTF-8 byte in the target. With no request in progress nothing else writes
    // here, so the answer goes out as a refused handshake's does, closing lingering.
    if (current === undefined && (socket as Socket & { encrypted?: boolean }).encrypted) {
      return endAndClose(socket, answer);
    }
    socket.write(answer);
  }
  socket.destroy();
}

/**
 * Takes off the "error" listener node:http added to `socket` before reporting the same parse
 * failure again. Deno's node:http (2.9.6) adds one more at each read after the first failure
 * (Node.js adds it once): while a refusal waits for the answers before it (see
 * `refuseUnreadable`), a client that went on sending grew the socket by a listener per read, for
 * as long as the answers took (MaxListenersExceededWarning after ten reads).
 */
function dropRepeatedListener(socket: Duplex): void {
  const listeners = socket.listeners("error");
  const last = listeners[listeners.length - 1];
  if (last !== undefined && listeners.indexOf(last) < listeners.length - 1) {
    socket.removeListener("error", last as (error: Error) => void);
  }
}

/** How often a node listener under fd pressure is checked for still accepting, in ms. */
const LISTENER_CHECK_INTERVAL = 250;
/** How long a check's connection may wait to be accepted before the listener counts as dead. */
const LISTENER_CHECK_TIMEOUT = 1000;

/**
 * Keeps a `node:http` listener accepting under an fd limit.
 *
 * Deno's `node:http` (2.9.6) stops accepting for good, with no event, once one `accept()` fails
 * with "Too many open files". The connection cap keeps that from happening on a quiet machine,
 * but not always on a busy one: over-cap sockets still take an fd until their close has run, so
 * a burst of them can exhaust the fds all the same (the soak's idle scenario, issue 10 point 2).
 * So once the open connections reach half of what the fd limit allows, the listener is checked
 * every {@linkcode LISTENER_CHECK_INTERVAL} ms by connecting to it: a listener that neither
 * hands the connection over nor closes it within {@linkcode LISTENER_CHECK_TIMEOUT} ms is
 * dead, and its port is bound again (connections already open are served on). Checks stop once
 * one passes with the connections back under that mark, so a server far from its limit never
 * sees them.
 *
 * On a Unix socket a check's connection cannot be told from a client's (it has no port), so any
 * connection accepted while a check runs proves the listener alive, the check's own included
 * (served as a client's, which sends nothing and leaves). A dead listener's full backlog fails
 * a connect at once (EAGAIN) where TCP's waits: that waits for the deadline too.
 */
function watchListener(
  core: Core,
  server: NetServer,
  where: AddressInfo | UnixListenAddress,
  maxConnections: number,
  fdLimit: number | undefined,
  rebound: () => void,
): { stop(): void } {
  const mark = Math.floor(Math.min(maxConnections, fdLimit ?? Infinity) / 2);
  if (mark === Infinity) return { stop() {} };
  const info = "path" in where ? null : where;
  const path = "path" in where ? where.path : "";
  const host = info === null
    ? ""
    : info.address === "0.0.0.0"
    ? "127.0.0.1"
    : info.address === "::"
    ? "::1"
    : info.address;
  let open = 0;
  let pressed = false;
  let stopped = false;
  /** Local ports of the checks under way, each with what settles it as accepted. */
  const checks = new Map<number, () => void>();
  /** On a Unix socket: what settles the check under way as accepted. */
  let unixCheck: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastWarned = -Infinity;

  server.on("connection", (socket: Socket) => {
    if (info === null) {
      unixCheck?.();
    } else {
      const accepted = socket.remotePort === undefined ? undefined : checks.get(socket.remotePort);
      if (accepted !== undefined) {
        accepted();
        socket.destroy();
        return;
      }
    }
    open++;
    socket.once("close", () => open--);
    if (open >= mark && !pressed) {
      pressed = true;
      schedule();
    }
  });

  const schedule = (): void => {
    if (stopped || timer !== undefined) return;
    timer = setTimeout(check, LISTENER_CHECK_INTERVAL);
    // A check must never keep the process alive.
    (timer as { unref?: () => void }).unref?.();
  };

  const check = (): void => {
    timer = undefined;
    if (stopped) return;
    let settled = false;
    let port: number | undefined;
    // Set before connecting: the server may accept before the client hears it is connected.
    if (info === null) unixCheck = () => settle(true);
    const socket = info === null ? connect({ path }) : connect({ host, port: info.port });
    const settle = (alive: boolean | undefined): void => {
      if (settled) return;
      settled = true;
      unixCheck = undefined;
      clearTimeout(deadline);
      if (port !== undefined) checks.delete(port);
      socket.destroy();
      if (stopped) return;
      if (alive === false) relisten();
      if (alive === true && open < mark) pressed = false;
      if (pressed) schedule();
    };
    const deadline = setTimeout(() => settle(false), LISTENER_CHECK_TIMEOUT);
    (deadline as { unref?: () => void }).unref?.();
    socket.once("connect", () => {
      port = socket.localPort;
      if (port !== undefined) checks.set(port, () => settle(true));
    });
    // Flowing, so that "end" is emitted when the server closes it.
    socket.resume();
    socket.unref();
    // Closed by the server: accepted, then dropped for being over the cap.
    socket.once("end", () => settle(port === undefined && info !== null ? undefined : true));
    socket.once("error", (error: Error & { code?: string }) => {
      // A full backlog: accepted, or not, by the deadline (see above).
      if (info === null && error.code === "EAGAIN") return;
      // Out of fds here too: no verdict, try again. Refused: the listening socket is gone.
      settle(error.code === "ECONNREFUSED" ? false : error.code === "ECONNRESET" || undefined);
    });
  };

  const relisten = (): void => {
    const now = performance.now();
    if (now - lastWarned >= 10_000) {
      lastWarned = now;
      core.logger.warn(
        `Listener on ${
          info === null ? `unix:${path}` : `${info.address}:${info.port}`
        } stopped accepting (out of file descriptors); listening again`,
      );
    }
    // net.Server's close, not http.Server's: that one would also close idle keep-alive
    // connections, which are served on. On a Unix socket it removes the file, and the listen
    // makes it anew.
    if (server.listening) NetServer.prototype.close.call(server);
    // Once per listen that succeeds (one that failed left its own to the next).
    server.off("listening", rebound);
    server.once("listening", rebound);
    if (info !== null) server.listen(info.port, info.address);
    else {
      const bind = (where as UnixListenAddress).bind;
      if (bind === undefined) server.listen(path);
      else bind(() => server.listen(path));
    }
  };

  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
