/**
 * proxyHeaders(): X-Forwarded-For and X-Forwarded-Proto believed from trusted peers only, in a
 * new scope; table-driven over peers, trusted lists and header chains, then once per transport
 * on a real server.
 */
import { assert, assertEquals, assertStrictEquals, assertThrows } from "@std/assert";
import {
  type AsgiApplication,
  type HttpScope,
  type LifespanScope,
  proxyHeaders,
  type ProxyHeadersOptions,
  type Scope,
  type WebSocketScope,
} from "../asgi.ts";
import { bytes, rawRequest, start, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { handshake } from "./fixtures/ws_client.ts";
import { httpScope as minimalHttpScope } from "./fixtures/web_helpers.ts";

/** An `http` scope from `client`, with header fields given as `[name, value]` text pairs. */
function httpScope(
  client: [string, number] | null,
  headers: readonly [string, string][],
): HttpScope {
  return {
    ...minimalHttpScope(),
    headers: headers.map(([name, value]) => [bytes(name), bytes(value)]),
    client,
    server: ["127.0.0.1", 8000],
  };
}

function webSocketScope(
  client: [string, number] | null,
  headers: readonly [string, string][],
): WebSocketScope {
  const { type: _, method: __, asgi: ___, ...rest } = httpScope(client, headers);
  return {
    ...rest,
    type: "websocket",
    asgi: { version: "3.0", spec_version: "2.5" },
    scheme: "ws",
    subprotocols: [],
    extensions: { "websocket.http.response": {} },
  };
}

/** The scope the wrapped application gets for `scope`. */
async function seen(scope: Scope, options?: ProxyHeadersOptions): Promise<Scope> {
  let got: Scope | undefined;
  const app = proxyHeaders((s) => {
    got = s;
    return Promise.resolve();
  }, options);
  await app(scope, () => Promise.reject(new Error("not used")), () => Promise.resolve());
  if (got === undefined) throw new Error("The application was not called");
  return got;
}

const XFF = "x-forwarded-for";
const XFP = "x-forwarded-proto";
const CLIENT: [string, number] = ["203.0.113.7", 0];

interface Case {
  name: string;
  peer: [string, number] | null;
  headers: [string, string][];
  trusted?: string[];
  /** The `client` and `scheme` the application gets; `null` when it gets the server's scope. */
  expect: { client: [string, number] | null; scheme: string } | null;
}

const CASES: Case[] = [
  // Who is trusted.
  {
    name: "believes 127.0.0.1 by default",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "203.0.113.7"], [XFP, "https"]],
    expect: { client: CLIENT, scheme: "https" },
  },
  {
    name: "believes ::1 by default, in any spelling",
    peer: ["0:0:0:0:0:0:0:1", 40000],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "believes an IPv4-mapped IPv6 peer of a trusted IPv4 address",
    peer: ["::ffff:127.0.0.1", 40000],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "ignores the headers of an untrusted peer",
    peer: ["198.51.100.1", 40000],
    headers: [[XFF, "203.0.113.7"], [XFP, "https"]],
    expect: null,
  },
  {
    name: "ignores the headers when the peer is unknown",
    peer: null,
    headers: [[XFF, "203.0.113.7"]],
    expect: null,
  },
  {
    name: "believes a peer in a trusted IPv4 network",
    peer: ["10.255.0.1", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "ignores a peer just outside a trusted IPv4 network",
    peer: ["11.0.0.1", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "203.0.113.7"]],
    expect: null,
  },
  {
    name: "believes a mapped peer in a trusted IPv4 network",
    peer: ["::ffff:10.1.2.3", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "believes a peer in a trusted IPv6 network, whatever the case",
    peer: ["FD12:3456::1", 40000],
    trusted: ["fd00::/8"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "ignores a peer outside a trusted IPv6 network",
    peer: ["fe80::1", 40000],
    trusted: ["fd00::/8"],
    headers: [[XFF, "203.0.113.7"]],
    expect: null,
  },
  {
    name: "compares IPv6 entries as addresses, not text",
    peer: ["2001:db8::1", 40000],
    trusted: ["2001:0DB8:0:0:0000::1"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "ignores the zone of a link-local peer",
    peer: ["fe80::1%eth0", 40000],
    trusted: ["fe80::/10"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "trusts nobody with an empty list",
    peer: ["127.0.0.1", 40000],
    trusted: [],
    headers: [[XFF, "203.0.113.7"]],
    expect: null,
  },
  {
    name: 'trusts every peer with "*", an unknown one too',
    peer: null,
    trusted: ["*"],
    headers: [[XFF, "203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  // Which X-Forwarded-For entry is the client.
  {
    name: "takes the rightmost entry over what a client prepended (spoofed chain)",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "1.2.3.4, 203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "skips the trusted proxies at the right of the chain",
    peer: ["10.0.0.2", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "1.2.3.4, 203.0.113.7, 10.0.0.9, 10.0.0.8"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "takes the leftmost entry when every entry is trusted",
    peer: ["10.0.0.2", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "10.0.0.9, 10.0.0.8"]],
    expect: { client: ["10.0.0.9", 0], scheme: "http" },
  },
  {
    // "*" took the leftmost entry, which behind nginx ($proxy_add_x_forwarded_for) is whatever
    // the client sent: "X-Forwarded-For: 6.6.6.6" from 203.0.113.7 made the client 6.6.6.6.
    name: 'with "*" takes the entry the peer appended, not one the client sent',
    peer: ["198.51.100.1", 40000],
    trusted: ["*"],
    headers: [[XFF, "6.6.6.6, 203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: 'with "*" skips entries in the listed networks only',
    peer: ["198.51.100.1", 40000],
    trusted: ["*", "10.0.0.0/8"],
    headers: [[XFF, "6.6.6.6, 203.0.113.7, 10.0.0.9"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: 'with "*" takes the leftmost entry when every entry is in a listed network',
    peer: ["198.51.100.1", 40000],
    trusted: ["*", "10.0.0.0/8"],
    headers: [[XFF, "10.0.0.8, 10.0.0.9"]],
    expect: { client: ["10.0.0.8", 0], scheme: "http" },
  },
  {
    name: "joins several fields in order",
    peer: ["10.0.0.2", 40000],
    trusted: ["10.0.0.0/8"],
    headers: [[XFF, "1.2.3.4"], [XFP, "https"], [XFF, "203.0.113.7, 10.0.0.9"]],
    expect: { client: CLIENT, scheme: "https" },
  },
  {
    name: "trims entries and skips empty ones",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, " ,203.0.113.7 ,\t, "]],
    expect: { client: CLIENT, scheme: "http" },
  },
  {
    name: "keeps an IPv6 entry as written",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "2001:DB8::7"]],
    expect: { client: ["2001:DB8::7", 0], scheme: "http" },
  },
  {
    name: "leaves client as it is for an empty list",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, " , "]],
    expect: null,
  },
  {
    name: 'leaves client as it is when the deciding entry is "unknown"',
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "203.0.113.7, unknown"], [XFP, "https"]],
    expect: { client: ["127.0.0.1", 40000], scheme: "https" },
  },
  {
    name: "leaves client as it is when the deciding entry has a port",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "203.0.113.7:5555"]],
    expect: null,
  },
  {
    name: "does not read past an untrusted address to a token left of it",
    peer: ["127.0.0.1", 40000],
    headers: [[XFF, "_hidden, 203.0.113.7"]],
    expect: { client: CLIENT, scheme: "http" },
  },
  // X-Forwarded-Proto.
  {
    name: "sets scheme alone from X-Forwarded-Proto",
    peer: ["127.0.0.1", 40000],
    headers: [[XFP, "https"]],
    expect: { client: ["127.0.0.1", 40000], scheme: "https" },
  },
  {
    name: "reads X-Forwarded-Proto in any case, trimmed",
    peer: ["127.0.0.1", 40000],
    headers: [[XFP, " HTTPS "]],
    expect: { client: ["127.0.0.1", 40000], scheme: "https" },
  },
  {
    name: "maps wss to https in an http scope",
    peer: ["127.0.0.1", 40000],
    headers: [[XFP, "wss"]],
    expect: { client: ["127.0.0.1", 40000], scheme: "https" },
  },
  {
    name: "ignores a scheme it does not know",
    peer: ["127.0.0.1", 40000],
    headers: [[XFP, "ftp"]],
    expect: null,
  },
  {
    name: "ignores a list of schemes",
    peer: ["127.0.0.1", 40000],
    headers: [[XFP, "https, http"]],
    expect: null,
  },
];

