/**
 * The web layer's {@linkcode Response} and the fixed responses the App sends itself. Private:
 * `web.ts` re-exports `Response` and `ResponseOptions`.
 *
 * @module
 */
import { STATUS_CODE } from "@std/http/status";
import { textBytes } from "../_asgi/bytes.ts";
import type { Send } from "../_asgi/types.ts";
import { describe, shorten, visible } from "../_common/describe.ts";
import { rejectUnknownKeys } from "../_common/keys.ts";
import { logText } from "../_common/log_text.ts";

/**
 * Options of {@linkcode Response}.
 *
 * @example A redirect that sets two cookies
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { Response, type ResponseOptions } from "@stellarator/stellarator/web";
 *
 * const options: ResponseOptions = {
 *   status: 303,
 *   // A list of pairs, since a record cannot repeat `set-cookie`.
 *   headers: [
 *     ["Location", "/account"],
 *     ["set-cookie", "session=abc"],
 *     ["set-cookie", "theme=dark"],
 *   ],
 * };
 * const response = new Response(options);
 * assertEquals(response.status, 303);
 * // Names in lower case; the default content type and the length of the empty body added.
 * assertEquals(response.headers, [
 *   ["content-type", "text/plain; charset=utf-8"],
 *   ["location", "/account"],
 *   ["set-cookie", "session=abc"],
 *   ["set-cookie", "theme=dark"],
 *   ["content-length", "0"],
 * ]);
 * ```
 */
export interface ResponseOptions {
  /**
   * The body: bytes, text (sent as UTF-8), or an async iterable of chunks, streamed as they come.
   *
   * @default {empty}
   */
  body?: Uint8Array | string | AsyncIterable<Uint8Array | string>;
  /**
   * The status code, from 200 to 599.
   *
   * @default {200}
   */
  status?: number;
  /**
   * Header fields; a list of pairs can repeat a name (e.g. `set-cookie`). Names are sent in lower
   * case; values must be printable ASCII.
   *
   * @default {no headers}
   */
  headers?: Record<string, string> | Iterable<readonly [string, string]>;
  /**
   * The `content-type`. Give it here or in `headers`, not both.
   *
   * @default {"text/plain; charset=utf-8", or none for 204, 205 and 304}
   */
  contentType?: string;
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();
/** The empty body, shared. */
export const EMPTY: Uint8Array = new Uint8Array(0);
const TEXT_PLAIN = "text/plain; charset=utf-8";
/** The keys of {@linkcode ResponseOptions}: a misspelt one (`stauts`) must not pass unnoticed. */
const RESPONSE_OPTION_KEYS: readonly string[] = ["body", "status", "headers", "contentType"];
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Printable ASCII, space and tab. Wider values would depend on how each transport maps bytes to
// text; percent-encode anything else (RFC 8187 does for file names).
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;
/** One character of a token, and of a field value: for naming the first one refused. */
const TOKEN_CHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]$/;
const FIELD_CHAR = /^[\t\x20-\x7e]$/;

/**
 * The first character of `text` that `allowed` refuses, with its code point and position (in
 * UTF-16 code units): a long value is quoted cut to its first 200 characters, and a stray
 * newline at its end was refused with nothing in the message to show it (fault probe of
 * 2026-11-29). Only on the way to an error.
 *
 * @param text Text that holds such a character.
 * @param allowed Matches one allowed character.
 * @returns E.g. ` ("\n", U+000A, at position 300)`, to follow the quoted value.
 */
function firstRefused(text: string, allowed: RegExp): string {
  for (let i = 0; i < text.length; i++) {
    const code = text.codePointAt(i)!;
    const character = String.fromCodePoint(code);
    if (!allowed.test(character)) {
      const hex = code.toString(16).toUpperCase().padStart(4, "0");
      return ` ("${visible(character)}", U+${hex}, at position ${i})`;
    }
    if (code > 0xffff) i++;
  }
  return "";
}

/** The encoded header pairs of a response, for the ASGI message (set by `Response`). */
export let encodedHeaders: (response: Response) => readonly (readonly [Uint8Array, Uint8Array])[];

