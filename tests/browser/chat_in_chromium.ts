/**
 * examples/chat.ts in a real browser: headless Chromium (Debian's package), driven over the
 * DevTools protocol with Deno's own WebSocket client. Two pages open the chat, one sends a
 * message through the form, both show it, and a screenshot of the second is saved
 * (`CHAT_SCREENSHOT`, default /tmp/stellarator-chat.png, saved as
 * stellarator-chat-deno.png and stellarator-chat-node.png).
 *
 * Not part of `deno task test` (a browser start costs seconds and CI machines may lack one):
 * run it with `deno task test:browser`. `CHROMIUM` names the binary (default /usr/bin/chromium).
 */
import { assert, assertEquals } from "@std/assert";
import { serve } from "../../web.ts";
import { createChatApp } from "../../examples/chat.ts";

const CHROMIUM = Deno.env.get("CHROMIUM") ?? "/usr/bin/chromium";
const SCREENSHOT = Deno.env.get("CHAT_SCREENSHOT") ?? "/tmp/stellarator-chat.png";

/** A DevTools protocol connection with flat sessions (one per page). */
class Cdp {
  readonly #socket: WebSocket;
  #nextId = 1;
  #pending = new Map<number, PromiseWithResolvers<Record<string, unknown>>>();

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      const pending = this.#pending.get(message.id);
      if (pending === undefined) return;
      this.#pending.delete(message.id);
      if (message.error) pending.reject(new Error(JSON.stringify(message.error)));
      else pending.resolve(message.result);
    };
  }

  static async connect(url: string): Promise<Cdp> {
    const socket = new WebSocket(url);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error(`Cannot connect to ${url}`));
    });
    return new Cdp(socket);
  }

  send(
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
  ): Promise<Record<string, unknown>> {
    const id = this.#nextId++;
    const pending = Promise.withResolvers<Record<string, unknown>>();
    this.#pending.set(id, pending);
    this.#socket.send(JSON.stringify({ id, method, params, sessionId }));
    return pending.promise;
  }

  /** Evaluates an expression in a page and returns its value. */
  async evaluate(sessionId: string, expression: string): Promise<unknown> {
    const result = await this.send(
      "Runtime.evaluate",
      { expression, awaitPromise: true, returnByValue: true },
      sessionId,
    );
    return (result.result as { value?: unknown }).value;
  }

  close(): void {
    this.#socket.close();
  }
}

/** Polls `expression` in a page until it is truthy, for at most `ms` milliseconds. */
async function waitUntil(cdp: Cdp, sessionId: string, expression: string, ms = 10_000) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await cdp.evaluate(sessionId, expression)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`Timed out after ${ms} ms waiting for ${expression}`);
}

/** Starts Chromium with a fresh profile; resolves with the browser's DevTools URL. */
async function launch(profile: string): Promise<{ child: Deno.ChildProcess; url: string }> {
  const child = new Deno.Command(CHROMIUM, {
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      `--user-data-dir=${profile}`,
      "--remote-debugging-port=0",
      "--window-size=800,600",
      "about:blank",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // Chromium prints "DevTools listening on ws://…" on stderr once it is ready.
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const deadline = setTimeout(() => child.kill(), 30_000);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`Chromium exited before listening:\n${text}`);
      text += value;
      const match = text.match(/DevTools listening on (ws:\/\/\S+)/);
      if (match) {
        // Keep draining stderr so Chromium never blocks on a full pipe.
        (async () => {
          try {
            while (!(await reader.read()).done);
          } catch { /* the process ended */ }
        })();
        return { child, url: match[1]! };
      }
    }
  } finally {
    clearTimeout(deadline);
  }
}

for (const transport of ["deno", "node"] as const) {
  Deno.test({
    name:
      `examples/chat.ts [${transport}] works in headless Chromium: two pages exchange a message`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const app = createChatApp();
      await using server = serve(app, { port: 0, transport, onListen() {} });
      const { port } = await server.addr;
      const profile = await Deno.makeTempDir({ prefix: "chat_chromium_" });
      const { child, url } = await launch(profile);
      const cdp = await Cdp.connect(url);
      try {
        const pages: string[] = [];
        for (let i = 0; i < 2; i++) {
          const { targetId } = await cdp.send("Target.createTarget", {
            url: `http://127.0.0.1:${port}/`,
          });
          const { sessionId } = await cdp.send("Target.attachToTarget", {
            targetId,
            flatten: true,
          });
          pages.push(sessionId as string);
        }
        const [alice, bob] = pages as [string, string];
        for (const page of pages) {
          await waitUntil(
            cdp,
            page,
            `document.getElementById("status")?.textContent === "connected"`,
          );
        }
        assertEquals(app.clients.size, 2);
        await cdp.evaluate(
          alice,
          `document.getElementById("text").value = "hello from page one";
         document.getElementById("form").requestSubmit();`,
        );
        const seen =
          `[...document.querySelectorAll("#log li")].map((li) => li.textContent).join("|")`;
        await waitUntil(cdp, bob, `${seen} === "hello from page one"`);
        await waitUntil(cdp, alice, `${seen} === "hello from page one"`);
        const { data } = await cdp.send("Page.captureScreenshot", { format: "png" }, bob);
        const png = Uint8Array.from(atob(data as string), (c) => c.charCodeAt(0));
        assert(png.length > 1000, `screenshot of ${png.length} bytes`);
        const file = SCREENSHOT.replace(/\.png$/, `-${transport}.png`);
        await Deno.writeFile(file, png);
        console.log(`Screenshot: ${file} (${png.length} bytes)`);
      } finally {
        await cdp.send("Browser.close").catch(() => {});
        cdp.close();
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await child.status;
        clearTimeout(timer);
        await Deno.remove(profile, { recursive: true }).catch(() => {});
      }
    },
  });
}
