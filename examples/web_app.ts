/**
 * The web layer's example application, run by `deno task example`.
 *
 * - `GET /` answers `{"received": <the JSON body, or {} when empty>}`, stores the payload in
 *   `app.db` under the request path and registers a background task that would sleep five times
 *   one second; its 3 s limit cuts it off after three iterations (the limit and the third
 *   sleep fall due together, so the fourth iteration's line may show just before the cut).
 * - `GET /timeout` would wait 2 s; the 1 s request time limit sends 408 instead.
 * - The same handler as `/` answers `GET` and `POST` on `/files/{dir}/{filepath:*}`,
 *   `/info/{user}` and deeper `/info/...` routes, `/regex/{name:[a-zA-Z]+}/test` and
 *   `/optional/{name:[a-zA-Z]+}/{word}/plus/{uid:<uuid regex>}`.
 *
 * Environment: `PORT` (default 8000), `TRANSPORT` (`deno`, the default, or `node`, which
 * delivers the bodies of GET requests). It listens on 127.0.0.1, logs one line per request and
 * the lifespan events, and shuts down gracefully on Ctrl-C (SIGINT) or SIGTERM; a second one
 * exits at once.
 *
 * ```sh
 * deno task example
 * curl -i localhost:8000/timeout
 * curl localhost:8000/info/bob -d '{"a":1}'
 * ```
 *
 * @module
 */
import { delay } from "@std/async/delay";
import {
  App,
  type AsgiApplication,
  AsgiRouter,
  type AsgiServer,
  type LifespanMessageType,
  logQuoted,
  logText,
  type Request,
  Response,
  Route,
  serve,
  type WebHandler,
  type WebLogger,
} from "../web.ts";
import { listenSettings } from "./_env.ts";
import { stopOnSignals } from "./_signals.ts";

/** The attributes of the example app: the lifespan sets `db` at startup and clears it. */
export type Attributes = { db: Record<string, unknown> | null };

/** Options of {@linkcode createApp}; the defaults are the example's own settings. */
export interface ExampleOptions {
  /** Request time limit in seconds. @default {1} */
  requestTimeLimit?: number;
  /** Background task time limit in seconds. @default {3} */
  backgroundTaskTimeLimit?: number;
  /** How long `/timeout` waits, in milliseconds. @default {2000} */
  timeoutHandlerMs?: number;
  /** How long one iteration of the background task sleeps, in milliseconds. @default {1000} */
  iterationMs?: number;
  /** Where log lines go. @default {timestamped lines on stdout} */
  log?: (line: string) => void;
}

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/** The routes that share the handler of `/` and accept GET and POST. */
export const ECHO_PATHS: readonly string[] = [
  "/files/{dir}/{filepath:*}",
  "/info/{user}",
  "/info/{user}/project",
  "/info/{user}/project/{project}",
  "/info/{user}/project/{project}/dept",
  "/info/{user}/project/{project}/dept/{dept}",
  "/regex/{name:[a-zA-Z]+}/test",
  `/optional/{name:[a-zA-Z]+}/{word}/plus/{uid:${UUID}}`,
];

/**
 * Writes a line to stdout with the time of day, so the transcript shows the time limits at work.
 *
 * @param line The line.
 */
export function timestamped(line: string): void {
  console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
}

function loggerFor(log: (line: string) => void): WebLogger {
  const write = (level: string) => (...data: unknown[]) =>
    log(
      `${level} ${
        data.map((part) =>
          typeof part === "string" ? part : part instanceof Error ? part.stack : Deno.inspect(part)
        ).join(" ")
      }`,
    );
  return { debug: write("DEBUG"), info: write("INFO"), warn: write("WARN"), error: write("ERROR") };
}

/**
 * Builds the example app.
 *
 * @param options Limits and durations (shorter ones make tests quick) and the log sink.
 * @returns The app.
 */
