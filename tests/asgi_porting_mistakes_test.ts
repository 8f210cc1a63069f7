/**
 * Mistakes of a port from Python ASGI, or of JavaScript habits, said where they are made.
 *
 * Regression (log floods and porting footguns, task Q2): an application that sent
 * `{ type: "http.response.body", body, moreBody: true }` had its response end with that chunk,
 * with no word of `moreBody` (ASGI keys are snake_case, and the spec has unknown keys ignored);
 * `statusCode` or `status_code` in place of `status` was refused as `Invalid "status" undefined`,
 * and headers given as an object as `Invalid "headers" an object`, neither naming the fix; and an
 * App's `requestTimeLimit: 5000`, meant as milliseconds, was taken as 83 minutes without a word.
 */
import { assertEquals, assertMatch } from "@std/assert";
import { AsgiRouter, Route } from "../router.ts";
import { type AsgiApplication, type SendMessage, textBytes } from "../asgi.ts";
import { App } from "../web.ts";
import { start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { RecordingLogger } from "./fixtures/web_helpers.ts";

/** An application that sends `messages` on every request, and records how each send went. */
function sending(messages: readonly SendMessage[], outcomes: string[]): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    for (const message of messages) {
      try {
        await send(message);
        outcomes.push("sent");
      } catch (error) {
        outcomes.push((error as Error).message);
        return;
      }
    }
  };
}

const START = { type: "http.response.start", status: 200, headers: [] } as const;

for (const transport of TRANSPORTS) {
  Deno.test(`send() warns once per server of "moreBody" where "more_body" is missing, and still ignores it (${transport}; regression)`, async () => {
    const outcomes: string[] = [];
    const chunk = {
      type: "http.response.body",
      body: textBytes("a"),
      moreBody: true,
    } as unknown as SendMessage;
    await using s = await start(
      sending([START, chunk, { type: "http.response.body", body: textBytes("b") }], outcomes),
      transport,
    );
    for (let i = 0; i < 2; i++) {
      const response = await fetch(s.url);
      // Ignored, as the ASGI spec has unknown keys: the response ends with the first chunk.
      assertEquals(await response.text(), "a");
    }
    const warnings = s.logger.lines("warn").filter((line) => line.includes("moreBody"));
    assertEquals(warnings, [
      'Ignored "moreBody" true in "http.response.body": ASGI keys are snake_case, so ' +
      '"more_body" was missing and taken as false, and the response ended with this message; ' +
      "write more_body: true (said once per server)",
    ]);
  });
}

Deno.test('send() names "statusCode" or "status_code" given for "status" (regression)', async (t) => {
  for (const key of ["statusCode", "status_code"]) {
    await t.step(key, async () => {
      const outcomes: string[] = [];
      await using s = await start(
        sending([{ type: "http.response.start", [key]: 201 } as unknown as SendMessage], outcomes),
        "deno",
      );
      const response = await fetch(s.url);
      assertEquals(response.status, 500);
      await response.body?.cancel();
      assertEquals(outcomes, [
        `Invalid "status" undefined in "http.response.start": the key is "status", not "${key}": ` +
        "write status: 201",
      ]);
    });
  }
});

Deno.test("send() shows headers given as an object as byte pairs (regression)", async () => {
  const outcomes: string[] = [];
  await using s = await start(
    sending([
      {
        type: "http.response.start",
        status: 200,
        headers: { "content-type": "text/html" },
      } as unknown as SendMessage,
    ], outcomes),
    "deno",
  );
  const response = await fetch(s.url);
  assertEquals(response.status, 500);
  await response.body?.cancel();
  assertEquals(outcomes, [
    'Invalid "headers" an object in "http.response.start": use an array of [Uint8Array, ' +
    "Uint8Array] pairs, not an object of names and values: e.g. " +
    '[[textBytes("content-type"), textBytes("text/html")]]',
  ]);
});

Deno.test("App warns of a time limit in seconds that reads like milliseconds (regression)", () => {
  const log = new RecordingLogger();
  new App({
    router: new AsgiRouter({ routes: [new Route("/", { handler: () => {} })] }),
    logger: log,
    handleSignals: false,
    requestTimeLimit: 5000,
    shutdownGracePeriod: 3600,
  });
  const warnings = log.lines.filter(({ level }) => level === "warn").map(({ text }) => text);
  assertEquals(warnings.length, 1, warnings.join("\n"));
  assertMatch(
    warnings[0]!,
    /^requestTimeLimit is in seconds: 5000 means 5000 s \(83 min\)\. For 5 seconds write requestTimeLimit: 5 /,
  );
});