for (const c of CASES) {
  Deno.test(`proxyHeaders() ${c.name}`, async () => {
    const scope = httpScope(c.peer, c.headers);
    const before = structuredClone(scope);
    const got = await seen(scope, c.trusted === undefined ? undefined : { trusted: c.trusted });
    assertEquals(scope, before, "the server's scope is unchanged");
    if (c.expect === null) {
      assertStrictEquals(got, scope, "the application gets the server's scope");
      return;
    }
    assert(got !== scope, "the application gets a new scope");
    if (got.type !== "http") throw new Error(`Got a ${got.type} scope`);
    assertEquals({ client: got.client, scheme: got.scheme }, c.expect);
    assertEquals({ ...got, client: null, scheme: "" }, { ...scope, client: null, scheme: "" });
  });
}

Deno.test("proxyHeaders() maps X-Forwarded-Proto to ws and wss in a websocket scope", async (t) => {
  for (
    const [proto, scheme] of [["https", "wss"], ["http", "ws"], ["WSS", "wss"], ["ws", "ws"]]
  ) {
    await t.step(`${proto} → ${scheme}`, async () => {
      const scope = webSocketScope(["127.0.0.1", 40000], [[XFF, "203.0.113.7"], [XFP, proto!]]);
      const got = await seen(scope);
      if (got.type !== "websocket") throw new Error(`Got a ${got.type} scope`);
      assert(got !== scope, "the application gets a new scope");
      assertEquals([got.client, got.scheme, got.subprotocols], [CLIENT, scheme, []]);
      assertEquals(scope.scheme, "ws", "the server's scope is unchanged");
    });
  }
});