/**
 * A response to send with {@linkcode Request.respondWith}.
 *
 * Defaults: status 200, `content-type: text/plain; charset=utf-8` unless one is given, and a
 * `content-length` computed for a byte or text body. A body given as an async iterable is
 * streamed chunk by chunk (chunked, unless a `content-length` header is given) and can be sent
 * only once (`respondWith` refuses it a second time). A fixed body is not copied: do not change its bytes after creating the response.
 * The header bytes in the ASGI messages an App sends are shared between responses that repeat a
 * name or value: ASGI middleware wrapping `app.asgi` may replace a pair but must not write into
 * its bytes.
 *
 * @example A JSON response
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { Response } from "@stellarator/stellarator/web";
 *
 * const response = new Response({ body: '{"ok":true}', contentType: "application/json" });
 * assertEquals(response.status, 200);
 * assertEquals(response.headers, [["content-type", "application/json"], ["content-length", "11"]]);
 * ```
 *
 * @example A streamed body
 * ```ts
 * import { Response } from "@stellarator/stellarator/web";
 *
 * async function* lines(): AsyncGenerator<string> {
 *   yield "one\n";
 *   yield "two\n";
 * }
 * const response = new Response({ body: lines() });
 * ```
 */
export class Response {
  static {
    // A list of its own for every message (middleware may add or replace pairs in it); the
    // pairs are shared and frozen, and the bridge finds them again by identity.
    encodedHeaders = (response) => (response.#encoded ??= encodeFields(response.headers)).slice();
  }

  /** The status code. */
  readonly status: number;
  /**
   * The header fields as sent, names in lower case, `content-type` and `content-length` included.
   * Frozen, pairs included; responses that give only a content type and a fixed body share one
   * list.
   */
  readonly headers: readonly (readonly [string, string])[];
  /**
   * The body: bytes, or the async iterable of chunks given. A short ASCII text body becomes a view
   * into a buffer shared with other responses (an ArrayBuffer per response would cost more than
   * the rest of the response): read it, or `.slice()` it for a copy of your own; its `.buffer`
   * holds other bytes too.
   */
  readonly body: Uint8Array | AsyncIterable<Uint8Array | string>;
  #encoded: readonly (readonly [Uint8Array, Uint8Array])[] | undefined;

  /**
   * Creates a response.
   *
   * @param options Body, status, headers and content type; all optional.
   * @throws {RangeError} When the status is not a whole number from 200 to 599.
   * @throws {TypeError} When an option's key is unknown (`stauts`), the body is passed in place
   *   of the options (`new Response(stream)`, as Fetch takes it), a header name or value is
   *   invalid, the content type is given twice (or a `content-type` header repeated), a
   *   `content-length` header is repeated, disagrees with the body or comes with a 204, a
   *   `transfer-encoding` header is given (the server frames the body), a 204, 205 or 304
   *   response has a body, the body is a `ReadableStream` a reader already holds, or the body
   *   is of another type (a `Blob` included: stream it).
   */
  constructor(options?: ResponseOptions) {
    if (options !== undefined && (typeof options !== "object" || options === null)) {
      throw new TypeError(
        `Invalid options ${describe(options)}: pass an object, e.g. new Response({ body: ` +
          `${typeof options === "string" ? JSON.stringify(shorten(options)) : '"Hello"'} })`,
      );
    }
    if (options !== undefined) {
      // A misspelt key (`{ stauts: 404 }`) sent a 200 with the defaults. This runs per response:
      // `for...in` and comparisons allocate nothing (measured 5 ns a response, against 15 ns
      // with `Object.keys()` and `includes()`, on some 105 ns).
      let keys = 0;
      for (const key in options) {
        keys++;
        if (key !== "body" && key !== "status" && key !== "headers" && key !== "contentType") {
          refuseBodyAsOptions(options);
          rejectUnknownKeys(options, RESPONSE_OPTION_KEYS, "new Response()");
        }
      }
      if (keys === 0) refuseBodyAsOptions(options);
    }
    const { body = EMPTY, status = 200, headers, contentType } = options ?? {};
    if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
      throw new RangeError(
        `Invalid status ${describe(status)}: use a whole number from 200 to 599`,
      );
    }
    this.status = status;
    let bytes: Uint8Array | undefined;
    if (typeof body === "string") bytes = textBytes(body);
    else if (body instanceof Uint8Array) bytes = body;
    else if (body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) {
      // Binary data of another kind is one step away from a Uint8Array: say which step.
      const kind = (body as unknown) instanceof ArrayBuffer
        ? "an ArrayBuffer"
        : ArrayBuffer.isView(body)
        ? `a ${(body as { constructor?: { name?: string } }).constructor?.name ?? "typed array"}`
        : undefined;
      if ((body as unknown) instanceof Blob) {
        // A Blob (a File, from FormData or a read) was "an object", with no way out named.
        throw new TypeError(
          `Invalid body a ${(body as Blob).constructor.name}: pass { body: blob.stream() }, ` +
            `or new Uint8Array(await blob.arrayBuffer())`,
        );
      }
      throw new TypeError(
        kind === undefined
          ? `Invalid body ${describe(body)}: use a string, a Uint8Array or an async iterable ` +
            `of them`
          : `Invalid body ${kind}: pass a Uint8Array over its bytes, e.g. ` +
            `new Uint8Array(${
              kind === "an ArrayBuffer" ? "buffer" : "view.buffer, view.byteOffset, view.byteLength"
            })`,
      );
    } else if (body instanceof ReadableStream && body.locked) {
      // Read by someone else: its first read here would fail after the head had gone.
      throw lockedStreamError();
    }
    const nullBody = status === 204 || status === 205 || status === 304;
    if (nullBody && (bytes === undefined || bytes.length > 0)) {
      throw new TypeError(`Cannot send a body with status ${status}: leave the body out`);
    }
    if (headers === undefined && bytes !== undefined && !nullBody) {
      // The usual response: a content-type and the length of a fixed body. Its lists are shared
      // with every response of the same type and length (see `commonFields`).
      const type = contentType === undefined ? TEXT_PLAIN : checkedContentType(contentType);
      const common = commonFields(type, bytes.length);
      this.body = bytes;
      this.headers = common.fields;
      this.#encoded = common.encoded;
      return;
    }
    const fields: (readonly [string, string])[] = [];
    let typeGiven: string | undefined;
    let lengthGiven: string | undefined;
    // Most responses give no headers: no iteration, no Object.entries() for them.
    if (headers !== undefined) {
      for (const pair of headerPairs(headers)) {
        const field = checkedField(pair);
        const [name, value] = field;
        if (name === "content-type") {
          // A response has one media type (RFC 9110, section 8.3); both transports sent both
          // fields, and clients pick either.
          if (typeGiven !== undefined) {
            throw new TypeError(
              `Invalid header "content-type: ${logText(value)}" after "content-type: ${
                logText(typeGiven)
              }": ` +
                `give the content type once`,
            );
          }
          typeGiven = value;
        } else if (name === "content-length") {
          if (lengthGiven !== undefined) {
            throw new TypeError(
              `Invalid header "content-length: ${logText(value)}" after "content-length: ` +
                `${logText(lengthGiven)}": give the length once, or leave it out for a fixed body`,
            );
          }
          if (status === 204) {
            throw new TypeError(
              `Invalid header "content-length: ${logText(value)}" for status 204: a 204 response ` +
                `carries no length (RFC 9110, section 8.6); leave the header out`,
            );
          }
          if (!/^[0-9]+$/.test(value)) {
            throw new TypeError(
              `Invalid header "content-length: ${
                logText(value)
              }": use the body's length in bytes, in ` +
                `decimal digits`,
            );
          }
          lengthGiven = value;
        } else if (name === "transfer-encoding") {
          throw new TypeError(
            `Invalid header "transfer-encoding: ${
              logText(value)
            }": the server chooses the framing ` +
              `(a streamed body without a content-length goes out chunked); leave it out`,
          );
        }
        fields.push(field);
      }
    }
    if (contentType !== undefined) {
      if (typeGiven !== undefined) {
        throw new TypeError(
          `Invalid contentType ${describe(contentType)} beside a "content-type" header: give ` +
            `one of them`,
        );
      }
      fields.unshift(["content-type", checkedContentType(contentType)]);
    } else if (typeGiven === undefined && !nullBody) {
      fields.unshift(["content-type", TEXT_PLAIN]);
    }
    if (bytes !== undefined && !nullBody) {
      const length = lengthText(bytes.length);
      if (lengthGiven === undefined) fields.push(["content-length", length]);
      else if (lengthGiven !== length) {
        throw new TypeError(
          `Invalid header "content-length: ${
            logText(lengthGiven)
          }" for a body of ${length} bytes: ` +
            `leave the header out, it is computed`,
        );
      }
    }
    this.body = bytes ?? body as AsyncIterable<Uint8Array | string>;
    // Frozen, as the shared lists are: the fields are read when the response is first sent, so
    // one pushed or changed in between went out past every check above.
    for (let i = 0; i < fields.length; i++) Object.freeze(fields[i]);
    this.headers = Object.freeze(fields);
  }
}

