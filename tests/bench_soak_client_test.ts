import { assertEquals } from "@std/assert";
import { Connection, percentile, probe, requestBytes } from "../bench/soak/_client.ts";
import { withTimeout } from "./fixtures/timeout.ts";

/** A raw TCP server that answers each connection with `reply(bytes received)`, then `after`. */
function cannedServer(
  reply: string,
  after: "close" | "stay" = "close",
): { port: number; close: () => Promise<void> } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      (async () => {
        await conn.read(new Uint8Array(65536));
        await conn.write(new TextEncoder().encode(reply));
        if (after === "close") conn.close();
      })().catch(() => {});
    }
  })();
  return {
    port: listener.addr.port,
    close: async () => {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // Closed by the server already.
        }
      }
      await serving.catch(() => {});
    },
  };
}

const GET = requestBytes("GET / HTTP/1.1\r\nhost: x\r\n\r\n");

Deno.test("Connection.readResponse() reads content-length, chunked and close-delimited bodies", async (t) => {
  const cases: [string, string, { status: number; close: boolean; bodyLength: number }][] = [
    [
      "content-length",
      "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
      { status: 200, close: false, bodyLength: 5 },
    ],
    [
      "chunked",
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n",
      { status: 201, close: false, bodyLength: 13 },
    ],
    [
      "close-delimited",
      "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end",
      { status: 200, close: true, bodyLength: 13 },
    ],
    ["204 without a body", "HTTP/1.1 204 No Content\r\n\r\n", {
      status: 204,
      close: false,
      bodyLength: 0,
    }],
  ];
  for (const [name, reply, expected] of cases) {
    await t.step(name, async () => {
      const server = cannedServer(reply);
      const connection = await Connection.open(server.port);
      try {
        await connection.write(GET);
        assertEquals(await withTimeout(connection.readResponse(), 5000, name), expected);
      } finally {
        connection.close();
        await server.close();
      }
    });
  }
});

Deno.test("probe() tells an answer from a closed connection and from silence", async (t) => {
  await t.step("answer", async () => {
    const server = cannedServer("HTTP/1.1 413 Content Too Large\r\ncontent-length: 0\r\n\r\n");
    assertEquals((await probe(server.port, GET, 2000)).outcome, 413);
    await server.close();
  });
  await t.step("closed", async () => {
    const server = cannedServer("");
    assertEquals((await probe(server.port, GET, 2000)).outcome, "closed");
    await server.close();
  });
  await t.step("silent", async () => {
    const server = cannedServer("", "stay");
    assertEquals((await probe(server.port, GET, 200)).outcome, "silent");
    await server.close();
  });
});

Deno.test("percentile() picks the value at the rank, and 0 for no values", () => {
  const values = Array.from({ length: 100 }, (_, i) => 100 - i);
  assertEquals(percentile(values, 99), 100);
  assertEquals(percentile(values, 50), 51);
  assertEquals(percentile([], 99), 0);
});
