/**
 * The `Deno.serve` transport of the ASGI bridge: Fetch `Request` in, Fetch `Response` out. It also
 * backs `createFetchHandler`, so it only uses what any Fetch runtime has, apart from `Deno.serve`
 * itself in `listenDeno`.
 *
 * @module
 */
import type { AsgiServerAddr, AsgiUnixAddr, HttpScope } from "./types.ts";
import {
  type BodyFailure,
  type Core,
  drainTiming,
  HttpCycle,
  type ListenAddress,
  type Listener,
} from "./core.ts";
import { AsgiProtocolError } from "./errors.ts";
import {
  hasToken,
  isChunkedOnly,
  isHostValue,
  isNullBodyStatus,
  parseContentLength,
} from "./fields.ts";
import { authorityEnd, httpScope, namesAnotherHost } from "./scope.ts";
import { serveWebSocket } from "./deno_websocket.ts";
import { describe, errorText } from "../_common/describe.ts";
import { closeWebSockets, isUpgrade } from "./websocket.ts";

/** Whether this runtime can upgrade a Fetch request (Deno can; other Fetch hosts get HTTP). */
const CAN_UPGRADE = typeof Deno !== "undefined" && typeof Deno.upgradeWebSocket === "function";

/** Feeds a streamed response to Deno one chunk at a time, so `send` feels back-pressure. */
class ChunkSource implements UnderlyingDefaultSource<Uint8Array> {
  controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  #cycle: DenoCycle;
  /**
   * What the sends that wait for Deno to pull share: an application may send again before the
   * previous send resolved (asyncio.gather in Python), and every one of them must wake.
   */
  #waiting: PromiseWithResolvers<void> | null = null;

  constructor(cycle: DenoCycle) {
    this.#cycle = cycle;
  }

  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.controller = controller;
  }

  pull(): void {
    this.wake();
  }

  cancel(): void {
    this.controller = null;
    this.wake();
    // Deno cancels the body when the client goes away mid-stream: the one reliable signal then.
    this.#cycle.clientGone();
  }

  wait(): Promise<void> {
    return (this.#waiting ??= Promise.withResolvers()).promise;
  }

  wake(): void {
    const waiting = this.#waiting;
    if (waiting !== null) {
      this.#waiting = null;
      waiting.resolve();
    }
  }
}

/**
 * Response headers in the form Fetch converts fastest: a record, unless two fields share a name
 * (then the pairs, which keep both) or one is named `__proto__`, which a record cannot hold.
 *
 * With `Deno.serve` (`body` given), a `content-length` that states the length of a fixed body is
 * left out: Deno writes that very header itself (the same bytes on the wire; verified on Deno
 * 2.9.6), and each header given costs Deno a conversion; without it, `content-type` alone takes
 * Deno's fast path for static responses. Saves some 1.5 µs of server CPU per request. Not done
 * for `createFetchHandler`, whose caller may read the header from the `Response` object.
 */
function headersInit(pairs: [string, string][], body: Uint8Array | null): HeadersInit {
  const length = body === null ? "" : String(body.length);
  // Most responses of a server repeat one header list: reuse what the last one made. (Deno copies
  // the fields out of the object, so sharing it between responses is safe.)
  if (length === lastLength && samePairs(pairs, lastPairs)) return lastInit;
  const record: Record<string, string> = {};
  let init: HeadersInit = record;
  let lengthSeen = false;
  for (let i = 0; i < pairs.length; i++) {
    const [name, value] = pairs[i]!;
    if (name.length === 14 && name.toLowerCase() === "content-length") {
      if (lengthSeen) {
        init = pairs;
        break;
      }
      lengthSeen = true;
      if (value === length) continue;
    }
    if (name === "__proto__" || Object.hasOwn(record, name)) {
      init = pairs;
      break;
    }
    record[name] = value;
  }
  lastPairs = pairs;
  lastLength = length;
  lastInit = init;
  return init;
}

let lastPairs: [string, string][] = [];
let lastLength = "";
let lastInit: HeadersInit = {};

function samePairs(a: [string, string][], b: [string, string][]): boolean {
  // The core hands over the very list it converted last time when the app repeats its pairs, and
  // no one writes into a converted list: then there is nothing left to compare.
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x[0] !== y[0] || x[1] !== y[1]) return false;
  }
  return true;
}

/** Whether Deno (2.9.6) failed a body read for a body it cannot parse: see `readFailed`. */
function isParseFailure(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("invalid HTTP/");
}

/**
 * The names of the errors Deno fails the body of a request it received with when the connection
 * broke, not the body: a close mid-body (`BadResource`), a reset (`Http`, "unexpected EOF while
 * reading HTTP/1 body"; over TLS, a reset or a close without `close_notify`: "connection
 * reset"), a stream or connection of HTTP/2 broken off (`Http`, "error reading a body from
 * connection"). Told by class, as Deno names it, not by message.
 */
const CONNECTION_LOST = new Set([
  "BadResource",
  "Http",
  "ConnectionReset",
  "ConnectionAborted",
  "BrokenPipe",
  "UnexpectedEof",
  "NotConnected",
]);

/** The largest body `bodyInit` turns into a string. */
const STRING_BODY_LIMIT = 1024;

/**
 * The body in the form Deno sends fastest. Deno copies a `Uint8Array` body into a fresh
 * ArrayBuffer but keeps a string as it is, so a short ASCII body goes as a string: the bytes on
 * the wire are the same (UTF-8 of ASCII is ASCII). Only when the application set a content-type,
 * since for a string Deno would add "text/plain;charset=UTF-8" of its own.
 */
function bodyInit(body: Uint8Array | null, headers: [string, string][]): BodyInit | null {
  if (body === null) return null;
  if (body.length > STRING_BODY_LIMIT) return fetchBytes(body);
  for (let i = 0; i < body.length; i++) {
    if (body[i]! >= 0x80) return fetchBytes(body);
  }
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i]![0];
    if (name.length === 12 && name.toLowerCase() === "content-type") {
      return String.fromCharCode.apply(null, body as unknown as number[]);
    }
  }
  return fetchBytes(body);
}

/**
 * `body` as `Response` takes it: a view of a SharedArrayBuffer (threaded WebAssembly's memory)
 * is copied, since Fetch refuses one ("a view on a SharedArrayBuffer"): such a body over 1 KiB,
 * or without a content-type, got an empty 500 and `send()` a TypeError (review of 2026-11-29;
 * node sent it, as did a shorter one here, which goes out as a string).
 */
function fetchBytes(body: Uint8Array): Uint8Array<ArrayBuffer> {
  return (body.buffer instanceof ArrayBuffer ? body : body.slice()) as Uint8Array<ArrayBuffer>;
}

/** The field the answers of a server shutting down carry: see `#connectionFields`. */
const CLOSE_FIELD: [string, string] = ["connection", "close"];

function isConnectionField(name: string): boolean {
  return name.length === 10 && name.toLowerCase() === "connection";
}