/**
 * The error for a streamed body that a reader already holds: read by someone else, it cannot be
 * sent, and was found out only after the head had gone (a 200, then a connection cut off).
 *
 * @returns The error.
 */
export function lockedStreamError(): TypeError {
  return new TypeError(
    "Invalid body a locked ReadableStream: a reader holds it (getReader(), a for await or a " +
      "pipe); send a stream nobody reads, e.g. one branch of stream.tee()",
  );
}

/**
 * Refuses a body given where the options go, as Fetch's `new Response(body)` takes it: it has no
 * keys of its own for the unknown-key check to refuse (a Uint8Array's are its indices), so a
 * stream, a generator, a Blob or empty bytes went out as an empty 200.
 *
 * @param options What was passed as the options.
 * @throws {TypeError} When it is bytes, a Blob or an async iterable.
 */
function refuseBodyAsOptions(options: object): void {
  const binary = ArrayBuffer.isView(options) || options instanceof ArrayBuffer;
  const blob = options instanceof Blob;
  if (!binary && !blob && !(Symbol.asyncIterator in options)) return;
  // Binary data, Blobs and ReadableStreams by their class (`an ArrayBuffer`, `a Uint8Array`),
  // generators and other iterables by what they are.
  const name = binary || blob || options instanceof ReadableStream
    ? options.constructor.name
    : undefined;
  const kind = name === undefined
    ? "an async iterable"
    : `${/^[AEIO]/.test(name) ? "an" : "a"} ${name}`;
  throw new TypeError(
    blob
      ? `Invalid options ${kind}: pass its stream as the body, e.g. new Response({ body: blob.stream() })`
      : `Invalid options ${kind}: pass it as the body, e.g. new Response({ body })`,
  );
}

