/**
 * The HTTP scope differential: random HTTP/1.x requests, sent byte for byte alike to uvicorn
 * 0.17.6 (Debian 12, h11) serving tests/fixtures/http_differential/app.py and to `serve()` on
 * each transport serving app.ts, which both answer with the scope and body they were given.
 * Methods, targets (percent-escapes valid and not, dot segments, `//`, `;`, `?` in the query),
 * header names and values (tabs, spaces at either end, obs-text bytes, repeated fields of any
 * case), bodies of stated length or chunked, HTTP/1.0 and 1.1.
 *
 * Every difference from uvicorn is listed in DIFFERENCES with its reason and turns uvicorn's answer
 * into ours; anything else that differs fails the test, with fast-check's shrunk request. Skipped,
 * saying why, without uvicorn.
 *
 * Responses are compared between the two transports, not with uvicorn, whose h11 differs from
 * both by design (it closes the connection without a word on a header value it refuses, and sends
 * a 205's body): random statuses, header fields (framing, hop-by-hop and invalid ones among them)
 * and bodies, given whole or in pieces, to GET, HEAD and POST over HTTP/1.0 and 1.1. What each
 * client reads (status, fields other than framing and date, the body its framing delimits, the
 * close) must be the same, but for RESPONSE_DIFFERENCES.
 */
import { assertEquals } from "@std/assert";
import { METHODS } from "node:http";
import fc from "npm:fast-check@4.10.2";
import { dechunk, start } from "./fixtures/asgi_harness.ts";
import { app, type ResponsePlan } from "./fixtures/http_differential/app.ts";
import { pythonHas, startUvicorn } from "./fixtures/uvicorn.ts";
import { propertyRuns } from "./_property.ts";

const ready = await pythonHas("uvicorn");
if (!ready) console.log("asgi_http_differential_test: skipped, needs uvicorn");

/** A request as the generator makes it. */
interface Sent {
  method: string;
  target: string;
  version: "1.0" | "1.1";
  headers: [string, string][];
  body: string[] | undefined;
  chunked: boolean;
}

/** What a server answered: the status, and the scope and body the application saw. */
interface Answer {
  status: number;
  seen?: {
    method: string;
    path: string;
    raw_path: string;
    query_string: string;
    root_path: string;
    http_version: string;
    scheme: string;
    headers: [string, string][];
    body: string;
  };
}

const hex = fc.constantFrom(..."0123456789abcdefABCDEF");
const pathPiece = fc.oneof(
  fc.constantFrom(..."abcXYZ019-._~!$&'()*+,;=:@"),
  fc.tuple(hex, hex).map(([a, b]) => `%${a}${b}`),
  fc.constantFrom("%", "%2", "%G1", "%2F", "%00", "%C3%A9", "%FF", "%E2%82%AC", "..", ".", "//"),
  fc.constantFrom("%25", "%3F", "%23", "/"),
);
const queryPiece = fc.oneof(pathPiece, fc.constantFrom("?", "=", "&", "+", "%20", "??"));
const target = fc.tuple(
  fc.array(pathPiece, { maxLength: 8 }),
  fc.option(fc.array(queryPiece, { maxLength: 6 }), { nil: undefined }),
).map(([path, query]) => `/${path.join("")}${query === undefined ? "" : `?${query.join("")}`}`);
const name = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-fxyzA-CXYZ0-9!#$%&'*+.^_`|~-]{1,8}$/) },
  { weight: 1, arbitrary: fc.constantFrom("Accept", "accept", "X-Dup", "x-dup", "Cookie") },
);
const valueChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x21, max: 0x7e }) },
  { weight: 2, arbitrary: fc.constantFrom(0x20, 0x09) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
).map((code) => String.fromCharCode(code));
const value = fc.array(valueChar, { maxLength: 12 }).map((chars) => chars.join(""));
const sent: fc.Arbitrary<Sent> = fc.record({
  method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND", "X-Y"),
  target,
  version: fc.constantFrom("1.0", "1.1"),
  headers: fc.array(fc.tuple(name, value), { maxLength: 5 }),
  body: fc.option(fc.array(fc.string({ minLength: 1, maxLength: 10 }), { maxLength: 3 }), {
    nil: undefined,
  }),
  chunked: fc.boolean(),
});

/** The request's bytes, each code unit one byte: obs-text goes out as the byte itself. */
function requestBytes(request: Sent): Uint8Array {
  let head = `${request.method} ${request.target} HTTP/${request.version}\r\nHost: x\r\n`;
  for (const [field, text] of request.headers) head += `${field}: ${text}\r\n`;
  let body = "";
  if (request.body !== undefined && request.chunked && request.version === "1.1") {
    head += "Transfer-Encoding: chunked\r\n";
    for (const chunk of request.body) body += `${chunk.length.toString(16)}\r\n${chunk}\r\n`;
    body += "0\r\n\r\n";
  } else if (request.body !== undefined) {
    body = request.body.join("");
    head += `Content-Length: ${body.length}\r\n`;
  }
  if (request.version === "1.1") head += "Connection: close\r\n";
  return Uint8Array.from(`${head}\r\n${body}`, (c) => c.charCodeAt(0));
}

