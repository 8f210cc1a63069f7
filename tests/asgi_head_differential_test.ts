/**
 * Request heads against uvicorn: the cases of the head differential of 2026-11-29 where the
 * transports and uvicorn 0.17.6 (Debian 12, h11 0.14) part ways, or where parting ways would
 * matter, sent as raw bytes to each of them with a plain request pipelined behind where the
 * framing is in question. Each row pins what every server does, so that a Deno, Node or uvicorn
 * upgrade that changes one shows here; docs/asgi.md ("Request heads against uvicorn") explains
 * them. The uvicorn column is skipped, saying why, without uvicorn.
 *
 * An outcome lists what a client reads, in order: `"<status> <method> <path> <version>"` for a
 * request the application answered (tests/fixtures/http_differential/app.*), the status alone
 * for one the server answered itself, then `"closed"` where the server must close the
 * connection. Reading stops at the first difference, which is then recorded in its place
 * (`"no answer"`, `"still open"`).
 */
import { assertEquals } from "@std/assert";
import { dechunk, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { app } from "./fixtures/http_differential/app.ts";
import { RawClient } from "./fixtures/raw_client.ts";
import { pythonHas, startUvicorn } from "./fixtures/uvicorn.ts";

const ready = await pythonHas("uvicorn");
if (!ready) {
  console.log("asgi_head_differential_test: the uvicorn column is skipped, needs uvicorn");
}

/** How long a read waits for bytes that should come at once: generous for a busy machine. */
const PATIENCE_MS = 2000;

/** Pipelined behind a request whose framing is in question: served, it was read as a request. */
const NEXT = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";

type Server = "deno" | "node" | "uvicorn";

/** One case: what is sent, and what a client reads from each server. */
interface Row {
  label: string;
  request: string;
  outcomes: Record<Server, string[]>;
}

/** The same outcome on both transports. */
function ours(outcome: string[], uvicorn: string[]): Record<Server, string[]> {
  return { deno: outcome, node: outcome, uvicorn };
}

const ROWS: Row[] = [
  {
    label: "an absolute-form target: the path alone, where uvicorn's h11 passes the whole URL",
    request: "GET http://h/p?q HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: ours(["200 GET /p 1.1"], ["200 GET http://h/p 1.1"]),
  },
  {
    label: "an absolute-form target with an empty authority",
    request: "GET http:///p HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: {
      // Deno's URL takes it for an origin-form path it cannot tell from "/http:///p".
      deno: ["200 GET /http:///p 1.1"],
      node: ["200 GET /p 1.1"],
      uvicorn: ["200 GET http:///p 1.1"],
    },
  },
  {
    label: "OPTIONS *: '/*' on deno, whose URL cannot tell it from OPTIONS /*",
    request: "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: {
      deno: ["200 OPTIONS /* 1.1"],
      node: ["200 OPTIONS * 1.1"],
      uvicorn: ["200 OPTIONS * 1.1"],
    },
  },
  {
    label: "GET *: Deno.serve refuses it",
    request: "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: {
      deno: ["400", "closed"],
      node: ["200 GET * 1.1"],
      uvicorn: ["200 GET * 1.1"],
    },
  },
  {
    label: "a field folded onto a second line (obs-fold)",
    request: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
    outcomes: ours(["400", "closed"], ["200 GET / 1.1"]),
  },
  {
    label: "a control byte in a field value",
    request: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
    outcomes: ours(["400", "closed"], ["200 GET / 1.1"]),
  },
  {
    label: "an empty line before the request line",
    request: "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: ours(["200 GET / 1.1"], ["400", "closed"]),
  },
  {
    label: "lines ending in a bare LF",
    request: "GET / HTTP/1.1\nHost: x\n\n",
    outcomes: { deno: ["200 GET / 1.1"], node: ["400", "closed"], uvicorn: ["200 GET / 1.1"] },
  },
  {
    label: "HTTP/1.2: uvicorn passes the version on",
    request: "GET / HTTP/1.2\r\nHost: x\r\n\r\n",
    outcomes: ours(["400", "closed"], ["200 GET / 1.2"]),
  },
  {
    label: "a lower-case method",
    request: `get / HTTP/1.1\r\nHost: x\r\n\r\n${NEXT}`,
    outcomes: {
      // A well-framed request refused by the bridge: the connection goes on.
      deno: ["400", "200 GET /next 1.1"],
      node: ["400", "closed"],
      uvicorn: ["200 get / 1.1", "200 GET /next 1.1"],
    },
  },
  {
    label: "HTTP/1.0 asking for keep-alive, a request pipelined behind it",
    request: `GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n${NEXT}`,
    outcomes: {
      // Deno.serve does not say which version a request came over.
      deno: ["200 GET / 1.1", "200 GET /next 1.1"],
      node: ["200 GET / 1.0", "200 GET /next 1.1"],
      // uvicorn closes after an HTTP/1.0 request, and refuses one with bytes pipelined behind.
      uvicorn: ["400", "closed"],
    },
  },
  {
    label: "an HTTP/1.1 request without a Host",
    request: "GET / HTTP/1.1\r\n\r\n",
    outcomes: { deno: ["200 GET / 1.1"], node: ["400", "closed"], uvicorn: ["400", "closed"] },
  },
  {
    label: "raw UTF-8 in the target",
    request: "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
    outcomes: {
      deno: ["200 GET /café 1.1"],
      node: ["400", "closed"],
      uvicorn: ["400", "closed"],
    },
  },
  {
    label: "a chunk size with a space before it: Deno.serve alone takes it",
    request:
      `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n${NEXT}`,
    outcomes: {
      deno: ["200 POST / 1.1", "200 GET /next 1.1"],
      node: ["400", "closed"],
      uvicorn: ["400", "closed"],
    },
  },
  {
    label: "a chunk size in hex with 0x: Deno.serve closes without an answer",
    request:
      `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n${NEXT}`,
    outcomes: { deno: ["closed"], node: ["400", "closed"], uvicorn: ["400", "closed"] },
  },
  {
    label: "Expect: 100-continue in HTTP/1.0: Deno.serve sends the 100 all the same",
    request: "POST / HTTP/1.0\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
    outcomes: {
      deno: ["100", "200 POST / 1.1"],
      node: ["200 POST / 1.0"],
      uvicorn: ["200 POST / 1.0"],
    },
  },
];

