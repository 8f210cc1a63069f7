/**
 * The fault suite's App server: the web layer served by `serve()`.
 *
 * Routes: `GET /ok`; `POST /echo` (reads the body, answers its length); `POST /json` (400 for
 * invalid JSON); `GET /stream?n=&ms=`; `GET /slow?ms=` (stops early on its signal);
 * `GET /tasks?n=&ms=` (answers, then registers `n` background tasks that each sleep `ms` and stop
 * on their signal); `GET /_stats`.
 *
 * Environment: `TRANSPORT`, `MAX_BODY_SIZE` (bytes), `SHUTDOWN_TIMEOUT` (ms, default 5000),
 * `REQUEST_TIME_LIMIT`, `TASK_TIME_LIMIT`, `TASK_LIMIT`, `GRACE` (seconds, default 5).
 *
 * @module
 */
import {
  countingLogger,
  countRegistered,
  envNumber,
  exitOnSigterm,
  listen,
  statsJson,
} from "./_server_common.ts";
import { serve } from "../../asgi.ts";
import { AsgiRouter, Route } from "../../router.ts";
import { App, type Request, Response, type WebHandler } from "../../web.ts";

const KIB = "a".repeat(1024);

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function numberParam(request: Request, name: string, fallback: number): number {
  const value = new URLSearchParams(new TextDecoder().decode(request.scope.query_string)).get(name);
  return value === null ? fallback : Number(value);
}

const routes: [string, string, WebHandler][] = [
  ["/ok", "GET", (request) => request.respondWith(new Response({ body: "ok" }))],
  ["/echo", "POST", async (request) => {
    const body = await request.bytes();
    await request.respondWith(new Response({ body: String(body.length) }));
  }],
  ["/json", "POST", async (request) => {
    let value: unknown;
    try {
      value = JSON.parse(await request.text());
    } catch {
      return await request.respondWith(new Response({ status: 400, body: "invalid JSON" }));
    }
    await request.respondWith(
      new Response({ body: JSON.stringify({ received: value }), contentType: "application/json" }),
    );
  }],
  ["/stream", "GET", async (request) => {
    const n = numberParam(request, "n", 8);
    const ms = numberParam(request, "ms", 10);
    async function* chunks(): AsyncGenerator<string> {
      for (let i = 0; i < n; i++) {
        yield KIB;
        await sleep(ms);
      }
    }
    await request.respondWith(new Response({ body: chunks() }));
  }],
  ["/slow", "GET", async (request) => {
    await sleep(numberParam(request, "ms", 100), request.signal);
    await request.respondWith(new Response({ body: "slow" }));
  }],
  ["/tasks", "GET", async (request) => {
    const n = numberParam(request, "n", 10);
    const ms = numberParam(request, "ms", 10);
    await request.respondWith(new Response({ body: "ok" }));
    for (let i = 0; i < n; i++) {
      countRegistered();
      await request.registerBackground((signal) => sleep(ms, signal), { name: "soak" });
    }
  }],
  [
    "/_stats",
    "GET",
    (request) =>
      request.respondWith(new Response({ body: statsJson(), contentType: "application/json" })),
  ],
];

const app = new App({
  router: new AsgiRouter<WebHandler>({
    routes: routes.map(([path, method, handler]) =>
      new Route(path, { handler, methods: [method] })
    ),
  }),
  requestTimeLimit: envNumber("REQUEST_TIME_LIMIT"),
  backgroundTaskTimeLimit: envNumber("TASK_TIME_LIMIT"),
  backgroundTaskLimit: envNumber("TASK_LIMIT"),
  shutdownGracePeriod: envNumber("GRACE", 5),
  logger: countingLogger,
});

const server = serve(app, {
  ...listen,
  transport: Deno.env.get("TRANSPORT") === "node" ? "node" : "deno",
  maxBodySize: envNumber("MAX_BODY_SIZE"),
  shutdownTimeout: envNumber("SHUTDOWN_TIMEOUT", 5000),
  logger: countingLogger,
});
exitOnSigterm(server);
