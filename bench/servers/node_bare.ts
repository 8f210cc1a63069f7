/**
 * For information: the benchmark's two handlers on a bare `node:http` server
 * (Deno's Node compatibility layer), the baseline for our bridge's `node`
 * transport.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Buffer } from "node:buffer";

const server = createServer((req, res) => {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  const path = query < 0 ? url : url.slice(0, query);
  let body: string | undefined;
  if (req.method === "GET") {
    if (path === "/hello") body = "hello";
    else if (path.startsWith("/hello/") && path.length > 7 && path.indexOf("/", 7) < 0) {
      body = `hello ${path.slice(7)}`;
    }
  }
  const status = body === undefined ? 404 : 200;
  body ??= "Not Found";
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
});
server.listen(Number(Deno.env.get("PORT") ?? 0), "127.0.0.1", () => {
  console.log(`LISTENING ${(server.address() as AddressInfo).port}`);
});
// A graceful exit on SIGTERM lets `--cpu-prof` write its profile.
Deno.addSignalListener("SIGTERM", function stop() {
  Deno.removeSignalListener("SIGTERM", stop);
  server.close();
  server.closeAllConnections();
});
