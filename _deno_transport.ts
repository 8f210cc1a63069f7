/**
 * The `Deno.serve` transport of the ASGI bridge: Fetch `Request` in, Fetch `Response` out. It also
 * backs `createFetchHandler`, so it only uses what any Fetch runtime has, apart from `Deno.serve`
 * itself in `listenDeno`.
 *
 * @module
 */
import type { AsgiServerAddr, FetchInfo, HttpScope } from "./asgi.ts";
import {
  type Core,
  EMPTY,
  HttpCycle,
  latin1Bytes,
  type Listener,
  parseContentLength,
  utf8Bytes,
} from "./_asgi_core.ts";

const HTTP_ASGI = { version: "3.0", spec_version: "2.1" } as const;

/** Feeds a streamed response to Deno one chunk at a time, so `send` feels back-pressure. */
class ChunkSource implements UnderlyingDefaultSource<Uint8Array> {
  controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  #cycle: DenoCycle;
  #waiting: (() => void) | null = null;

  constructor(cycle: DenoCycle) {
    this.#cycle = cycle;
  }

  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.controller = controller;
  }

  pull(): void {
    this.wake();
  }

  cancel(): void {
    this.controller = null;
    this.wake();
    // Deno cancels the body when the client goes away mid-stream: the one reliable signal then.
    this.#cycle.clientGone();
  }

  wait(): Promise<void> {
    return new Promise((resolve) => (this.#waiting = resolve));
  }

  wake(): void {
    const waiting = this.#waiting;
    if (waiting !== null) {
      this.#waiting = null;
      waiting();
    }
  }
}

function erroredStream(reason: unknown): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.error(reason);
    },
  });
}

/** A cycle whose exchange is a Fetch request and the promise of its response. */
class DenoCycle extends HttpCycle {
  readonly response: Promise<Response>;
  #resolve: (response: Response) => void;
  #request: Request;
  #responded = false;
  #reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  #source: ChunkSource | null = null;
  #watching = false;
  #onAbort: (() => void) | null = null;

  constructor(
    core: Core,
    request: Request,
    scope: HttpScope,
    hasBody: boolean,
    expectedLength: number,
  ) {
    super(core, scope, hasBody, expectedLength);
    this.#request = request;
    const { promise, resolve } = Promise.withResolvers<Response>();
    this.response = promise;
    this.#resolve = resolve;
  }

