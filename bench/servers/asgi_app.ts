/**
 * The benchmark's handlers as a low-level ASGI application built on `AsgiRouter`, served by our
 * `serve()`. It routes with `router.match()`, the exception-free lookup meant for hot paths, and
 * answers lifespan itself. `POST /echo` reads the body through `receive()` and sends it back.
 *
 * Transport from `TRANSPORT` (`deno`, default, or `node`). Prints
 * `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * Serves when run as the main module; `bench/profile_app.ts` imports the handlers.
 *
 * @module
 */
import { listenOptions } from "./_listen.ts";
import { AsgiRouter, Route } from "../../router.ts";
import {
  type AsgiApplication,
  type HttpScope,
  type Receive,
  type Send,
  serve,
  textBytes,
} from "../../asgi.ts";

type Handler = (
  context: Record<string, string>,
  scope: HttpScope,
  receive: Receive,
  send: Send,
) => Promise<void>;

const headers: [Uint8Array, Uint8Array][] = [
  [textBytes("content-type"), textBytes("text/plain; charset=utf-8")],
];

async function respond(send: Send, status: number, body: Uint8Array): Promise<void> {
  await send({ type: "http.response.start", status, headers });
  await send({ type: "http.response.body", body });
}

async function echo(receive: Receive, send: Send): Promise<void> {
  const chunks: Uint8Array[] = [];
  while (true) {
    const message = await receive();
    if (message.type !== "http.request") return;
    chunks.push(message.body);
    if (!message.more_body) break;
  }
  let body = chunks[0]!;
  if (chunks.length > 1) {
    body = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
    let at = 0;
    for (const chunk of chunks) {
      body.set(chunk, at);
      at += chunk.byteLength;
    }
  }
  await respond(send, 200, body);
}

const router = new AsgiRouter<Handler>({
  routes: [
    new Route<Handler>("/hello", {
      handler: (_context, _scope, _receive, send) => respond(send, 200, textBytes("hello")),
    }),
    new Route<Handler>("/hello/{name}", {
      handler: (context, _scope, _receive, send) =>
        respond(send, 200, textBytes(`hello ${context.name}`)),
    }),
    new Route<Handler>("/echo", {
      handler: (_context, _scope, receive, send) => echo(receive, send),
      methods: ["POST"],
    }),
  ],
});

/** The application. */
export const app: AsgiApplication = async (scope, receive, send) => {
  if (scope.type === "lifespan") {
    while (true) {
      const message = await receive();
      if (message.type === "lifespan.startup") await send({ type: "lifespan.startup.complete" });
      if (message.type === "lifespan.shutdown") {
        await send({ type: "lifespan.shutdown.complete" });
        return;
      }
    }
  }
  if (scope.type !== "http") return;
  const match = router.match(scope.path);
  if (match === undefined) return respond(send, 404, textBytes("Not Found"));
  const route = match.routeFor(scope.method);
  if (route === undefined) return respond(send, 405, textBytes("Method Not Allowed"));
  await route.handler(match.context, scope, receive, send);
};

if (import.meta.main) {
  serve(app, {
    ...listenOptions(),
    shutdownTimeout: 2_000,
    transport: Deno.env.get("TRANSPORT") === "node" ? "node" : "deno",
  });
}
