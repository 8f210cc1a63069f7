/**
 * For information: the benchmark's handlers on a bare `node:http` server (Deno's Node
 * compatibility layer), the baseline for our bridge's `node` transport.
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * @module
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Buffer } from "node:buffer";

function reply(res: ServerResponse, status: number, body: string | Uint8Array): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": typeof body === "string" ? Buffer.byteLength(body) : body.byteLength,
  });
  res.end(body);
}

const server = createServer((req, res) => {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  const path = query < 0 ? url : url.slice(0, query);
  if (req.method === "POST" && path === "/echo") {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => reply(res, 200, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    return;
  }
  if (req.method === "GET") {
    if (path === "/hello") return reply(res, 200, "hello");
    if (path.startsWith("/hello/") && path.length > 7 && path.indexOf("/", 7) < 0) {
      return reply(res, 200, `hello ${path.slice(7)}`);
    }
  }
  reply(res, 404, "Not Found");
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
