/**
 * Request heads against uvicorn: the cases of the head differential of 2026-11-29 where the
 * transports and uvicorn 0.17.6 (Debian 12, h11 0.14) part ways, or where parting ways would
 * matter, sent as raw bytes to each of them with a plain request pipelined behind where the
 * framing is in question. Each row pins what every server does, so that a Deno, Node or uvicorn
 * upgrade that changes one shows here; docs/asgi.md ("Request heads against uvicorn") explains
 * them. The uvicorn column is skipped, saying why, without uvicorn.
 *
 * Outcomes are written as tests/fixtures/request_differential.ts describes.
 */
import { differentialTests, NEXT, ours, type Row } from "./fixtures/request_differential.ts";

const ROWS: Row[] = [
  {
    label: "an absolute-form target: the path alone, where uvicorn's h11 passes the whole URL",
    request: "GET http://h/p?q HTTP/1.1\r\nHost: h\r\n\r\n",
    outcomes: ours(["200 GET /p 1.1"], ["200 GET http://h/p 1.1"]),
  },
  {
    // With the empty Host RFC 9112 §3.2 asks for: another is refused, as in
    // tests/asgi_host_field_test.ts.
    label: "an absolute-form target with an empty authority",
    request: "GET http:///p HTTP/1.1\r\nHost:\r\n\r\n",
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

await differentialTests(
  "serve() and uvicorn: what each does with odd request heads",
  ROWS,
  "asgi_head_differential_test",
);