/** What a client reads of one response whose head is `head`. */
async function answerOf(client: RawClient, head: string): Promise<string> {
  const status = head.slice(9, 12);
  if (status.startsWith("1")) return status;
  const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
  let body: string;
  if (length !== undefined) body = await client.body(Number(length), PATIENCE_MS);
  else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    body = dechunk(await client.chunked(PATIENCE_MS));
  } else {
    // Delimited by the close (uvicorn's own 400).
    await client.closedWithin(PATIENCE_MS);
    body = await client.body(client.pending.length);
  }
  if (status !== "200") return status;
  const seen = JSON.parse(new TextDecoder().decode(Uint8Array.from(body, (c) => c.charCodeAt(0))));
  return `${status} ${seen.method} ${seen.path} ${seen.http_version}`;
}

/** Sends `request` on a new connection and reads as many outcomes as `expected` has. */
async function outcome(port: number, request: string, expected: string[]): Promise<string[]> {
  using client = await RawClient.connect(port);
  await client.write(request);
  const got: string[] = [];
  for (const want of expected) {
    if (want === "closed") {
      const closed = await client.closedWithin(PATIENCE_MS) < PATIENCE_MS;
      got.push(
        closed
          ? (client.pending === "" ? "closed" : `closed after ${client.pending}`)
          : "still open",
      );
      break;
    }
    let head: string;
    try {
      head = await client.head(PATIENCE_MS);
    } catch (error) {
      got.push(String(error).includes("Connection closed") ? "closed" : "no answer");
      break;
    }
    got.push(await answerOf(client, head));
  }
  return got;
}

for (const server of [...TRANSPORTS, "uvicorn"] as const) {
  Deno.test({
    name: `serve() and uvicorn: what each does with odd request heads [${server}]`,
    ignore: server === "uvicorn" && !ready,
    async fn(t) {
      await using running = server === "uvicorn"
        ? await startUvicorn(new URL("./fixtures/http_differential/", import.meta.url), [
          // Its default parser is httptools where that is installed, which parts ways elsewhere.
          "--http",
          "h11",
        ])
        : await start(app, server);
      for (const row of ROWS) {
        await t.step(row.label, async () => {
          const expected = row.outcomes[server];
          assertEquals(await outcome(running.port, row.request, expected), expected);
        });
      }
    },
  });
}
