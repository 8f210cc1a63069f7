/**
 * The benchmark's two handlers as a low-level ASGI application built on
 * `AsgiRouter`, served by our `serve()`. It routes with `router.match()`, the
 * exception-free lookup meant for hot paths, and answers lifespan itself.
 *
 * Transport from `TRANSPORT` (`deno`, default, or `node`). Prints
 * `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * @module
 */
import { listenOptions } from "./_listen.ts";
import { AsgiRouter, Route } from "../../router.ts";
import { type AsgiApplication, type HttpScope, type Send, serve, textBytes } from "../../asgi.ts";

type Handler = (context: Record<string, string>, scope: HttpScope, send: Send) => Promise<void>;

const headers: [Uint8Array, Uint8Array][] = [
  [textBytes("content-type"), textBytes("text/plain; charset=utf-8")],
];

async function respond(send: Send, status: number, text: string): Promise<void> {
  await send({ type: "http.response.start", status, headers });
  await send({ type: "http.response.body", body: textBytes(text) });
}

const router = new AsgiRouter<Handler>({
  routes: [
    new Route<Handler>("/hello", {
      handler: (_context, _scope, send) => respond(send, 200, "hello"),
    }),
    new Route<Handler>("/hello/{name}", {
      handler: (context, _scope, send) => respond(send, 200, `hello ${context.name}`),
    }),
  ],
});

const app: AsgiApplication = async (scope, receive, send) => {
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
  if (match === undefined) return respond(send, 404, "Not Found");
  const route = match.routeFor(scope.method);
  if (route === undefined) return respond(send, 405, "Method Not Allowed");
  await route.handler(match.context, scope, send);
};

const transport = Deno.env.get("TRANSPORT") === "node" ? "node" : "deno";
serve(app, {
  ...listenOptions(),
  shutdownTimeout: 2_000,
  transport,
});