/** Whether one of the `connection` fields of `headers` holds `close`. */
function saysClose(headers: [string, string][]): boolean {
  return headers.some(([name, value]) => isConnectionField(name) && hasToken(value, "close"));
}

function hasContentLength(headers: [string, string][]): boolean {
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i]![0];
    if (name.length === 14 && name.toLowerCase() === "content-length") return true;
  }
  return false;
}

function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.close();
    },
  });
}

function erroredStream(reason: unknown): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.error(reason);
    },
  });
}

/**
 * The largest request body, by its `content-length`, read whole with `request.bytes()`: Deno
 * hands over a body that has arrived in one op, without a stream and its reads. Measured on
 * Deno 2.9.6 with 100-byte POSTs: 12.5–13.2 µs of server CPU per request against 16.5–17.3
 * through a reader, and a third more requests per second. Larger bodies stream in chunks.
 */
const WHOLE_BODY_LIMIT = 64 * 1024;

/**
 * How long a response whose `connection` fields depend on a whole-body read that has begun waits
 * for that read to settle (see `#connectionFields`). A body that has all arrived settles within
 * microseconds (100 POSTs of 1,000 bytes on Deno 2.9.6: 9 µs median, 1.5 ms at most); one still
 * arriving (the web layer's 408 to a slow upload) must not hold its answer back for long.
 */
const WHOLE_SETTLE_MS = 20;

/** A cycle whose exchange is a Fetch request and the promise of its response. */
class DenoCycle extends HttpCycle {
  /** The response, once made and while no one waits for it through a promise. */
  #response: Response | null = null;
  /** Settles the promise `response()` handed out, if it handed one out. */
  #resolve: ((response: Response) => void) | null = null;
  #request: Request;
  /**
   * The request body, kept from the start: after the response Deno throws on `request.body`.
   * `null` once it has been read to its end (or when there is none).
   */
  #body: ReadableStream<Uint8Array> | null;
  /** The body is small and of known length: read it whole, with `request.bytes()`. */
  #whole: boolean;
  /** That read, when it began before the application asked for the body: see `#respond`. */
  #wholeRead: Promise<Uint8Array | null> | null = null;
  /** A read of the whole body has begun and not yet settled: see `#connectionFields`. */
  #wholePending = false;
  /** That read, once begun, settled either way. */
  #wholeSettled: Promise<unknown> | null = null;
  /** The response waits for `#wholeSettled` before its `connection` fields are decided. */
  #fieldsOnHold = false;
  #expectedLength: number;
  #receivedLength = 0;
  /** The read of the body in flight, if any: settles once its own handler has run. */
  #reading: Promise<unknown> | null = null;
  /** The body exceeded maxBodySize: see `closeExchange`. */
  #refused = false;
  /** A read of the body failed: see `closeExchange`. */
  #bodyFailed = false;
  #responded = false;
  #reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  #source: ChunkSource | null = null;
  #watching = false;
  #onAbort: (() => void) | null = null;
  /** Deno.serve writes the response: see `headersInit`. */
  #denoServes: boolean;
  /** The response says `connection: close` before the body is read to its end: see `#respond`. */
  #closeAsked = false;
  /** What is left of the body is being dropped: see `#dropBody`. */
  #dropping = false;
  /** The request's authority came as HTTP/2's `:authority`, not a Host: see `#readUnread`. */
  #overHttp2: boolean;

  constructor(
    core: Core,
    request: Request,
    scope: HttpScope,
    hasBody: boolean,
    expectedLength: number,
    whole: boolean,
    denoServes: boolean,
    overHttp2: boolean,
  ) {
    super(core, scope, hasBody, expectedLength);
    this.#overHttp2 = overHttp2;
    this.#request = request;
    this.#whole = hasBody && whole;
    this.shortBodyIsDisconnect = denoServes;
    this.#body = hasBody && !whole ? request.body : null;
    this.#expectedLength = expectedLength;
    this.#denoServes = denoServes;
  }

