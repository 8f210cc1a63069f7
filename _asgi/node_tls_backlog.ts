/**
 * A bound on what the node transport's TLS connections hold unread.
 *
 * Deno's `node:https` (2.9.6) reads a TLS connection as fast as the client sends, whether or not
 * anything takes the bytes: pausing the request, the TLS socket, its handle (`readStop()`) or the
 * TCP socket beneath changes nothing, and the decrypted bytes wait inside Deno's TLS layer,
 * counted by the TLS socket's `bytesRead` (plaintext: 3,050 bytes sent one per record read as
 * 3,050) but in no `readableLength`. So node:http's back-pressure, which bounds a plain connection
 * to about 2 MiB ahead of an application that does not read, bounds nothing here: one client
 * pushing a chunked body at an application that waited took a server from 60 to 1,581 MiB in 5 s,
 * and a WSS client sending to one that did not receive, from 58 to 1,568 MiB (2026-11-28).
 *
 * What such a connection holds can be told from outside, though: the bytes it read, less those it
 * handed up (its "data" events), less those its stream buffers. `TlsBacklog` looks at that for
 * every TLS connection each `CHECK_MS`, and destroys one that holds more than its limit, with a
 * warning: `HTTP_LIMIT` for HTTP, twice the largest WebSocket message for an upgraded connection
 * (what the deno transport lets wait unread). The application then sees its client leave
 * (`http.disconnect`, or `websocket.disconnect` 1006). Destroying the socket frees what Deno held
 * (RSS stayed at 138 MiB where it had grown past 1.5 GiB). The check runs only while the server
 * has TLS connections, and never keeps the process alive.
 *
 * @module
 */
import type { Duplex } from "node:stream";
import type { Socket } from "node:net";

/**
 * The most an HTTP connection may hold unread, in bytes. Eight times what node:http lets a plain
 * connection read ahead of its application: a client's burst passes, a flood does not.
 */
export const HTTP_LIMIT = 16 * 1024 * 1024;

/**
 * How often the connections are looked at, in milliseconds. A client on loopback sent 46 MB in
 * 100 ms here, so a connection may overshoot its limit by some 25 MB before it is closed.
 */
export const CHECK_MS = 50;

/** What is known of one TLS connection. */
interface Watched {
  /** The bytes the socket has handed up in "data" events. */
  surfaced: number;
  /** The most it may hold unread. */
  limit: number;
}

/** Where a warning a client causes goes, within the server's bound (`Core.warnOf`). */
interface ClientWarnings {
  warnOf(kind: string, line: string): void;
}

/** Watches the TLS connections of one node transport server: see the module doc. */
export class TlsBacklog {
  readonly #watched = new Map<Socket, Watched>();
  readonly #log: ClientWarnings;
  readonly #upgradedLimit: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * @param log Where the warning goes when a connection is closed (the server's `Core`).
   * @param maxMessageSize The largest WebSocket message the server accepts, in bytes: an
   *   upgraded connection may hold twice as much unread.
   */
  constructor(log: ClientWarnings, maxMessageSize: number) {
    this.#log = log;
    this.#upgradedLimit = Math.max(HTTP_LIMIT, 2 * maxMessageSize);
  }

  /** Watches `socket`, a TLS connection whose handshake has ended, until it closes. */
  watch(socket: Socket): void {
    const watched: Watched = { surfaced: 0, limit: HTTP_LIMIT };
    this.#watched.set(socket, watched);
    // node:http has its own "data" listener on the socket already (it is added when the
    // handshake ends, before this one): a second one only counts, and changes no flow.
    socket.on("data", (chunk: Uint8Array) => {
      watched.surfaced += chunk.byteLength;
    });
    socket.once("close", () => this.#forget(socket));
    if (this.#timer === undefined) {
      const timer = setInterval(this.#check, CHECK_MS);
      if (typeof timer === "number") Deno.unrefTimer(timer);
      else (timer as { unref?: () => void }).unref?.();
      this.#timer = timer;
    }
  }

  /** `socket` now carries a WebSocket: it may hold twice the largest message unread. */
  upgraded(socket: Duplex): void {
    const watched = this.#watched.get(socket as Socket);
    if (watched !== undefined) watched.limit = this.#upgradedLimit;
  }

  #forget(socket: Socket): void {
    this.#watched.delete(socket);
    if (this.#watched.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  readonly #check = (): void => {
    for (const [socket, { surfaced, limit }] of this.#watched) {
      const held = socket.bytesRead - surfaced - socket.readableLength;
      if (held <= limit) continue;
      this.#forget(socket);
      socket.destroy();
      this.#log.warnOf(
        "TLS bytes unread over the limit",
        `A TLS client sent ${mib(held)} MiB that nothing has read yet, over the limit of ` +
          `${mib(limit)} MiB: closed the connection. Deno's node:https reads TLS connections ` +
          `whatever the application takes; serve such clients with the deno transport or ` +
          `behind a TLS-terminating proxy`,
      );
    }
  };
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}