  #respond(response: Response): void {
    this.#responded = true;
    const onAbort = this.#onAbort;
    if (onAbort !== null) {
      // Deno aborts the signal after a successful response too (and warns about listeners that
      // see it): from here on a streamed body's cancel() tells when the client goes away.
      this.#onAbort = null;
      this.#request.signal.removeEventListener("abort", onAbort);
    }
    this.#resolve(response);
  }

  protected override sendWhole(
    status: number,
    headers: [string, string][],
    body: Uint8Array | null,
  ): void {
    this.#respond(new Response(body as Uint8Array<ArrayBuffer> | null, { status, headers }));
  }

  protected override openStream(status: number, headers: [string, string][]): void {
    const source = this.#source = new ChunkSource(this);
    this.#respond(
      new Response(new ReadableStream(source, { highWaterMark: 1 }), { status, headers }),
    );
  }

  protected override writeChunk(chunk: Uint8Array): Promise<void> | undefined {
    const source = this.#source!;
    const controller = source.controller;
    if (controller === null) return;
    controller.enqueue(chunk);
    if (controller.desiredSize! > 0) return;
    return source.wait();
  }

  protected override endStream(last: Uint8Array): void {
    const source = this.#source!;
    const controller = source.controller;
    if (controller === null) return;
    source.controller = null;
    if (last.length > 0) controller.enqueue(last);
    controller.close();
    source.wake();
  }

  protected override abortResponse(
    reason: unknown,
    status: number,
    headers: [string, string][],
  ): void {
    const source = this.#source;
    if (source !== null) {
      const controller = source.controller;
      source.controller = null;
      controller?.error(reason);
      source.wake();
    } else if (!this.#responded) {
      // Fetch cannot close a connection without a response: send the head, then fail the body.
      this.#respond(new Response(erroredStream(reason), { status: status || 500, headers }));
    }
  }

  protected override readChunk(): Promise<Uint8Array | null> {
    const reader = this.#reader ??= this.#request.body!.getReader();
    return reader.read().then((result) => result.done ? null : result.value);
  }

  protected override watchClient(): void {
    if (this.#watching) return;
    this.#watching = true;
    if (this.#responded) return;
    const signal = this.#request.signal;
    if (signal.aborted) return this.clientGone();
    const onAbort = () => this.clientGone();
    this.#onAbort = onAbort;
    signal.addEventListener("abort", onAbort, { once: true });
  }

  protected override closeExchange(): void {
    // The client is gone and nothing was answered: settle the handler's promise all the same.
    if (!this.#responded) this.#respond(new Response(null, { status: 500 }));
  }
}

/**
 * Serves one Fetch request through the core.
 *
 * @param core The shared state.
 * @param request The request.
 * @param info Connection facts, if the host passes them.
 * @param server The listening address, when known.
 * @returns The response, once the application has started one.
 */
export function handleFetch(
  core: Core,
  request: Request,
  info: FetchInfo | undefined,
  server: [string, number] | null,
): Promise<Response> {
  const url = request.url;
  // request.url keeps the target as the client sent it ("..", "%7e" and all); new URL() would not.
  const schemeEnd = url.indexOf(":");
  let pathStart = url.indexOf("/", schemeEnd + 3);
  if (pathStart === -1) pathStart = url.length;
  const queryStart = url.indexOf("?", pathStart);
  const rawPath = queryStart === -1 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
  const [path, rawPathBytes] = core.paths(rawPath === "" ? "/" : rawPath);
  const headers: [Uint8Array, Uint8Array][] = [];
  let expectedLength = -1;
  for (const [name, value] of request.headers) {
    if (name === "content-length") expectedLength = parseContentLength(value);
    headers.push([latin1Bytes(name), latin1Bytes(value)]);
  }
  const remote = info?.remoteAddr;
  const scope: HttpScope = {
    type: "http",
    asgi: { ...HTTP_ASGI },
    http_version: "1.1",
    method: request.method,
    scheme: schemeEnd === 5 ? "https" : "http",
    path,
    raw_path: rawPathBytes,
    query_string: queryStart === -1 ? EMPTY : utf8Bytes(url.slice(queryStart + 1)),
    root_path: core.rootPath,
    headers,
    client: remote === undefined ? null : [remote.hostname, remote.port],
    server: server === null ? null : [server[0], server[1]],
    state: { ...core.lifespan.state },
    extensions: {},
  };
  const cycle = new DenoCycle(core, request, scope, request.body !== null, expectedLength);
  cycle.run();
  return cycle.response;
}

/**
 * Starts `Deno.serve` for the core.
 *
 * @param core The shared state.
 * @param hostname The interface.
 * @param port The port.
 * @returns The listener.
 */
export function listenDeno(core: Core, hostname: string, port: number): Listener {
  let server: [string, number] | null = null;
  const httpServer = Deno.serve({
    hostname,
    port,
    onListen() {},
    // Only errored response streams get here (the handler never throws), and the cycle has
    // logged why already; Deno would print the error a second time.
    onError: () => new Response(null, { status: 500 }),
  }, (request, info) => handleFetch(core, request, info, server));
  const addr: AsgiServerAddr = {
    transport: "tcp",
    hostname: httpServer.addr.hostname,
    port: httpServer.addr.port,
  };
  server = [addr.hostname, addr.port];
  return {
    addr,
    close: () => httpServer.shutdown(),
    // Deno has no forced close; Core.abortAll() has ended every response by the time this runs.
    forceClose() {},
  };
}
