// Copyright the stellarator authors. MIT license.
/**
 * How client text goes into a log line. It imports nothing, so every layer may use it;
 * `logText` and `logQuoted` are public through `asgi.ts` (and so `web.ts` and `mod.ts`), for
 * applications that write their own access logs.
 *
 * A request path is percent-decoded, so a client chooses every character of it: `%0A` put a
 * forged second line in the log, `%1B[2J` cleared an operator's terminal (CWE-117), and an 8 KB
 * path wrote an 8 KB line per request. Text a client controls (path, method, header values,
 * close reasons, route parameters, and messages built from them) is therefore written through
 * `logText` or `logQuoted` wherever a log line or a logged error message quotes it. Values handed
 * to the application (`scope`, `request.path`) stay as received.
 *
 * The rules are written down once, in `logText`'s documentation (which `deno doc` shows).
 *
 * @module
 */

/**
 * The most characters of client text a log line quotes (before the marker of a cut).
 *
 * @example Text at the bound is kept whole
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { LOG_TEXT_MAX, logText } from "@stellarator/stellarator/asgi";
 *
 * assertEquals(logText("x".repeat(LOG_TEXT_MAX)).length, LOG_TEXT_MAX);
 * ```
 */
export const LOG_TEXT_MAX = 256;

/**
 * Any character the rules above escape. Without the `u` flag a class matches UTF-16 code units,
 * so the surrogate ranges find halves; the lookarounds leave whole pairs (astral characters) be.
 */
const UNSAFE =
  // deno-lint-ignore no-control-regex
  /[\u0000-\u001f\u007f-\u009f"\\\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * `text` rendered for a log line, without quotes. The rules (for `logQuoted` too):
 *
 * - Text made of printable characters only, and no longer than `LOG_TEXT_MAX` (256) UTF-16 code
 *   units, is written as it is: an ordinary path reads as it always did.
 * - C0 controls, DEL and C1 controls are escaped: `\n`, `\r`, `\t` by name, the others as `\xHH`
 *   (`\x1b`, `\x7f`, `\x85`). U+2028 and U+2029 (line breaks to some viewers), the bidi
 *   controls (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069, which reorder what a terminal shows)
 *   and lone surrogate halves (printed as U+FFFD, hiding which) are escaped as `\uHHHH`.
 * - `"` and `\` are escaped (`\"`, `\\`), so a quoted value ends where it seems to, and `\n` in
 *   a line was a newline, never a backslash and an `n`.
 * - Longer text is cut once its rendering reaches `LOG_TEXT_MAX` characters (never inside an
 *   escape or a surrogate pair), and marked with `…` and the length the client sent:
 *   `/aaaa…[8001 chars]`, or for a quoted value `"GET /aaaa…" [8001 chars]`, the marker outside
 *   the quotes so that a client cannot forge it.
 *
 * @example An access log line that a client cannot split or colour
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { logText } from "@stellarator/stellarator/asgi";
 *
 * assertEquals(logText("/users/42"), "/users/42");
 * // scope.path is percent-decoded: "/a%0Afake%1B[2J" arrives as "/a\nfake\x1b[2J".
 * assertEquals(logText("/a\nfake\x1b[2J"), "/a\\nfake\\x1b[2J");
 * assertEquals(logText("/" + "a".repeat(999), 8), "/aaaaaaa…[1000 chars]");
 * ```
 *
 * @param text Text a client controls.
 * @param max The most characters kept before the marker; `LOG_TEXT_MAX` unless told.
 * @returns `text` itself when it is printable and fits; else its escaped, maybe cut, form.
 */
export function logText(text: string, max: number = LOG_TEXT_MAX): string {
  // Nearly every path: one scan, no copy.
  if (text.length <= max && !UNSAFE.test(text)) return text;
  const { shown, cut } = render(text, max);
  return cut ? `${shown}…[${text.length} chars]` : shown;
}

/**
 * `text` in double quotes for a log line, by the rules of {@linkcode logText}; a cut's marker
 * goes outside the quotes.
 *
 * @example A request named in a log line
 * ```ts
 * import { assertEquals } from "@std/assert";
 * import { logQuoted } from "@stellarator/stellarator/asgi";
 *
 * assertEquals(logQuoted("GET /a"), '"GET /a"');
 * assertEquals(logQuoted('GET /"x"'), '"GET /\\"x\\""');
 * assertEquals(logQuoted("GET /" + "a".repeat(99), 6), '"GET /a…" [104 chars]');
 * ```
 *
 * @param text Text a client controls.
 * @param max The most characters kept before the marker; `LOG_TEXT_MAX` unless told.
 * @returns E.g. `"GET /a"`, `"GET /a\nb"`, `"GET /aaa…" [8001 chars]`.
 */
export function logQuoted(text: string, max: number = LOG_TEXT_MAX): string {
  if (text.length <= max && !UNSAFE.test(text)) return `"${text}"`;
  const { shown, cut } = render(text, max);
  return cut ? `"${shown}…" [${text.length} chars]` : `"${shown}"`;
}

const NAMED: Readonly<Record<number, string>> = {
  0x09: "\\t",
  0x0a: "\\n",
  0x0d: "\\r",
  0x22: '\\"',
  0x5c: "\\\\",
};

/** The escaped form of `text`, cut once it reaches `max` characters. */
function render(text: string, max: number): { shown: string; cut: boolean } {
  let shown = "";
  let i = 0;
  for (; i < text.length && shown.length < max; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        shown += text[i]! + text[i + 1]!;
        i++;
      } else shown += `\\u${c.toString(16)}`;
    } else if (c >= 0xdc00 && c <= 0xdfff) shown += `\\u${c.toString(16)}`;
    else if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x22 || c === 0x5c) {
      shown += NAMED[c] ?? `\\x${c.toString(16).padStart(2, "0")}`;
    } else if (
      c === 0x2028 || c === 0x2029 || c === 0x200e || c === 0x200f ||
      (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)
    ) shown += `\\u${c.toString(16)}`;
    else shown += text[i]!;
  }
  return { shown, cut: i < text.length };
}