Deno.test("proxyHeaders() passes a lifespan scope through untouched", async () => {
  const scope: LifespanScope = {
    type: "lifespan",
    asgi: { version: "3.0", spec_version: "2.0" },
    state: {},
  };
  assertStrictEquals(await seen(scope, { trusted: ["*"] }), scope);
});

Deno.test("proxyHeaders() takes an object with an asgi method, such as an App", async () => {
  const scopes: Scope[] = [];
  const holder = {
    asgi(scope: Scope): Promise<void> {
      assert(this === holder, "called as a method");
      scopes.push(scope);
      return Promise.resolve();
    },
  };
  const app = proxyHeaders(holder);
  await app(httpScope(["127.0.0.1", 1], [[XFF, "203.0.113.7"]]), () => {
    throw new Error("not used");
  }, () => Promise.resolve());
  assertEquals(scopes[0]?.type === "http" ? scopes[0].client : null, CLIENT);
});

Deno.test("proxyHeaders() remembers its last peer without mixing peers up", async () => {
  // One peer's answer is cached; the next, different peer must be judged on its own.
  let client: unknown;
  const app = proxyHeaders((scope) => {
    if (scope.type === "http") client = scope.client;
    return Promise.resolve();
  }, { trusted: ["10.0.0.1"] });
  const call = (peer: string) =>
    app(httpScope([peer, 1], [[XFF, "203.0.113.7"]]), () => {
      throw new Error("not used");
    }, () => Promise.resolve());
  for (const [peer, expected] of [["10.0.0.1", CLIENT], ["10.0.0.2", ["10.0.0.2", 1]]] as const) {
    for (let i = 0; i < 2; i++) {
      await call(peer);
      assertEquals(client, expected, `peer ${peer}, call ${i + 1}`);
    }
  }
});

Deno.test("proxyHeaders() takes an X-Forwarded-For entry only when it is an address", async (t) => {
  const cases: [string, boolean][] = [
    ["1.2.3.4", true],
    ["0.0.0.0", true],
    ["255.255.255.255", true],
    ["256.1.1.1", false],
    ["1.2.3", false],
    ["1.2.3.4.5", false],
    ["01.2.3.4", false],
    ["1.2.3.4%x", false],
    ["::", true],
    ["::1", true],
    ["1::", true],
    ["1:2:3:4:5:6:7:8", true],
    ["1:2:3:4:5:6:7::", true],
    ["::2:3:4:5:6:7:8", true],
    ["1:2:3:4:5:6:7:8:9", false],
    ["1:2:3:4:5:6:7:8::", false],
    ["1::2::3", false],
    [":1::", false],
    ["1:", false],
    [":::", false],
    ["12345::", false],
    ["g::1", false],
    ["::ffff:1.2.3.4", true],
    ["1:2:3:4:5:6:1.2.3.4", true],
    ["1:2:3:4:5:6:7:1.2.3.4", false],
    ["::ffff:1.2.3", false],
    ["fe80::1%eth0", true],
  ];
  for (const [entry, address] of cases) {
    await t.step(`${JSON.stringify(entry)}: ${address ? "an address" : "none"}`, async () => {
      const got = await seen(httpScope(["127.0.0.1", 40000], [[XFF, entry]]));
      assertEquals(
        got.type === "http" ? got.client : null,
        address ? [entry, 0] : ["127.0.0.1", 40000],
      );
    });
  }
});

