/**
 * Tolerant percent-decoding of `scope.path` (`_asgi/percent.ts`): the results of Python's
 * `urllib.parse.unquote`, which ASGI servers use, including for malformed input.
 */
import { assertEquals } from "@std/assert";
import fc from "npm:fast-check@4.10.2";
import { unquote } from "../_asgi/percent.ts";
import { propertyRuns } from "./_property.ts";

Deno.test("unquote() decodes like Python's urllib.parse.unquote", async (t) => {
  // Expected values as Python 3.12 gives them: unquote(s) with errors="replace".
  const cases: [string, string][] = [
    ["/plain/path", "/plain/path"],
    ["/a%2Fb/caf%C3%A9", "/a/b/café"],
    ["/%zz/%E0%A4%A", "/%zz/\ufffd%A"],
    ["%", "%"],
    ["%4", "%4"],
    ["%%41", "%A"],
    ["%e2%82%ac", "€"],
    ["%E2%82", "\ufffd"],
    ["%C3%28", "\ufffd("],
    ["%FF%FE", "\ufffd\ufffd"],
    ["%F0%9F%98%80", "😀"],
    ["%ED%A0%80", "\ufffd\ufffd\ufffd"],
    ["café%20ok", "café ok"],
    ["%C3é", "\ufffdé"],
    ["%20%", " %"],
    ["a+b", "a+b"],
  ];
  for (const [input, expected] of cases) {
    await t.step(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => {
      assertEquals(unquote(input), expected);
    });
  }
});

Deno.test("unquote() undoes encodeURIComponent and never throws", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary" }), (text) => {
      assertEquals(unquote(encodeURIComponent(text)), text);
    }),
    propertyRuns(100),
  );
  // Arbitrary mixes of "%", hex digits and other characters: decoding never throws, and text
  // without "%" comes back unchanged.
  const pieces = fc.constantFrom("%", "A", "f", "9", "z", "é", "/", "%C3", "%A9", "%E0");
  fc.assert(
    fc.property(fc.array(pieces).map((parts) => parts.join("")), (text) => {
      const decoded = unquote(text);
      assertEquals(typeof decoded, "string");
      if (!text.includes("%")) assertEquals(decoded, text);
    }),
    propertyRuns(100),
  );
});