/** Sends `bytes` on a new connection and reads the answer until the server closes it. */
async function exchange(port: number, bytes: Uint8Array): Promise<Answer> {
  using conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(bytes);
  const decoder = new TextDecoder();
  let answer = "";
  const timer = setTimeout(() => conn.close(), 5000);
  try {
    for await (const chunk of conn.readable) answer += decoder.decode(chunk, { stream: true });
  } catch {
    // Closed by the timer: the answer so far is judged.
  } finally {
    clearTimeout(timer);
  }
  const status = Number(answer.slice(9, 12));
  if (status !== 200) return { status };
  return { status, seen: JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) };
}

/** Fields joined as Deno's `Headers` joins them: empty values before the first are lost. */
function joinFields(fields: [string, string][]): [string, string][] {
  const joined = new Map<string, string>();
  for (const [field, text] of fields) {
    const before = joined.get(field);
    if (before === undefined || (before === "" && field !== "cookie")) joined.set(field, text);
    else joined.set(field, `${before}${field === "cookie" ? "; " : ", "}${text}`);
  }
  return [...joined].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Where we differ from uvicorn 0.17.6, and why: each entry turns uvicorn's answer to `request`
 * into the one expected of `transport`. Printed by the test as the differential's table.
 */
const DIFFERENCES: [string, string, (answer: Answer, request: Sent, transport: string) => void][] =
  [
    [
      "node: methods node:http does not know",
      "Node's parser takes only the methods of node:http's METHODS (PROPFIND yes, X-Y no) and " +
      "answers 400; uvicorn and Deno take any token (RFC 9110 §9.1)",
      (answer, request, transport) => {
        if (transport === "node" && !METHODS.includes(request.method)) {
          answer.status = 400;
          delete answer.seen;
        }
      },
    ],
    [
      "deno: the body of a GET",
      "Fetch gives a GET no body: Deno.serve drops it (docs/asgi.md, the GET body)",
      (answer, _request, transport) => {
        if (transport === "deno" && answer.seen?.method === "GET") answer.seen.body = "";
      },
    ],
    [
      "deno: the order and joining of header fields",
      "Fetch's Headers sort the fields by name and join repeated ones with ', ' (cookie with " +
      "'; '), losing an empty value that comes first; uvicorn passes them as sent",
      (answer, _request, transport) => {
        if (transport === "deno" && answer.seen) {
          answer.seen.headers = joinFields(answer.seen.headers);
        }
      },
    ],
    [
      "deno: http_version",
      "Deno.serve does not say which version a request came over: always 1.1",
      (answer, _request, transport) => {
        if (transport === "deno" && answer.seen) answer.seen.http_version = "1.1";
      },
    ],
  ];

Deno.test({
  name: "serve() builds the scope uvicorn builds for random HTTP/1.x requests, on both transports",
  ignore: !ready,
  async fn() {
    for (const [what, why] of DIFFERENCES) console.log(`differs from uvicorn: ${what}: ${why}`);
    // h11, named: where httptools is installed uvicorn's default parser is that one, which keeps
    // the spaces at the end of a field value (python3-httptools 0.1.1 failed the first request).
    await using uvicorn = await startUvicorn(
      new URL("./fixtures/http_differential/", import.meta.url),
      ["--http", "h11"],
    );
    await using deno = await start(app, "deno");
    await using node = await start(app, "node");
    const ports: Record<string, number> = { deno: deno.port, node: node.port };
    await fc.assert(
      fc.asyncProperty(sent, async (request) => {
        const bytes = requestBytes(request);
        const reference = await exchange(uvicorn.port, bytes);
        for (const transport of ["deno", "node"]) {
          const expected = structuredClone(reference);
          for (const [, , apply] of DIFFERENCES) apply(expected, request, transport);
          assertEquals(await exchange(ports[transport]!, bytes), expected, transport);
        }
      }),
      propertyRuns(150),
    );
  },
});

const plan: fc.Arbitrary<ResponsePlan> = fc.record({
  status: fc.constantFrom(200, 201, 204, 205, 206, 301, 304, 400, 404, 418, 500, 599, 103, 99, 600),
  headers: fc.array(
    fc.tuple(
      fc.oneof(
        { weight: 5, arbitrary: name },
        {
          weight: 3,
          arbitrary: fc.constantFrom(
            "content-type",
            "Content-Length",
            "transfer-encoding",
            "connection",
            "set-cookie",
            "x-dup",
            "date",
            "server",
            "keep-alive",
            "upgrade",
            "trailer",
            "te",
          ),
        },
        { weight: 1, arbitrary: fc.constantFrom("", "a b", "a:b", "a\r\nb", "\u00e9", "a\0") },
      ),
      fc.oneof(
        { weight: 5, arbitrary: value },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            "0",
            "3",
            "-1",
            "3, 3",
            "chunked",
            "gzip",
            "gzip, chunked",
            "close",
            "keep-alive",
            "a\rb",
            "a\nb",
            "a\0",
          ),
        },
      ),
    ),
    { maxLength: 4 },
  ),
  body: fc.array(fc.string({ maxLength: 6 }), { maxLength: 3 }),
});

