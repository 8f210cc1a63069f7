/**
 * The scope's byte strings: header names are shared between requests that repeat them, values
 * and paths are not, and nothing one request writes into its bytes reaches another.
 */
import { assert, assertEquals } from "@std/assert";
import {
  type AsgiApplication,
  type AsgiServer,
  createFetchHandler,
  type HttpScope,
  serve,
} from "../asgi.ts";
import { rawRequest } from "./fixtures/asgi_harness.ts";

const decoder = new TextDecoder();

/** Records every HTTP scope it sees and answers 204. */
function recordingApp(scopes: HttpScope[]): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    scopes.push(scope);
    await send({ type: "http.response.start", status: 204 });
    await send({ type: "http.response.body" });
  };
}

/** `recordingApp` served by `serve()` on a free port of 127.0.0.1. */
function serveRecording(scopes: HttpScope[]): AsgiServer {
  return serve(recordingApp(scopes), {
    port: 0,
    hostname: "127.0.0.1",
    lifespan: "off",
    onListen() {},
  });
}

function header(scope: HttpScope, name: string): Uint8Array | undefined {
  return scope.headers.find(([n]) => decoder.decode(n) === name)?.[1];
}

Deno.test("createFetchHandler() shares a repeated header name's bytes, never a value's", async () => {
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  for (let i = 0; i < 2; i++) {
    await handler.fetch(new Request("http://localhost/", { headers: { "x-token": "secret" } }));
  }
  const [a, b] = scopes as [HttpScope, HttpScope];
  assert(a.headers[0]![0] === b.headers[0]![0], "a name is one array");
  assert(header(a, "x-token") !== header(b, "x-token"), "a value is each request's own");
});

Deno.test("createFetchHandler() hands no request bytes another request wrote into", async () => {
  // A program may wipe a secret in place; the next request with the same header must not see it.
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  const send = () =>
    handler.fetch(new Request("http://localhost/same", { headers: { authorization: "token" } }));
  await send();
  const first = scopes[0]!;
  first.headers.forEach(([name, value]) => (name.fill(42), value.fill(42)));
  first.raw_path.fill(42);
  await send();
  const second = scopes[1]!;
  assertEquals(decoder.decode(header(second, "authorization")), "token");
  assertEquals(decoder.decode(second.raw_path), "/same");
});

Deno.test("createFetchHandler() reads every header right past the name cache's size", async () => {
  // More distinct names than the cache keeps (it starts over): each must come out as sent.
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  for (let i = 0; i < 600; i++) {
    await handler.fetch(new Request("http://localhost/", { headers: { [`x-${i}`]: `v${i}` } }));
  }
  scopes.forEach((scope, i) => assertEquals(decoder.decode(header(scope, `x-${i}`)), `v${i}`));
});

Deno.test("createFetchHandler() gives each request only its own headers, fewer or nested", async () => {
  const scopes: HttpScope[] = [];
  const inner = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  // The outer app starts a request of its own before its first await: the transport reads
  // header fields into one array for all requests, which must be done with by then.
  const outer = createFetchHandler(async (scope, receive, send) => {
    const nested = inner.fetch(new Request("http://localhost/in", { headers: { "x-in": "1" } }));
    await recordingApp(scopes)(scope, receive, send);
    await nested;
  }, { lifespan: "off" });
  const names = (scope: HttpScope) => scope.headers.map(([n]) => decoder.decode(n)).sort();
  await outer.fetch(
    new Request("http://localhost/out", { headers: { "x-a": "1", "x-b": "2", "x-c": "3" } }),
  );
  await outer.fetch(new Request("http://localhost/out", { headers: { "x-d": "4" } }));
  const seen = scopes.map((scope) => `${scope.path} ${names(scope).join(",")}`).sort();
  assertEquals(seen, ["/in x-in", "/in x-in", "/out x-a,x-b,x-c", "/out x-d"]);
});

Deno.test("createFetchHandler() gives every request a raw_path of its own, right", async (t) => {
  const cases: [string, string, string][] = [
    // [root path, request URL path, expected raw_path]
    ["", "/hello/world", "/hello/world"],
    ["", "/caf%C3%A9", "/caf%C3%A9"],
    ["", `/${"a".repeat(70)}`, `/${"a".repeat(70)}`],
    ["/api", "/users", "/api/users"],
  ];
  for (const [rootPath, path, expected] of cases) {
    await t.step(`${rootPath}${path.slice(0, 20)}`, async () => {
      const scopes: HttpScope[] = [];
      const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off", rootPath });
      await handler.fetch(new Request(`http://localhost${path}`));
      await handler.fetch(new Request(`http://localhost${path}`));
      const [a, b] = scopes as [HttpScope, HttpScope];
      assertEquals([decoder.decode(a.raw_path), decoder.decode(b.raw_path)], [expected, expected]);
      assert(a.raw_path !== b.raw_path);
    });
  }
});

Deno.test("serve() [deno] keeps a raw non-ASCII raw_path UTF-8 after a header with the same text (regression)", async () => {
  // A cache shared by header values and paths once handed a later request the Latin-1 bytes of
  // an earlier request's header in place of its own path's UTF-8.
  const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0"));
  const scopes: HttpScope[] = [];
  await using server = serveRecording(scopes);
  const { port } = await server.addr;
  const request = (target: string, extra = "") =>
    `GET ${target} HTTP/1.1\r\nhost: x\r\n${extra}connection: close\r\n\r\n`;
  await rawRequest(port, request("/\xc3\xa9"));
  await rawRequest(port, request("/", "x-p: /\xe9\r\n"));
  await rawRequest(port, request("/\xc3\xa9"));
  assertEquals(hex(scopes[2]!.raw_path), ["2f", "c3", "a9"]);
  assertEquals(hex(scopes[0]!.raw_path), ["2f", "c3", "a9"]);
});

Deno.test("serve() [deno] gives every request of a listener one frozen server pair", async () => {
  const scopes: HttpScope[] = [];
  await using server = serveRecording(scopes);
  const { port } = await server.addr;
  for (let i = 0; i < 2; i++) await (await fetch(`http://127.0.0.1:${port}/`)).body?.cancel();
  const [a, b] = scopes as [HttpScope, HttpScope];
  assertEquals(a.server, ["127.0.0.1", port]);
  assert(a.server === b.server && Object.isFrozen(a.server), "one frozen pair");
});
