/**
 * The `Deno.upgradeWebSocket` half of the deno transport: a handshake request in, the 101 (or a
 * denial) out, then Deno's `WebSocket` events into the cycle. Works wherever the request comes
 * from `Deno.serve`, `deno serve` included.
 *
 * @module
 */
import type { Core } from "./core.ts";
import {
  checkHandshake,
  type HandshakeHead,
  SEND_BUFFER_LIMIT,
  UPGRADE_REQUIRED,
  WebSocketCycle,
  webSocketScope,
} from "./websocket.ts";

/** How often a send waiting for a slow reader looks at Deno's `bufferedAmount` again, at most. */
const DRAIN_POLL_MS = 5;
/**
 * What a socket may hold unsent in Deno before `send` waits: four times the bridge's limit.
 * Deno tells of a drain only through `bufferedAmount`, looked at on later turns of the event
 * loop, so each wait costs a turn at least; with 64 KiB, a local reader that keeps up got 59
 * MiB/s of 64 KiB messages, with 256 KiB 142 MiB/s (1 MiB: 449; node 1,536). A slow reader
 * costs this much on top of its kernel send buffer (which holds more).
 */
const DENO_SEND_BUFFER_LIMIT = 4 * SEND_BUFFER_LIMIT;
/**
 * How long a socket may stay CONNECTING once its 101 is handed to Deno. A TLS client that leaves
 * right after its handshake request (no close_notify) left Deno's socket CONNECTING for good,
 * firing neither "open" nor "close": the application waited forever and its fds stayed open (a
 * probe: 27-50 of 50 apps stuck). A socket that opens does so within milliseconds.
 */
export const OPEN_TIMEOUT_MS = 5_000;
/** The most messages that may wait unread for the application (see `unreadCountLimit`). */
const MAX_UNREAD_MESSAGES = 16_384;

class DenoWebSocketCycle extends WebSocketCycle {
  readonly response: Promise<Response>;
  #resolve: (response: Response) => void;
  #request: Request;
  #socket: WebSocket | null = null;
  #responded = false;
  #onAbort: (() => void) | null;
  /** The server has sent its close frame (from then on Deno's `bufferedAmount` reads 0). */
  #closeSent = false;
  /** The sends waiting for Deno to write out what it holds: see `sendFrame` and `closeFrame`. */
  readonly #draining = new Set<(taken: boolean) => void>();
  /** `#pollDrain` is looking at Deno's buffer for the waiting sends. */
  #polling = false;
  /** The connection is being dropped: the close frame no longer waits for the sends before it. */
  #dropping = false;
  /**
   * The bytes handed to Deno so far, as its `bufferedAmount` counts them (UTF-8 for text): less
   * what it still holds, what it has written out, for `#watchQueued`.
   */
  #handed = 0;
  /** The stall clock of what Deno holds unsent while no send waits: see `#watchQueued`. */
  #queuedTimer: ReturnType<typeof setTimeout> | undefined = undefined;

  constructor(core: Core, request: Request, head: HandshakeHead) {
    super(core, webSocketScope(core, head));
    this.#request = request;
    const { promise, resolve } = Promise.withResolvers<Response>();
    this.response = promise;
    this.#resolve = resolve;
    // Until the handshake is answered, the request's signal is how Deno says the client left.
    const onAbort = () => {
      this.closed(1006, "");
      this.#respond(new Response(null, { status: 500 }));
    };
    this.#onAbort = onAbort;
    request.signal.addEventListener("abort", onAbort, { once: true });
  }

  /**
   * A Deno `WebSocket` cannot stop reading, so what a client sends to an application that does
   * not receive is bounded by closing instead: twice `maxMessageSize` (32 MiB by default), room
   * for a whole message of the largest size beside others.
   */
  protected override get unreadLimit(): number {
    return 2 * this.maxMessageSize;
  }

  /**
   * Unread messages cost memory beyond their bytes (an empty one about 250 bytes of RSS), so
   * their number is bounded too: `ws`'s bound on the frames of one message, which the node
   * transport never reaches (it stops reading at 16 unread messages).
   */
  protected override get unreadCountLimit(): number {
    return MAX_UNREAD_MESSAGES;
  }