/** What a client reads of a response: the status, the fields that are not framing, the body. */
function readResponse(raw: string, head: boolean): {
  status: string;
  fields: string[];
  body: string;
  chunked: boolean;
} {
  const end = raw.indexOf("\r\n\r\n");
  if (end === -1) {
    return { status: `no head: ${JSON.stringify(raw)}`, fields: [], body: "", chunked: false };
  }
  const lines = raw.slice(0, end).split("\r\n");
  const fields: string[] = [];
  let chunked = false;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    const field = line.slice(0, colon).toLowerCase();
    const text = line.slice(colon + 1).trim();
    if (field === "transfer-encoding") chunked = /(^|,)\s*chunked$/i.test(text);
    if (
      !["content-length", "transfer-encoding", "date", "connection", "keep-alive"].includes(field)
    ) {
      fields.push(`${field}: ${text}`);
    }
  }
  const rest = raw.slice(end + 4);
  const body = chunked && !head ? dechunk(rest) : rest;
  return { status: lines[0]!.slice(9, 12), fields: fields.sort(), body, chunked };
}

/** Sends `request` on a new connection; the raw answer, read until the server closes it. */
async function rawExchange(port: number, request: string): Promise<string> {
  using conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(Uint8Array.from(request, (c) => c.charCodeAt(0)));
  let raw = "";
  const timer = setTimeout(() => conn.close(), 3000);
  try {
    for await (const chunk of conn.readable) {
      for (const byte of chunk) raw += String.fromCharCode(byte);
    }
  } catch {
    raw += "<not closed within 3 s>";
  } finally {
    clearTimeout(timer);
  }
  return raw;
}

/**
 * Where node's response differs from deno's, and why: each entry turns what a client read of
 * deno's answer into what it reads of node's. Printed by the test.
 */
const RESPONSE_DIFFERENCES: [
  string,
  string,
  (deno: ReturnType<typeof readResponse>, node: ReturnType<typeof readResponse>) => void,
][] = [
  [
    "node: a trailer field where the body is not chunked",
    "node:http refuses it there; with no trailer section it says nothing, and is left out",
    (deno, node) => {
      if (!node.chunked) deno.fields = deno.fields.filter((f) => !f.startsWith("trailer:"));
    },
  ],
];

/** Whether the plan names a transfer coding other than chunked, which deno refuses. */
function codedOnDeno(plan: ResponsePlan): boolean {
  return plan.headers.some(([field, text]) =>
    field.toLowerCase() === "transfer-encoding" && !/^[ \t]*chunked[ \t]*$/i.test(text)
  );
}

Deno.test("serve() sends the same response on both transports for random application responses", async () => {
  for (const [what, why] of RESPONSE_DIFFERENCES) {
    console.log(`node differs from deno: ${what}: ${why}`);
  }
  console.log(
    "deno refuses (500) a transfer-encoding other than chunked: Deno.serve would drop it and send the coded bytes as the body",
  );
  await using deno = await start(app, "deno");
  await using node = await start(app, "node");
  const ports = [deno.port, node.port];
  const request = fc.record({
    plan,
    method: fc.constantFrom("GET", "HEAD", "POST"),
    version: fc.constantFrom("1.0", "1.1"),
  });
  await fc.assert(
    fc.asyncProperty(request, async ({ plan, method, version }) => {
      const text = `${method} /respond?${btoa(JSON.stringify(plan))} HTTP/${version}\r\n` +
        `Host: x\r\n${method === "POST" ? "Content-Length: 0\r\n" : ""}` +
        `${version === "1.1" ? "Connection: close\r\n" : ""}\r\n`;
      const [deno, node] = await Promise.all(
        ports.map(async (port) => readResponse(await rawExchange(port, text), method === "HEAD")),
      );
      if (codedOnDeno(plan)) {
        // deno refuses such a response (500): Deno.serve would drop the field and send the coded
        // bytes as the body. node sends it as given (tests/asgi_node_hardening_test.ts).
        assertEquals(deno!.status, "500");
        return;
      }
      for (const [, , apply] of RESPONSE_DIFFERENCES) apply(deno!, node!);
      assertEquals(
        { status: node!.status, fields: node!.fields, body: node!.body },
        { status: deno!.status, fields: deno!.fields, body: deno!.body },
      );
    }),
    propertyRuns(150),
  );
});
