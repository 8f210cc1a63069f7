/**
 * The slow-leak probe's server: an ASGI application or an `App`, behind `proxyHeaders()`, served
 * by `serve()`, with a private `/_probe/*` route that reads the process from inside (heap after
 * GC, RSS, fds, timers, abort listeners) and writes heap snapshots. Started by `leak_probe.ts`.
 *
 * Environment: `APP` (`asgi` or `app`), `TRANSPORT` (`deno` or `node`), `PORT` (0: any free one),
 * `MAX_BODY_SIZE` (bytes; the bridge's default when unset), `REQUEST_TIME_LIMIT` (seconds, App
 * only, default 0.2). `/_probe/stats` answers the readings as JSON; `/_probe/snapshot?path=`
 * writes a heap snapshot there. Listens on 127.0.0.1 only.
 *
 * Run with `--v8-flags=--expose-gc`: the heap is read after a full GC.
 *
 * @module
 */
import v8 from "node:v8";
import { countingLogger, currentStats, envNumber, exitOnSigterm } from "./_server_common.ts";
import {
  type AsgiApplication,
  proxyHeaders,
  type Receive,
  type Send,
  serve,
  textBytes,
} from "../../asgi.ts";
import { AsgiRouter, Route } from "../../router.ts";
import { App, type AppHandler, type Request, Response, type WebSocketRequest } from "../../web.ts";

// Listeners on AbortSignals, counted per signal: a long-lived signal (the App's shutdown signal)
// that gains a listener per request and never loses it would show here long before in the heap.
const listeners = new WeakMap<AbortSignal, number>();
const signals = new Set<WeakRef<AbortSignal>>();
const realAdd = EventTarget.prototype.addEventListener;
const realRemove = EventTarget.prototype.removeEventListener;
EventTarget.prototype.addEventListener = function (this: EventTarget, type, listener, options) {
  if (this instanceof AbortSignal && type === "abort" && listener !== null) {
    const count = listeners.get(this);
    if (count === undefined) signals.add(new WeakRef(this));
    // Once listeners go when the signal aborts, and an aborted signal is not counted below.
    listeners.set(this, (count ?? 0) + 1);
  }
  return realAdd.call(this, type, listener, options);
};
EventTarget.prototype.removeEventListener = function (this: EventTarget, type, listener, options) {
  if (this instanceof AbortSignal && type === "abort" && listener !== null) {
    const count = listeners.get(this);
    if (count !== undefined && count > 0) listeners.set(this, count - 1);
  }
  return realRemove.call(this, type, listener, options);
};

/** Live signals not yet aborted that hold listeners: how many, and the most on one. */
function abortListeners(): { signals: number; listeners: number; most: number } {
  let live = 0;
  let total = 0;
  let most = 0;
  for (const ref of signals) {
    const signal = ref.deref();
    if (signal === undefined) {
      signals.delete(ref);
      continue;
    }
    const count = listeners.get(signal) ?? 0;
    if (signal.aborted || count === 0) continue;
    live++;
    total += count;
    most = Math.max(most, count);
  }
  return { signals: live, listeners: total, most };
}

function fdCount(): number {
  let n = 0;
  for (const _ of Deno.readDirSync("/proc/self/fd")) n++;
  return n;
}

/** What `/_probe/stats` answers. */
function probeStats(): string {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  // Counted before the heap is read: it drops the references to signals collected since the last
  // reading, which would otherwise count in the heap (one per request that watched its signal).
  const abort = abortListeners();
  gc?.();
  const stats = currentStats();
  const memory = Deno.memoryUsage();
  return JSON.stringify({
    heapUsed: stats.heapUsed,
    heapTotal: memory.heapTotal,
    external: memory.external,
    rss: memory.rss,
    fds: fdCount(),
    timers: stats.timers,
    errors: stats.errors,
    warnings: stats.warnings,
    samples: stats.samples,
    tasks: stats.tasks,
    registered: stats.registered,
    abort,
  });
}

/** What `/_probe/snapshot?path=` does: a heap snapshot, after a GC. */
function snapshot(query: URLSearchParams): string {
  (globalThis as { gc?: () => void }).gc?.();
  return v8.writeHeapSnapshot(query.get("path") ?? undefined);
}

function probe(path: string, query: URLSearchParams): string {
  return path === "/_probe/snapshot" ? snapshot(query) : probeStats();
}

let served = 0;

