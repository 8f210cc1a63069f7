/**
 * The benchmark's handlers on our `App`, served by our `serve()`. `REQUEST_TIME_LIMIT` (seconds)
 * sets `requestTimeLimit`, to measure what the limit costs; without it the App runs without a
 * limit.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * Serves when run as the main module; `bench/profile_app.ts` imports the handlers.
 *
 * @module
 */
import { listenOptions } from "./_listen.ts";
import { serve } from "../../asgi.ts";
import { AsgiRouter, Route } from "../../router.ts";
import { App, type Request, Response, type WebHandler } from "../../web.ts";

async function hello(request: Request): Promise<void> {
  await request.respondWith(new Response({ body: "hello" }));
}

async function helloName(request: Request): Promise<void> {
  await request.respondWith(new Response({ body: `hello ${request.context.name}` }));
}

async function echo(request: Request): Promise<void> {
  await request.respondWith(new Response({ body: await request.bytes() }));
}

/**
 * The benchmark's App.
 *
 * @param requestTimeLimit Seconds, or undefined for no limit.
 * @returns The App.
 */
export function makeApp(requestTimeLimit?: number): App {
  return new App({
    router: new AsgiRouter<WebHandler>({
      routes: [
        new Route<WebHandler>("/hello", { handler: hello }),
        new Route<WebHandler>("/hello/{name}", { handler: helloName }),
        new Route<WebHandler>("/echo", { handler: echo, methods: ["POST"] }),
      ],
    }),
    requestTimeLimit,
    logger: { error: console.error, warn: console.warn, info: () => {}, debug: () => {} },
  });
}

if (import.meta.main) {
  const limit = Deno.env.get("REQUEST_TIME_LIMIT");
  serve(makeApp(limit === undefined ? undefined : Number(limit)), {
    ...listenOptions(),
    shutdownTimeout: 2_000,
  });
}