  /**
   * The response itself when the application has made it already (an application that sends
   * before its first await, as the web layer does for a handler that responds at once), else the
   * promise of it. Fetch hosts take either; the promise, when none is needed, cost some 150 B
   * and a turn of the microtask queue per request.
   */
  response(): Response | Promise<Response> {
    const response = this.#response;
    if (response !== null) {
      this.#response = null;
      return response;
    }
    return new Promise((resolve) => (this.#resolve = resolve));
  }

  #respond(response: Response): void {
    // The first response is the one Deno gets, as when a promise carried it: a later one must
    // not replace a response made before anyone asked for it.
    if (this.#responded) return;
    this.#responded = true;
    if (this.#whole && this.#wholeRead === null) {
      if (this.#closeAsked) {
        // Dropped as a stream, which a time bounds (see below), not read whole: a pending
        // bytes() cannot be given up.
        this.#whole = false;
        this.#body = this.#request.body;
      } else if (this.#source === null && !this.#overHttp2) {
        this.#readUnread();
      }
    }
    // Claim a body nobody read yet before Deno takes the response, if it has no stated length
    // or the response asks to close the connection: Deno drops an unclaimed body to its end
    // itself, keeping the connection, which for a body of stated length is at most maxBodySize
    // but may take for ever, and for a chunked one may be for ever. A claimed body is dropped by
    // #dropBody, within a time, and Deno closes the connection (the web layer's 408 to a slow
    // upload asks it to, and a client still sending must not hold it as long as it likes).
    // Not over HTTP/2 (see #readUnread): Deno resets such a stream at once, where the bridge's
    // read held it for as long as the client sent nothing.
    const body = this.#body;
    if (
      body !== null && this.#reader === null && !this.#overHttp2 &&
      (this.#expectedLength < 0 || this.#closeAsked)
    ) {
      this.#reader = body.getReader();
    }
    const onAbort = this.#onAbort;
    if (onAbort !== null) {
      // Deno aborts the signal after a successful response too (and warns about listeners that
      // see it): from here on a streamed body's cancel() tells when the client goes away.
      this.#onAbort = null;
      this.#request.signal.removeEventListener("abort", onAbort);
    }
    if (this.#fieldsOnHold) this.#handOverSettled(response);
    else this.#handOver(response);
  }

  /**
   * The application answers with a whole body before reading its small body (a 401 or 404 to an
   * upload): read it now. Deno only reads to its end a body it was asked for, and closed the
   * connection ("connection: close") after every such answer. Never under a streamed answer:
   * Deno (2.9.6) writes its head at once, with "connection: close" unless the body came with the
   * request's head and is tiny (400 bytes kept the connection here, 500 did not), so a read gains
   * nothing there, and one that waits holds the connection open. Begun with the stream, it left a stream cut off meanwhile (the
   * application raising, a time limit) open with no end; begun at the stream's end, it left a
   * connection whose body came later open 40 s and more after the client had sent it all. Left
   * to Deno, the connection closes once the body has arrived.
   *
   * Not for a request that came over HTTP/2, known by an authority in its URL that is neither a
   * Host field nor the one Deno makes up for a request without (see `handleFetch`): there the
   * read held the stream open, with no bound in time, for as long as the client sent nothing
   * more (2,000 such streams held 29 MiB, 2026-11-29), where an unread body is dropped by Deno,
   * which resets the stream (`NO_ERROR`) once the answer is out and keeps the connection. Told
   * apart by the Host alone at first, an HTTP/1.1 request without one lost the claim below too:
   * Deno then read its slow chunked upload for as long as it went on (still open after 4 s,
   * against 1 s with `drainTiming` at 1 s; review of 2026-11-29). An HTTP/1.1 request in absolute
   * form without a Host is still taken for HTTP/2 (Deno cannot tell them apart for us), and so,
   * over TLS, is one without a Host that carries no field HTTP/2 refuses (see `isMadeUpHost`; a
   * chunked upload carries `transfer-encoding`).
   */
  #readUnread(): void {
    const read = this.#wholeRead = this.#readWhole();
    read.catch(() => {});
  }

  #handOver(response: Response): void {
    const resolve = this.#resolve;
    if (resolve === null) {
      this.#response = response;
    } else {
      this.#resolve = null;
      resolve(response);
    }
  }

  /**
   * Hands over a response that kept the application's `connection` fields while the whole-body
   * read was pending, once that read has settled or `WHOLE_SETTLE_MS` has passed: a body read to
   * its end keeps them, one still arriving (or failed) loses them to the `connection: close`
   * `Deno.serve` adds itself.
   */
  #handOverSettled(response: Response): void {
    let decided = false;
    const decide = () => {
      if (decided) return;
      decided = true;
      clearTimeout(timer);
      if (this.#wholePending || this.#bodyFailed) response.headers.delete("connection");
      this.#handOver(response);
    };
    const timer = setTimeout(decide, WHOLE_SETTLE_MS);
    this.#wholeSettled!.then(decide, decide);
  }

  /**
   * The response's fields without the application's `connection` fields while the request's body
   * is not read to its end (a stream, a refused one included, or a small body the application
   * did not read): `Deno.serve` then decides itself whether the connection closes, and states
   * its own `connection: close` if it does, beside any already there (the bridge's 413 said it
   * twice, Deno 2.9.6). Once the body is read, Deno keeps the connection whatever the
   * application says, and its fields go out as given. A small body whose whole read has begun
   * (the web layer begins it at once) may be either: the response waits for that read to settle
   * (see `#handOverSettled`), as dropping the fields at once lost the application's
   * `connection: close` to a body that had all arrived (Deno then adds none).
   */
  #connectionFields(headers: [string, string][]): [string, string][] {
    if (!this.#denoServes) return headers;
    // Deno.serve's shutdown closes the connection after this answer without saying so: a
    // keep-alive client then sent its next request into the close and got no answer (20 of 20
    // busy connections, probe of 2026-11-29), as a proxy's pooled POST gets its 502. Not over
    // HTTP/2, which has no such field (RFC 9113 §8.2.2): Deno's GOAWAY says it there.
    const draining = this.core.draining && !this.#overHttp2;
    if (this.#body === null && !this.#whole) {
      // Beside an application's own field too (its "keep-alive" went out alone, then the
      // close), as node and uvicorn add theirs.
      const fields = draining && !saysClose(headers) ? [...headers, CLOSE_FIELD] : headers;
      if (this.#wholePending && fields.some(([name]) => isConnectionField(name))) {
        this.#fieldsOnHold = true;
      }
      return fields;
    }
    const kept = headers.filter(([name, value]) => {
      if (!isConnectionField(name)) return true;
      if (hasToken(value, "close")) this.#closeAsked = true;
      return false;
    });
    // A body not read to its end, but all arrived: Deno says nothing of the connection, which
    // its shutdown then closes (a 401 to an upload, review of 2026-11-29). One still arriving
    // gets Deno's own field beside this one: the same "close" twice, which says it no less.
    if (draining) return [...kept, CLOSE_FIELD];
    return kept.length === headers.length ? headers : kept;
  }

  protected override sendWhole(
    status: number,
    fields: [string, string][],
    body: Uint8Array | null,
  ): void {
    const headers = this.#connectionFields(fields);
    if (this.scope.method === "HEAD" && status !== 204 && status !== 304) {
      if (body !== null) {
        // The length a GET would get, stated here and not left to Deno with the body: over
        // HTTP/2 Deno (2.9.6) writes a HEAD response's body, which curl and nghttp2 take as a
        // protocol error (the whole response failed). A null body keeps a length given, and so
        // does this one: the bridge's own 500 states its length already, and a second field
        // made Deno send two, which nghttp2 and curl refuse over HTTP/2 as they refuse a body.
        const stated: [string, string][] = hasContentLength(headers)
          ? headers
          : [...headers, ["content-length", String(body.length)]];
        this.#respond(new Response(null, { status, headers: headersInit(stated, null) }));
        return;
      }
      if (!hasContentLength(headers)) {
        // Deno states "content-length: 0" for a null body, which for HEAD claims the GET
        // response is empty (RFC 9110 §8.6 forbids that); for a stream it states no length at
        // all (an empty stream: over HTTP/2 an empty DATA frame ends it, which clients take).
        this.#respond(new Response(emptyStream(), { status, headers }));
        return;
      }
    }
    this.#respond(
      new Response(bodyInit(body, headers), {
        status,
        headers: headersInit(headers, this.#denoServes ? body : null),
      }),
    );
  }

  protected override checkTransferCoding(coding: string): void {
    // Fetch servers frame a body themselves: Deno.serve drops the field and sends the body chunked
    // (or with a length), so a coding named there never reached the client, which read the
    // still-coded bytes (gzip) as the body. h11, uvicorn's parser, refuses it too.
    if (isChunkedOnly(coding)) return;
    throw new AsgiProtocolError(
      `Invalid "transfer-encoding" ${
        describe(coding)
      } in "http.response.start": Deno.serve frames the body itself and drops the field, so the client would read the coded bytes as the body; use "content-encoding" for compression, or transport "node"`,
    );
  }

  protected override openStream(status: number, fields: [string, string][]): void {
    const headers = this.#connectionFields(fields);
    const source = this.#source = new ChunkSource(this);
    this.#respond(
      new Response(new ReadableStream(source, { highWaterMark: 1 }), { status, headers }),
    );
  }

  protected override writeChunk(chunk: Uint8Array): Promise<void> | undefined {
    const source = this.#source!;
    const controller = source.controller;
    if (controller === null) return;
    controller.enqueue(chunk);
    // Deno may write the chunk inside enqueue(), fail on a connection the client has closed and
    // cancel the stream there and then: the stream is closed (desiredSize 0), nothing will pull
    // again, and waiting would hold the application's send() for good.
    if (source.controller === null || controller.desiredSize! > 0) return;
    return source.wait();
  }

  protected override endStream(last: Uint8Array): void {
    const source = this.#source!;
    const controller = source.controller;
    if (controller === null) return;
    source.controller = null;
    if (last.length > 0) controller.enqueue(last);
    controller.close();
    source.wake();
  }

  protected override abortResponse(
    reason: unknown,
    status: number,
    fields: [string, string][],
  ): void {
    const source = this.#source;
    if (source !== null) {
      const controller = source.controller;
      source.controller = null;
      controller?.error(reason);
      source.wake();
    } else if (!this.#responded) {
      // Fetch cannot close a connection without a response: send the head, then fail the body.
      // A 204, 205 or 304 has no body to fail (Fetch throws on one, which once ended the whole
      // process): its head is the whole response.
      const headers = this.#connectionFields(fields);
      this.#respond(
        status !== 0 && isNullBodyStatus(status)
          ? new Response(null, { status, headers })
          : new Response(erroredStream(reason), { status: status || 500, headers }),
      );
    }
  }