/**
 * The pairs of headers given as a record of names and values or as an iterable of pairs (a list,
 * a `Map`, a Fetch `Headers`), as `Response` and `WebSocketRequest.accept()` take them.
 *
 * @param headers The headers as given.
 * @returns What to iterate; each item still needs `checkedField`.
 * @throws {TypeError} When `headers` is neither.
 */
export function headerPairs(headers: unknown): Iterable<unknown> {
  if (typeof headers !== "object" || headers === null) {
    throw new TypeError(
      `Invalid headers ${describe(headers)}: pass an object of names and values or a list ` +
        `of [name, value] pairs`,
    );
  }
  return Symbol.iterator in headers ? headers as Iterable<unknown> : Object.entries(headers);
}

/**
 * Checks one header pair of `headerPairs`.
 *
 * @param pair The pair.
 * @returns A new pair: the name in lower case, the value.
 * @throws {TypeError} When it is no `[name, value]` pair, or its name is no token or its value
 *   not printable ASCII.
 */
export function checkedField(pair: unknown): readonly [string, string] {
  if (!Array.isArray(pair) || pair.length !== 2) {
    throw new TypeError(
      `Invalid header pair ${
        Array.isArray(pair) ? `an array of ${pair.length} items` : describe(pair)
      }: give each header as [name, value]`,
    );
  }
  const [rawName, value] = pair;
  const text = String(rawName);
  // Checked before lower-casing: the Kelvin sign (U+212A) lower-cases to ASCII "k", so
  // "X-\u212Aey" went out as "x-key".
  if (!TOKEN.test(text)) {
    const where = typeof rawName === "string" ? firstRefused(text, TOKEN_CHAR) : "";
    throw new TypeError(
      `Invalid header name ${describe(rawName)}${where}: use letters, digits and ` +
        `!#$%&'*+-.^_\`|~ only`,
    );
  }
  const name = text.toLowerCase();
  if (typeof value !== "string" || !FIELD_VALUE.test(value)) {
    const where = typeof value === "string" ? firstRefused(value, FIELD_CHAR) : "";
    throw new TypeError(
      `Invalid value ${describe(value)}${where} for header "${name}": use a string of ` +
        `printable ASCII (percent-encode other text)`,
    );
  }
  return [name, value];
}

