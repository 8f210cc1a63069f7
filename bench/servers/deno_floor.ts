/**
 * The floor under any ASGI bridge on `Deno.serve`: bare `Deno.serve` doing, by hand, only what an
 * ASGI scope and an async application make unavoidable, and nothing else. Per request it reads the
 * method, the target, every header field, the client's address and whether a body follows (the
 * scope needs them all, and Deno closes the request once the response is out, so they cannot be
 * read later), and answers through a promise with the application's `content-type` header (an ASGI
 * application is async and sends its own headers). No scope object, no messages, no router.
 *
 * Where Deno offers a cheaper way, the floor takes it, as the bridge does, so that the gap measures
 * the bridge and not a Deno quirk only one side avoids: whether a body follows comes from the
 * method and `content-length` (reading `request.body` would make a stream nobody needs; only a
 * request without a length asks Fetch), `POST
 * /echo` reads the body in one piece with `request.bytes()`, and a short ASCII body goes back as a
 * string (Deno copies a `Uint8Array` body into a fresh ArrayBuffer; a string it sends as it is).
 *
 * The gap between this and bare `Deno.serve` is what no bridge can win back; the gap between our
 * ASGI app and this is what the bridge itself costs.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * Serves when run as the main module; `bench/profile_app.ts` imports the handlers.
 *
 * @module
 */
import { serveForBench } from "./_listen.ts";

function collect(this: string[], value: string, name: string): void {
  this.push(name, value);
}

/** Short ASCII bytes as a string, which Deno sends without a copy; other bytes as they are. */
function asciiText(bytes: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> | string {
  if (bytes.length > 1024) return bytes;
  for (let i = 0; i < bytes.length; i++) if (bytes[i]! >= 0x80) return bytes;
  return String.fromCharCode.apply(null, bytes as unknown as number[]);
}

const CONTENT_TYPE = { "content-type": "text/plain; charset=utf-8" };

/**
 * Answers `GET /hello` with "hello", `GET /hello/{name}` with "hello <name>" and `POST /echo`
 * with the request's body, after reading what a scope needs.
 *
 * @param request The request.
 * @param info The connection.
 * @returns The response, through a promise.
 */
export async function handler(
  request: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
): Promise<Response> {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const query = url.indexOf("?", start);
  const path = query < 0 ? url.slice(start) : url.slice(start, query);
  const fields: string[] = [];
  request.headers.forEach(collect, fields);
  const client = [info.remoteAddr.hostname, info.remoteAddr.port];
  const method = request.method;
  let hasBody = false;
  if (method !== "GET" && method !== "HEAD") {
    // As the bridge does: the content-length when there is one; Fetch knows otherwise.
    let length: string | undefined;
    for (let i = 0; i < fields.length; i += 2) {
      if (fields[i] === "content-length") length = fields[i + 1];
    }
    hasBody = length === undefined ? request.body !== null : length !== "0";
  }
  if (fields.length > 0 && client.length === 2) {
    if (method === "POST" && path === "/echo") {
      return new Response(hasBody ? asciiText(await request.bytes()) : null, {
        status: 200,
        headers: CONTENT_TYPE,
      });
    }
    // Without a body, the application still runs after the transport has read the request: one
    // turn of the microtask queue, as an async ASGI application takes at least one.
    await null;
    if (method === "GET" && !hasBody) {
      if (path === "/hello") return new Response("hello", { status: 200, headers: CONTENT_TYPE });
      if (path.startsWith("/hello/") && path.length > 7 && path.indexOf("/", 7) < 0) {
        return new Response(`hello ${path.slice(7)}`, { status: 200, headers: CONTENT_TYPE });
      }
    }
  }
  return new Response("Not Found", { status: 404, headers: CONTENT_TYPE });
}

if (import.meta.main) serveForBench(handler);