export function createApp(options: ExampleOptions = {}): App<Attributes> & Attributes {
  const {
    requestTimeLimit = 1,
    backgroundTaskTimeLimit = 3,
    timeoutHandlerMs = 2000,
    iterationMs = 1000,
    log = timestamped,
  } = options;

  async function backgroundTask(arg1: string, signal: AbortSignal): Promise<void> {
    for (let iterations = 1; iterations <= 5; iterations++) {
      log(`Sleeping ${iterationMs / 1000}s for total iterations: ${iterations}`);
      // The signal aborts at the task's time limit: without it the loop would run on, unobserved.
      await delay(iterationMs, { signal });
    }
    log(`Background DONE SLEEPING, with arg1 '${arg1}'`);
  }

  async function index(request: Request<Attributes>): Promise<void> {
    const text = await request.text();
    // A malformed body throws here: the App answers 500 and keeps serving.
    const payload: unknown = text === "" ? {} : JSON.parse(text);
    // The path and its parameters are client text: escaped and bounded for the log line.
    const context = Object.entries(request.context).map(([name, value]) =>
      `${logQuoted(name)}:${logQuoted(String(value))}`
    );
    log(`${request.method} ${logText(request.path)} context {${context.join(",")}}`);
    const db = request.app.db;
    if (db !== null) db[request.path] = payload;
    await request.registerBackground((signal) => backgroundTask("some kwarg", signal), {
      name: "backgroundTask",
    });
    await request.respondWith(
      new Response({
        body: JSON.stringify({ received: payload }),
        contentType: "application/json",
      }),
    );
  }

  async function timeout(request: Request<Attributes>): Promise<void> {
    // Passing the signal on makes the handler stop at the time limit instead of running on.
    await delay(timeoutHandlerMs, { signal: request.signal });
    await request.respondWith(new Response({ body: "ok" }));
  }

  // Nothing here needs awaiting; an async function (returning a promise) fits as well.
  function lifespan(
    app: App<Attributes> & Attributes,
    messageType: LifespanMessageType,
  ): App<Attributes> {
    if (messageType === App.LIFESPAN_STARTUP) {
      app.db = {};
      log("Lifespan startup: app.db is ready");
    } else if (messageType === App.LIFESPAN_SHUTDOWN) {
      log(`Lifespan shutdown: clearing app.db (${Object.keys(app.db ?? {}).length} payloads)`);
      app.db = null;
    }
    return app;
  }

  const methods = ["GET", "POST"];
  const routes: Route<WebHandler<Attributes>>[] = [
    new Route("/", { handler: index, methods: ["GET"] }),
    new Route("/timeout", { handler: timeout, methods: ["GET"] }),
    ...ECHO_PATHS.map((path) => new Route(path, { handler: index, methods })),
  ];
  // The attributes live on the app itself; TypeScript types a class's instances without them.
  return new App<Attributes>({
    router: new AsgiRouter({ routes }),
    requestTimeLimit,
    backgroundTaskTimeLimit,
    lifespan,
    attributes: { db: null },
    logger: loggerFor(log),
  }) as App<Attributes> & Attributes;
}

/**
 * Wraps an ASGI application to log one line per request: method, path, status and duration.
 *
 * @param app The application.
 * @param log Where the lines go.
 * @returns The wrapped application.
 */
export function withAccessLog(app: AsgiApplication, log: (line: string) => void): AsgiApplication {
  return async (scope, receive, send) => {
    if (scope.type !== "http") return await app(scope, receive, send);
    const started = performance.now();
    let status = 0;
    try {
      await app(scope, receive, (message) => {
        if (message.type === "http.response.start") status = message.status;
        return send(message);
      });
    } finally {
      const ms = (performance.now() - started).toFixed(1);
      // A percent-decoded path may hold a newline or ESC: logText escapes and bounds it.
      log(`${logText(scope.method)} ${logText(scope.path)} ${status || "-"} ${ms} ms`);
    }
  };
}

/**
 * Serves the example app until SIGINT or SIGTERM, then shuts down gracefully (a second signal
 * exits at once).
 *
 * @param env Reads `PORT` and `TRANSPORT`.
 * @returns The server.
 * @throws {RangeError} When `PORT` or `TRANSPORT` is invalid.
 */
export function main(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): AsgiServer {
  const { port, transport } = listenSettings(env);
  const log = timestamped;
  const app = createApp({ log });
  const controller = new AbortController();
  const server = serve({ asgi: withAccessLog(app.asgi, log) }, {
    port,
    hostname: "127.0.0.1",
    transport,
    signal: controller.signal,
    onListen: ({ hostname, port }) =>
      log(`Listening on http://${hostname}:${port}/ (transport: ${transport})`),
  });
  // The first SIGINT or SIGTERM stops the server gracefully; a second one exits at once.
  const unlisten = stopOnSignals(() => controller.abort(), { log });
  server.finished.then(() => log("Stopped"), (error) => {
    log(`Stopped with an error: ${error instanceof Error ? error.message : error}`);
    Deno.exitCode = 1;
  }).finally(() => {
    // Listening for signals keeps the process alive; once stopped, let it exit.
    unlisten();
  });
  return server;
}

if (import.meta.main) {
  // Exit as soon as the server has stopped, while the signal listeners are still there: left to
  // wind down on its own, the process had a moment without them in which a second SIGINT ended it
  // with 130 instead of 0.
  const exit = (): never => Deno.exit();
  main().finished.then(exit, exit);
}
