/**
 * A small HTTP/1.1 client over raw TCP for the fault suite: keep-alive load with latencies, and
 * one-off probes that send exactly the bytes given (malformed ones included) and say whether the
 * server answered, closed, or kept silent.
 *
 * @module
 */

const encoder = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/** UTF-8 bytes of a request text; use {@linkcode rawBytes} for bytes that are not UTF-8. */
export function requestBytes(text: string): Uint8Array {
  return encoder.encode(text);
}

/** One byte per character (Latin-1), for requests holding bytes that are not UTF-8. */
export function rawBytes(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

/** A response as read off the wire. */
export interface WireResponse {
  /** The status code. */
  status: number;
  /** Whether the server asked to close the connection. */
  close: boolean;
  /** Body length in bytes (chunked coding removed). */
  bodyLength: number;
}

function indexOf(haystack: Uint8Array, needle: number[], from: number, to: number): number {
  outer: for (let i = from; i <= to - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

const CRLF = [13, 10];
const CRLFCRLF = [13, 10, 13, 10];

/** A TCP connection with a read buffer, speaking HTTP/1.1. */
export class Connection {
  #conn: Deno.TcpConn;
  #buffer = new Uint8Array(65536);
  #start = 0;
  #end = 0;
  #eof = false;
  /** Whether the server reset the connection rather than closing it with a FIN. */
  reset = false;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  /** Connects to 127.0.0.1:`port`. */
  static async open(port: number): Promise<Connection> {
    return new Connection(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  /** Writes all of `bytes`. */
  async write(bytes: Uint8Array): Promise<void> {
    let written = 0;
    while (written < bytes.length) written += await this.#conn.write(bytes.subarray(written));
  }

  /** Closes the connection; safe to call twice. */
  close(): void {
    try {
      this.#conn.close();
    } catch {
      // Closed already.
    }
  }

  /** Reads more bytes into the buffer; false at end of stream. */
  async #fill(): Promise<boolean> {
    if (this.#eof) return false;
    if (this.#start > 0 && this.#start === this.#end) this.#start = this.#end = 0;
    if (this.#end === this.#buffer.length) {
      const bigger = new Uint8Array(
        Math.max(this.#buffer.length, (this.#end - this.#start) * 2),
      );
      bigger.set(this.#buffer.subarray(this.#start, this.#end));
      this.#end -= this.#start;
      this.#start = 0;
      this.#buffer = bigger;
    }
    const n = await this.#conn.read(this.#buffer.subarray(this.#end));
    if (n === null) {
      this.#eof = true;
      return false;
    }
    this.#end += n;
    return true;
  }

  /** Reads up to and including `needle`; returns the bytes before it, or null at end of stream. */
  async #readUntil(needle: number[]): Promise<Uint8Array | null> {
    let from = this.#start;
    for (;;) {
      const at = indexOf(this.#buffer, needle, from, this.#end);
      if (at >= 0) {
        const out = this.#buffer.slice(this.#start, at);
        this.#start = at + needle.length;
        return out;
      }
      from = Math.max(this.#start, this.#end - needle.length + 1);
      const before = this.#start;
      if (!await this.#fill()) return null;
      from -= before - this.#start;
    }
  }

  /** Skips `n` bytes; false when the stream ends first. */
  async #skip(n: number): Promise<boolean> {
    while (n > 0) {
      if (this.#start === this.#end && !await this.#fill()) return false;
      const take = Math.min(n, this.#end - this.#start);
      this.#start += take;
      n -= take;
    }
    return true;
  }

  /**
   * Reads one response.
   *
   * @param head Whether it answers a HEAD request (no body follows).
   * @returns The response, or null when the server closed before a whole head arrived.
   * @throws {Error} When the body ends early.
   */
  async readResponse(head = false): Promise<WireResponse | null> {
    const bytes = await this.#readUntil(CRLFCRLF);
    if (bytes === null) return null;
    const lines = latin1.decode(bytes).split("\r\n");
    const status = Number(lines[0]!.split(" ")[1]);
    let length = -1;
    let chunked = false;
    let close = false;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim().toLowerCase();
      if (name === "content-length") length = Number(value);
      else if (name === "transfer-encoding") chunked = value.includes("chunked");
      else if (name === "connection") close = value.includes("close");
    }
    if (head || status === 204 || status === 304 || (status >= 100 && status < 200)) {
      return { status, close, bodyLength: 0 };
    }
    if (chunked) {
      let total = 0;
      for (;;) {
        const sizeLine = await this.#readUntil(CRLF);
        if (sizeLine === null) throw new Error("The chunked body ended early");
        const size = parseInt(latin1.decode(sizeLine), 16);
        if (size === 0) {
          await this.#readUntil(CRLF);
          return { status, close, bodyLength: total };
        }
        if (!await this.#skip(size + 2)) throw new Error("The chunked body ended early");
        total += size;
      }
    }
    if (length >= 0) {
      if (!await this.#skip(length)) throw new Error("The body ended early");
      return { status, close, bodyLength: length };
    }
    let total = this.#end - this.#start;
    this.#start = this.#end;
    while (await this.#fill()) {
      total += this.#end - this.#start;
      this.#start = this.#end;
    }
    return { status, close: true, bodyLength: total };
  }

  /** Resolves once the server closes the connection (or `ms` pass: then false). */
  async closedWithin(ms: number): Promise<boolean> {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      this.close();
    }, ms);
    try {
      while (await this.#fill()) this.#start = this.#end;
      return true;
    } catch (error) {
      // A server that closes while request bytes it never read are still arriving (a refused
      // upload) closes with a reset, not a FIN: closed all the same. Only our own close after
      // `ms` means it stayed open.
      this.reset = !expired && error instanceof Deno.errors.ConnectionReset;
      return this.reset;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What a probe saw. */
export interface ProbeResult {
  /** The status, `closed` when the server closed without answering, `silent` when nothing came. */
  outcome: number | "closed" | "silent";
  /** Milliseconds from the first byte sent to the outcome. */
  ms: number;
}

/**
 * Sends `bytes` on a new connection and reads one response.
 *
 * @param port The server's port.
 * @param bytes The request, sent as is. A server may answer or close before it has all of it.
 * @param timeoutMs How long to wait for an answer.
 * @returns The outcome.
 */
export async function probe(
  port: number,
  bytes: Uint8Array,
  timeoutMs = 5000,
): Promise<ProbeResult> {
  const started = performance.now();
  let connection: Connection;
  try {
    connection = await Connection.open(port);
  } catch {
    return { outcome: "closed", ms: performance.now() - started };
  }
  let silent = false;
  const timer = setTimeout(() => {
    silent = true;
    connection.close();
  }, timeoutMs);
  try {
    // The server may answer (413, 431) before it has read everything: keep reading meanwhile.
    const writing = connection.write(bytes).catch(() => {});
    const response = await connection.readResponse().catch(() => null);
    await writing;
    const ms = performance.now() - started;
    if (silent) return { outcome: "silent", ms };
    return { outcome: response === null ? "closed" : response.status, ms };
  } finally {
    clearTimeout(timer);
    connection.close();
  }
}

/** The figures of one load run. */
export interface LoadResult {
  /** Responses read. */
  requests: number;
  /** Failed requests: connection errors, timeouts, statuses not in `ok`. */
  errors: number;
  /** A few error descriptions. */
  errorSamples: string[];
  /** Latencies in ms, one per response. */
  latencies: number[];
  /** Responses that closed their keep-alive connection (`connection: close`). */
  closes: number;
  /** Wall time in ms. */
  ms: number;
}

/** One request of a load run: its bytes, whether it is HEAD, the statuses that count as success. */
export interface LoadRequest {
  bytes: Uint8Array;
  head?: boolean;
  ok?: (status: number) => boolean;
}

/**
 * Runs keep-alive load: `connections` clients, each sending requests from `next()` one after the
 * other, until `durationMs` pass or `maxRequests` responses have been read.
 */
export async function load(
  port: number,
  options: {
    connections: number;
    durationMs: number;
    maxRequests?: number;
    next: () => LoadRequest;
    stop?: AbortSignal;
  },
): Promise<LoadResult> {
  const started = performance.now();
  const until = started + options.durationMs;
  const max = options.maxRequests ?? Infinity;
  const result: LoadResult = {
    requests: 0,
    errors: 0,
    errorSamples: [],
    latencies: [],
    closes: 0,
    ms: 0,
  };
  const fail = (what: string) => {
    result.errors++;
    if (result.errorSamples.length < 5 && !result.errorSamples.includes(what)) {
      result.errorSamples.push(what);
    }
  };
  const done = () =>
    performance.now() >= until || result.requests + result.errors >= max ||
    options.stop?.aborted === true;
  async function client(): Promise<void> {
    let connection: Connection | undefined;
    while (!done()) {
      const request = options.next();
      const sent = performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        connection ??= await Connection.open(port);
        const current = connection;
        timer = setTimeout(() => current.close(), 10_000);
        await current.write(request.bytes);
        const response = await current.readResponse(request.head);
        if (response === null) throw new Error("closed before answering");
        result.requests++;
        result.latencies.push(performance.now() - sent);
        if (!(request.ok ?? ((s: number) => s < 400))(response.status)) {
          fail(`status ${response.status}`);
        }
        if (response.close) {
          result.closes++;
          current.close();
          connection = undefined;
        }
      } catch (error) {
        fail(error instanceof Error ? error.message.slice(0, 80) : String(error));
        connection?.close();
        connection = undefined;
      } finally {
        clearTimeout(timer);
      }
    }
    connection?.close();
  }
  await Promise.all(Array.from({ length: options.connections }, client));
  result.ms = performance.now() - started;
  return result;
}

/** The `p`-th percentile of `values` (0-100), or 0 for none. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
