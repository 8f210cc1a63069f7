/**
 * examples/chat.ts with Deno's WebSocket client: the page is served, and a message from one
 * socket reaches every connected socket. The same in a real browser: tests/browser/.
 */
import { assertEquals, assertStringIncludes } from "@std/assert";
import { serve } from "../web.ts";
import { createChatApp } from "../examples/chat.ts";
import { REPEAT_WINDOW_MS } from "../examples/_signals.ts";
import { runExampleProgram } from "./fixtures/example_program.ts";
import { RawSocket } from "./fixtures/raw_socket.ts";
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

for (const transport of ["deno", "node"] as const) {
  Deno.test(`examples/chat.ts [${transport}] exits at once on a second Ctrl-C while a page holds the shutdown`, async () => {
    // Probe of 2026-11-29 (signals and process exit): a second Ctrl-C did nothing, and a page
    // that did not answer the 1012 held the chat for the 10 s the server waits for its answer.
    await using example = await runExampleProgram("examples/chat.ts", transport);
    const page = await RawSocket.open(example.port, "/chat");
    try {
      example.kill("SIGINT");
      const held = await example.exited(REPEAT_WINDOW_MS + 100);
      assertEquals(held, undefined, "the page holds the shutdown");
      example.kill("SIGINT");
      assertEquals(await example.exited(5000), 130);
      await example.output(/Received SIGINT again: exiting without waiting/, 1000);
    } finally {
      page.close();
    }
  });
}