Deno.test("proxyHeaders() takes an X-Forwarded-For zone only when it names an interface", async (t) => {
  // Any text after "%" was taken: "fe80::1%<script>" became the client's host, quoted or not.
  const cases: [string, boolean][] = [
    ["fe80::1%eth0", true],
    ["fe80::1%2", true],
    ["fe80::1%en0.100_a-b~", true],
    [`fe80::1%${"a".repeat(32)}`, true],
    ["fe80::1%", false],
    ["fe80::1%<script>", false],
    ["fe80::1%a b", false],
    ["fe80::1%'x'", false],
    ["fe80::1%eth0%eth1", false],
    ["fe80::1%\u00e9", false],
    [`fe80::1%${"a".repeat(33)}`, false],
    [`fe80::1%${"a".repeat(16000)}`, false],
  ];
  for (const [entry, address] of cases) {
    await t.step(
      `${JSON.stringify(entry.slice(0, 24))}: ${address ? "an address" : "none"}`,
      async () => {
        const got = await seen(httpScope(["127.0.0.1", 40000], [[XFF, entry]]));
        assertEquals(
          got.type === "http" ? got.client : null,
          address ? [entry, 0] : ["127.0.0.1", 40000],
        );
      },
    );
  }
});

/**
 * The fastest of five rounds of 100 calls of `app` with `scope`, in milliseconds: the cost
 * tests compare two such figures, so a round slowed by the machine does not decide.
 */
async function bestOfFive(app: AsgiApplication, scope: HttpScope): Promise<number> {
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const began = performance.now();
    for (let i = 0; i < 100; i++) {
      await app(scope, () => Promise.reject(new Error("not used")), () => Promise.resolve());
    }
    best = Math.min(best, performance.now() - began);
  }
  return best;
}

Deno.test("proxyHeaders() reads a long X-Forwarded-For list only as far as the client", async () => {
  // A client behind the proxy could send 6,000 entries ahead of the one the proxy appends; the
  // whole list was decoded and split on every request (0.47 ms, some 80 times a short list),
  // though the rightmost entry decides. Compared with a short list, best of five rounds each.
  const long = `${Array(6000).fill("1.2.3.4").join(", ")}, 203.0.113.7`;
  const clients: unknown[] = [];
  const app = proxyHeaders((scope) => {
    if (scope.type === "http") clients.push(scope.client);
    return Promise.resolve();
  });
  const cost = (list: string) => bestOfFive(app, httpScope(["127.0.0.1", 40000], [[XFF, list]]));
  const short = await cost("1.2.3.4, 203.0.113.7");
  const ratio = await cost(long) / Math.max(short, 0.05);
  assertEquals(clients.at(-1), CLIENT);
  assert(ratio < 20, `A 6,000-entry list cost ${ratio.toFixed(1)} times a 2-entry one`);
});

Deno.test("proxyHeaders() does not decode a long X-Forwarded-Proto", async () => {
  // A proxy that adds its field beside the client's (or passes the client's on) let a client
  // have 48 KB decoded and lower-cased on every request, only to be ignored as no scheme.
  const app = proxyHeaders(() => Promise.resolve());
  const cost = (proto: string) => bestOfFive(app, httpScope(["127.0.0.1", 40000], [[XFP, proto]]));
  const short = await cost("https");
  const ratio = await cost(`https${" ".repeat(48000)}x`) / Math.max(short, 0.05);
  const padded = await seen(httpScope(["127.0.0.1", 1], [[XFP, "\t https \t"]]));
  assertEquals(padded.type === "http" ? padded.scheme : null, "https");
  assert(ratio < 20, `A 48 KB X-Forwarded-Proto cost ${ratio.toFixed(1)} times "https"`);
});

