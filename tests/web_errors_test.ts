// Copyright the stellarator authors. MIT license.
// The web layer's errors that quote a value the application chose: each message names the value
// bounded and escaped, so that a megabyte of it, or a control character in it, can neither blow
// up the log line the message ends in (a handler that fails is logged with its error) nor forge a
// second one. Sweep of every error the library raises, 2026-11-29.
import {
  assert,
  assertInstanceOf,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import { App, type AppHandler, AsgiRouter, Response } from "../web.ts";

const HUGE = 100_000;
const MESSAGE_MAX = 1_000;
const BIG_TYPE = "text/" + "x".repeat(HUGE);

type Case = [name: string, raise: () => unknown, errorClass: ErrorConstructor, includes: string[]];

const CASES: readonly Case[] = [
  [
    "a contentType beside a content-type header, with a control character, escaped",
    () =>
      new Response({
        body: "x",
        contentType: "text/html\n2026-11-29 ERROR forged",
        headers: { "content-type": "text/plain" },
      }),
    TypeError,
    [
      'Invalid contentType "text/html\\n2026-11-29 ERROR forged" beside a "content-type" ' +
      "header: give one of them",
    ],
  ],
  [
    "a huge contentType beside a content-type header, bounded",
    () =>
      new Response({ body: "x", contentType: BIG_TYPE, headers: { "content-type": "text/plain" } }),
    TypeError,
    ['Invalid contentType "text/xxx', '…" beside a "content-type" header'],
  ],
  [
    "two content-type headers, the second huge, bounded",
    () =>
      new Response({ body: "x", headers: [["content-type", "a/b"], ["content-type", BIG_TYPE]] }),
    TypeError,
    [`[${BIG_TYPE.length} chars]" after "content-type: a/b": give the content type once`],
  ],
  [
    "a content-length of huge digits, bounded",
    () => new Response({ body: "x", headers: { "content-length": "9".repeat(HUGE) } }),
    TypeError,
    [`Invalid header "content-length: 999`, `…[${HUGE} chars]" for a body of 1 bytes`],
  ],
  [
    "a content-length that is no number, with a tab and a quote, escaped",
    () => new Response({ body: "x", headers: { "content-length": '1\t"2"' } }),
    TypeError,
    ['Invalid header "content-length: 1\\t\\"2\\"": use the body\'s length in bytes'],
  ],
  [
    "a huge transfer-encoding, bounded",
    () => new Response({ body: "x", headers: { "transfer-encoding": "g".repeat(HUGE) } }),
    TypeError,
    [`…[${HUGE} chars]": the server chooses the framing`],
  ],
];

Deno.test("new Response() quotes a header value it refuses bounded and escaped, with the fix", async (t) => {
  for (const [name, raise, errorClass, includes] of CASES) {
    await t.step(name, () => {
      const error = assertThrows(raise);
      assertInstanceOf(error, errorClass);
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

Deno.test("App.asgi() refuses a scope of another protocol, naming its type and the ones it serves", async (t) => {
  const app = new App({ router: new AsgiRouter<AppHandler>() });
  const rows: [unknown, string][] = [
    [
      "http2",
      'Cannot serve a "http2" scope: an App serves "http", "websocket" and "lifespan" scopes',
    ],
    [
      undefined,
      'Cannot serve a undefined scope: an App serves "http", "websocket" and "lifespan" scopes',
    ],
  ];
  for (const [type, message] of rows) {
    await t.step(String(type), async () => {
      await assertRejects(
        () =>
          app.asgi({ type } as never, () => Promise.resolve({} as never), () => Promise.resolve()),
        TypeError,
        message,
      );
    });
  }
});
