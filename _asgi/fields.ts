// Copyright the stellarator authors. MIT license.
/**
 * The HTTP field and framing rules the bridge checks, for both transports and both directions:
 * header names and values an application sends, statuses, `content-length` (declared and
 * counted), `transfer-encoding` codings, and the token and whitespace rules of RFC 9110 they rest
 * on. Private: not exported from `deno.json`.
 *
 * @module
 */
import { latin1Text } from "./bytes.ts";
import { AsgiProtocolError } from "./errors.ts";
import { describe } from "../_common/describe.ts";
import { logQuoted, logText } from "../_common/log_text.ts";

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
 * 1 for the bytes a Host field's value may hold: those of a registered name (unreserved,
 * percent-escapes, sub-delimiters), of an IP literal (`[`, `]`) and the port's `:` (RFC 9110
 * §7.2, RFC 3986 §3.2.2).
 */
const HOST: Uint8Array = (() => {
  const table = new Uint8Array(256);
  for (let c = 0x30; c <= 0x39; c++) table[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) table[c] = 1;
  for (let c = 0x61; c <= 0x7a; c++) table[c] = 1;
  for (const ch of "-._~%!$&'()*+,;=:[]") table[ch.charCodeAt(0)] = 1;
  return table;
})();

/**
 * The `status` of a response start message, checked: an integer from 200 to 599 (1xx answers are
 * the server's to send, and nothing outside 100-599 is a status).
 *
 * @param status The message's `status`, as the application gave it.
 * @param type The message type, for the error.
 * @returns The status.
 */
export function checkStatus(status: unknown, type: string, message?: object): number {
  if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
    // A port from Python (`status_code`) or from JavaScript habits (`statusCode`) left `status`
    // out: the message names the key that was given instead.
    const twin = status === undefined && message !== undefined
      ? ["statusCode", "status_code"].find((key) => key in message)
      : undefined;
    throw new AsgiProtocolError(
      `Invalid "status" ${describe(status)} in ${JSON.stringify(type)}: ${
        twin === undefined
          ? "use an integer from 200 to 599"
          : `the key is "status", not "${twin}": write status: ${
            describe((message as Record<string, unknown>)[twin])
          }`
      }`,
    );
  }
  return status;
}

/**
 * The error for a message's `headers` that are not iterable. An object of names and values (as
 * `fetch` takes) is the likeliest slip: the message shows its first field as a pair of bytes.
 *
 * @param raw The message's `headers`.
 * @param type The message type.
 * @returns The error to throw.
 */
export function headersError(raw: unknown, type: string): AsgiProtocolError {
  let hint = "";
  if (raw !== null && typeof raw === "object") {
    const first = Object.entries(raw)[0];
    const [name, value] = first !== undefined && typeof first[1] === "string"
      ? [first[0], first[1]]
      : ["content-type", "text/plain"];
    hint = `, not an object of names and values: e.g. [[textBytes(${describe(name)}), textBytes(${
      describe(value)
    })]]`;
  }
  return new AsgiProtocolError(
    `Invalid "headers" ${
      describe(raw)
    } in "${type}": use an array of [Uint8Array, Uint8Array] pairs${hint}`,
  );
}

/**
 * Warns, once per server, of a body message whose `more_body` is missing while a camelCase
 * `moreBody` is there: ASGI keys are snake_case, and the spec has unknown keys ignored, so the
 * body ends with this message as for `more_body: false`, which a port from Python or a JavaScript
 * habit did not mean (the rest of the response was then refused, naming "more_body"). Called only
 * when `more_body` is missing, so a message written right costs nothing more.
 *
 * @param core Where the line goes, and whether it was said already.
 * @param message The message, whose `more_body` is missing.
 * @param type The message type.
 */
export function warnCamelMoreBody(
  core: {
    readonly logLimit: { once(key: string): boolean };
    readonly logger: { warn(...data: unknown[]): void };
  },
  message: object,
  type: string,
): void {
  const camel = (message as { moreBody?: unknown }).moreBody;
  if (camel === undefined || !core.logLimit.once(`moreBody in ${type}`)) return;
  core.logger.warn(
    `Ignored "moreBody" ${describe(camel)} in "${type}": ASGI keys are snake_case, so ` +
      `"more_body" was missing and taken as false, and the response ended with this message; ` +
      `write more_body: ${describe(camel)} (said once per server)`,
  );
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
 * The error for a header of `type` that is not a `[Uint8Array, Uint8Array]` pair. It shows the
 * pair's elements, so `["content-type", "text/plain"]` reads as such and not as "an array" (the
 * message once named no value), and points text to `textBytes()`.
 *
 * @param pair What the application gave as a header.
 * @param type The message type, for the message.
 * @returns The error to throw.
 */
export function headerPairError(pair: unknown, type: string): AsgiProtocolError {
  let shown = describe(pair);
  let hint = "";
  if (Array.isArray(pair)) {
    const items = pair.slice(0, 3).map(describe);
    if (pair.length > 3) items.push(`… ${pair.length} items`);
    shown = `[${items.join(", ")}]`;
    if (pair.some((item) => typeof item === "string")) {
      hint = "; encode text with textBytes()";
    }
  }
  return new AsgiProtocolError(
    `Invalid header ${shown} in "${type}": each header is a [Uint8Array, Uint8Array] pair${hint}`,
  );
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

/**
 * Whether `text` may be a Host field's value: only the bytes of a host and a port (`HOST`), or
 * nothing (RFC 9112 §3.2 has a target without an authority send an empty Host). The rest, a
 * space, `/`, `?`, `#`, `@`, `\`, obs-text and the like, make the request one to refuse with 400
 * (RFC 9112 §3.2): an allow-list that tests a Host's end takes "evil.example#.good.example", and a
 * link built from it leads to evil.example.
 */
export function isHostValue(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0xff || HOST[code] !== 1) return false;
  }
  return true;
}

/** Parses a response's `content-length`; throws `AsgiProtocolError` unless it is a byte count. */
export function contentLength(value: string): number {
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

/**
 * Parses a request's `content-length`; -1 when absent or unusable, `Infinity` for a count of
 * digits past 2^53 - 1. Both parsers take up to 2^64 - 1, and such a length read as none let
 * the application run and read a body that any finite `maxBodySize` refuses (review of
 * 2026-11-29); as `Infinity` it gets its 413 at once, and a body that ends reads as one cut
 * short.
 */
export function parseContentLength(value: string | null | undefined): number {
  if (value === null || value === undefined) return -1;
  const n = Number(value);
  if (Number.isSafeInteger(n) && n >= 0) return n;
  return n > 0 && /^[ \t]*[0-9]+[ \t]*$/.test(value) ? Infinity : -1;
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
export function checkCodings(codings: string[]): void {
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