  #respond(response: Response): void {
    if (this.#responded) return;
    this.#responded = true;
    this.#unwatch();
    this.#resolve(response);
  }

  #unwatch(): void {
    if (this.#onAbort !== null) {
      this.#request.signal.removeEventListener("abort", this.#onAbort);
      this.#onAbort = null;
    }
  }

  protected override acceptHandshake(
    subprotocol: string | null,
    headers: [string, string][],
  ): void {
    let upgrade: { socket: WebSocket; response: Response };
    // Upgrading aborts the request's signal: that is no longer the client leaving.
    this.#unwatch();
    try {
      // The subprotocol goes in as a header, not as `protocol`: Deno looks for it in the offer
      // split at ", " exactly, so "a,b" (as `ws` clients send it) failed with 500 whichever the
      // application picked. `checkHandshake` has validated the offer, `#accept` the choice.
      upgrade = upgradeUnpinned(this.#request);
    } catch (error) {
      // A Request that did not come from Deno.serve (app.fetch(new Request(...)), say).
      this.core.logger.error("Cannot upgrade the WebSocket handshake\n", error);
      this.#respond(new Response("Upgrade Failed", { status: 500 }));
      this.closed(1006, "");
      return;
    }
    const { socket, response } = upgrade;
    if (subprotocol !== null) response.headers.set("sec-websocket-protocol", subprotocol);
    for (const [name, value] of headers) response.headers.append(name, value);
    this.#socket = socket;
    socket.binaryType = "arraybuffer";
    let openTimer: ReturnType<typeof setTimeout> | undefined = setTimeout(() => {
      openTimer = undefined;
      if (socket.readyState !== WebSocket.CONNECTING) return;
      this.closed(1006, "");
      try {
        socket.close();
      } catch {
        // Deno may refuse to close a socket it never opened: the application has its 1006.
      }
    }, OPEN_TIMEOUT_MS);
    const stopOpenTimer = () => {
      if (openTimer !== undefined) clearTimeout(openTimer);
      openTimer = undefined;
    };
    socket.onopen = () => {
      stopOpenTimer();
      this.opened();
    };
    socket.onmessage = (event) => {
      const data = event.data;
      this.received(typeof data === "string" ? data : new Uint8Array(data as ArrayBuffer));
    };
    // Deno fires "error" before "close" on a lost connection; "close" carries what matters.
    socket.onerror = () => {};
    socket.onclose = (event) => {
      stopOpenTimer();
      // Which of the messages Deno holds went out is unknown by now (it zeroes `bufferedAmount`
      // on a close, whether they went out or not), but a clean close means its own close frame,
      // written after them, went out: they all did. A connection lost after the server's close
      // frame is reported clean, with 1005 (then a second event, 0, not clean; measured with
      // Deno 2.9.6), so that 1005 counts as lost.
      const lost = !event.wasClean || (event.code === 1005 && this.#closeSent);
      this.closed(lost && event.code === 1005 ? 1006 : event.code, event.reason, !lost);
      // Deno keeps a closed WebSocket for 15 s more (a timer of its own, Deno 2.9.6), and with
      // it these handlers and the whole cycle they close over (see `upgradeUnpinned`).
      socket.onopen =
        socket.onmessage =
        socket.onerror =
        socket.onclose =
          null;
    };
    this.#respond(response);
  }

  protected override denyHandshake(
    status: number,
    headers: [string, string][],
    body: Uint8Array,
  ): void {
    // Deno writes content-length itself. The client asked for another protocol, so what it sends
    // next need not be HTTP: ask it to close, as node's denial and the bridge's refusals do (a
    // review found only the denial of the application without it).
    const fields = headers.filter(([name]) => {
      const lower = name.toLowerCase();
      return lower !== "content-length" && lower !== "connection";
    });
    fields.push(["connection", "close"]);
    const nullBody = status === 204 || status === 205 || status === 304 || body.length === 0;
    this.#respond(
      new Response(nullBody ? null : body as Uint8Array<ArrayBuffer>, { status, headers: fields }),
    );
  }

  protected override sendFrame(data: string | Uint8Array): Promise<boolean> | undefined {
    const socket = this.#socket;
    if (socket === null) return;
    if (socket.readyState !== WebSocket.OPEN) {
      // Closing or closed, but its "close" event, which tells the application, is not in yet:
      // Deno drops the message, and the send rejects with that event (it resolved after a turn
      // of the event loop, reporting sent a message that never went out). Until then it waits,
      // or an application sending in a loop never lets the event in (the whole server starved).
      return Promise.resolve(false);
    }
    // Deno counts text in UTF-8 bytes: what it adds is read, not encoded a second time here.
    const before = typeof data === "string" ? socket.bufferedAmount : 0;
    socket.send(data as string | Uint8Array<ArrayBuffer>);
    const buffered = socket.bufferedAmount;
    this.#handed += typeof data === "string" ? buffered - before : data.length;
    if (this.#queuedTimer === undefined) this.#watchQueued(socket);
    if (buffered <= DENO_SEND_BUFFER_LIMIT) return;
    // The WebSocket API has no drain event: look again until Deno has written half of it out,
    // at once at first (a reader that keeps up has taken it by the next turn of the event loop),
    // then less and less often, up to every DRAIN_POLL_MS for a slow one. Polling every 5 ms
    // from the start held a fast local reader to 20 MiB/s (64 KiB messages). Once the socket is
    // no longer open `bufferedAmount` says nothing (Deno zeroes it, whether the client takes
    // what is queued or not): the wait is left to the "close" event (`closed`).
    return new Promise<boolean>((resolve) => {
      this.#draining.add(resolve);
      if (!this.#polling) this.#pollDrain(socket);
    });
  }

  /**
   * Gives the client up once it has taken nothing for `stallTimeout` of what Deno holds for it,
   * as the cycle does while a send waits (`#watchTaken`). The sends that queued those bytes have
   * resolved (up to 256 KiB resolve at once), so without it a client that read none of them held
   * an application waiting in `receive()` until the client left: Deno's ping waits behind the
   * unsent bytes, and so does its answer to a client's close frame, whose "close" event then
   * never comes (40 s measured with stallTimeout 3 s, until the client left; node's pings and
   * close timer bound it). One timer per socket while it sends, looked at once per
   * `stallTimeout`: Deno counts a message out only once all of it is written, so the clock waits
   * a whole period after the last message went. What was written out is the bytes handed to Deno
   * less those it holds: a message sent meanwhile is no sign of the client taking any (counting
   * it so kept a client that took nothing for as long as the application sent something once per
   * `stallTimeout`).
   */
  #watchQueued(socket: WebSocket): void {
    const limit = this.core.stallTimeout;
    if (limit === Infinity) return;
    const written = this.#handed - socket.bufferedAmount;
    this.#queuedTimer = setTimeout(() => {
      this.#queuedTimer = undefined;
      if (socket.readyState === WebSocket.OPEN) {
        const now = socket.bufferedAmount;
        // All written: the next send starts the clock again.
        if (now === 0) return;
        // Some went out: look again a period later.
        if (this.#handed - now > written) return this.#watchQueued(socket);
      } else if (this.#closeSent) {
        // The server's closing handshake, bounded by the cycle's close timer.
        return;
      }
      // Closing on the client's close frame (Deno answers it before its "close" event), or
      // nothing taken for a whole period.
      this.stalled();
    }, limit);
  }

  override closed(code: number, reason: string, delivered = false): void {
    clearTimeout(this.#queuedTimer);
    this.#queuedTimer = undefined;
    super.closed(code, reason, delivered);
  }

  /**
   * Looks at Deno's buffer until it holds half its limit, then resolves every waiting send. All
   * wait behind the same buffer, so one look serves them all: a look per send, each on its own
   * timer, took 18% of a core for one client that read nothing with 300 sends waiting (review,
   * 2026-11-29). Stops when nothing waits or the socket is no longer open.
   */
  #pollDrain(socket: WebSocket): void {
    this.#polling = true;
    let wait = 0;
    const check = () => {
      if (socket.readyState !== WebSocket.OPEN || this.#draining.size === 0) {
        this.#polling = false;
      } else if (socket.bufferedAmount <= DENO_SEND_BUFFER_LIMIT / 2) {
        this.#polling = false;
        const draining = [...this.#draining];
        this.#draining.clear();
        for (const resolve of draining) resolve(true);
      } else {
        setTimeout(check, wait);
        wait = Math.min(DRAIN_POLL_MS, wait + 1);
      }
    };
    setTimeout(check, 0);
  }

  /**
   * Sends the close frame once Deno has written out the messages before it. Once the frame is
   * sent Deno says nothing more of them (`bufferedAmount` reads 0), and its "close" event cannot
   * tell a client that answered with no code from one that left (clean, 1005 both): the sends
   * still waiting then rejected, though the client had read every message (196 of 200 in
   * "answers with no code", tests/asgi_websocket_waiting_send_test.ts). Written out first, they
   * have all resolved when the frame goes, as with `ws`, which queues its close frame behind
   * them. A client that reads nothing holds the frame back until the bridge's close timer
   * (`closeTiming`) drops the connection: its sends then reject.
   */
  protected override closeFrame(code: number, reason: string): void {
    const socket = this.#socket;
    if (socket === null) return;
    let wait = 0;
    const close = () => {
      if (socket.readyState !== WebSocket.OPEN || this.#closeSent) return;
      if (socket.bufferedAmount > 0 && !this.#dropping) {
        setTimeout(close, wait);
        wait = Math.min(DRAIN_POLL_MS, wait + 1);
        return;
      }
      // Written out (or given up): the waiting sends no longer wait for their next look.
      const draining = [...this.#draining];
      this.#draining.clear();
      for (const resolve of draining) resolve(!this.#dropping);
      this.#closeSent = true;
      socket.close(code, reason);
    };
    close();
  }

  protected override dropConnection(): void {
    // Deno has no way to reset an upgraded connection; a close frame is the most it can do.
    this.#dropping = true;
    this.closeFrame(1001, "");
    this.#respond(new Response(null, { status: 500 }));
  }
}

/**
 * `Deno.upgradeWebSocket(request)`, made so that what Deno keeps of it does not keep the cycle.
 *
 * Upgrading aborts `request.signal` with a `DOMException` whose stack holds its call sites, and
 * a call site holds its frame's receiver: the cycle that accepted. Deno keeps the request, with
 * its signal, for as long as it keeps the WebSocket, 15 s past its close (Deno 2.9.6), so each
 * connection's cycle, scope and queues stayed reachable that long: WebSocket clients that echoed
 * a message and left, 5,000 a second, held 500-700 MiB of heap after GC (12 KB each; Deno
 * itself, 3.5 KB). The exception is made with no call sites; what is lost is the stack of an
 * error the upgrade throws, logged below with its message.
 *
 * @param request The handshake request, from `Deno.serve`.
 * @returns What `Deno.upgradeWebSocket` returns.
 */
function upgradeUnpinned(request: Request): { socket: WebSocket; response: Response } {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return Deno.upgradeWebSocket(request);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * Serves one WebSocket handshake through the core.
 *
 * @param core The shared state.
 * @param request The handshake request, from `Deno.serve`.
 * @param head What the transport read of it.
 * @returns The 101 response, or a denial.
 */
export function serveWebSocket(
  core: Core,
  request: Request,
  head: HandshakeHead,
): Promise<Response> {
  const refused = checkHandshake(head.fields);
  if (refused !== null) {
    // The client asked for another protocol, so what it sends next need not be HTTP: node and
    // uvicorn close the connection. Deno.serve keeps it open whatever the response says, but a
    // client that honours "connection: close" closes it (RFC 9112 9.6).
    const headers: Record<string, string> = {
      "content-type": "text/plain; charset=utf-8",
      ...(refused.status === 426 ? UPGRADE_REQUIRED : { connection: "close" }),
    };
    return Promise.resolve(new Response(refused.reason, { status: refused.status, headers }));
  }
  const cycle = new DenoWebSocketCycle(core, request, head);
  cycle.run();
  return cycle.response;
}
