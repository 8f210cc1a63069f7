/**
 * The fault suite's ASGI server: a plain ASGI application served by `serve()`.
 *
 * Routes: `GET /ok`; `POST /echo` (reads the body, answers its length); `GET /stream?n=&ms=&kib=`
 * (`n` chunks of `kib` KiB, default 1, `ms` apart, none with `ms=0`); `GET /slow?ms=` (answers after `ms`, or stops early on
 * `http.disconnect`); `GET /_stats`. Anything else gets 404.
 *
 * Environment: `TRANSPORT` (`deno` or `node`), `MAX_BODY_SIZE` (bytes; the bridge's default
 * when unset), `SHUTDOWN_TIMEOUT` (ms, default 5000), `STALL_TIMEOUT` (ms; the bridge's default
 * when unset).
 *
 * @module
 */
import { countingLogger, envNumber, exitOnSigterm, listen, statsJson } from "./_server_common.ts";
import { type AsgiApplication, type Receive, type Send, serve, textBytes } from "../../asgi.ts";

const TEXT: [Uint8Array, Uint8Array][] = [[textBytes("content-type"), textBytes("text/plain")]];
const KIB = new Uint8Array(1024).fill(0x61);

async function reply(send: Send, status: number, text: string): Promise<void> {
  await send({ type: "http.response.start", status, headers: TEXT });
  await send({ type: "http.response.body", body: textBytes(text) });
}

/** Reads the body to its end; `undefined` when the client left first. */
async function bodyLength(receive: Receive): Promise<number | undefined> {
  let length = 0;
  for (;;) {
    const message = await receive();
    if (message.type !== "http.request") return undefined;
    length += message.body.length;
    if (!message.more_body) return length;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const app: AsgiApplication = async (scope, receive, send) => {
  if (scope.type === "lifespan") {
    for (;;) {
      const message = await receive();
      if (message.type === "lifespan.startup") await send({ type: "lifespan.startup.complete" });
      else {
        await send({ type: "lifespan.shutdown.complete" });
        return;
      }
    }
  }
  if (scope.type !== "http") return;
  const query = new URLSearchParams(new TextDecoder().decode(scope.query_string));
  switch (scope.path) {
    case "/ok":
      return await reply(send, 200, "ok");
    case "/echo": {
      const length = await bodyLength(receive);
      if (length !== undefined) await reply(send, 200, String(length));
      return;
    }
    case "/stream": {
      const n = Number(query.get("n") ?? 8);
      const ms = Number(query.get("ms") ?? 10);
      const kib = Number(query.get("kib") ?? 1);
      const chunk = kib === 1 ? KIB : new Uint8Array(kib * 1024).fill(0x61);
      await send({ type: "http.response.start", status: 200, headers: TEXT });
      for (let i = 0; i < n; i++) {
        await send({ type: "http.response.body", body: chunk, more_body: true });
        if (ms > 0) await sleep(ms);
      }
      return await send({ type: "http.response.body" });
    }
    case "/slow": {
      await bodyLength(receive);
      const disconnected = receive().then(() => true);
      const done = await Promise.race([sleep(Number(query.get("ms") ?? 100)), disconnected]);
      if (done !== true) await reply(send, 200, "slow");
      return;
    }
    case "/_stats":
      return await reply(send, 200, statsJson());
    default:
      return await reply(send, 404, "Not Found");
  }
};

const server = serve(app, {
  ...listen,
  transport: Deno.env.get("TRANSPORT") === "node" ? "node" : "deno",
  maxBodySize: envNumber("MAX_BODY_SIZE"),
  shutdownTimeout: envNumber("SHUTDOWN_TIMEOUT", 5000),
  stallTimeout: envNumber("STALL_TIMEOUT"),
  logger: countingLogger,
});
exitOnSigterm(server);
