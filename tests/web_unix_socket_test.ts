/**
 * An `App` served on a Unix domain socket (`serve(app, { path })`), on both transports: a route
 * and a WebSocket route reached over the socket with `fetch` through a Unix-socket client and
 * `Deno.connect`, the scope the handlers see, the App behind `proxyHeaders()`, and the socket
 * file gone once the server has shut down.
 */
import { assertEquals, assertMatch } from "@std/assert";
import {
  App,
  AsgiRouter,
  proxyHeaders,
  Response,
  Route,
  serve,
  type SocketHandler,
  type WebHandler,
} from "../web.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

// A directory of its own (short, for sun_path's 107 bytes), not one another run may be using.
const DIR = await Deno.makeTempDir({ prefix: "uds" });
globalThis.addEventListener("unload", () => Deno.removeSync(DIR, { recursive: true }));

const whoami: WebHandler = async (request) => {
  const { client, server, scheme } = request.scope;
  await request.respondWith(new Response({ body: JSON.stringify({ client, server, scheme }) }));
};

const shout: SocketHandler = async (socket) => {
  await socket.accept();
  for await (const message of socket) {
    if (typeof message === "string") await socket.send(message.toUpperCase());
  }
};

function app(): App {
  return new App({
    router: new AsgiRouter<WebHandler | SocketHandler>({
      routes: [
        new Route("/whoami", { handler: whoami }),
        new Route("/shout", { handler: shout, methods: ["WEBSOCKET"] }),
      ],
    }),
  });
}

for (const transport of ["deno", "node"] as const) {
  Deno.test(`App served with path on ${transport} answers over the Unix socket`, async () => {
    const path = `${DIR}/web-${transport}-${Deno.pid}.sock`;
    await Deno.remove(path).catch(() => {});
    const server = serve(proxyHeaders(app()), { path, transport, onListen() {} });
    const client = Deno.createHttpClient({ proxy: { transport: "unix", path } });
    try {
      await withTimeout(server.addr, BOUND_MS, "addr");
      const plain = await fetch("http://app/whoami", { client });
      assertEquals(await plain.json(), { client: null, server: [path, null], scheme: "http" });
      // nginx over the socket: its headers are believed by default.
      const proxied = await fetch("http://app/whoami", {
        client,
        headers: { "x-forwarded-for": "198.51.100.2", "x-forwarded-proto": "https" },
      });
      assertEquals(await proxied.json(), {
        client: ["198.51.100.2", 0],
        server: [path, null],
        scheme: "https",
      });
      const conn = await Deno.connect({ transport: "unix", path });
      try {
        await conn.write(new TextEncoder().encode(
          "GET /shout HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        ));
        // A masked text frame "hi" (mask 0).
        await conn.write(new Uint8Array([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69]));
        let answer = "";
        const buffer = new Uint8Array(4096);
        while (!answer.includes("HI")) {
          const n = await withTimeout(conn.read(buffer), BOUND_MS, "the socket's answer");
          if (n === null) break;
          answer += String.fromCharCode(...buffer.subarray(0, n));
        }
        assertMatch(answer, /^HTTP\/1\.1 101 /);
        assertEquals(answer.slice(answer.indexOf("\r\n\r\n") + 4), "\x81\x02HI");
      } finally {
        conn.close();
      }
    } finally {
      client.close();
      await withTimeout(server.shutdown(), BOUND_MS, "shutdown");
    }
    assertEquals(await Deno.lstat(path).then(() => true, () => false), false);
  });
}
