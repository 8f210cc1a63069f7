/**
 * The low-level example: an ASGI application built from an {@linkcode AsgiRouter} with two
 * routes, served by the bridge.
 *
 * | Method | Path                              | Response                                        |
 * | ------ | --------------------------------- | ----------------------------------------------- |
 * | GET    | `/`                               | the request body, or `OK` when it is empty      |
 * | POST   | `/other_handler/{name:[a-z1-9]+}` | the request body, or `{"name":"…"}` when empty  |
 *
 * Any other path answers 404 and a known path with another method 405, each with
 * `Content-Type: text/html; charset=UTF-8` and an HTML body naming the status; the 405 also
 * lists the path's methods in `Allow`.
 *
 * ```sh
 * deno task example:asgi                 # PORT=8000, TRANSPORT=deno
 * PORT=8080 TRANSPORT=node deno task example:asgi
 * curl -X GET --data hello http://127.0.0.1:8000/   # "hello" with TRANSPORT=node, "OK" with deno
 * ```
 *
 * `Deno.serve` (the default transport) drops the body of a GET request, as Fetch does, so `GET /`
 * with a body answers `OK`; the `node` transport (`node:http`) delivers the body, and `GET /`
 * echoes it.
 *
 * @module
 */
import {
  AsgiRouter,
  type EndpointHandler,
  MethodNotAllowed,
  type PathContext,
  Route,
  UnknownEndpoint,
} from "../router.ts";
import { type HttpScope, type Receive, type Scope, type Send, serve, textBytes } from "../asgi.ts";
import { listenSettings } from "./_env.ts";
import { stopOnSignals } from "./_signals.ts";

/** A handler the router dispatches to: path variables first, then the ASGI triple. */
type LowLevelHandler = (
  context: PathContext,
  scope: HttpScope,
  receive: Receive,
  send: Send,
) => Promise<void>;

const TEXT_PLAIN: [Uint8Array, Uint8Array] = [
  textBytes("content-type"),
  textBytes("text/plain; charset=UTF-8"),
];
const APPLICATION_JSON: [Uint8Array, Uint8Array] = [
  textBytes("content-type"),
  textBytes("application/json"),
];
const TEXT_HTML: [Uint8Array, Uint8Array] = [
  textBytes("content-type"),
  textBytes("text/html; charset=UTF-8"),
];
const OK = textBytes("OK");

/** Reads the whole request body; `null` when the client disconnects first. */
async function readBody(receive: Receive): Promise<Uint8Array | null> {
  const first = await receive();
  if (first.type !== "http.request") return null;
  if (!first.more_body) return first.body;
  const chunks = [first.body];
  let length = first.body.length;
  for (;;) {
    const message = await receive();
    if (message.type !== "http.request") return null;
    chunks.push(message.body);
    length += message.body.length;
    if (!message.more_body) break;
  }
  const body = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.length;
  }
  return body;
}

async function respond(
  send: Send,
  status: number,
  contentType: [Uint8Array, Uint8Array],
  body: Uint8Array,
  extraHeaders: [Uint8Array, Uint8Array][] = [],
): Promise<void> {
  await send({ type: "http.response.start", status, headers: [contentType, ...extraHeaders] });
  await send({ type: "http.response.body", body });
}

/** `GET /`: echoes the body, or says `OK`. */
async function home(
  _context: PathContext,
  _scope: HttpScope,
  receive: Receive,
  send: Send,
): Promise<void> {
  const body = await readBody(receive);
  if (body === null) return; // The client has gone: send nothing.
  await respond(send, 200, TEXT_PLAIN, body.length > 0 ? body : OK);
}

/** `POST /other_handler/{name}`: echoes the body, or the path variables as JSON. */
async function otherHandler(
  context: PathContext,
  _scope: HttpScope,
  receive: Receive,
  send: Send,
): Promise<void> {
  const body = await readBody(receive);
  if (body === null) return;
  if (body.length > 0) return await respond(send, 200, TEXT_PLAIN, body);
  await respond(send, 200, APPLICATION_JSON, textBytes(JSON.stringify(context)));
}