Deno.test("proxyHeaders() matches an IPv4 peer with its mapped IPv6 spelling in hex", async () => {
  const got = await seen(httpScope(["127.0.0.1", 40000], [[XFF, "203.0.113.7"]]), {
    trusted: ["::ffff:7f00:1"],
  });
  assertEquals(got.type === "http" ? got.client : null, CLIENT);
});

const noop: AsgiApplication = () => Promise.resolve();

Deno.test("proxyHeaders() refuses bad options at the call, quoting them", async (t) => {
  const cases: [string, unknown, ErrorConstructor, string][] = [
    [
      "a comma-separated string",
      { trusted: "10.0.0.1, 10.0.0.2" },
      TypeError,
      'Invalid trusted "10.0.0.1, 10.0.0.2": use an array of addresses, e.g. ["10.0.0.1","10.0.0.2"]',
    ],
    [
      "a non-array",
      { trusted: 5 },
      TypeError,
      'Invalid trusted 5: use an array of addresses, e.g. ["10.0.0.1"]',
    ],
    [
      "a non-string entry",
      { trusted: ["10.0.0.1", 7] },
      TypeError,
      'Invalid trusted entry 7 at index 1: use a string, e.g. "10.0.0.1"',
    ],
    [
      "localhost",
      { trusted: ["localhost"] },
      TypeError,
      'Invalid trusted entry "localhost": use "127.0.0.1" and "::1"; host names are not resolved',
    ],
    [
      "a host name",
      { trusted: ["proxy.internal"] },
      TypeError,
      'Invalid trusted entry "proxy.internal": use its IP address or network; host names are not resolved',
    ],
    [
      "an IPv4 prefix out of range",
      { trusted: ["10.0.0.0/33"] },
      RangeError,
      'Invalid trusted entry "10.0.0.0/33": an IPv4 prefix length is a whole number from 0 to 32, e.g. "10.0.0.0/24"',
    ],
    [
      "an IPv6 prefix out of range",
      { trusted: ["fd00::/129"] },
      RangeError,
      'Invalid trusted entry "fd00::/129": an IPv6 prefix length is a whole number from 0 to 128, e.g. "fd00::/64"',
    ],
    [
      "a prefix that is no number",
      { trusted: ["10.0.0.0/"] },
      RangeError,
      'Invalid trusted entry "10.0.0.0/": an IPv4 prefix length',
    ],
    [
      "an IPv4 network with host bits",
      { trusted: ["10.0.0.1/8"] },
      RangeError,
      'Invalid trusted entry "10.0.0.1/8": it has host bits set; use "10.0.0.0/8" for the network, or "10.0.0.1" for the one address',
    ],
    [
      "an IPv6 network with host bits",
      { trusted: ["fd00::1/8"] },
      RangeError,
      'Invalid trusted entry "fd00::1/8": it has host bits set; use "fd00::/8"',
    ],
    [
      "a bracketed IPv6 address",
      { trusted: ["[::1]"] },
      TypeError,
      'Invalid trusted entry "[::1]": drop the brackets: use "::1"',
    ],
    [
      "an address with a port",
      { trusted: ["10.0.0.1:8080"] },
      TypeError,
      'Invalid trusted entry "10.0.0.1:8080": drop the port: use "10.0.0.1"',
    ],
    [
      "a zone",
      { trusted: ["fe80::1%eth0"] },
      TypeError,
      'Invalid trusted entry "fe80::1%eth0": drop the zone',
    ],
    [
      "an IPv4 address with leading zeros",
      { trusted: ["010.0.0.1"] },
      TypeError,
      'Invalid trusted entry "010.0.0.1": use an IPv4 or IPv6 address, a CIDR network such as "10.0.0.0/8", "unix" or "*"',
    ],
    [
      "a malformed IPv6 address",
      { trusted: ["1::2::3"] },
      TypeError,
      'Invalid trusted entry "1::2::3": use an IPv4 or IPv6 address',
    ],
    [
      "options that are no object",
      "10.0.0.1",
      TypeError,
      'Invalid options "10.0.0.1": pass an object',
    ],
    [
      "a misspelt option",
      { trustd: ["10.0.0.1"] },
      TypeError,
      'Invalid option "trustd" for proxyHeaders(): use trusted',
    ],
  ];
  for (const [name, options, errorClass, message] of cases) {
    await t.step(name, () => {
      assertThrows(
        () => proxyHeaders(noop, options as ProxyHeadersOptions),
        errorClass,
        message,
      );
    });
  }
  await t.step("an application that is none", () => {
    assertThrows(
      () => proxyHeaders(42 as unknown as AsgiApplication),
      TypeError,
      "Invalid application 42",
    );
  });
});

