/**
 * The baseline: the benchmark's handlers on bare `Deno.serve`, with the path cut out of
 * `request.url` by hand (cheaper than `new URL()`), so the baseline is as fast as a hand-written
 * server gets.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * Serves when run as the main module; `bench/profile_app.ts` imports the handlers.
 *
 * @module
 */
import { serveForBench } from "./_listen.ts";

/**
 * Answers `GET /hello` with "hello", `GET /hello/{name}` with "hello <name>" and `POST /echo`
 * with the request's body.
 *
 * @param request The request.
 * @returns The response.
 */
export function handler(request: Request): Response | Promise<Response> {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const query = url.indexOf("?", start);
  const path = query < 0 ? url.slice(start) : url.slice(start, query);
  if (request.method === "GET") {
    if (path === "/hello") return new Response("hello");
    if (path.startsWith("/hello/") && path.length > 7 && path.indexOf("/", 7) < 0) {
      return new Response(`hello ${path.slice(7)}`);
    }
  } else if (request.method === "POST" && path === "/echo") {
    return echo(request);
  }
  return new Response("Not Found", { status: 404 });
}

async function echo(request: Request): Promise<Response> {
  return new Response(await request.bytes());
}

if (import.meta.main) serveForBench(handler);
