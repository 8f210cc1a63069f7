/**
 * The WebSocket frame fuzzer (tests/fixtures/ws_fuzz/, run by `tools/ws_fuzz.ts` against both
 * transports and uvicorn) as tests: a property over valid fragmented sequences, a fixed-seed run
 * of hostile ones with the invariants every server must keep, and the defects the fuzzer found,
 * each with raw frames.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import fc from "npm:fast-check@4.10.2";
import { app } from "./fixtures/ws_fuzz/app.ts";
import {
  CaseGenerator,
  type Frame,
  type FuzzCase,
  play,
  WAIT_MS,
} from "./fixtures/ws_fuzz/frames.ts";
import { start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { propertyRuns } from "./_property.ts";

const MAX_SIZE = 256;
const utf8 = new TextEncoder();

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function frame(opcode: number, payload: Uint8Array, fin = true): Frame {
  return { fin, rsv: 0, opcode, masked: true, payload };
}

/** A message in fragments cut at `cuts` (byte offsets: mid code point, empty fragments). */
function fragments(opcode: number, payload: Uint8Array, cuts: number[]): Frame[] {
  const points = [0, ...cuts.map((cut) => cut % (payload.length + 1)).sort((a, b) => a - b)];
  points.push(payload.length);
  const frames: Frame[] = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const fin = i + 2 === points.length;
    frames.push(frame(i === 0 ? opcode : 0, payload.subarray(points[i], points[i + 1]), fin));
  }
  return frames;
}

let ids = 0;

for (const transport of TRANSPORTS) {
  Deno.test({
    name:
      `serve() (${transport}) delivers valid fragmented messages as their concatenation, pings between`,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      await using server = await start(app, transport, { maxMessageSize: MAX_SIZE });
      const message = fc.record({
        data: fc.oneof(
          fc.string({ unit: "grapheme", maxLength: 40 }),
          fc.uint8Array({ maxLength: MAX_SIZE }),
        ),
        cuts: fc.array(fc.nat(), { maxLength: 5 }),
        ping: fc.option(fc.uint8Array({ maxLength: 125 }), { nil: undefined }),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 4 }), async (messages) => {
          const frames: Frame[] = [];
          const expected: [string, string][] = [];
          for (const { data, cuts, ping } of messages) {
            const isText = typeof data === "string";
            const payload = isText ? utf8.encode(data) : data;
            if (payload.length > MAX_SIZE) continue;
            const parts = fragments(isText ? 1 : 2, payload, cuts);
            if (ping !== undefined) parts.splice(1, 0, frame(9, ping));
            frames.push(...parts);
            expected.push(isText ? ["t", data] : ["b", hex(data)]);
          }
          const fuzzCase: FuzzCase = { kinds: [], frames, split: false, end: "close", expected };
          const outcome = await play(server.port, `p${ids++}`, fuzzCase);
          assertEquals(outcome.app, { m: expected, d: 1000 });
          // Echoes are not compared: the client's close may overtake the application's reply.
          assertEquals(outcome.close, 1000);
        }),
        propertyRuns(40),
      );
    },
  });
}

/**
 * What every transport keeps whatever a client sends: the connection closes (a close frame may
 * be missing on deno), the application hears of it once, no message over the limit reaches it,
 * and a sequence of valid frames arrives whole. Seed 20261128 of the generator, 80 sequences.
 */
for (const transport of TRANSPORTS) {
  Deno.test({
    name: `serve() (${transport}) keeps its invariants under random hostile frame sequences`,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      await using server = await start(app, transport, { maxMessageSize: MAX_SIZE });
      const generator = new CaseGenerator(20261128, MAX_SIZE);
      for (let i = 0; i < 80; i++) {
        const fuzzCase = generator.next(0.6);
        // A declared length with too little data behind it waits on deno: no close to wait for.
        const outcome = await play(server.port, `h${i}`, fuzzCase);
        const what = `case ${i} [${fuzzCase.kinds}]: ${JSON.stringify(outcome).slice(0, 300)}`;
        const seen = outcome.app;
        if (seen === null) throw new Error(`the application never saw the connection: ${what}`);
        assert(seen.d !== null, `no disconnect: ${what}`);
        for (const [kind, data] of seen.m) {
          const size = kind === "t" ? utf8.encode(data).length : data.length / 2;
          assert(size <= MAX_SIZE, `a message over the limit got through: ${what}`);
        }
        if (fuzzCase.expected !== null) {
          assertEquals(seen, { m: fuzzCase.expected, d: 1000 }, what);
        }
        if (fuzzCase.end === "close") assert(outcome.eof, `open after ${WAIT_MS} ms: ${what}`);
      }
    },
  });
}

// Found by tools/ws_fuzz.ts (seed 3, "msb64"): `ws` closed with 1009, but the bridge only knew
// its maxPayload error, so the application heard 1006 (connection lost) and nothing was logged.
Deno.test({
  name:
    "serve() (node) reports a frame whose 64-bit length is past 2^53 as a message over maxMessageSize (1009)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using server = await start(app, "node", { maxMessageSize: MAX_SIZE });
    for (const declared of [1n << 63n, (1n << 53n) + 1n]) {
      const fuzzCase: FuzzCase = {
        kinds: ["msb64"],
        frames: [{ ...frame(2, new Uint8Array(8)), form: 64, declared }],
        split: false,
        end: "close",
        expected: null,
      };
      const outcome = await play(server.port, `msb-${declared}`, fuzzCase);
      assertEquals([outcome.close, outcome.app], [1009, { m: [], d: 1009 }]);
    }
    const warnings = server.logger.lines("warn");
    assertEquals(warnings.length, 2);
    assertMatch(warnings[0]!, /exceeds maxMessageSize 256: closed with 1009/);
  },
});