  protected override readChunk(): Promise<Uint8Array | null> {
    if (this.#whole) {
      this.#whole = false;
      const read = this.#wholeRead ?? this.#readWhole();
      this.#wholeRead = null;
      return read;
    }
    const body = this.#body;
    if (body === null) return Promise.resolve(null);
    const expected = this.#expectedLength;
    const reader = this.#reader ??= body.getReader();
    const read = reader.read().then((result) => {
      this.#reading = null;
      if (result.done) {
        this.#body = null;
        return null;
      }
      const chunk = result.value;
      // Deno yields an empty chunk for a body of no declared length that has none: it is no
      // message of its own (node and uvicorn send one empty message with more_body false).
      if (chunk.length === 0) return this.readChunk();
      this.#receivedLength += chunk.length;
      if (expected >= 0 && this.#receivedLength >= expected) this.#readToEnd(reader);
      return chunk;
    }, (error) => {
      this.#reading = null;
      this.#noteBodyFailure(error);
      throw error;
    });
    this.#reading = read;
    return read;
  }

  /** Reads the whole body at once; it ends the body too, so Deno reuses the connection. */
  #readWhole(): Promise<Uint8Array | null> {
    this.#wholePending = true;
    const read = this.#request.bytes().then((bytes) => {
      this.#wholePending = false;
      return bytes.length === 0 ? null : bytes;
    }, (error) => {
      this.#wholePending = false;
      this.#noteBodyFailure(error);
      throw error;
    });
    this.#wholeSettled = read.then(() => {}, () => {});
    return read;
  }

  /**
   * Remembers that our own `Deno.serve` could not read the request's body, though the client may
   * still be there (see `closeExchange`). A body cut short by a half-close fails as one whose
   * client left (`BadResource` both), so both get the 400; to a client that left, it goes
   * nowhere. A Request made by a program (createFetchHandler) whose body stream fails is the
   * server's fault, not a client's: it keeps its 500; unless Deno failed it for a body it cannot
   * parse (`Deno.serve(app.fetch)`): the client gets the 400 it gets under `serve()`, not a 500
   * while the application is told of a 400 (seen before, 2026-11-29).
   */
  #noteBodyFailure(error: unknown): void {
    if (this.#denoServes || isParseFailure(error)) this.#bodyFailed = true;
  }

  /**
   * Deno (2.9.6) fails a read of a body it cannot parse (a bad chunk size, a chunk extension of
   * 4 KiB or more) with an `Error` "invalid HTTP/1 request: …", and one whose connection broke
   * with an error of its own (`CONNECTION_LOST`): the client left, reset or half-closed. The
   * stream of a `Request` a program built fails with whatever it was given. Our own `Deno.serve`
   * gives no such Request: an error it is not known to mean a parse failure by is a client that
   * left (a reset was taken for a malformed body, and warned of, until 2026-11-29), and so is a
   * connection's error under `createFetchHandler` (it was logged as the program's fault, an
   * error line per client that reset behind `Deno.serve(handler.fetch)`).
   */
  protected override readFailed(error: unknown): BodyFailure {
    if (isParseFailure(error)) return "body_malformed";
    if (this.#denoServes || (error instanceof Error && CONNECTION_LOST.has(error.name))) {
      return "client_left";
    }
    return "body_failed";
  }

  /**
   * Reads past the last byte of a `content-length` body, to its end. The application has all of
   * it, but Deno only reuses the connection for the next request once the stream has ended;
   * otherwise it answers `connection: close` and holds the socket until a garbage collection.
   */
  #readToEnd(reader: ReadableStreamDefaultReader<Uint8Array>): void {
    this.#reading = reader.read().then((result) => {
      this.#reading = null;
      if (result.done) this.#body = null;
    }, () => {
      this.#reading = null;
    });
  }

  protected override refuseBody(): void {
    this.#refused = true;
    if (this.#whole) {
      this.#whole = false;
      this.#body = this.#request.body;
    }
    // Claim a body nobody read yet before Deno sees the 413: Deno reads an unclaimed body to its
    // end, all of a declared 10 GB, and a reader taken later does not stop that.
    if (this.#body !== null && this.#reader === null) this.#reader = this.#body.getReader();
  }

  /**
   * Closes the connection of a request whose body was left unfinished, by cancelling the body.
   * Deno itself reads an untouched body to its end (so an ignored small body keeps the
   * connection alive), but one we started to read it leaves alone: the socket then lingers,
   * answered but never closed, until the Request is garbage-collected (~25 s under load). And a
   * refused body must not be read to its end at all. Cancelling only works once Deno has taken
   * the response (a cancel in the same tick changes nothing) and while no read is pending (a
   * pending read on an idle client holds the body open): measured on Deno 2.9.6.
   */
  #cancelBody(): void {
    const body = this.#body;
    if (body === null || this.#reading !== null) return;
    this.#body = null;
    const reader = this.#reader ?? body.getReader();
    reader.cancel().catch(() => {});
  }

  /**
   * Watches the client from the start of the request, not only once the application waits after
   * the body. Over HTTP/2 Deno (2.9.6) tells of a stream the client reset, or a connection it
   * closed, only to a `request.signal` read before that happened: read later, it stays quiet for
   * good (over HTTP/1.x it says so whenever it is read). An application that did something else
   * before it waited for the end (a query, a long poll) then never saw `http.disconnect`, and
   * waited until shutdown. Costs an `AbortSignal` and a pending op of Deno's per request.
   */
  watchFromStart(): void {
    this.watchClient();
  }

  protected override watchClient(): void {
    if (this.#watching) return;
    this.#watching = true;
    if (this.#responded) return;
    const signal = this.#request.signal;
    if (signal.aborted) return this.clientGone();
    const onAbort = () => this.clientGone();
    this.#onAbort = onAbort;
    signal.addEventListener("abort", onAbort, { once: true });
  }

  protected override closeExchange(): void {
    // The client is gone and nothing was answered: settle the handler's promise all the same.
    // Unless the body failed to read while the client is still there: a chunked body Deno
    // refuses to parse (a chunk extension of 4 KiB or more, on Deno 2.9.6; node and uvicorn's h11
    // take it; or a bad chunk size arriving after the head), or a body cut short by a
    // half-close. The application sees http.disconnect (with reason "body_malformed" for the
    // former: see readFailed), and this answer reaches the client (Deno adds "connection:
    // close"): a 500 blamed the server for a request it could not read.
    if (!this.#responded) {
      this.#respond(
        this.#bodyFailed
          ? textResponse(this.scope.method, 400, "Bad Request")
          : new Response(null, { status: 500 }),
      );
    }
    if (this.#body === null) return;
    if (this.#refused) setTimeout(() => this.#cancelBody(), 0);
    else if (this.#reader !== null) this.#dropBody();
  }

  protected override responseComplete(): void {
    // A body claimed in #respond was read by nobody until the application returned: a client
    // that sends its whole body before it reads had its answer only then.
    if (this.#body !== null && !this.#refused && this.#reader !== null) this.#dropBody();
  }

  /**
   * Reads the rest of a body the application left, whether it never read it (a chunked one,
   * claimed in `#respond`) or stopped partway, and drops it, as Node and uvicorn do. Deno would
   * read an untouched chunked body itself, but with no bound, and leaves one we began to read
   * alone: the socket then lingered, answered but never closed, until a garbage collection.
   * Cancelling the body instead closed the connection while the client was still sending: the
   * kernel reset it, and a client that sends its whole body before it reads (Python's
   * `http.client`) got "Broken pipe" instead of the answer (RFC 9112 §9.6 asks for a lingering
   * close). Deno answers `connection: close` to a request whose body has not all arrived, so
   * the connection closes once the body ends, or (cancelled, as a refused body is) at the first
   * chunk past `maxBodySize` bytes in all or past `drainTiming.totalMs` of dropping: a client
   * that goes on sending slowly once it has its answer does not hold the connection as long as
   * it likes. One that stalls mid-body holds it until it sends on or leaves: a pending read
   * cannot be cancelled (`node` closes it after `drainTiming.idleMs` without a byte).
   */
  #dropBody(): void {
    if (this.#dropping) return;
    this.#dropping = true;
    const reader = this.#reader!;
    const until = performance.now() + drainTiming.totalMs;
    let left = -1;
    const next = (): void => {
      // The application's own read, or the one past a content-length, goes first.
      const inFlight = this.#reading;
      if (inFlight !== null) {
        inFlight.then(next, () => {});
        return;
      }
      if (this.#body === null) return;
      if (left === -1) left = this.core.maxBodySize - this.#receivedLength;
      this.#reading = reader.read().then((result) => {
        this.#reading = null;
        if (result.done) {
          this.#body = null;
          return;
        }
        left -= result.value.length;
        if (left >= 0 && performance.now() < until) next();
        else this.#cancelBody();
      }, () => {
        this.#reading = null;
      });
    };
    next();
  }
}

/**
 * The header fields of the request being read, as `[name, value, name, value…]` in `list`'s
 * first `count` entries. One array serves every request: a request's fields are read, turned
 * into its scope's bytes and done with before `handleFetch` runs the application, so no two
 * requests ever use it at once, and a fresh array grown by `push()` was some 300 B of garbage
 * per request. (Entries past `count` are stale strings of an earlier request, never read.)
 */
const fieldsRead = { list: [] as string[], count: 0 };

function collectField(this: typeof fieldsRead, value: string, name: string): void {
  const list = this.list;
  list[this.count++] = name;
  list[this.count++] = value;
}

function hasLowerCase(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x61 && code <= 0x7a) return true;
  }
  return false;
}

/**
 * Whether the authority of `url` (from `start` to `end`) is one Deno made up for a request that
 * came without a Host (HTTP/1.x), from the listener's address: not a Host the client sent, so not
 * one to pass on as if it had (uvicorn and node pass none). Under createFetchHandler the listener
 * is not known, so any `localhost` or `localhost:<port>` counts, and any authority of an
 * `http+unix:` URL (a socket's path, percent-encoded).
 *
 * An HTTP/2 request whose `:authority` is that very text looks the same, and Deno (2.9.6) tells
 * nothing else apart (docs/asgi.md, "Limits"). Over TLS, where every browser negotiates HTTP/2,
 * that is each request in development (`https://localhost:8443/`), so there the authority is taken
 * as the client's unless a field HTTP/2 refuses shows HTTP/1.x (an HTTP/1.0 client without a
 * Host and without any such field, rare over TLS, then gets the made-up one). Over cleartext,
 * where no browser speaks HTTP/2 and health checks send HTTP/1.0 without a Host, it stays made up.
 *
 * @param url The request's URL.
 * @param start Where its authority starts.
 * @param end Where it ends.
 * @param server The listener's address, when known (`[path, null]` on a Unix socket).
 * @param tls Whether the listener speaks TLS.
 * @param fields The request's fields, as `[name, value, …]`.
 * @param count How many entries of `fields` are the request's.
 */
function isMadeUpHost(
  url: string,
  start: number,
  end: number,
  server: [string, number | null] | null,
  tls: boolean,
  fields: string[],
  count: number,
): boolean {
  return isFallbackAuthority(url, start, end, server, tls) &&
    (!tls || hasHttp1OnlyField(fields, count));
}

/**
 * Whether the authority of `url` (from `start` to `end`) is the one Deno (2.9) writes for a
 * request without a Host, or with an empty one, on the listener `server` (see
 * {@linkcode isMadeUpHost}, which also asks whether an HTTP/2 client could have sent it).
 */
function isFallbackAuthority(
  url: string,
  start: number,
  end: number,
  server: [string, number | null] | null,
  tls: boolean,
): boolean {
  const authority = url.slice(start, end);
  if (server === null) {
    // On a Unix socket Deno puts the socket's path in an `http+unix:` URL (an HTTP/2 request with
    // an `:authority` gets its `:scheme` instead): never the client's, under Deno.serve({ path }).
    return url.startsWith("http+unix:") || /^localhost(?::\d+)?$/.test(authority);
  }
  if (server[1] === null) return authority === unixFallbackHost(server[0]);
  return authority === fallbackHost(server[0], server[1], tls);
}

/**
 * Whether the request carries a field HTTP/2 forbids (RFC 9113 §8.2.2): Deno (2.9.6) resets an
 * HTTP/2 stream that sends one (`PROTOCOL_ERROR`, measured for each of these), so such a request
 * came over HTTP/1.x. (`te` is left out: HTTP/2 allows `te: trailers`.)
 */
function hasHttp1OnlyField(fields: string[], count: number): boolean {
  for (let i = 0; i < count; i += 2) {
    const name = fields[i];
    if (
      name === "connection" || name === "keep-alive" || name === "proxy-connection" ||
      name === "transfer-encoding" || name === "upgrade"
    ) {
      return true;
    }
  }
  return false;
}

/**
 * The authority Deno (2.9) gives a request without a Host on a Unix socket: the socket's path
 * with every byte but ASCII letters and digits percent-encoded (`http+unix://%2Frun%2Fapp%2Esock/`).
 */
function unixFallbackHost(path: string): string {
  let encoded = "";
  for (const byte of new TextEncoder().encode(path)) {
    const alphanumeric = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) ||
      (byte >= 0x61 && byte <= 0x7a);
    encoded += alphanumeric
      ? String.fromCharCode(byte)
      : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return encoded;
}

/**
 * The authority Deno gives a request without a Host, as Deno 2.9's `req_host_from_addr` makes it
 * from the listener's address: `localhost` for a loopback or unspecified address, its port left
 * out when it is the scheme's default (443 with TLS, 80 without); otherwise the address itself.
 * Only `localhost:<port>` was recognised once, so on 443 a request without a Host got
 * "localhost" as its Host.
 */
function fallbackHost(address: string, port: number, tls: boolean): string {
  const local = address === "0.0.0.0" || address === "::" || address === "::1" ||
    address.startsWith("127.");
  if (port === (tls ? 443 : 80)) return local ? "localhost" : address;
  if (local) return `localhost:${port}`;
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}

/** Whether the request's `transfer-encoding`, if any, is `chunked` alone (see isChunkedOnly). */
function chunkedOnly(fields: string[], count: number): boolean {
  for (let i = 0; i < count; i += 2) {
    if (fields[i] === "transfer-encoding") return isChunkedOnly(fields[i + 1]!);
  }
  return true;
}

/**
 * A plain-text response of the transport's own, with no body for HEAD: over HTTP/2 Deno (2.9.6)
 * writes a body even to HEAD, which curl and nghttp2 take as a protocol error. The length a GET
 * would get is stated all the same (RFC 9110 §9.3.2).
 *
 * @param method The request's method.
 * @param status The status.
 * @param text The body, ASCII.
 * @param close Whether to ask for the connection to close.
 * @returns The response.
 */
export function textResponse(
  method: string,
  status: number,
  text: string,
  close = false,
): Response {
  const headers: Record<string, string> = { "content-type": "text/plain; charset=utf-8" };
  if (close) headers["connection"] = "close";
  if (method !== "HEAD") return new Response(text, { status, headers });
  headers["content-length"] = String(text.length);
  return new Response(null, { status, headers });
}

/**
 * A text response after which the connection closes: its head and its text as one chunk, then a
 * body that fails. For a CONNECT, which `Deno.serve` gives no body whatever its `content-length`
 * says: the bytes after its head are read as the next request, and Deno keeps a connection
 * whatever `connection: close` says (docs/asgi.md, "HTTP details"), so a plain 501 let a
 * CONNECT's body, forwarded as such by a proxy in front, reach the application as a request of
 * its own (head differential of 2026-11-29). A body that fails is the one way a handler has to
 * end the connection; one that fails after a stated `content-length` does not (Deno 2.9.6), so
 * the text goes out chunked and its last chunk never comes.
 *
 * Over HTTP/2 the failure resets the stream (`INTERNAL_ERROR`) and the connection serves on.
 * Failing at the first pull reset it before its head went out, and the client saw the reset
 * alone, no 501 (review of 9c10a2c): it fails a turn of the event loop later, once Deno has
 * written the head and the text. The bridge cannot spare HTTP/2 the reset: Deno tells it neither
 * the version nor anything else that sets an HTTP/2 CONNECT apart from an HTTP/1.x one without a
 * Host.
 *
 * @param status The status to send.
 * @param text Its text, sent before the close.
 * @returns The response.
 */
function closingResponse(status: number, text: string): Response {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
    },
    // Once Deno has taken the text (failing in start() lost it), and written it: see above.
    pull(controller) {
      return new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() =>
        controller.error(new Error("The connection closes after this answer"))
      );
    },
  });
  return new Response(stream, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", connection: "close" },
  });
}

