/**
 * `stallTimeout` for answers the applications have finished giving, on `transport: "node"`: a
 * connection whose client takes nothing of what node:http has to write to it is dropped.
 *
 * The core's stall clock watches a request only while its application waits: in `receive()`,
 * or in a `send()` that waits for the client to take what was written before. An answer given
 * whole, or the last chunk of a stream, is handed to node:http and the send returns at once; the
 * application returns, and nothing waited on the client any more. A client that pipelined 5,000
 * GETs and read none of the answers (2,000 bytes each) then held its connection for as long as
 * it liked: the kernel's buffers took some 4 MB of answers, the one being written waited for good,
 * and the requests behind it waited their turn (task Q1, 2026-11-29; uvicorn 0.17.6 holds such a
 * client as long, with the application's send waiting).
 *
 * So a periodic check looks at every connection node:http serves, which costs a request nothing:
 * one with bytes waiting to be written whose application has finished giving them, and of which
 * no write has completed for `stallTimeout`, is dropped, with one warning. A client that takes
 * some, however slowly, moves the count and keeps its connection, and so does one whose request
 * body still arrives (answered early, it reads once it has sent it all). What waits while an
 * application still sends is the core's to judge (a send waiting on the client), or nobody's (an
 * application thinking between two sends).
 *
 * Answers the kernel has taken whole are out of sight here: a client that reads nothing of a few
 * small answers looks like an idle one, and `keepAliveTimeout` closes it (see docs/asgi.md).
 *
 * @module
 */
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { type Core, STALL_CHECKS, stallCheckPeriod } from "./core.ts";

/** Where a check of `watchUnreadAnswers` looks. */
export interface AnswerWriters {
  /** The connections node:http serves now (not those upgraded or handed over). */
  served(): Iterable<Socket>;
  /** Whether an application is still giving the answer `response`: not ended, not given whole. */
  giving(response: ServerResponse): boolean;
  /** Closes a connection given up, and tells the requests queued on it. */
  drop(socket: Socket): void;
}

/** What a socket had written out when a check first saw it waiting with that count, and that check. */
interface Seen {
  written: number;
  tick: number;
}

/**
 * Checks the connections of `writers` every quarter of `core.stallTimeout` until stopped (none
 * when it is infinite), and drops each one whose client took nothing for that long of what its
 * finished answers have to write: between 1 and 1.25 times the limit, as the core's stall checks.
 *
 * @param core Its `stallTimeout` and logger.
 * @param writers The connections and what to do with them.
 * @returns What stops the checks.
 */
export function watchUnreadAnswers(core: Core, writers: AnswerWriters): { stop(): void } {
  const limit = core.stallTimeout;
  if (limit === Infinity) return { stop() {} };
  const seen = new WeakMap<Socket, Seen>();
  let tick = 0;
  const check = () => {
    tick++;
    let stalled: Socket[] | null = null;
    for (const socket of writers.served()) {
      if (socket.destroyed || socket.writableLength === 0) {
        seen.delete(socket);
        continue;
      }
      // The response that has the socket: node:http's own link, set while it writes.
      const response = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
      if (response != null && writers.giving(response)) {
        seen.delete(socket);
        continue;
      }
      // A client that sends its whole body before it reads (Python's http.client) is moving
      // while its body arrives: answered early, it was dropped mid-upload. Bytes read count as
      // long as the answer's request is unfinished (a body over maxBodySize ends the connection).
      const taken = response?.req?.complete === false
        ? written(socket) + socket.bytesRead
        : written(socket);
      const last = seen.get(socket);
      if (last === undefined || last.written !== taken) seen.set(socket, { written: taken, tick });
      else if (tick - last.tick > STALL_CHECKS) (stalled ??= []).push(socket);
    }
    if (stalled === null) return;
    for (const socket of stalled) {
      seen.delete(socket);
      writers.drop(socket);
      // One per connection a client can open: bounded as the core's other stall lines are.
      core.warnOf(
        "answers left unread",
        `Response stalled: the client took nothing for stallTimeout ${limit} ms of the answers written to it; disconnected`,
      );
    }
  };
  const timer = setInterval(check, stallCheckPeriod(limit));
  // Never the reason a process stays up: a connection it would judge keeps it up by itself.
  if (typeof timer === "number") Deno.unrefTimer(timer);
  else (timer as { unref?: () => void }).unref?.();
  return { stop: () => clearInterval(timer) };
}

/**
 * The bytes `socket` has written out: handed to it, less those still waiting to go. It moves
 * when a write completes, so in lumps: a 16 MiB answer given whole counts once all of it is out.
 */
export function written(socket: Socket): number {
  return socket.bytesWritten - socket.writableLength;
}
