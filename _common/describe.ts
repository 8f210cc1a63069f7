// Copyright the stellarator authors. MIT license.
/**
 * How every layer's error messages quote the values they were given, and read the text of an
 * error they caught. Private: not exported from `deno.json`. It imports nothing, so the router,
 * the lowest layer, may use it without gaining a dependency.
 *
 * Bad-argument messages follow one template, `Invalid <what> <value>: <fix>` (with an optional
 * `for <subject>` or `in <message type>` before the colon), where `<value>` is
 * `describe(value)`.
 *
 * @module
 */

/**
 * A short description of a value for an error message: strings quoted, numbers and the like as
 * written, other values by kind.
 *
 * @param value Anything.
 * @returns E.g. `-1`, `"abc"`, `undefined`, `an array`, `a function`, `a Uint8Array`,
 * `an object`.
 */
export function describe(value: unknown): string {
  // Strings alone are quoted, so that the string "200" and the number 200 read differently in a
  // message about a wrong type.
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return `"${visible(shorten(value))}"`;
    case "number":
    case "boolean":
    case "bigint":
    case "undefined":
      return String(value);
    case "function":
      return "a function";
    case "symbol":
      return "a symbol";
    default:
      if (Array.isArray(value)) return "an array";
      if (value instanceof Uint8Array) return "a Uint8Array";
      return "an object";
  }
}

/**
 * C0 controls, DEL, C1 controls and NBSP: a no-break space printed as it is reads as a plain
 * space, hiding why `"5\u00a0"` was refused where `"5 "` would pass. U+2028 and U+2029 too: some
 * log viewers break the line there (client text in log lines: `log_text.ts`). And the bidi
 * controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder what a terminal shows:
 * a pattern holding U+202E was drawn by `toString()` and quoted in errors reversed (router review
 * of 2026-11-29), as `logText()` already escaped them.
 */
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u00a0\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with its control characters written as escapes (`\n`, `\r`, `\t`, `\u0000`), so that
 * a quoted value stays on one line and the character a message complains about can be seen.
 * Backslashes and quotes stay as they are: a quoted regex reads as it was written.
 *
 * @param text The text.
 * @returns `text` itself when it holds no such character.
 */
export function visible(text: string): string {
  return text.replace(
    CONTROL,
    (c) =>
      c === "\n"
        ? "\\n"
        : c === "\r"
        ? "\\r"
        : c === "\t"
        ? "\\t"
        : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * `text`, cut to `max` UTF-16 code units and marked with "…", for quoting a value that may be
 * long; never between the two halves of a surrogate pair (a lone half printed as U+FFFD in the
 * message).
 *
 * @param text The text.
 * @param max The most code units kept; 200 unless told.
 * @returns `text` itself when it fits.
 */
export function shorten(text: string, max = 200): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)}…`;
}

/**
 * The text of something thrown: an Error's message, or the value itself as a string.
 *
 * @param error Anything caught.
 * @returns E.g. `config missing` for `new Error("config missing")`.
 */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