/**
 * What `handleFetch` takes of a Fetch host's connection facts: a peer with an address, or none
 * (`createFetchHandler` passes no info for a Unix socket's peer, whose address has no host).
 */
export interface PeerInfo {
  /** The client's address: the scope's `client`. */
  remoteAddr?: { hostname: string; port: number };
}

/**
 * Serves one Fetch request through the core.
 *
 * @param core The shared state.
 * @param request The request.
 * @param info Connection facts, if the host passes them.
 * @param server The listening address, when known: one frozen pair, shared by every request of
 *   the listener (an ASGI server's `server` is a tuple, immutable in Python too).
 * @param denoServes `true` when our own `Deno.serve` writes the response.
 * @param tls Whether our own listener speaks TLS; left out, the scheme of `request.url` says.
 * @param byHand `true` for a Request no server handed over (a Fetch handler called without
 *   `info`): its URL is its caller's choice, so a Host beside it that names another host is
 *   passed on, not refused.
 * @returns The response when the application started it before its first await, else the
 *   promise of it.
 */
export function handleFetch(
  core: Core,
  request: Request,
  info: PeerInfo | undefined,
  server: [string, number | null] | null,
  denoServes = false,
  tls?: boolean,
  byHand = false,
): Response | Promise<Response> {
  const method = request.method;
  if (method !== "GET" && method !== "POST") {
    // Methods are case-sensitive (RFC 9110 §9.1) and ASGI promises upper case: "get" is refused
    // as node:http's parser and uvicorn refuse it, rather than passed on or silently upper-cased.
    if (hasLowerCase(method)) return textResponse(method, 400, "Bad Request");
    // CONNECT asks for a tunnel, which ASGI has no way to serve, and Fetch's URL loses its
    // authority-form target: "CONNECT example.com:443" reached the application as path "/", and
    // its 200 told the client a tunnel was open (Deno then held the connection as one).
    // The connection must close after it (see closingResponse), under createFetchHandler too:
    // a CONNECT comes from a server only (Fetch's Request refuses the method), and the handler
    // is meant for Deno.serve(handler.fetch), where a plain 501 let the bytes after the head
    // reach the application (review of 9c10a2c).
    if (method === "CONNECT") return closingResponse(501, "Not Implemented");
  }
  const url = request.url;
  // forEach with a shared callback costs half what for...of does (no iterator, no entry arrays).
  fieldsRead.count = 0;
  request.headers.forEach(collectField, fieldsRead);
  const fields = fieldsRead.list;
  const count = fieldsRead.count;
  let host: string | undefined;
  let lengthText: string | undefined;
  for (let i = 0; i < count; i += 2) {
    const name = fields[i];
    if (name === "host") host = fields[i + 1];
    else if (name === "content-length") lengthText = fields[i + 1];
  }
  // Deno's request.url is the scheme, "://", the Host header as sent and the target, so a Host
  // holding "/" moved the path's start: "Host: x/admin?" turned "GET /public" into path "/admin"
  // (a proxy that checks the target is then bypassed). Neither it nor "?" or "#" nor any byte but
  // a host's is valid in a Host (RFC 9112 3.2: 400, see isHostValue); without them, the first "/"
  // after the authority starts the target's path. Only "/", "?" and "#" were refused until the
  // malformed-request differential (2026-11-29): "Host: evil.example\.good.example" went on.
  if (host !== undefined && !isHostValue(host)) return textResponse(method, 400, "Bad Request");
  // request.url keeps the target as the client sent it ("..", "%7e" and all); new URL() would not.
  // It is "scheme://" + Host + target for an origin-form target, the target itself for one in
  // absolute form, whose authority ends at "/", "?" or "#": the first "/" alone once read
  // "GET http://a?next=/admin" as path "/admin". Only comparing the URL's authority with the Host
  // tells "GET /p" with "Host: evil" from "GET http://evil/p" with "Host: good": the startsWith
  // below is that, at 6-20 ns per request with a Host (measured when it was first avoided).
  const schemeEnd = url.indexOf(":");
  const authorityStart = schemeEnd + 3;
  let pathStart = url.indexOf("/", authorityStart);
  if (pathStart === -1) pathStart = url.length;
  let queryStart = url.indexOf("?", authorityStart);
  if (
    (queryStart !== -1 && queryStart < pathStart) ||
    // An authority as long as the Host but another ("GET http://evil/p" with "Host: good") was
    // once taken for the Host: the application saw "good" while the target named "evil".
    (host !== undefined &&
      (pathStart - authorityStart !== host.length || !url.startsWith(host, authorityStart))) ||
    // A "#" before the first "/": an authority as long as the Host does not make it the Host
    // ("GET http://ab#c/admin" with "Host: abcd" was once read as path "/admin"). Searched
    // backwards from the path, so only "scheme://" + authority is scanned.
    url.lastIndexOf("#", pathStart) > schemeEnd
  ) {
    // Not "scheme://" + Host + target: absolute form (a Host holding "?" or "#", which would move
    // the path's start as "/" does, was refused above).
    pathStart = authorityEnd(url, authorityStart);
    // RFC 9112 §3.2.2 has a client send the target's authority as the Host, and RFC 9113 §8.3.1
    // the same of HTTP/2's host field beside :authority. Passed on, a differing Host reached the
    // application while a proxy in front went by the target (review of the malformed-request
    // differential, 2026-11-29): 400, as Kestrel and HAProxy answer.
    // An empty Host gets the authority Deno makes up for none: only another one is the target's.
    // A Request made by hand (app.fetch(new Request("http://localhost/p", { headers: { host } }))
    // in a test) has no proxy in front to disagree with, and was refused once this came in.
    if (
      host !== undefined && !byHand &&
      (host === ""
        ? !isFallbackAuthority(url, authorityStart, pathStart, server, tls ?? schemeEnd === 5)
        : namesAnotherHost(url, authorityStart, pathStart, host))
    ) {
      return textResponse(method, 400, "Bad Request");
    }
    // No part of a request target (RFC 9112 §3.2), and no path to take: node's parser refuses it.
    if (url.charCodeAt(pathStart) === 35 /* "#" */) return textResponse(method, 400, "Bad Request");
    queryStart = url.indexOf("?", pathStart);
  }
  const rawPath = queryStart === -1 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
  // The listener knows whether it speaks TLS; request.url has the scheme the client claimed
  // (HTTP/2's :scheme: "https" over plain TCP once made a scope say "https").
  const secure = tls ?? schemeEnd === 5;
  let fieldCount = count;
  // One comparison for a request with a Host; the rest only for one without.
  const overHttp2 = host === undefined && pathStart > schemeEnd + 3 &&
    !isMadeUpHost(url, schemeEnd + 3, pathStart, server, secure, fields, count);
  if (overHttp2) {
    // Over HTTP/2 Deno builds request.url from the client's :authority and lists no Host: the
    // ASGI spec asks for the authority as the Host (the scope once had none, and under
    // createFetchHandler, so Deno.serve(app.fetch), it still had none). A Host sent beside
    // it is passed on as sent when it names the same host, and refused above when it names
    // another (RFC 9113 §8.3.1), as a Host beside an HTTP/1.1 absolute-form target is. A
    // Request made by hand without a Host has its authority in its URL only, as an HTTP/2 one.
    const authority = url.slice(schemeEnd + 3, pathStart);
    // Held to a Host's rule: Deno takes a userinfo in an :authority (RFC 9113 §8.3.1 forbids
    // one), and "good.example@evil.example" once reached the application as its Host.
    if (!isHostValue(authority)) return textResponse(method, 400, "Bad Request");
    // At the start of the list, where the ASGI spec puts the :authority (it was once last).
    for (let i = fieldCount - 1; i >= 0; i--) fields[i + 2] = fields[i]!;
    fields[0] = "host";
    fields[1] = authority;
    fieldCount += 2;
  }
  // Deno.serve takes two equal content-length fields (any other pair or list it refuses) and its
  // Headers join them: the application read "5, 5", which no parser of a length takes. 400, as
  // node:http answers (RFC 9110 §8.6 allows it); a scan of a few bytes per request that has a
  // content-length. The connection goes on: the two agree, so the body's end is not in question.
  if (lengthText !== undefined && lengthText.includes(",")) {
    return textResponse(method, 400, "Bad Request");
  }
  // Fetch (and so Deno.serve) gives GET and HEAD requests no body: no need to ask.
  let hasBody = false;
  let expectedLength = -1;
  let whole = false;
  if (method !== "GET" && method !== "HEAD") {
    expectedLength = parseContentLength(lengthText);
    whole = expectedLength >= 0 && expectedLength <= WHOLE_BODY_LIMIT;
    hasBody = whole ? expectedLength > 0 : request.body !== null;
    // Deno refuses a content-length beside a transfer-encoding: only a body without one can
    // carry a transfer coding, and Deno passes "gzip, chunked" on still gzipped.
    // fieldCount: a host taken from the URL went first and moved every field on by two.
    if (lengthText === undefined && hasBody && !chunkedOnly(fields, fieldCount)) {
      return textResponse(method, 501, "Not Implemented", true);
    }
  }
  const remote = info?.remoteAddr;
  if (CAN_UPGRADE && method === "GET" && isUpgrade(fields, fieldCount)) {
    return serveWebSocket(core, request, {
      scheme: secure ? "wss" : "ws",
      rawPath: rawPath === "" ? "/" : rawPath,
      query: queryStart === -1 ? "" : url.slice(queryStart + 1),
      fields: fields.slice(0, fieldCount),
      client: remote === undefined ? null : [remote.hostname, remote.port],
      server,
    });
  }
  const scope = httpScope(
    core,
    method,
    secure ? "https" : "http",
    "1.1",
    rawPath === "" ? "/" : rawPath,
    queryStart === -1 ? "" : url.slice(queryStart + 1),
    fields,
    fieldCount,
    remote === undefined ? null : [remote.hostname, remote.port],
    server,
  );
  const cycle = new DenoCycle(
    core,
    request,
    scope,
    hasBody,
    expectedLength,
    whole,
    denoServes,
    overHttp2,
  );
  cycle.run();
  // Over HTTP/2 Deno tells of a reset stream only to a signal read before the reset: see
  // watchFromStart. Over TLS (where browsers negotiate HTTP/2) and for a request without a Host
  // (every HTTP/2 one that sent no host field, whatever its authority); plain HTTP/1.1 pays
  // nothing for it.
  if (secure || host === undefined) cycle.watchFromStart();
  return cycle.response();
}

