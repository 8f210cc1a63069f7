/**
 * Tolerant percent-decoding of `scope.path` (`_asgi/percent.ts`): the results of Python's
 * `urllib.parse.unquote`, which ASGI servers use, including for malformed input.
 */
import { assert, assertEquals } from "@std/assert";
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

// Found probing the largest request heads (2026-11-29, docs/asgi.md "Request heads"): each call
// took a buffer of its own, three bytes a character of the path, so a 64 KiB path of escapes made
// 192 KiB of garbage a request, and a deno server answering a stream of them grew to 177 MiB RSS,
// against 100 MiB since.
Deno.test("unquote() reuses one decoding buffer instead of allocating three bytes a character per call", () => {
  const path = "/" + "%FF".repeat(21_800);
  const expected = "/" + "\ufffd".repeat(21_800);
  const Original = globalThis.Uint8Array;
  let allocated = 0;
  // Counts the bytes of the arrays made with a length, each of which takes a buffer of its own;
  // views of an existing buffer cost none.
  globalThis.Uint8Array = class extends Original {
    constructor(...args: unknown[]) {
      super(...(args as ConstructorParameters<typeof Original>));
      if (typeof args[0] === "number") allocated += this.byteLength;
    }
  } as typeof Uint8Array;
  try {
    for (let i = 0; i < 20; i++) assertEquals(unquote(path), expected);
  } finally {
    globalThis.Uint8Array = Original;
  }
  // At most one buffer of 192 KiB for the twenty calls, where each call took 196,203 bytes.
  assert(allocated <= 3 * 65_536, `${allocated} bytes allocated for 20 decodes`);
});