/**
 * The application's fallback pages: status, HTML content type, an HTML body naming the status.
 * A 405 also lists the path's methods in `Allow`, which HTTP (RFC 9110) requires of it.
 */
function fallback(
  send: Send,
  status: number,
  reason: string,
  allowed?: readonly string[],
): Promise<void> {
  const html = `<!DOCTYPE html><html><head><title>${status} ${reason}</title></head>` +
    `<body><h1>${status} ${reason}</h1></body></html>`;
  const allow: [Uint8Array, Uint8Array][] = allowed
    ? [[textBytes("allow"), textBytes(allowed.join(", "))]]
    : [];
  return respond(send, status, TEXT_HTML, textBytes(html), allow);
}

/** The router of the example. */
export const router: AsgiRouter<LowLevelHandler> = new AsgiRouter<LowLevelHandler>({
  routes: [
    new Route("/", { handler: home, methods: ["GET"] }),
    new Route("/other_handler/{name:[a-z1-9]+}", { handler: otherHandler, methods: ["POST"] }),
  ],
});

/**
 * The ASGI application: answers the lifespan protocol, routes HTTP requests, and turns the
 * router's {@linkcode UnknownEndpoint} and {@linkcode MethodNotAllowed} into 404 and 405.
 *
 * @param scope The connection scope.
 * @param receive Receives events.
 * @param send Sends events.
 */
export async function app(scope: Scope, receive: Receive, send: Send): Promise<void> {
  if (scope.type === "lifespan") {
    for (;;) {
      const message = await receive();
      if (message.type === "lifespan.startup") {
        await send({ type: "lifespan.startup.complete" });
      } else if (message.type === "lifespan.shutdown") {
        await send({ type: "lifespan.shutdown.complete" });
        return;
      }
    }
  }
  // This example serves HTTP only: a WebSocket handshake is denied (HTTP 403).
  if (scope.type === "websocket") return await send({ type: "websocket.close" });
  let route: [EndpointHandler<LowLevelHandler>, PathContext];
  try {
    route = router.getRoute(scope.path);
  } catch (error) {
    if (error instanceof UnknownEndpoint) return await fallback(send, 404, "Not Found");
    throw error;
  }
  const [handler, context] = route;
  try {
    await handler(context, scope, receive, send, { method: scope.method });
  } catch (error) {
    if (error instanceof MethodNotAllowed) {
      return await fallback(send, 405, "Method Not Allowed", error.allowed);
    }
    throw error;
  }
}

/**
 * Reads `PORT` and `TRANSPORT` as `examples/web_app.ts` does.
 *
 * @param env Reads `PORT` and `TRANSPORT`.
 * @returns The port and the transport.
 * @throws {RangeError} When `PORT` or `TRANSPORT` is invalid.
 */
export function settings(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): { port: number; transport: "deno" | "node" } {
  return listenSettings(env);
}

if (import.meta.main) {
  const server = serve(app, settings());
  // The first SIGINT or SIGTERM stops the server gracefully; a second one exits at once.
  // `finished` reports a failed shutdown; shutdown()'s promise would only repeat it, unhandled.
  stopOnSignals(() => void server.shutdown().catch(() => {}));
  try {
    await server.finished;
  } catch (error) {
    // The bridge has logged what went wrong and how to fix it (a taken port, say): one line here,
    // not an uncaught rejection's stack.
    console.error(`Stopped with an error: ${error instanceof Error ? error.message : error}`);
    Deno.exitCode = 1;
  }
  // Exit now, with the signal listeners still there: a SIGINT sent to the process group reaches
  // the example twice (from the group and from the JSR mirror), and a copy that came after the
  // listeners were removed, while the process wound down, ended it with 130 instead of 0.
  Deno.exit();
}