/**
 * The wait before listening again after the listener failed. Short and fixed: the failure that
 * passes (EMFILE once idle connections hold every fd) ends the moment clients leave, and a
 * doubling back-off (it once reached 2 s) kept the port closed long after that. A retry costs
 * three system calls, and while fds stay exhausted each one fails at the next connection anyway.
 */
const RELISTEN_DELAY = 100;
/** At most one warning per this many milliseconds for a listener failing again and again. */
const RELISTEN_LOG_INTERVAL = 10_000;

/** Bind errors that waiting cannot cure; anything else (EMFILE, ENFILE, ENOBUFS) may pass. */
function isPermanent(error: unknown): boolean {
  return error instanceof Deno.errors.AddrInUse || error instanceof Deno.errors.PermissionDenied ||
    error instanceof Deno.errors.AddrNotAvailable;
}

/**
 * Starts `Deno.serve` for the core, and keeps it listening.
 *
 * When accepting fails ("Too many open files" once idle connections hold every fd of the
 * process), Deno.serve closes its listening socket (connections waiting in its backlog are
 * reset) and rejects its `finished`; unhandled, that ends the process. Here the port is bound
 * again every 0.1 s while the connections already open are served on, and it is logged as a
 * warning (at most one line per 10 s, with the number of failures since the last one): under an
 * fd limit it is expected operation, and it passes once clients leave. Only a bind error that
 * waiting cannot cure (the port taken meanwhile) ends the listener for good, logged as an error
 * and settled through `failed`.
 *
 * Deno.serve (2.9) has no header-read or keep-alive timeout: idle connections are not bounded.
 *
 * On a Unix socket (`where.path`), each request's `client` is `null`: Deno gives the listening
 * socket's own path as the peer's address, which names no client.
 *
 * @param core The shared state.
 * @param where The interface and port, or the path of a Unix socket.
 * @param tls The certificate chain and key (PEM), for HTTPS (TCP only).
 * @returns The listener.
 */