/** Response headers whose values differ on every response. */
function distinctHeaders(path: string): [string, string][] {
  served++;
  return [
    ["x-request", String(served)],
    ["etag", `"${served.toString(36)}-${path.length}"`],
    ["x-path", encodeURIComponent(path).slice(0, 60)],
    ["set-cookie", `s=${crypto.randomUUID()}; Path=/`],
  ];
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// --- The ASGI application -----------------------------------------------------------------

const decoder = new TextDecoder();
const KIB = new Uint8Array(1024).fill(0x61);

function encoded(headers: [string, string][]): [Uint8Array, Uint8Array][] {
  return headers.map(([name, value]) => [textBytes(name), textBytes(value)]);
}

async function reply(send: Send, status: number, text: string, path: string): Promise<void> {
  await send({ type: "http.response.start", status, headers: encoded(distinctHeaders(path)) });
  await send({ type: "http.response.body", body: textBytes(text) });
}

async function bodyLength(receive: Receive): Promise<number | undefined> {
  let length = 0;
  for (;;) {
    const message = await receive();
    if (message.type !== "http.request") return undefined;
    length += message.body.length;
    if (!message.more_body) return length;
  }
}

const asgiApp: AsgiApplication = async (scope, receive, send) => {
  if (scope.type === "lifespan") {
    for (;;) {
      const message = await receive();
      if (message.type === "lifespan.startup") await send({ type: "lifespan.startup.complete" });
      else return await send({ type: "lifespan.shutdown.complete" });
    }
  }
  if (scope.type === "websocket") {
    if ((await receive()).type !== "websocket.connect") return;
    await send({ type: "websocket.accept" });
    for (;;) {
      const message = await receive();
      if (message.type !== "websocket.receive") return;
      await send(
        message.bytes != null
          ? { type: "websocket.send", bytes: message.bytes }
          : { type: "websocket.send", text: message.text ?? "" },
      );
    }
  }
  if (scope.type !== "http") return;
  const query = new URLSearchParams(decoder.decode(scope.query_string));
  const path = scope.path;
  if (path.startsWith("/_probe/")) return await reply(send, 200, probe(path, query), path);
  if (path.startsWith("/p/")) return await reply(send, 200, `client ${scope.client?.[0]}`, path);
  if (path === "/echo") {
    const length = await bodyLength(receive);
    if (length !== undefined) await reply(send, 200, String(length), path);
    return;
  }
  if (path === "/stream") {
    const n = Number(query.get("n") ?? 8);
    await send({
      type: "http.response.start",
      status: 200,
      headers: encoded(distinctHeaders(path)),
    });
    for (let i = 0; i < n; i++) {
      await send({ type: "http.response.body", body: KIB, more_body: true });
      await sleep(2);
    }
    return await send({ type: "http.response.body" });
  }
  if (path === "/slow") {
    await bodyLength(receive);
    const disconnected = receive().then(() => true);
    const done = await Promise.race([sleep(Number(query.get("ms") ?? 100)), disconnected]);
    if (done !== true) await reply(send, 200, "slow", path);
    return;
  }
  await reply(send, 404, "Not Found", path);
};

// --- The App ------------------------------------------------------------------------------

function answer(request: Request, body: string): Promise<void> {
  return request.respondWith(new Response({ body, headers: distinctHeaders(request.path) }));
}

function queryOf(request: Request): URLSearchParams {
  return new URLSearchParams(decoder.decode(request.scope.query_string));
}

const routes: Route<AppHandler>[] = [
  new Route("/p/{a}/{b}", {
    handler: (request: Request) => answer(request, `client ${request.scope.client?.[0]}`),
  }),
  new Route("/p/{rest:*}", {
    handler: (request: Request) => answer(request, `client ${request.scope.client?.[0]}`),
  }),
  new Route("/echo", {
    methods: ["POST"],
    handler: async (request: Request) => answer(request, String((await request.bytes()).length)),
  }),
  new Route("/stream", {
    handler: async (request: Request) => {
      const n = Number(queryOf(request).get("n") ?? 8);
      async function* chunks(): AsyncGenerator<string> {
        for (let i = 0; i < n; i++) {
          yield "a".repeat(1024);
          await sleep(2);
        }
      }
      await request.respondWith(new Response({ body: chunks(), headers: distinctHeaders("s") }));
    },
  }),
  new Route("/slow", {
    handler: async (request: Request) => {
      await sleep(Number(queryOf(request).get("ms") ?? 100), request.signal);
      await answer(request, "slow");
    },
  }),
  new Route("/tasks", {
    handler: async (request: Request) => {
      const n = Number(queryOf(request).get("n") ?? 2);
      await answer(request, "ok");
      for (let i = 0; i < n; i++) {
        await request.registerBackground((signal) => sleep(5, signal), { name: "probe" });
      }
    },
  }),
  new Route("/ws", {
    methods: ["WEBSOCKET"],
    handler: async (socket: WebSocketRequest) => {
      await socket.accept();
      for await (const message of socket) await socket.send(message);
    },
  }),
  new Route("/_probe/{what}", {
    handler: (request: Request) =>
      request.respondWith(new Response({ body: probe(request.path, queryOf(request)) })),
  }),
];

const transport = Deno.env.get("TRANSPORT") === "node" ? "node" : "deno";
const application: AsgiApplication = Deno.env.get("APP") === "app"
  ? proxyHeaders(
    new App({
      router: new AsgiRouter<AppHandler>({ routes }),
      requestTimeLimit: envNumber("REQUEST_TIME_LIMIT", 0.2),
      backgroundTaskTimeLimit: 1,
      logger: countingLogger,
    }),
  )
  : proxyHeaders(asgiApp);

const server = serve(application, {
  hostname: "127.0.0.1",
  port: envNumber("PORT", 0),
  transport,
  maxBodySize: envNumber("MAX_BODY_SIZE"),
  logger: countingLogger,
  onListen: ({ port }) => console.log(`LISTENING ${port}`),
});
exitOnSigterm(server);
