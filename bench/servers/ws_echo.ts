/**
 * The WebSocket load test's server: an ASGI echo application on the bridge, transport from
 * `TRANSPORT` (`deno` or `node`). Prints `LISTENING <port>`; SIGTERM shuts it down. `GET /stats`
 * answers the heap after a full GC (when run with `--v8-flags=--expose-gc`) and the number of
 * echo applications still running, so the load test can tell garbage from a leak.
 *
 * @module
 */
import { type AsgiApplication, serve } from "../../asgi.ts";
import { listenOptions } from "./_listen.ts";

let active = 0;

const echo: AsgiApplication = async (scope, receive, send) => {
  if (scope.type === "http") {
    (globalThis as { gc?: () => void }).gc?.();
    const memory = Deno.memoryUsage();
    const body = JSON.stringify({ heapUsed: memory.heapUsed, rss: memory.rss, active });
    await send({ type: "http.response.start", status: 200 });
    return await send({ type: "http.response.body", body: new TextEncoder().encode(body) });
  }
  if (scope.type !== "websocket") return;
  active++;
  try {
    await receive();
    await send({ type: "websocket.accept" });
    for (;;) {
      const message = await receive();
      if (message.type !== "websocket.receive") return;
      await send(
        message.text !== null
          ? { type: "websocket.send", text: message.text }
          : { type: "websocket.send", bytes: message.bytes },
      );
    }
  } finally {
    active--;
  }
};

const transport = Deno.env.get("TRANSPORT") === "node" ? "node" : "deno";
serve(echo, { ...listenOptions(), transport, lifespan: "off" });
