/**
 * Not a server to use: an upper bound for issue 13's item 5, measuring what an `App` that skipped
 * ASGI on `Deno.serve` could at best cost. The benchmark's handlers run against the Fetch request
 * directly: the path cut out of `request.url`, our router's `match()`, a request object holding
 * the route's variables, and a `respondWith()` that hands a Fetch `Response` to `Deno.serve`
 * through a promise made per request.
 *
 * It does only what a correct App would have to do at the least: it reads the client's address
 * and touches `request.headers` while the request is open (Deno frees a request once its response
 * is out; touched headers it copies first, the address it does not keep), so that a scope could
 * still be built afterwards. It leaves out everything else the App does: no scope, no ASGI
 * messages, no time limit, no background tasks, none of the bridge's checks of the request (a
 * lower-case method, a Host holding "/") or of the response (HEAD, 204 and 304 bodies, lengths),
 * no tracking for a graceful shutdown. So what it measures is a ceiling: a real App that skipped
 * ASGI would be slower. Run it with `deno task bench:http --servers=floor,hono,app,native-bound`
 * (it is not in the default run); docs/performance.md has the figures and what they decided.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * @module
 */
import { serveForBench } from "./_listen.ts";
import { AsgiRouter, Route } from "../../router.ts";

const CONTENT_TYPE = { "content-type": "text/plain; charset=utf-8" };
const DONE: Promise<void> = Promise.resolve();

/** The least a request needs: its route's variables, the kept headers and client, a reply. */
class BoundRequest {
  readonly context: Readonly<Record<string, string>>;
  readonly headers: Headers;
  readonly client: readonly [string, number];
  #request: Request;
  #reply: (response: Response) => void;

  constructor(
    request: Request,
    client: readonly [string, number],
    context: Readonly<Record<string, string>>,
    reply: (response: Response) => void,
  ) {
    this.#request = request;
    // Touched while the request is open, so Deno keeps a copy past the response.
    this.headers = request.headers;
    this.client = client;
    this.context = context;
    this.#reply = reply;
  }

  respondWith(body: string): Promise<void> {
    this.#reply(new Response(body, { status: 200, headers: CONTENT_TYPE }));
    return DONE;
  }

  text(): Promise<string> {
    return this.#request.text();
  }
}

type BoundHandler = (request: BoundRequest) => Promise<void>;

async function hello(request: BoundRequest): Promise<void> {
  await request.respondWith("hello");
}

async function helloName(request: BoundRequest): Promise<void> {
  await request.respondWith(`hello ${request.context.name}`);
}

async function echo(request: BoundRequest): Promise<void> {
  await request.respondWith(await request.text());
}

const router = new AsgiRouter<BoundHandler>({
  routes: [
    new Route<BoundHandler>("/hello", { handler: hello }),
    new Route<BoundHandler>("/hello/{name}", { handler: helloName }),
    new Route<BoundHandler>("/echo", { handler: echo, methods: ["POST"] }),
  ],
});

function failed(error: unknown): void {
  console.error(error);
}

/**
 * Routes the request and runs its handler, answering through a promise.
 *
 * @param request The request.
 * @param info The connection.
 * @returns The response, or the promise of it.
 */
export function handler(
  request: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
): Response | Promise<Response> {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const query = url.indexOf("?", start);
  const path = query < 0 ? url.slice(start) : url.slice(start, query);
  const match = router.match(path);
  const route = match?.routeFor(request.method);
  if (route === undefined) {
    return new Response("Not Found", { status: 404, headers: CONTENT_TYPE });
  }
  const remote = info.remoteAddr;
  const { promise, resolve } = Promise.withResolvers<Response>();
  const bound = new BoundRequest(
    request,
    [remote.hostname, remote.port],
    match!.context as Readonly<Record<string, string>>,
    resolve,
  );
  route.handler(bound).then(undefined, failed);
  return promise;
}

if (import.meta.main) serveForBench(handler);
