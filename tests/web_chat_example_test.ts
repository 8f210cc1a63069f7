/**
 * examples/chat.ts with Deno's WebSocket client: the page is served, and a message from one
 * socket reaches every connected socket. The same in a real browser: tests/browser/.
 */
import { assertEquals, assertStringIncludes } from "@std/assert";
import { serve } from "../web.ts";
import { createChatApp } from "../examples/chat.ts";
import { runOnTakenPort } from "./fixtures/taken_port.ts";
import { WsClient } from "./fixtures/ws_client.ts";

for (const transport of ["deno", "node"] as const) {
  Deno.test(`examples/chat.ts [${transport}] broadcasts a message to every page`, async () => {
    const app = createChatApp();
    await using server = serve(app, { port: 0, transport, onListen() {} });
    const { port } = await server.addr;
    const page = await fetch(`http://127.0.0.1:${port}/`);
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    assertStringIncludes(await page.text(), "new WebSocket(");
    const alice = await WsClient.open(`ws://127.0.0.1:${port}/chat`);
    const bob = await WsClient.open(`ws://127.0.0.1:${port}/chat`);
    // Both are registered once the first broadcast reaches both.
    while (app.clients.size < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    alice.socket.send("hello from alice");
    assertEquals(await bob.next(), "hello from alice");
    assertEquals(await alice.next(), "hello from alice");
    bob.socket.close();
    await bob.closeEvent();
    alice.socket.send("anyone?");
    assertEquals(await alice.next(), "anyone?");
    alice.socket.close();
    await alice.closeEvent();
  });
}

Deno.test("examples/chat.ts on a taken port exits 1 with the bridge's line, no stack", async () => {
  // Regression (newcomer walk-through, 2026-11-29): `PORT=<taken> deno task example:chat` printed
  // the bridge's clear line, then the error again with a stack of Deno's internals.
  const { code, output, port } = await runOnTakenPort("examples/chat.ts");
  assertEquals(code, 1);
  assertStringIncludes(output, `port ${port} is taken; stop what listens there`);
  assertEquals(/Uncaught|\n\s+at /.test(output), false, output);
});
