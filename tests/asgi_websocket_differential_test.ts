/**
 * The WebSocket differential: the same application in Python (tests/fixtures/ws_differential/
 * app.py, served by Debian's uvicorn) and in TypeScript (app.ts, served by stellarator on each
 * transport), driven by the same Debian python3-websockets client (client.py). Handshake,
 * subprotocols, accept headers, the scope, text and bytes, close codes both ways, a client that
 * vanishes mid-message, denial, the denial-response extension and the size limit.
 *
 * Every difference from uvicorn is listed in DIFFERENCES with its reason; anything else that
 * differs fails the test. Skipped, saying why, without python3-websockets or uvicorn.
 */
import { assertEquals } from "@std/assert";
import { fileURLToPath as fromFileUrl } from "node:url";
import { serve } from "../asgi.ts";
import { app } from "./fixtures/ws_differential/app.ts";
import { RecordingLogger } from "./fixtures/asgi_harness.ts";
import { PYTHON, pythonHas, startUvicorn } from "./fixtures/uvicorn.ts";

const DIR = new URL("./fixtures/ws_differential/", import.meta.url);
const MAX_SIZE = 1000;

const ready = await pythonHas("websockets, uvicorn");
if (!ready) {
  console.log("asgi_websocket_differential_test: skipped, needs python3-websockets and uvicorn");
}

async function runClient(port: number): Promise<Record<string, unknown>> {
  const output = await new Deno.Command(PYTHON, {
    args: [fromFileUrl(new URL("client.py", DIR)), `ws://127.0.0.1:${port}`],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  if (!output.success) throw new Error(`client.py failed:\n${stderr}`);
  return JSON.parse(new TextDecoder().decode(output.stdout));
}

/** What uvicorn 0.17.6 (Debian 12) saw, for comparison with each of our transports. */
async function uvicornResults(): Promise<Record<string, unknown>> {
  await using uvicorn = await startUvicorn(DIR, ["--ws-max-size", String(MAX_SIZE)]);
  return await runClient(uvicorn.port);
}

/**
 * Where we differ from uvicorn 0.17.6, and why: each entry rewrites uvicorn's result into ours.
 * Printed by the test as the differential's table.
 */
// deno-lint-ignore no-explicit-any
const DIFFERENCES: [string, string, (results: Record<string, any>) => void][] = [
  [
    "scope.asgi.spec_version",
    "2.5 (the current spec) against uvicorn 0.17.6's 2.3",
    (r) => (r.scope.asgi.spec_version = "2.5"),
  ],
  [
    "client close: the app's reason",
    "spec 2.5 adds the client's reason to websocket.disconnect; uvicorn 0.17.6 drops it",
    (r) => (r["client close"].app[0].reason = "client bye"),
  ],
  [
    "denial response",
    "we offer the websocket.http.response extension, so the app's own 401 goes out; uvicorn " +
    "0.17.6 does not offer it, so the same app falls back to a plain close (403)",
    (r) => (r["denial response"] = 401),
  ],
  [
    "message over the size limit: the app's code",
    "the app sees the 1009 the client was sent; uvicorn 0.17.6 reports 1006",
    (r) => (r["message over the size limit"].app[0].disconnect = 1009),
  ],
];

Deno.test({
  name: "serve() matches uvicorn's WebSocket behaviour, python3-websockets as the client",
  ignore: !ready,
  async fn(t) {
    const reference = await uvicornResults();
    for (const [what, why] of DIFFERENCES) console.log(`differs from uvicorn: ${what}: ${why}`);
    for (const transport of ["deno", "node"] as const) {
      await t.step(transport, async () => {
        const expected = structuredClone(reference);
        for (const [, , apply] of DIFFERENCES) apply(expected);
        await using server = serve(app, {
          port: 0,
          transport,
          lifespan: "on",
          maxMessageSize: MAX_SIZE,
          logger: new RecordingLogger(),
          onListen() {},
        });
        const { port } = await server.addr;
        assertEquals(await runClient(port), expected);
      });
    }
  },
});
