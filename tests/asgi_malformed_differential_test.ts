/**
 * Malformed and hostile HTTP/1.1 against uvicorn: the cases of the malformed-request differential
 * of 2026-11-29 (request smuggling and parsing ambiguities: framing, line endings, field syntax,
 * request targets and Host, methods and versions, sizes), sent as raw bytes to each transport and
 * to uvicorn 0.17.6 (Debian 12, h11 0.14), with a plain request pipelined behind where what
 * follows the request is in question. Each row pins what every server does, so that a Deno, Node
 * or uvicorn upgrade that changes one shows here; docs/asgi.md ("Malformed and hostile requests")
 * explains them, and tests/asgi_head_differential_test.ts has the rows this one does not repeat
 * (bare LF, obs-fold, `*`, lower-case methods, `Expect`, `Upgrade: h2c`). The uvicorn column is
 * skipped, saying why, without uvicorn. Outcomes are written as
 * tests/fixtures/request_differential.ts describes.
 *
 * What is safe: no row may serve `/smuggled`, and where a server reads a request differently
 * from another (a framing, a Host) it must refuse it or close, never serve what follows as a
 * request of its own reading.
 */
import { differentialTests, NEXT, ours, type Row } from "./fixtures/request_differential.ts";

/** A request hidden in a body: served, it was smuggled. */
const SMUGGLED = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

/** A POST with `fields` and `body`, and NEXT pipelined behind it. */
function post(fields: string, body: string, version = "1.1"): string {
  return `POST /a HTTP/${version}\r\nHost: x\r\n${fields}\r\n${body}${NEXT}`;
}

/** A GET of `target` with `fields` (the Host among them), and NEXT pipelined behind it. */
function get(target: string, fields: string, line = `GET ${target} HTTP/1.1`): string {
  return `${line}\r\n${fields}\r\n${NEXT}`;
}

const CHUNKED = "Transfer-Encoding: chunked\r\n";
const NEXT_SERVED = "200 GET /next 1.1 host=[x] body=0";
const REFUSED = ["400", "closed"];

/** A POST of "hello" that the application read whole, and NEXT served after it. */
const HELLO = ["200 POST /a 1.1 host=[x] body=5", NEXT_SERVED];

