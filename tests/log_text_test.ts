// Copyright the stellarator authors. MIT license.
// The rules live in _common/log_text.ts's module doc; each row here is one of them.
import { assertEquals } from "@std/assert";
import { LOG_TEXT_MAX, logQuoted, logText } from "../_common/log_text.ts";

const LONG = "/" + "a".repeat(8000);

const TABLE: readonly [name: string, input: string, text: string, quoted: string][] = [
  ["an ordinary path as it is", "/users/42?x=1", "/users/42?x=1", '"/users/42?x=1"'],
  ["a space as it is", "GET /a b", "GET /a b", '"GET /a b"'],
  ["non-ASCII letters as they are", "/café/日本", "/café/日本", '"/café/日本"'],
  ["an astral character as it is", "/😀", "/😀", '"/😀"'],
  ["a newline escaped", "/a\n2026 ERROR x", "/a\\n2026 ERROR x", '"/a\\n2026 ERROR x"'],
  ["a carriage return escaped", "/a\rb", "/a\\rb", '"/a\\rb"'],
  ["a tab escaped", "/a\tb", "/a\\tb", '"/a\\tb"'],
  ["NUL escaped", "/a\0b", "/a\\x00b", '"/a\\x00b"'],
  ["ESC escaped", "/\x1b[2J", "/\\x1b[2J", '"/\\x1b[2J"'],
  ["DEL escaped", "/\x7f", "/\\x7f", '"/\\x7f"'],
  ["C1 controls escaped", "/\x85\x9b\x80", "/\\x85\\x9b\\x80", '"/\\x85\\x9b\\x80"'],
  ["NBSP as it is (printable)", "/a\xa0", "/a\xa0", '"/a\xa0"'],
  ["U+2028 and U+2029 escaped", "/a\u2028b\u2029", "/a\\u2028b\\u2029", '"/a\\u2028b\\u2029"'],
  [
    "bidi controls escaped",
    "/\u202etxt.exe\u2066",
    "/\\u202etxt.exe\\u2066",
    '"/\\u202etxt.exe\\u2066"',
  ],
  ["a quote escaped", '/a" b="c', '/a\\" b=\\"c', '"/a\\" b=\\"c"'],
  ["a backslash escaped", "/a\\nb", "/a\\\\nb", '"/a\\\\nb"'],
  ["a lone high surrogate escaped", "/a\ud800b", "/a\\ud800b", '"/a\\ud800b"'],
  ["a lone low surrogate escaped", "/a\udc00", "/a\\udc00", '"/a\\udc00"'],
  ["a high surrogate at the end escaped", "/\ud83d", "/\\ud83d", '"/\\ud83d"'],
  ["reversed halves both escaped", "/\ude00\ud83d", "/\\ude00\\ud83d", '"/\\ude00\\ud83d"'],
  [
    "long text cut, with the length sent",
    LONG,
    `${LONG.slice(0, LOG_TEXT_MAX)}…[8001 chars]`,
    `"${LONG.slice(0, LOG_TEXT_MAX)}…" [8001 chars]`,
  ],
  ["text of exactly the bound as it is", "b".repeat(256), "b".repeat(256), `"${"b".repeat(256)}"`],
];

Deno.test("logText() and logQuoted() render client text for a log line", async (t) => {
  for (const [name, input, text, quoted] of TABLE) {
    await t.step(name, () => {
      assertEquals(logText(input), text);
      assertEquals(logQuoted(input), quoted);
    });
  }
});

Deno.test("logText() bounds the rendering of text that is all escapes", () => {
  const text = "\n".repeat(5000);
  const shown = logText(text);
  assertEquals(shown, `${"\\n".repeat(128)}…[5000 chars]`);
});

Deno.test("logText() never cuts between the halves of a surrogate pair", () => {
  const shown = logText("a".repeat(255) + "😀".repeat(10));
  assertEquals(shown, `${"a".repeat(255)}😀…[275 chars]`);
});

Deno.test("logText() keeps a line: no rendering holds a line break or ESC", () => {
  for (let c = 0; c < 0x10000; c++) {
    const shown = logText(`/${String.fromCharCode(c)}`);
    if (/[\n\r\x1b\x7f\x85\u2028\u2029]/.test(shown)) {
      throw new Error(`U+${c.toString(16)}: ${shown}`);
    }
  }
});
