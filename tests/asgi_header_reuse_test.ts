/**
 * Applications send the same header arrays again and again, and the bridge keeps the text of the
 * last few it converted, by identity. These tests pin down that the cache never changes what goes
 * out: an array written into since is read afresh, and invalid bytes are refused every time.
 */
import { assertEquals, assertInstanceOf } from "@std/assert";
import { type AsgiApplication, AsgiProtocolError, createFetchHandler } from "../asgi.ts";
import { bytes } from "./fixtures/asgi_harness.ts";

/** Answers with `headers`, the same array object every time. */
function reusingApp(headers: [Uint8Array, Uint8Array][]): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") throw new Error("No lifespan here");
    await send({ type: "http.response.start", status: 200, headers });
    await send({ type: "http.response.body", body: bytes("ok") });
  };
}

Deno.test("send() reads a reused header array afresh after the app wrote into it", async () => {
  const value = bytes("aaaa");
  const name = bytes("x-tag");
  const handler = createFetchHandler(reusingApp([[name, value]]), { lifespan: "off" });
  const first = await handler.fetch(new Request("http://localhost/"));
  assertEquals(first.headers.get("x-tag"), "aaaa");
  await first.body?.cancel();
  value.set(bytes("bbbb"));
  name.set(bytes("x-tog"));
  const second = await handler.fetch(new Request("http://localhost/"));
  assertEquals(second.headers.get("x-tog"), "bbbb");
  assertEquals(second.headers.get("x-tag"), null);
  await second.body?.cancel();
});

Deno.test("send() refuses a reused header value once it holds a line break", async () => {
  const value = bytes("safe");
  const logged: unknown[] = [];
  const logger = { error: (...args: unknown[]) => logged.push(args[0]), warn() {}, info() {} };
  const handler = createFetchHandler(reusingApp([[bytes("x-tag"), value]]), {
    lifespan: "off",
    logger,
  });
  const first = await handler.fetch(new Request("http://localhost/"));
  assertEquals(first.headers.get("x-tag"), "safe");
  await first.body?.cancel();
  value.set(bytes("a\r\nb"));
  const second = await handler.fetch(new Request("http://localhost/"));
  assertEquals(second.status, 500);
  await second.body?.cancel();
  const error = logged[0];
  assertInstanceOf(error, AsgiProtocolError);
  assertEquals(
    (error as AsgiProtocolError).message,
    'Invalid value for header "x-tag": byte 0x0d is a control character; a header value ' +
      "holds tab, space, visible ASCII and bytes 0x80-0xff only (CR and LF would split the " +
      "response): percent-encode the text",
  );
});

Deno.test("send() converts more distinct headers than it keeps, all correctly", async () => {
  // More pairs than the cache holds, sent twice: every value must come out right both times.
  const headers: [Uint8Array, Uint8Array][] = [];
  for (let i = 0; i < 40; i++) headers.push([bytes(`x-h${i}`), bytes(`v${i}`)]);
  const handler = createFetchHandler(reusingApp(headers), { lifespan: "off" });
  for (let round = 0; round < 2; round++) {
    const response = await handler.fetch(new Request("http://localhost/"));
    for (let i = 0; i < 40; i++) assertEquals(response.headers.get(`x-h${i}`), `v${i}`);
    await response.body?.cancel();
  }
});

Deno.test("createFetchHandler() sends each response's own header list", async () => {
  // Consecutive responses alternate between lists the bridge hands Fetch as a record and as pairs
  // (a repeated name); none may get the previous response's headers.
  const lists: [string, string][][] = [
    [["x-a", "1"], ["x-a", "2"]],
    [["x-a", "1"]],
    [["x-a", "1"], ["x-a", "2"]],
    [["x-a", "1"], ["x-b", "3"]],
    [["x-a", "1"]],
  ];
  let next = 0;
  const app: AsgiApplication = async (scope, _receive, send) => {
    if (scope.type !== "http") throw new Error("No lifespan here");
    const list = lists[next++]!;
    await send({
      type: "http.response.start",
      status: 200,
      headers: list.map(([name, value]) => [bytes(name), bytes(value)]),
    });
    await send({ type: "http.response.body", body: bytes("ok") });
  };
  const handler = createFetchHandler(app, { lifespan: "off" });
  const seen: [string | null, string | null][] = [];
  for (let i = 0; i < lists.length; i++) {
    const response = await handler.fetch(new Request("http://localhost/"));
    seen.push([response.headers.get("x-a"), response.headers.get("x-b")]);
    await response.body?.cancel();
  }
  assertEquals(seen, [["1, 2", null], ["1", null], ["1, 2", null], ["1", "3"], ["1", null]]);
});

Deno.test("send() reads a reused header list afresh after pairs were added, replaced or broken", async () => {
  const logged: unknown[] = [];
  const logger = { error: (...args: unknown[]) => logged.push(args[0]), warn() {}, info() {} };
  const headers: [Uint8Array, Uint8Array][] = [[bytes("x-a"), bytes("1")]];
  const handler = createFetchHandler(reusingApp(headers), { lifespan: "off", logger });
  const get = async () => {
    const response = await handler.fetch(new Request("http://localhost/"));
    await response.body?.cancel();
    return response;
  };
  assertEquals((await get()).headers.get("x-a"), "1");
  headers.push([bytes("x-b"), bytes("2")]);
  let response = await get();
  assertEquals([response.headers.get("x-a"), response.headers.get("x-b")], ["1", "2"]);
  headers[0] = [bytes("x-c"), bytes("3")];
  response = await get();
  assertEquals([response.headers.get("x-a"), response.headers.get("x-c")], [null, "3"]);
  headers[1]![1] = bytes("4");
  assertEquals((await get()).headers.get("x-b"), "4");
  headers.push([bytes("content-length"), bytes("2")]);
  assertEquals((await get()).headers.get("content-length"), "2");
  headers.pop();
  (headers[0] as unknown[])[1] = "not bytes";
  assertEquals((await get()).status, 500);
  assertEquals(logged.length, 1);
  assertInstanceOf(logged[0], AsgiProtocolError);
});
