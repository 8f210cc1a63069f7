/**
 * The scope's byte strings: header names and short values are shared between requests that
 * repeat them, long ones are not, and sharing never changes what an application reads.
 */
import { assert, assertEquals } from "@std/assert";
import { type AsgiApplication, createFetchHandler, type HttpScope, serve } from "../asgi.ts";

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

function header(scope: HttpScope, name: string): Uint8Array | undefined {
  return scope.headers.find(([n]) => decoder.decode(n) === name)?.[1];
}

Deno.test("createFetchHandler() shares the bytes of a repeated header name and short value", async () => {
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  const long = "v".repeat(65);
  for (let i = 0; i < 2; i++) {
    await handler.fetch(
      new Request("http://localhost/", { headers: { "x-short": "same", "x-long": long } }),
    );
  }
  const [a, b] = scopes as [HttpScope, HttpScope];
  assert(header(a, "x-short") === header(b, "x-short"), "a short value is one array");
  assert(a.headers[0]![0] === b.headers[0]![0], "a name is one array");
  assert(header(a, "x-long") !== header(b, "x-long"), "a long value is each request's own");
  assertEquals(decoder.decode(header(b, "x-long")), long);
});

Deno.test("createFetchHandler() reads every header right past the field cache's size", async () => {
  // More distinct short values than the cache keeps (it starts over): each must come out as sent.
  const scopes: HttpScope[] = [];
  const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off" });
  for (let i = 0; i < 1_200; i++) {
    await handler.fetch(new Request("http://localhost/", { headers: { "x-n": `value-${i}` } }));
  }
  scopes.forEach((scope, i) => assertEquals(decoder.decode(header(scope, "x-n")), `value-${i}`));
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

Deno.test("createFetchHandler() shares a short ASCII raw_path, and gets every raw_path right", async (t) => {
  const cases: [string, string, string, boolean][] = [
    // [root path, request URL path, expected raw_path, shared between two requests]
    ["", "/hello/world", "/hello/world", true],
    ["", "/caf%C3%A9", "/caf%C3%A9", true],
    ["", `/${"a".repeat(70)}`, `/${"a".repeat(70)}`, false],
    ["/api", "/users", "/api/users", false],
  ];
  for (const [rootPath, path, expected, shared] of cases) {
    await t.step(`${rootPath}${path.slice(0, 20)}`, async () => {
      const scopes: HttpScope[] = [];
      const handler = createFetchHandler(recordingApp(scopes), { lifespan: "off", rootPath });
      await handler.fetch(new Request(`http://localhost${path}`));
      await handler.fetch(new Request(`http://localhost${path}`));
      const [a, b] = scopes as [HttpScope, HttpScope];
      assertEquals([decoder.decode(a.raw_path), decoder.decode(b.raw_path)], [expected, expected]);
      assertEquals(a.raw_path === b.raw_path, shared);
    });
  }
});

Deno.test("serve() [deno] gives every request of a listener one frozen server pair", async () => {
  const scopes: HttpScope[] = [];
  await using server = serve(recordingApp(scopes), {
    port: 0,
    hostname: "127.0.0.1",
    lifespan: "off",
    onListen() {},
  });
  const { port } = await server.addr;
  for (let i = 0; i < 2; i++) await (await fetch(`http://127.0.0.1:${port}/`)).body?.cancel();
  const [a, b] = scopes as [HttpScope, HttpScope];
  assertEquals(a.server, ["127.0.0.1", port]);
  assert(a.server === b.server && Object.isFrozen(a.server), "one frozen pair");
});