export function listenDeno(
  core: Core,
  where: ListenAddress,
  tls?: { cert: string; key: string },
): Listener {
  const path = "path" in where ? where.path : undefined;
  const bind = "path" in where ? where.bind : undefined;
  const hostname = path === undefined ? (where as { hostname: string }).hostname : "";
  let server: [string, number | null] | null = null;
  const secure = tls !== undefined;
  const servers = new Set<Deno.HttpServer<Deno.Addr>>();
  const failed = Promise.withResolvers<unknown>();
  let closing = false;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let lastLogged = -Infinity;
  let unlogged = 0;

  // Only errored response streams get here (the handler never throws), and the cycle has
  // logged why already; Deno would print the error a second time.
  const onError = () => new Response(null, { status: 500 });
  // A handler of its own for a Unix socket, so that the TCP one does no more per request.
  const onUnix = (request: Request) =>
    closing
      ? textResponse(request.method, 503, "Service Unavailable", true)
      : handleFetch(core, request, undefined, server, true, false);
  // Deno.serve binds before it returns (Deno 2.9.6).
  const listenUnix = () => Deno.serve({ path: path!, onListen() {}, onError }, onUnix);
  const open = (port: number): Deno.HttpServer<Deno.Addr> => {
    const httpServer: Deno.HttpServer<Deno.Addr> = path === undefined
      ? Deno.serve(
        { hostname, port, ...tls, onListen() {}, onError },
        (request, info) =>
          closing
            ? textResponse(request.method, 503, "Service Unavailable", true)
            : handleFetch(core, request, info, server, true, secure),
      )
      : bind === undefined
      ? listenUnix()
      : bind(listenUnix);
    servers.add(httpServer);
    httpServer.finished.then(() => servers.delete(httpServer), (error) => {
      servers.delete(httpServer);
      if (!closing) relistenLater(error);
    });
    return httpServer;
  };

  const relistenLater = (error: unknown): void => {
    const now = performance.now();
    if (now - lastLogged >= RELISTEN_LOG_INTERVAL) {
      const more = unlogged === 0 ? "" : ` (${unlogged} more failures since the last warning)`;
      core.logger.warn(
        `Listener on ${place} failed: ${
          errorText(error)
        }; listening again every ${RELISTEN_DELAY} ms${more}`,
      );
      lastLogged = now;
      unlogged = 0;
    } else {
      unlogged++;
    }
    retry = setTimeout(relisten, RELISTEN_DELAY);
  };

  const relisten = (): void => {
    retry = undefined;
    if (closing) return;
    try {
      open(relistenPort);
      listener.onRebound?.();
    } catch (error) {
      if (isPermanent(error)) {
        core.logger.error(
          `Listener on ${place} is gone: ${errorText(error)}`,
        );
        failed.resolve(error);
      } else {
        relistenLater(error);
      }
    }
  };

  const first = open(path === undefined ? (where as { port: number }).port : 0);
  let addr: AsgiServerAddr | AsgiUnixAddr;
  let place: string;
  let relistenPort = 0;
  if (path === undefined) {
    const bound = first.addr as Deno.NetAddr;
    addr = { transport: "tcp", hostname: bound.hostname, port: bound.port };
    server = Object.freeze([bound.hostname, bound.port]) as [string, number];
    place = `${hostForLog(hostname)}:${bound.port}`;
    relistenPort = bound.port;
  } else {
    addr = { transport: "unix", path };
    server = Object.freeze([path, null]) as [string, null];
    place = `unix:${path}`;
  }
  const listener: Listener = {
    addr,
    // Deno.serve's shutdown closes upgraded sockets at once with 1001 (going away), even those
    // whose close frame is still being written: close them with 1012 (service restart) and wait
    // for their closing handshakes first, so clients know to reconnect.
    //
    // Deno.serve's shutdown also fails the body reads of requests in flight (an upload still
    // arriving got http.disconnect and its client a 500), and it stops accepting only when it
    // runs. So it also waits until no request is still receiving its body (not for every request
    // in flight: a long poll would have held the sockets' 1012 back); until then, and while
    // sockets close, new requests (and handshakes) get 503 with the connection closed.
    close: () => {
      closing = true;
      clearTimeout(retry);
      return Promise.all([closeWebSockets(core), bodiesReceived(core)])
        .then(() => Promise.all([...servers].map((s) => s.shutdown())))
        .then(() => {});
    },
    // Deno has no forced close; Core.abortAll() has ended every response by the time this runs.
    forceClose() {},
    failed: failed.promise,
  };
  return listener;
}

/** How often shutdown looks whether the uploads in flight are in (see `listenDeno`'s close). */
const UPLOAD_POLL_MS = 20;

/**
 * Resolves once no request in flight is still receiving its body. Polled, so that the request
 * path pays nothing for it; shutdown waits at most one period more, and serve()'s
 * `shutdownTimeout` ends the requests (and so the wait) if they take too long.
 */
function bodiesReceived(core: Core): Promise<void> {
  if (!core.receivingBodies()) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (core.receivingBodies()) return;
      clearInterval(timer);
      resolve();
    }, UPLOAD_POLL_MS);
  });
}

function hostForLog(hostname: string): string {
  return hostname.includes(":") ? `[${hostname}]` : hostname;
}
