/**
 * How the benchmark's `Deno.serve` servers listen: on 127.0.0.1, port from `PORT` (default: any
 * free one), printing `LISTENING <port>` for the harness, and shutting down gracefully on SIGTERM so
 * that `--cpu-prof` can write its profile.
 *
 * @module
 */

/**
 * Serves `handler` with `Deno.serve` as the benchmark harness expects.
 *
 * @param handler The request handler.
 */
export function serveForBench(handler: Deno.ServeHandler<Deno.NetAddr>): void {
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: Number(Deno.env.get("PORT") ?? 0),
    onListen: ({ port }) => console.log(`LISTENING ${port}`),
  }, handler);
  Deno.addSignalListener("SIGTERM", function stop() {
    Deno.removeSignalListener("SIGTERM", stop);
    server.shutdown();
  });
}
