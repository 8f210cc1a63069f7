/**
 * How the benchmark's servers listen: on 127.0.0.1, port from `PORT` (default: any free one),
 * printing `LISTENING <port>` for the harness, and shutting down gracefully on SIGTERM so that
 * `--cpu-prof` can write its profile.
 *
 * @module
 */

/** The listening options every benchmark server shares; fit for `Deno.serve` and our `serve`. */
export interface BenchListenOptions {
  /** Always 127.0.0.1. */
  readonly hostname: string;
  /** From `PORT`, or 0 for any free port. */
  readonly port: number;
  /** Aborted on SIGTERM. */
  readonly signal: AbortSignal;
  /** Prints `LISTENING <port>`. */
  readonly onListen: (addr: { port: number }) => void;
}

/**
 * The options, with a SIGTERM listener behind `signal`.
 *
 * @returns The options.
 */
export function listenOptions(): BenchListenOptions {
  const stop = new AbortController();
  Deno.addSignalListener("SIGTERM", function onTerm() {
    Deno.removeSignalListener("SIGTERM", onTerm);
    stop.abort();
  });
  return {
    hostname: "127.0.0.1",
    port: Number(Deno.env.get("PORT") ?? 0),
    signal: stop.signal,
    onListen: ({ port }) => console.log(`LISTENING ${port}`),
  };
}

/**
 * Serves `handler` with `Deno.serve` as the benchmark harness expects.
 *
 * @param handler The request handler.
 */
export function serveForBench(handler: Deno.ServeHandler<Deno.NetAddr>): void {
  Deno.serve(listenOptions(), handler);
}
