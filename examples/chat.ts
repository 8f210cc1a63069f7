/**
 * A small chat on the web layer, run by `deno task example:chat`: `GET /` serves one HTML page
 * with a few lines of JavaScript, and the WebSocket route `/chat` broadcasts every message it
 * receives to every connected page. Open http://127.0.0.1:8000/ in two browser windows.
 *
 * Environment: `PORT` (default 8000), `TRANSPORT` (`deno`, the default, or `node`). Ctrl-C
 * (SIGINT) or SIGTERM shuts down gracefully: open pages see close code 1012 and reconnect. A
 * second one exits at once.
 *
 * @module
 */
import {
  App,
  type AppHandler,
  AsgiRouter,
  type AsgiServer,
  type Request,
  Response,
  Route,
  serve,
  type SocketHandler,
  type WebHandler,
  type WebSocketRequest,
} from "../web.ts";
import { listenSettings } from "./_env.ts";
import { stopOnSignals } from "./_signals.ts";

/** The app's attributes: the sockets of the open pages. */
export type ChatAttributes = {
  clients: Set<WebSocketRequest<App<ChatAttributes> & ChatAttributes>>;
};

/** The page: a list of messages, a form, and the script that connects the two to `/chat`. */
export const PAGE = `<!doctype html>
<html lang="en">
<meta charset="utf-8">
<title>stellarator chat</title>
<style>body { font: 16px system-ui; margin: 2em } #log { min-height: 8em }</style>
<h1>stellarator chat</h1>
<ul id="log"></ul>
<form id="form"><input id="text" autocomplete="off" autofocus> <button>Send</button></form>
<p id="status">connecting…</p>
<script>
  const log = document.getElementById("log");
  const status = document.getElementById("status");
  let socket;
  function connect() {
    socket = new WebSocket(\`\${location.protocol === "https:" ? "wss" : "ws"}://\${location.host}/chat\`);
    socket.onopen = () => (status.textContent = "connected");
    socket.onmessage = (event) => log.append(Object.assign(document.createElement("li"), { textContent: event.data }));
    socket.onclose = (event) => {
      status.textContent = \`disconnected (\${event.code}), reconnecting…\`;
      setTimeout(connect, 1000);
    };
  }
  document.getElementById("form").onsubmit = (event) => {
    event.preventDefault();
    const input = document.getElementById("text");
    if (input.value) socket.send(input.value);
    input.value = "";
  };
  connect();
</script>
</html>
`;

/** The largest message the chat relays, in bytes. */
const MAX_MESSAGE = 4096;

const page: WebHandler<ChatAttributes> = async (request: Request<ChatAttributes>) => {
  await request.respondWith(new Response({ body: PAGE, contentType: "text/html; charset=utf-8" }));
};

const chat: SocketHandler<ChatAttributes> = async (socket) => {
  await socket.accept();
  const clients = socket.app.clients;
  clients.add(socket);
  try {
    for await (const message of socket) {
      if (typeof message !== "string" || message.length > MAX_MESSAGE) continue;
      // Every page gets it, the sender's included; a closed socket drops it silently.
      await Promise.all([...clients].map((client) => client.send(message)));
    }
  } finally {
    clients.delete(socket);
  }
};

/**
 * Builds the chat app.
 *
 * @returns The app, with an empty set of clients.
 */
export function createChatApp(): App<ChatAttributes> & ChatAttributes {
  // An App's attributes are typed on the instance only where user code reaches it
  // (request.app, socket.app); the one place that builds it says what it holds.
  return new App<ChatAttributes>({
    router: new AsgiRouter<AppHandler<ChatAttributes>>({
      routes: [
        new Route("/", { handler: page }),
        new Route("/chat", { handler: chat, methods: ["WEBSOCKET"] }),
      ],
    }),
    requestTimeLimit: 5,
    attributes: { clients: new Set() },
  }) as App<ChatAttributes> & ChatAttributes;
}

/**
 * Serves the chat on 127.0.0.1 until SIGINT or SIGTERM (a second one exits at once).
 *
 * @param env Reads `PORT` and `TRANSPORT`.
 * @returns The server.
 * @throws {RangeError} When `PORT` or `TRANSPORT` is invalid.
 */
export function main(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): AsgiServer {
  const { port, transport } = listenSettings(env);
  const controller = new AbortController();
  const server = serve(createChatApp(), {
    port,
    transport,
    signal: controller.signal,
    maxMessageSize: 64 * 1024,
    onListen: ({ hostname, port }) =>
      console.log(`Chat on http://${hostname}:${port}/ (transport: ${transport})`),
  });
  // The first SIGINT or SIGTERM stops the server gracefully; a second one exits at once.
  server.finished.finally(stopOnSignals(() => controller.abort()));
  return server;
}

if (import.meta.main) {
  // Exit as soon as the server has stopped, while the signal listeners are still there: left to
  // wind down on its own, the process had a moment without them in which a second SIGINT ended it
  // with 130 instead of 0.
  main().finished.then(() => Deno.exit(0), (error) => {
    // The bridge has logged what went wrong and how to fix it (a taken port, say): one line here.
    console.error(`Stopped with an error: ${error instanceof Error ? error.message : error}`);
    Deno.exit(1);
  });
}