function checkedContentType(contentType: unknown): string {
  if (typeof contentType !== "string" || !FIELD_VALUE.test(contentType)) {
    const where = typeof contentType === "string" ? firstRefused(contentType, FIELD_CHAR) : "";
    throw new TypeError(
      `Invalid contentType ${describe(contentType)}${where}: use a string of printable ASCII`,
    );
  }
  return contentType;
}

/** The header lists of a response that gives only a content type and a fixed body. */
interface CommonFields {
  readonly fields: readonly (readonly [string, string])[];
  readonly encoded: readonly (readonly [Uint8Array, Uint8Array])[];
}

/** Common lists by content type, then by body length. */
const commonFieldsCache = new Map<string, CommonFields[]>();
/** Beyond this many content types the cache starts over. */
const COMMON_TYPES = 64;

/**
 * The frozen header lists `[content-type, content-length]` for a type and a body length, made
 * once and shared by every response that repeats them: most responses of an app do, and a
 * response then allocates no list of its own, while the bridge finds the same encoded pairs as
 * last time by identity and converts nothing.
 */
function commonFields(type: string, length: number): CommonFields {
  if (length >= 4096) return makeCommonFields(type, length);
  let byLength = commonFieldsCache.get(type);
  if (byLength === undefined) {
    if (commonFieldsCache.size >= COMMON_TYPES) commonFieldsCache.clear();
    commonFieldsCache.set(type, byLength = []);
  }
  return byLength[length] ??= makeCommonFields(type, length);
}

function makeCommonFields(type: string, length: number): CommonFields {
  const fields = Object.freeze([
    Object.freeze(["content-type", type] as const),
    Object.freeze(["content-length", lengthText(length)] as const),
  ]);
  // The encoded list stays unfrozen: encodedHeaders() copies it for every message, and V8
  // copies a frozen array on a slow path (measured: slice() 272 ns against 17).
  return { fields, encoded: encodeFields(fields) };
}

/** `String(n)` for the lengths of small bodies, made once. */
const LENGTH_TEXTS: string[] = [];

/**
 * A body length as header text. Small lengths come from a table, so every response of one length
 * carries the same string: the field cache below and the bridge then find it by identity instead
 * of hashing or comparing a new string.
 */
function lengthText(length: number): string {
  if (length >= 4096) return String(length);
  return LENGTH_TEXTS[length] ??= String(length);
}

/** Field strings already encoded: responses repeat the same few names and values. */
const fieldBytesCache = new Map<string, Uint8Array>();
/** Beyond this many entries the cache starts over, so unique values cannot grow it for ever. */
const FIELD_CACHE_ENTRIES = 256;
/** Longer strings (cookies, long links) rarely repeat; they are encoded each time. */
const FIELD_CACHE_LENGTH = 64;