Deno.test("proxyHeaders() refuses the unspecified address, which no peer has and trusted nobody", () => {
  // "0.0.0.0" and "::" were taken as single addresses: an operator who meant "everyone", as in a
  // listen address, got a middleware that silently believed no one.
  const cases: [string, string][] = [
    ["0.0.0.0", '"0.0.0.0/0" for every IPv4 peer'],
    ["::ffff:0.0.0.0", '"0.0.0.0/0" for every IPv4 peer'],
    ["::", '"::/0" for every IPv4 and IPv6 peer'],
    ["0:0:0:0:0:0:0:0", '"::/0" for every IPv4 and IPv6 peer'],
  ];
  for (const [entry, network] of cases) {
    assertThrows(
      () => proxyHeaders(noop, { trusted: ["127.0.0.1", entry] }),
      TypeError,
      `Invalid trusted entry ${JSON.stringify(entry)}: no peer connects from the unspecified ` +
        `address; use "*" for every peer, or ${network}`,
    );
  }
  // As networks they are every address, and meant so.
  proxyHeaders(noop, { trusted: ["0.0.0.0/0", "::/0"] });
});

Deno.test("proxyHeaders() shows how to split an entry that holds several", async (t) => {
  // "10.0.0.1,10.0.0.2" in one string got the generic message, and "10.0.0.0/8,fd00::/8" one
  // about the prefix length: neither said the entries go in separate strings.
  const cases: [string, string][] = [
    ["10.0.0.1,10.0.0.2", '["10.0.0.1","10.0.0.2"]'],
    ["10.0.0.1, 10.0.0.2", '["10.0.0.1","10.0.0.2"]'],
    ["10.0.0.1 10.0.0.2", '["10.0.0.1","10.0.0.2"]'],
    ["10.0.0.1;10.0.0.2", '["10.0.0.1","10.0.0.2"]'],
    ["10.0.0.0/8,fd00::/8", '["10.0.0.0/8","fd00::/8"]'],
    ["127.0.0.1,", '["127.0.0.1"]'],
  ];
  for (const [entry, fix] of cases) {
    await t.step(entry, () => {
      assertThrows(
        () => proxyHeaders(noop, { trusted: [entry] }),
        TypeError,
        `Invalid trusted entry ${JSON.stringify(entry)}: one entry per string: use ${fix}`,
      );
    });
  }
  await t.step("an empty entry", () => {
    assertThrows(
      () => proxyHeaders(noop, { trusted: ["10.0.0.1", " "] }),
      TypeError,
      'Invalid trusted entry " " at index 1: it is empty; remove it',
    );
  });
  await t.step("an empty string for the list", () => {
    assertThrows(
      () => proxyHeaders(noop, { trusted: "" as unknown as string[] }),
      TypeError,
      'Invalid trusted "": use an array of addresses, e.g. ["10.0.0.1"]',
    );
  });
  await t.step("a wildcard", () => {
    assertThrows(
      () => proxyHeaders(noop, { trusted: ["10.1.*"] }),
      TypeError,
      'Invalid trusted entry "10.1.*": use a CIDR network: "10.1.0.0/16"',
    );
  });
});

Deno.test("proxyHeaders() says to wrap a list given as the options in { trusted }", () => {
  // proxyHeaders(app, ["10.0.0.1"]) was told 'Invalid option "0" ... use one of trusted'.
  assertThrows(
    () => proxyHeaders(noop, ["10.0.0.1"] as unknown as ProxyHeadersOptions),
    TypeError,
    'Invalid options ["10.0.0.1"]: pass { trusted: ["10.0.0.1"] }',
  );
});

