/**
 * A response's `transfer-encoding` on the deno transport. `Deno.serve` frames every body itself
 * and drops an application's `transfer-encoding`, so a coding named there (`gzip`) never reached
 * the client, which read the still-coded bytes as the body (defect found by the response
 * differential of 2026-11-28, documented then, refused now). The deno transport refuses such a
 * response where it is sent, as h11 (uvicorn) does; `node` sends it as given
 * (tests/asgi_node_hardening_test.ts).
 */
import { assertEquals, assertInstanceOf, assertMatch, assertStringIncludes } from "@std/assert";
import { type AsgiApplication, AsgiProtocolError, createFetchHandler } from "../asgi.ts";
import { bytes, rawRequest, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";

/** Sends `coding` as the response's transfer-encoding (or those headers); records what `send` did. */
function codingApp(
  coding: string | (() => [Uint8Array, Uint8Array][]),
  outcomes: unknown[],
  status = 200,
): AsgiApplication {
  return async (scope, _receive, send) => {
    if (scope.type !== "http") return;
    const headers = typeof coding === "string"
      ? [[bytes("transfer-encoding"), bytes(coding)] as [Uint8Array, Uint8Array]]
      : coding();
    try {
      await send({ type: "http.response.start", status, headers });
      await send({ type: "http.response.body", body: bytes("hello") });
      outcomes.push("sent");
    } catch (error) {
      outcomes.push(error);
      throw error;
    }
  };
}

/** Serves `coding` on `transport`; asserts a 500 and one refusal of `send`, and returns it. */
async function refusal(
  coding: Parameters<typeof codingApp>[0],
  transport: "deno" | "node",
): Promise<{ error: AsgiProtocolError; errors: string[] }> {
  const outcomes: unknown[] = [];
  await using server = await start(codingApp(coding, outcomes), transport);
  const raw = await rawRequest(
    server.port,
    "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
  );
  assertMatch(raw, /^HTTP\/1\.1 500 /);
  assertEquals(outcomes.length, 1);
  const error = outcomes[0];
  assertInstanceOf(error, AsgiProtocolError);
  return { error: error as AsgiProtocolError, errors: server.logger.lines("error") };
}

for (const coding of ["gzip", "gzip, chunked", "chunked, gzip", "x-custom"]) {
  Deno.test(`deno transport refuses a response transfer-encoding ${JSON.stringify(coding)} (regression: coded bytes sent as the body)`, async () => {
    const { error, errors } = await refusal(coding, "deno");
    assertEquals(
      error.message,
      `Invalid "transfer-encoding" ${
        JSON.stringify(coding)
      } in "http.response.start": Deno.serve frames the body itself and drops the field, so the client would read the coded bytes as the body; use "content-encoding" for compression, or transport "node"`,
    );
    assertStringIncludes(errors.join("\n"), 'Invalid "transfer-encoding"');
  });
}

Deno.test("deno transport sends a response with transfer-encoding chunked as Deno.serve frames it", async () => {
  const outcomes: unknown[] = [];
  await using server = await start(codingApp(" Chunked ", outcomes), "deno");
  const raw = await rawRequest(
    server.port,
    "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
  );
  assertMatch(raw, /^HTTP\/1\.1 200 /);
  assertEquals(outcomes, ["sent"]);
  assertEquals(server.logger.lines("error"), []);
});

Deno.test("createFetchHandler refuses a response transfer-encoding gzip as serve() does", async () => {
  const outcomes: unknown[] = [];
  const handler = createFetchHandler(codingApp("gzip", outcomes), {
    lifespan: "off",
    logger: { error() {}, warn() {}, info() {} },
  });
  const response = await handler.fetch(new Request("http://x/"));
  assertEquals(response.status, 500);
  await response.body?.cancel();
  assertInstanceOf(outcomes[0], AsgiProtocolError);
});

Deno.test("deno transport refuses transfer-encoding gzip in a header list node accepted first (regression: the list's cache skipped the check)", async () => {
  // One array, as an application sends a constant list: the core keeps the text of the last list
  // it checked, shared by every server of the process.
  const headers: [Uint8Array, Uint8Array][] = [[bytes("transfer-encoding"), bytes("gzip")]];
  const outcomes: unknown[] = [];
  const app = codingApp(() => headers, outcomes);
  await using node = await start(app, "node");
  await using deno = await start(app, "deno");
  const request = "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
  assertMatch(await rawRequest(node.port, request), /^HTTP\/1\.1 200 /);
  assertMatch(await rawRequest(deno.port, request), /^HTTP\/1\.1 500 /);
  assertEquals(outcomes[0], "sent");
  assertInstanceOf(outcomes[1], AsgiProtocolError);
});

// Regression (fresh-eyes review of f9d447a, 2026-11-28): a 204 states no transfer-encoding
// whatever the application set (docs/asgi.md, "HTTP details"), yet on deno one naming gzip got
// a 500: the field is dropped before any transport sees it, so there is no coded body to refuse.
// The review of that fix (2026-11-28): a 205 naming gzip got 500 on deno too, and on node went out
// with both `transfer-encoding: gzip` and the `content-length: 0` a 205 states (RFC 9112 §6.1:
// never both), and the connection closed.
for (const transport of TRANSPORTS) {
  Deno.test(`${transport} transport drops a 204's or a 205's transfer-encoding gzip rather than refuse it`, async (t) => {
    for (const [status, length] of [[204, null], [205, "0"]] as const) {
      await t.step(`${status}`, async () => {
        const outcomes: unknown[] = [];
        const app = codingApp("gzip", outcomes, status);
        await using server = await start(app, transport);
        const raw = await rawRequest(
          server.port,
          "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        );
        assertMatch(raw, new RegExp(`^HTTP/1\\.1 ${status} [^]*\r\n\r\n$`));
        assertEquals(/transfer-encoding/i.test(raw), false, raw);
        // Deno.serve strips a 205's content-length (docs/asgi.md, "HTTP details").
        if (transport === "node") {
          assertEquals(/\r\ncontent-length: 0\r\n/i.test(raw), length !== null, raw);
        }
        assertEquals(outcomes, ["sent"]);
        assertEquals(server.logger.lines("error"), []);
      });
    }
  });
}

// Regression (review, 2026-11-28): node:http sent `transfer-encoding: chunked, chunked` (or two
// such fields) over a body it chunked once, so a client that follows the header decodes it twice.
// Refused now on both transports, as h11 refuses it.
for (const transport of TRANSPORTS) {
  Deno.test(`${transport} transport refuses a response transfer-encoding that names chunked twice`, async (t) => {
    const cases: [string, string[]][] = [
      ["one field", ["chunked, chunked"]],
      ["two fields", ["chunked", "Chunked"]],
      ["with another coding between", ["chunked,gzip", " chunked"]],
    ];
    for (const [label, values] of cases) {
      await t.step(label, async () => {
        const { error } = await refusal(
          () => values.map((value) => [bytes("transfer-encoding"), bytes(value)]),
          transport,
        );
        assertStringIncludes(error.message, `names "chunked" 2 times`);
      });
    }
  });
}

// Review R6, 2026-11-28: node framed the body by a list the header did not state. "chunked," (an
// empty element, which a sender must not write: RFC 9110 §5.6.1) went out as the raw body ended
// by the close, which curl, reading the list as chunked, refused ("Illegal or missing
// hexadecimal sequence"); "chunked\xa0" (no token) went out chunked under a final coding that is
// not chunked. Refused now on both transports, naming the element.
for (const transport of TRANSPORTS) {
  Deno.test(`${transport} transport refuses a response transfer-encoding element that is not a coding`, async (t) => {
    const cases: [string, string, string][] = [
      ["a trailing empty element", "chunked,", '""'],
      ["an empty element between", "gzip, , chunked", '""'],
      ["an empty field", "", '""'],
      ["a byte that is no token", "chunked\xa0", '"chunked\\u00a0"'],
      ["a parameter", "gzip;level=1, chunked", '"gzip;level=1"'],
    ];
    for (const [label, value, element] of cases) {
      await t.step(label, async () => {
        const latin1 = Uint8Array.from(value, (char) => char.charCodeAt(0));
        const { error } = await refusal(() => [[bytes("transfer-encoding"), latin1]], transport);
        assertStringIncludes(error.message, `: ${element} is not a transfer coding;`);
      });
    }
  });
}