/**
 * A validated header name or value as bytes. Both are ASCII (the constructor checks), so the
 * bytes are the code units. Each `TextEncoder.encode()` call costs an op call and an ArrayBuffer,
 * a third of the web layer's cost per request before this cache; the bytes are only read (the
 * bridge copies them into strings), so one array serves every response that repeats the string.
 */
function fieldBytes(text: string): Uint8Array {
  let bytes = fieldBytesCache.get(text);
  if (bytes !== undefined) return bytes;
  bytes = textBytes(text);
  if (text.length <= FIELD_CACHE_LENGTH) {
    if (fieldBytesCache.size >= FIELD_CACHE_ENTRIES) fieldBytesCache.clear();
    fieldBytesCache.set(text, bytes);
  }
  return bytes;
}

/** The header pairs of a response as bytes, for the ASGI message. */
function encodeFields(
  fields: readonly (readonly [string, string])[],
): (readonly [Uint8Array, Uint8Array])[] {
  const encoded: (readonly [Uint8Array, Uint8Array])[] = [];
  for (let i = 0; i < fields.length; i++) {
    const [name, value] = fields[i]!;
    encoded.push(Object.freeze([fieldBytes(name), fieldBytes(value)] as const));
  }
  return encoded;
}

/**
 * The 408 of the request time limit. It closes the connection (RFC 9110 §15.5.9: the server has
 * stopped waiting for the request, whose body may still be arriving), as Node's own
 * `requestTimeout` does; the bridge reads on what the client still sends for a short while
 * first, so that a client sending its body before it reads gets the 408 (see `drainTiming` in `_asgi/core.ts`).
 */
export const TIMEOUT_RESPONSE: Response = new Response({
  status: STATUS_CODE.RequestTimeout,
  body: "Request time limit exceeded",
  headers: [["connection", "close"]],
});
/** The 404 of an unknown path. */
export const NOT_FOUND_RESPONSE: Response = new Response({
  status: STATUS_CODE.NotFound,
  body: "Not Found",
});
/** The 500 of a failed handler. */
export const SERVER_ERROR_RESPONSE: Response = new Response({
  status: STATUS_CODE.InternalServerError,
  body: "Internal Server Error",
});
/** The 503 of a request that arrives while the app shuts down. */
export const UNAVAILABLE_RESPONSE: Response = new Response({
  status: STATUS_CODE.ServiceUnavailable,
  body: "Service Unavailable",
  headers: [["connection", "close"]],
});
const METHOD_NOT_ALLOWED_BODY = encoder.encode("Method Not Allowed");

/**
 * Sends a response with a fixed body.
 *
 * @param send The request's `send`.
 * @param response The response; its body is bytes.
 * @returns Resolves once sent.
 */
export async function sendFixed(send: Send, response: Response): Promise<void> {
  await send({
    type: "http.response.start",
    status: response.status,
    headers: encodedHeaders(response),
  });
  await send({ type: "http.response.body", body: response.body as Uint8Array, more_body: false });
}

/**
 * Sends the 405 of a path whose routes do not serve the method, with its `Allow` header.
 *
 * @param send The request's `send`.
 * @param allowed The methods the path's routes serve.
 * @returns Resolves once sent.
 */
export async function sendMethodNotAllowed(send: Send, allowed: readonly string[]): Promise<void> {
  if (allowed.includes("GET") && !allowed.includes("HEAD")) allowed = [...allowed, "HEAD"].sort();
  await send({
    type: "http.response.start",
    status: STATUS_CODE.MethodNotAllowed,
    headers: [
      [encoder.encode("content-type"), encoder.encode(TEXT_PLAIN)],
      [encoder.encode("content-length"), encoder.encode(String(METHOD_NOT_ALLOWED_BODY.length))],
      [encoder.encode("allow"), encoder.encode(allowed.join(", "))],
    ],
  });
  await send({ type: "http.response.body", body: METHOD_NOT_ALLOWED_BODY, more_body: false });
}