const ROWS: Row[] = [
  // Framing (RFC 9112 §6): where one party could read the body's end elsewhere.
  {
    label: "Content-Length beside Transfer-Encoding: chunked: uvicorn goes by chunked and goes on",
    request: post(`Content-Length: 5\r\n${CHUNKED}`, "0\r\n\r\n"),
    outcomes: ours(REFUSED, ["200 POST /a 1.1 host=[x] body=0", NEXT_SERVED]),
  },
  {
    label:
      "two equal Content-Length fields: h11 keeps one (deno passed '5, 5' on until 2026-11-29)",
    request: post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
    // Refused by the bridge on deno, where the two agree on the body's end: the connection goes on.
    outcomes: { deno: ["400", NEXT_SERVED], node: REFUSED, uvicorn: HELLO },
  },
  {
    label: "two different Content-Length fields",
    request: post("Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "Content-Length: 5, 5: h11 takes the list",
    request: post("Content-Length: 5, 5\r\n", "hello"),
    outcomes: ours(REFUSED, HELLO),
  },
  {
    label: "Transfer-Encoding: chunked, identity",
    request: post("Transfer-Encoding: chunked, identity\r\n", "5\r\nhello\r\n0\r\n\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "Transfer-Encoding: xchunked",
    request: post("Transfer-Encoding: xchunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "chunked not the final coding (chunked, gzip)",
    request: post("Transfer-Encoding: chunked, gzip\r\n", "5\r\nhello\r\n0\r\n\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "gzip, chunked: 501, and deno, having read the chunked body, goes on",
    request: post("Transfer-Encoding: gzip, chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
    outcomes: { deno: ["501", NEXT_SERVED], node: ["501", "closed"], uvicorn: REFUSED },
  },
  {
    label: "Transfer-Encoding in an HTTP/1.0 request",
    request: post(`${CHUNKED}Connection: keep-alive\r\n`, "5\r\nhello\r\n0\r\n\r\n", "1.0"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "chunk sizes with leading zeros",
    request: post(CHUNKED, "0005\r\nhello\r\n0000\r\n\r\n"),
    outcomes: ours(HELLO, HELLO),
  },
  {
    label: "a chunk size with '+': Deno.serve closes without an answer",
    request: post(CHUNKED, "+5\r\nhello\r\n0\r\n\r\n"),
    outcomes: { deno: ["closed"], node: REFUSED, uvicorn: REFUSED },
  },
  {
    label: "a chunk size past 2^64 (ffffffffffffffff1): h11 waits for the chunk",
    request: post(CHUNKED, "ffffffffffffffff1\r\nhello\r\n0\r\n\r\n"),
    outcomes: { deno: ["closed"], node: REFUSED, uvicorn: ["no answer"] },
  },
  {
    label: "chunk extensions",
    request: post(CHUNKED, '5;a=b;c="d"\r\nhello\r\n0;x\r\n\r\n'),
    outcomes: ours(HELLO, HELLO),
  },
  {
    // The bridge's 400: the application was called and its body failed. node's parser keeps no
    // extension it skips (10 MB of one cost no memory, 2026-11-29); uvicorn refuses 1 MB.
    label: "a chunk extension of 100 KB: Deno.serve fails the body",
    request: post(CHUNKED, `5;${"a".repeat(100_000)}\r\nhello\r\n0\r\n\r\n`),
    outcomes: { deno: REFUSED, node: HELLO, uvicorn: HELLO },
  },
  {
    label: "a trailer section",
    request: post(CHUNKED, "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
    outcomes: ours(HELLO, HELLO),
  },
  {
    // Deno.serve fails the body past 64 KB of trailers, then neither answers nor closes
    // (a plain Deno.serve handler too, Deno 2.9.6): the connection stays until the client goes.
    label: "a trailer section of 100 KB: Deno.serve never answers",
    request: post(CHUNKED, `5\r\nhello\r\n0\r\nX-T: ${"a".repeat(100_000)}\r\n\r\n`),
    outcomes: { deno: ["no answer"], node: ["431", "closed"], uvicorn: HELLO },
  },
  // Field lines (RFC 9112 §5).
  {
    label: "a bare CR ending the request line",
    request: "GET /a HTTP/1.1\rHost: x\r\n\r\n",
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "whitespace before a field's colon",
    request: get("/a", "Host: x\r\nX-A : a\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "a space in a field name",
    request: get("/a", "Host: x\r\nX A: a\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "NUL in a field value",
    request: get("/a", "Host: x\r\nX-A: a\x00b\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "DEL in a field value: h11 passes it on",
    request: get("/a", "Host: x\r\nX-A: a\x7fb\r\n"),
    outcomes: ours(REFUSED, ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED]),
  },
  {
    label: "non-ASCII in a field name",
    request: get("/a", "Host: x\r\nX-\xc3\xa9: a\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  // Targets and Host (RFC 9112 §3.2).
  {
    label: "an absolute-form target naming another host than the Host",
    request: get("http://evil/p", "Host: good\r\n"),
    outcomes: {
      // A well-framed request refused by the bridge: deno goes on, node closes.
      deno: ["400", NEXT_SERVED],
      node: REFUSED,
      uvicorn: ["200 GET http://evil/p 1.1 host=[good] body=0", NEXT_SERVED],
    },
  },
  {
    label: "an absolute-form target naming the Host's host in another case, with its default port",
    request: get("http://GOOD:80/p", "Host: good\r\n"),
    outcomes: ours(
      ["200 GET /p 1.1 host=[good] body=0", NEXT_SERVED],
      ["200 GET http://GOOD:80/p 1.1 host=[good] body=0", NEXT_SERVED],
    ),
  },
  {
    label: "an absolute-form target without a Host: deno takes the target's authority as the Host",
    request: get("http://evil/p", ""),
    outcomes: {
      deno: ["200 GET /p 1.1 host=[evil] body=0", NEXT_SERVED],
      node: REFUSED,
      uvicorn: REFUSED,
    },
  },
  {
    label: "an authority-form target in a GET",
    request: get("evil:80", "Host: good\r\n"),
    outcomes: ours(REFUSED, ["200 GET evil:80 1.1 host=[good] body=0", NEXT_SERVED]),
  },
  {
    label: "a target with a fragment: all keep it in the path",
    request: get("/a#frag", "Host: x\r\n"),
    outcomes: ours(
      ["200 GET /a#frag 1.1 host=[x] body=0", NEXT_SERVED],
      ["200 GET /a#frag 1.1 host=[x] body=0", NEXT_SERVED],
    ),
  },
  {
    label: "two Host fields",
    request: get("/a", "Host: a\r\nHost: b\r\n"),
    outcomes: ours(REFUSED, REFUSED),
  },
  {
    label: "an empty Host (RFC 9112 §3.2 allows it)",
    request: get("/a", "Host:\r\n"),
    outcomes: ours(
      ["200 GET /a 1.1 host=[] body=0", NEXT_SERVED],
      ["200 GET /a 1.1 host=[] body=0", NEXT_SERVED],
    ),
  },
  {
    // Passed on by both transports until 2026-11-29 (tests/asgi_host_field_test.ts). A
    // well-framed request refused by the bridge: deno goes on, node closes.
    label: "a Host that is no host (a space, userinfo): h11 passes it on",
    request: get("/a", "Host: u@a b\r\n"),
    outcomes: {
      deno: ["400", NEXT_SERVED],
      node: REFUSED,
      uvicorn: ["200 GET /a 1.1 host=[u@a b] body=0", NEXT_SERVED],
    },
  },
  // Methods and versions (RFC 9112 §3).
  {
    label: "an unknown method: node:http knows only its METHODS",
    request: get("/a", "Host: x\r\n", "FOO /a HTTP/1.1"),
    outcomes: {
      deno: ["200 FOO /a 1.1 host=[x] body=0", NEXT_SERVED],
      node: REFUSED,
      uvicorn: ["200 FOO /a 1.1 host=[x] body=0", NEXT_SERVED],
    },
  },
  {
    label: "a method of 1,000 letters",
    request: get("/a", "Host: x\r\n", `${"M".repeat(1000)} /a HTTP/1.1`),
    outcomes: {
      deno: [`200 ${"M".repeat(1000)} /a 1.1 host=[x] body=0`, NEXT_SERVED],
      node: REFUSED,
      uvicorn: [`200 ${"M".repeat(1000)} /a 1.1 host=[x] body=0`, NEXT_SERVED],
    },
  },
  {
    label: "an HTTP/0.9 request line: node and h11 wait for more",
    request: "GET /a\r\n",
    outcomes: { deno: REFUSED, node: ["no answer"], uvicorn: ["no answer"] },
  },
  {
    label: "HTTP/2.0 in a request line: h11 serves it as 2.0",
    request: get("/a", "Host: x\r\n", "GET /a HTTP/2.0"),
    outcomes: {
      deno: REFUSED,
      node: ["505", "closed"],
      uvicorn: ["200 GET /a 2.0 host=[x] body=0", NEXT_SERVED],
    },
  },
  {
    label: "a space after the version",
    request: get("/a", "Host: x\r\n", "GET /a HTTP/1.1 "),
    outcomes: ours(REFUSED, REFUSED),
  },
  // Sizes: what each bounds (docs/asgi.md, "Limits").
  {
    label: "a request line of 100 KB",
    request: get("/a", "Host: x\r\n", `GET /a?${"q".repeat(100_000)} HTTP/1.1`),
    outcomes: {
      deno: REFUSED,
      node: ["431", "closed"],
      uvicorn: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
    },
  },
  {
    label: "a request line of 60 KB: node's 16 KB head limit",
    request: get("/a", "Host: x\r\n", `GET /a?${"q".repeat(60_000)} HTTP/1.1`),
    outcomes: {
      deno: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
      node: ["431", "closed"],
      uvicorn: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
    },
  },
  {
    label: "200 header fields: Deno.serve's limit",
    request: get(
      "/a",
      `Host: x\r\n${Array.from({ length: 200 }, (_, i) => `X-${i}: 1\r\n`).join("")}`,
    ),
    outcomes: {
      deno: REFUSED,
      node: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
      uvicorn: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
    },
  },
  {
    label: "10,000 header fields",
    request: get(
      "/a",
      `Host: x\r\n${Array.from({ length: 10_000 }, (_, i) => `X-${i}: 1\r\n`).join("")}`,
    ),
    outcomes: {
      deno: REFUSED,
      node: ["431", "closed"],
      uvicorn: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
    },
  },
  // A request inside a body is body.
  {
    label: "a request inside a body of stated length",
    request: post(`Content-Length: ${SMUGGLED.length}\r\n`, SMUGGLED),
    outcomes: ours(
      [`200 POST /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
      [`200 POST /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
    ),
  },
  {
    label: "a request inside a chunked body",
    request: post(CHUNKED, `${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`),
    outcomes: ours(
      [`200 POST /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
      [`200 POST /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
    ),
  },
  {
    label: "a request inside the body of a GET: Deno.serve reads it and drops it",
    request: `GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n` +
      `${SMUGGLED}${NEXT}`,
    outcomes: {
      deno: ["200 GET /a 1.1 host=[x] body=0", NEXT_SERVED],
      node: [`200 GET /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
      uvicorn: [`200 GET /a 1.1 host=[x] body=${SMUGGLED.length}`, NEXT_SERVED],
    },
  },
].map((row) => ({ ...row, details: true }));

await differentialTests(
  "serve() and uvicorn: what each does with malformed and hostile requests",
  ROWS,
  "asgi_malformed_differential_test",
);
