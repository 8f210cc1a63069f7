// Copyright the stellarator authors. MIT license.
// The rules live in _common/log_text.ts's module doc; each row here is one of them.
import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { App, type Request, Response } from "../web.ts";
import { rawRequest, RecordingLogger, startServer } from "./fixtures/web_helpers.ts";
import { TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { handshake } from "./fixtures/ws_client.ts";
import { BOUND_MS, withTimeout as bounded } from "./fixtures/timeout.ts";
import { createApp, withAccessLog } from "../examples/web_app.ts";
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
    // deno-lint-ignore no-control-regex
    if (/[\n\r\x1b\x7f\x85\u2028\u2029]/.test(shown)) {
      throw new Error(`U+${c.toString(16)}: ${shown}`);
    }
  }
});

// ---- Regressions: every class of log line that quotes client text, on a real server ----------

/** A path with a forged second log line, terminal escapes and a quote, percent-encoded. */
const FORGED = "/slow%0A2026-11-29T06:00:00Z%20ERROR%20fake%1B[2J%22";
const FORGED_SHOWN = '/slow\\n2026-11-29T06:00:00Z ERROR fake\\x1b[2J\\"';

/** Fails when a logged line, or the message of a logged error, holds a line break or ESC. */
function assertOneLineEach(logger: RecordingLogger): void {
  for (const line of logger.lines) {
    const texts = [line.text, ...line.values.map((v) => v instanceof Error ? v.message : "")];
    for (const text of texts) {
      // deno-lint-ignore no-control-regex
      if (/[\n\r\x1b\u2028\u2029]/.test(text)) {
        throw new Error(`Unsafe log text: ${JSON.stringify(text)}`);
      }
    }
  }
}

/** An App whose one route, for any path, waits for its signal (the time limit) then returns. */
function waitingApp(logger: RecordingLogger, methods?: string[]): App {
  return new App({
    router: new AsgiRouter({
      routes: [
        new Route("/{p:*}", {
          handler: (request: Request) =>
            new Promise<void>((resolve) =>
              request.signal.addEventListener("abort", () => resolve())
            ),
          methods,
        }),
      ],
    }),
    requestTimeLimit: 0.05,
    logger,
  });
}

// Issue: a %0A path that hit the request time limit wrote a forged second log line (CWE-117).
Deno.test("App's time-limit warning escapes a client's path on either transport", async (t) => {
  for (const transport of TRANSPORTS) {
    await t.step(transport, async () => {
      const logger = new RecordingLogger();
      await using server = await startServer(waitingApp(logger), { transport });
      const response = await withTimeout(rawRequest(server.port, "GET", FORGED));
      assertEquals(response.status, 408);
      assertEquals(logger.at("warn"), [
        `Route "/{p:*}" on "GET ${FORGED_SHOWN}" did not respond within the request time limit ` +
        `of 0.05 s; answered 408`,
      ]);
      assertOneLineEach(logger);
    });
  }
});

// Issue: one request with an 8 KB path wrote an 8 KB log line.
Deno.test("App's time-limit warning cuts a long path, with its length", async () => {
  const logger = new RecordingLogger();
  await using server = await startServer(waitingApp(logger));
  const path = "/" + "a".repeat(7999);
  assertEquals((await withTimeout(rawRequest(server.port, "GET", path))).status, 408);
  const [warning] = logger.at("warn");
  assertStringIncludes(warning!, `"GET ${path.slice(0, LOG_TEXT_MAX - 4)}…" [8004 chars]`);
  assert(warning!.length < 2 * LOG_TEXT_MAX, `a warning of ${warning!.length} characters`);
});

// Issue: an error the App threw at a handler quoted the raw path, and was logged with it.
Deno.test("App's errors that quote a request escape its path", async () => {
  const logger = new RecordingLogger();
  const app = new App({
    router: new AsgiRouter({
      routes: [
        new Route("/{p:*}", {
          handler: async (request: Request) => {
            await request.respondWith(new Response({ body: "once" }));
            await request.respondWith(new Response({ body: "twice" }));
          },
        }),
      ],
    }),
    logger,
  });
  await using server = await startServer(app);
  assertEquals((await withTimeout(rawRequest(server.port, "GET", FORGED))).body, "once");
  await withTimeout(waitFor(() => logger.lines.length > 0));
  const [line] = logger.lines;
  assertEquals(
    line!.text,
    `Route "/{p:*}" on "GET ${FORGED_SHOWN}" failed after its response was sent:`,
  );
  assertStringIncludes((line!.values[0] as Error).message, `"GET ${FORGED_SHOWN}" twice`);
  assertOneLineEach(logger);
});

// Issue: a WebSocket handshake to a %0A path, not accepted in time, forged a log line.
Deno.test("App's WebSocket time-limit warning escapes a client's path", async (t) => {
  for (const transport of TRANSPORTS) {
    await t.step(transport, async () => {
      const logger = new RecordingLogger();
      await using server = await startServer(waitingApp(logger, ["WEBSOCKET"]), { transport });
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
      try {
        await conn.write(new TextEncoder().encode(handshake(FORGED)));
        const buffer = new Uint8Array(1024);
        const n = await withTimeout(conn.read(buffer));
        assertStringIncludes(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), " 408 ");
      } finally {
        conn.close();
      }
      assertEquals(logger.at("warn"), [
        `WebSocket "${FORGED_SHOWN}" was not accepted within the request time limit of 0.05 s; ` +
        `answered 408`,
      ]);
      assertOneLineEach(logger);
    });
  }
});

// Issue: the example's access log and request log wrote a client's path as it came.
Deno.test("examples/web_app.ts logs escape a client's path", async (t) => {
  await t.step("withAccessLog()", async () => {
    const lines: string[] = [];
    const app = withAccessLog(async (_scope, _receive, send) => {
      await send({ type: "http.response.start", status: 200, headers: [] });
      await send({ type: "http.response.body", body: new Uint8Array() });
    }, (line) => lines.push(line));
    const server = await startServer(app);
    try {
      await withTimeout(rawRequest(server.port, "GET", FORGED));
      await withTimeout(rawRequest(server.port, "GET", "/plain/path"));
    } finally {
      await server.server.shutdown();
    }
    assertEquals(lines.map((line) => line.replace(/ [\d.]+ ms$/, "")), [
      `GET ${FORGED_SHOWN} 200`,
      "GET /plain/path 200",
    ]);
  });
  await t.step("the request log of createApp()", async () => {
    const lines: string[] = [];
    const app = createApp({ log: (line) => lines.push(line) });
    await using server = await startServer(app);
    await withTimeout(rawRequest(server.port, "GET", "/info/a%0Ab%E2%80%A8"));
    assertEquals(lines.filter((line) => line.startsWith("GET ")), [
      'GET /info/a\\nb\\u2028 context {"user":"a\\nb\\u2028"}',
    ]);
  });
});

/** `promise`, failing the test after `BOUND_MS`. */
function withTimeout<T>(promise: Promise<T>): Promise<T> {
  return bounded(promise, BOUND_MS, "the server's answer");
}

/** Resolves once `ready()` holds, checking at each macrotask turn (bounded by the caller). */
async function waitFor(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 0));
}
