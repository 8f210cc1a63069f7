import { assertEquals, assertThrows } from "@std/assert";
import fc from "npm:fast-check@4.10.2";
import { textBytes } from "../asgi.ts";
import { propertyRuns } from "./_property.ts";

const encoder = new TextEncoder();

Deno.test("textBytes() gives what TextEncoder gives, for any text", () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" })),
      (text) => {
        assertEquals(textBytes(text), encoder.encode(text));
      },
    ),
    propertyRuns(2000),
  );
});

Deno.test("textBytes() encodes the edge cases of its shared-buffer path", async (t) => {
  const cases: [string, string][] = [
    ["empty", ""],
    ["ASCII", "hello world"],
    ["non-ASCII after ASCII", "hello wörld"],
    ["a lone surrogate (replaced)", "a\ud800b"],
    ["the longest shared text", "x".repeat(2048)],
    ["one byte longer", "y".repeat(2049)],
    ["longer than a shared buffer", "z".repeat(20_000)],
  ];
  for (const [name, text] of cases) {
    await t.step(name, () => assertEquals(textBytes(text), encoder.encode(text)));
  }
});

Deno.test("textBytes() keeps earlier results intact while the shared buffer fills up", () => {
  const made = Array.from(
    { length: 3000 },
    (_, i) => [`text ${i}`, textBytes(`text ${i}`)] as const,
  );
  for (const [text, bytes] of made) assertEquals(new TextDecoder().decode(bytes), text);
  const copy = made[0]![1].slice();
  assertEquals(copy.buffer.byteLength, copy.byteLength);
});

Deno.test("textBytes() rejects a value that is not a string, with the fix", () => {
  assertThrows(
    () => textBytes(42 as unknown as string),
    TypeError,
    "Invalid text 42: pass textBytes() a string, e.g. String(value)",
  );
});
