/**
 * The baseline: the benchmark's two handlers on bare `Deno.serve`, with the path
 * cut out of `request.url` by hand (cheaper than `new URL()`), so the baseline is
 * as fast as a hand-written server gets.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * @module
 */

/**
 * Answers `GET /hello` with "hello" and `GET /hello/{name}` with "hello <name>".
 *
 * @param request The request.
 * @returns The response.
 */
function handler(request: Request): Response {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const query = url.indexOf("?", start);
  const path = query < 0 ? url.slice(start) : url.slice(start, query);
  if (request.method === "GET") {
    if (path === "/hello") return new Response("hello");
    if (path.startsWith("/hello/") && path.length > 7 && path.indexOf("/", 7) < 0) {
      return new Response(`hello ${path.slice(7)}`);
    }
  }
  return new Response("Not Found", { status: 404 });
}

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: Number(Deno.env.get("PORT") ?? 0),
  onListen: ({ port }) => console.log(`LISTENING ${port}`),
}, handler);
// A graceful exit on SIGTERM lets `--cpu-prof` write its profile.
Deno.addSignalListener("SIGTERM", function stop() {
  Deno.removeSignalListener("SIGTERM", stop);
  server.shutdown();
});
