// Copyright the stellarator authors. MIT license.
// The ASGI layer's errors that quote a value an application (or, through it, a client) chose: each
// message names the value bounded and escaped, so that a megabyte of it, or a newline in it, can
// neither blow up the log line the message ends in nor forge a second one (house rule: errors
// quote the offending value; client and application text goes through _common/log_text.ts).
// Sweep of every error the library raises, 2026-11-29.
import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import { AsgiProtocolError, createFetchHandler } from "../asgi.ts";
import { declaredLength, headerName } from "../_asgi/fields.ts";
import { unofferedSubprotocol } from "../_asgi/websocket.ts";

const encoder = new TextEncoder();
const HUGE = 100_000;
/** A message quoting a bounded value stays short whatever the value's length. */
const MESSAGE_MAX = 1_000;

type Case = [
  name: string,
  raise: () => unknown,
  errorClass: ErrorConstructor | typeof AsgiProtocolError,
  /** Text the message must hold: the quoted value, bounded and escaped, and the fix. */
  includes: readonly string[],
];

const app = async () => {};

const CASES: readonly Case[] = [
  [
    "headerName() quotes a short bad name escaped, with the fix",
    () => headerName(encoder.encode("x-a\nx-b")),
    AsgiProtocolError,
    [
      'Invalid header name "x-a\\nx-b": byte 0xa is not allowed in a header name; use letters, ' +
      "digits and !#$%&'*+-.^_`|~ only",
    ],
  ],
  [
    "headerName() quotes a huge bad name bounded (regression: JSON.stringify quoted it whole)",
    () => headerName(encoder.encode("x".repeat(HUGE) + "\n")),
    AsgiProtocolError,
    [`"${"x".repeat(256)}…" [${HUGE + 1} chars]: byte 0xa`],
  ],
  [
    "headerName() escapes a quote, so the quoted name ends where it seems to",
    () => headerName(encoder.encode('a"b')),
    AsgiProtocolError,
    ['Invalid header name "a\\"b": byte 0x22'],
  ],
  [
    "declaredLength() quotes a padded second length bounded and escaped",
    () => declaredLength(50, "\t".repeat(HUGE) + "2", "http.response.start"),
    AsgiProtocolError,
    [`Invalid header "content-length: ${"\\t".repeat(128)}…[${HUGE + 1} chars]" in`, "says 50"],
  ],
  [
    "unofferedSubprotocol() quotes what the client offered",
    () => {
      throw unofferedSubprotocol("zz", ["a", "b"]);
    },
    AsgiProtocolError,
    [
      'Invalid "subprotocol" "zz" in "websocket.accept": the client offered "a", "b"; pick one ' +
      "of them or null",
    ],
  ],
  [
    "unofferedSubprotocol() bounds a huge subprotocol and a long list of offers",
    () => {
      throw unofferedSubprotocol(
        "p".repeat(HUGE),
        Array.from({ length: 5000 }, (_, i) => `proto${i}-${"q".repeat(100)}`),
      );
    },
    AsgiProtocolError,
    [
      `"${"p".repeat(64)}…" [${HUGE} chars]`,
      `"proto7-${"q".repeat(57)}…" [107 chars] and 4992 more`,
    ],
  ],
  [
    "createFetchHandler() quotes a huge rootPath bounded (regression: JSON.stringify quoted it whole)",
    () => createFetchHandler(app, { rootPath: "/" + "r".repeat(HUGE) + "/" }),
    RangeError,
    ['Invalid rootPath "/rrr', '…": use "" or a path that starts with "/"'],
  ],
];

Deno.test("ASGI layer errors quote the offending value bounded and escaped, with the fix", async (t) => {
  for (const [name, raise, errorClass, includes] of CASES) {
    await t.step(name, () => {
      const error = assertThrows(raise);
      assertInstanceOf(error, errorClass as ErrorConstructor);
      const { message } = error as Error;
      for (const text of includes) assertStringIncludes(message, text);
      assert(
        message.length < MESSAGE_MAX,
        `${message.length} characters: ${message.slice(0, 300)}`,
      );
      assert(!/[\n\r\t]/.test(message), `a control character: ${JSON.stringify(message)}`);
    });
  }
});

// Newcomer pass (2026-11-29): with none offered, the fix read "pick one of them or null".
Deno.test("unofferedSubprotocol() says none when the client offered none, and to accept with null", () => {
  assertEquals(
    unofferedSubprotocol("chat", []).message,
    'Invalid "subprotocol" "chat" in "websocket.accept": the client offered none; accept with ' +
      "null (no subprotocol)",
  );
  assertStringIncludes(
    unofferedSubprotocol("chat", ["v1"]).message,
    'the client offered "v1"; pick one of them or null',
  );
});

// Newcomer pass (2026-11-29): a text body, the first thing a port of a Python application writes
// ({ body: "Hello" }), was told to "use a Uint8Array" and no more, where a header given as text is
// told to encode it with textBytes().
Deno.test("send() says how to encode a text body given for bytes", async () => {
  let refused: unknown;
  const handler = createFetchHandler(async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    await send({ type: "http.response.start", status: 200 });
    refused = await send({ type: "http.response.body", body: "Hello" as unknown as Uint8Array })
      .catch((error) => error);
  }, { lifespan: "off", logger: { error() {}, warn() {}, info() {} } });
  // The response is cut off: its body fails.
  await (await handler.fetch(new Request("http://localhost/"))).text().catch(() => {});
  assertInstanceOf(refused, AsgiProtocolError);
  assertEquals(
    (refused as AsgiProtocolError).message,
    'Invalid "body" "Hello" in "http.response.body": use a Uint8Array; encode text with ' +
      "textBytes()",
  );
});