Deno.test("proxyHeaders() refuses an IPv4-mapped network with a short prefix, not suggesting ::/8", () => {
  // "::ffff:10.0.0.0/8" (10.0.0.0/8 meant) was told to use "::/8", which holds every IPv4-mapped
  // address: the suggested fix trusted every IPv4 peer.
  const cases: [string, string][] = [
    [
      "::ffff:10.0.0.0/8",
      'Invalid trusted entry "::ffff:10.0.0.0/8": an IPv4-mapped prefix counts all 128 bits, so ' +
      '/8 is wider than IPv4; use "10.0.0.0/8" or "::ffff:10.0.0.0/104"',
    ],
    [
      "::FFFF:127.0.0.1/8",
      'Invalid trusted entry "::FFFF:127.0.0.1/8": an IPv4-mapped prefix counts all 128 bits, so ' +
      '/8 is wider than IPv4; use "127.0.0.0/8" or "::ffff:127.0.0.0/104"',
    ],
    [
      "::ffff:10.0.0.0/64",
      'Invalid trusted entry "::ffff:10.0.0.0/64": an IPv4-mapped prefix counts all 128 bits, so ' +
      '/64 is wider than IPv4; use one from 96 to 128, e.g. "::ffff:10.0.0.0/104"',
    ],
    [
      "::ffff:10.0.0.1/104",
      'Invalid trusted entry "::ffff:10.0.0.1/104": it has host bits set; use ' +
      '"::ffff:10.0.0.0/104" for the network, or "::ffff:10.0.0.1" for the one address',
    ],
  ];
  for (const [entry, message] of cases) {
    assertThrows(() => proxyHeaders(noop, { trusted: [entry] }), RangeError, message);
  }
});

Deno.test("proxyHeaders() takes entries in every valid form", () => {
  for (
    const entry of [
      "0.0.0.0/0",
      "::/0",
      " 10.0.0.1 ",
      "::ffff:10.0.0.0/104",
      "1:2:3:4:5:6:7::",
      "::1:2:3:4:5:6:7",
      "1:2:3:4:5:6:1.2.3.4",
      "2001:db8::/32",
      "255.255.255.255/32",
    ]
  ) {
    proxyHeaders(noop, { trusted: [entry] });
  }
});

for (const transport of TRANSPORTS) {
  Deno.test(`proxyHeaders() under serve() on ${transport}: a raw request and a handshake from 127.0.0.1`, async () => {
    const scopes: Scope[] = [];
    await using server = await start(
      proxyHeaders(async (scope, _receive, send) => {
        if (scope.type === "http") {
          scopes.push(scope);
          await send({ type: "http.response.start", status: 204 });
          await send({ type: "http.response.body" });
        } else if (scope.type === "websocket") {
          scopes.push(scope);
          await send({ type: "websocket.close" }); // denies the handshake: 403
        }
      }),
      transport,
    );
    const answer = await rawRequest(
      server.port,
      "GET / HTTP/1.1\r\nHost: app.example\r\nX-Forwarded-For: 1.2.3.4, 203.0.113.7\r\n" +
        "X-Forwarded-Proto: https\r\nConnection: close\r\n\r\n",
    );
    assert(answer.startsWith("HTTP/1.1 204 "), answer);
    const denied = await rawRequest(
      server.port,
      handshake("/live", "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n"),
    );
    assert(denied.startsWith("HTTP/1.1 403 "), denied);
    assertEquals(
      scopes.map((scope) => scope.type === "lifespan" ? null : [scope.client, scope.scheme]),
      [[CLIENT, "https"], [CLIENT, "wss"]],
    );
  });
}

/** Whether this machine can listen on IPv6's "::" (dual-stack); CI machines may have no IPv6. */
function dualStack(): boolean {
  try {
    Deno.listen({ hostname: "::", port: 0 }).close();
    return true;
  } catch {
    return false;
  }
}

for (const transport of TRANSPORTS) {
  Deno.test({
    name:
      `proxyHeaders() under serve() on ${transport}: a dual-stack listener's IPv4-mapped peer is trusted`,
    ignore: !dualStack(),
    async fn() {
      // Both transports give an IPv4 client of a "::" listener as ::ffff:127.0.0.1.
      const clients: unknown[] = [];
      await using server = await start(
        proxyHeaders(async (scope, _receive, send) => {
          if (scope.type !== "http") return;
          clients.push(scope.client);
          await send({ type: "http.response.start", status: 204 });
          await send({ type: "http.response.body" });
        }),
        transport,
        { hostname: "::" },
      );
      const answer = await rawRequest(
        server.port,
        "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 203.0.113.7\r\nConnection: close\r\n\r\n",
      );
      assert(answer.startsWith("HTTP/1.1 204 "), answer);
      assertEquals(clients, [CLIENT]);
    },
  });
}
