// Copyright the stellarator authors. MIT license.
/**
 * The client's address and scheme as a reverse proxy saw them: `X-Forwarded-For` and
 * `X-Forwarded-Proto`, believed only when the connection comes from a trusted proxy. Private:
 * `asgi.ts` exports {@linkcode forwardedApp} as `proxyHeaders()`, where the rules are written
 * down for users.
 *
 * Addresses are compared as numbers, never as text: `::1`, `0:0:0:0:0:0:0:1` and
 * `0000::0001` are one address. IPv4 is held in its IPv4-mapped IPv6 form (`::ffff:a.b.c.d`), so
 * the peer `::ffff:10.0.0.1` that `node:http` gives on a dual-stack listener matches the entry
 * `10.0.0.1`, and an IPv4 network `/n` is the IPv6 network `/96+n`.
 *
 * @module
 */
import { describe } from "../_common/describe.ts";
import { rejectUnknownKeys } from "../_common/keys.ts";
import { latin1Text } from "./bytes.ts";
import { trimOws } from "./fields.ts";
import type {
  AsgiApplication,
  HttpScope,
  ProxyHeadersOptions,
  Scope,
  WebSocketScope,
} from "./types.ts";

/** Every key of `ProxyHeadersOptions`. */
const OPTION_KEYS: readonly string[] = ["trusted"];

/**
 * uvicorn's `--forwarded-allow-ips` default, with IPv6's loopback beside IPv4's, and the peers of
 * a Unix socket (`"unix"`): like loopback, only processes of this machine can connect there, and
 * only those the socket file's mode lets in. (uvicorn's default trusts no Unix-socket peer: its
 * scope's `client` is `None` there, which only `"*"` trusts, checked on uvicorn 0.17.6.)
 */
const DEFAULT_TRUSTED: readonly string[] = ["127.0.0.1", "::1", "unix"];

/** An address: eight 16-bit words, IPv4 as `::ffff:a.b.c.d`. */
type Address = Uint16Array;

/** A network: its address with the host bits clear, and how many leading bits are its own. */
interface Network {
  readonly words: Address;
  /** 0 to 128, over the IPv6 form. */
  readonly prefix: number;
}

/**
 * Where {@linkcode parseAddress} writes: one buffer for every call. Each request from a trusted
 * peer parses an address or more, and a typed array of its own costs Deno an ArrayBuffer (some
 * 0.4 µs, see bytes.ts): with one per parse, the middleware cost 1.1 µs a request.
 */
const scratch: Address = new Uint16Array(8);

/** The value of a hex digit's code, or -1. */
function hexDigit(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  const lower = code | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

/**
 * Writes the dotted-quad IPv4 address `text[start, end)` into `out[at]` and `out[at + 1]`.
 * Leading zeros are refused, as Python's `ipaddress` refuses them: `010.0.0.1` reads as octal to
 * some parsers and decimal to others.
 *
 * @returns Whether it was one.
 */
function parseIPv4(text: string, start: number, end: number, out: Address, at: number): boolean {
  let value = 0;
  let octets = 0;
  let i = start;
  while (octets < 4) {
    let octet = 0;
    let digits = 0;
    for (; i < end; i++, digits++) {
      const code = text.charCodeAt(i);
      if (code < 48 || code > 57) break;
      if (digits === 1 && octet === 0) return false;
      octet = octet * 10 + code - 48;
    }
    if (digits === 0 || octet > 255) return false;
    value = value * 256 + octet;
    if (++octets < 4) {
      if (text.charCodeAt(i) !== 46) return false; // "."
      i++;
    }
  }
  if (i !== end) return false;
  out[at] = value >>> 16;
  out[at + 1] = value & 0xffff;
  return true;
}

/**
 * Writes the IPv6 address `text[start, end)` (no brackets, no zone) into `out`.
 *
 * @returns Whether it was one.
 */
function parseIPv6(text: string, start: number, end: number, out: Address): boolean {
  let count = 0;
  /** Where the groups after "::" begin, or -1. */
  let gap = -1;
  let i = start;
  if (text.charCodeAt(i) === 58) {
    if (text.charCodeAt(i + 1) !== 58) return false;
    gap = 0;
    i += 2;
  }
  while (i < end) {
    if (count === 8) return false;
    let value = 0;
    let j = i;
    for (; j < end && j - i < 5; j++) {
      const digit = hexDigit(text.charCodeAt(j));
      if (digit === -1) break;
      value = value * 16 + digit;
    }
    if (text.charCodeAt(j) === 46) {
      // A dotted IPv4 address ends the address: ::ffff:10.0.0.1.
      if (count > 6 || !parseIPv4(text, i, end, out, count)) return false;
      count += 2;
      break;
    }
    if (j === i || j - i > 4) return false;
    out[count++] = value;
    i = j;
    if (i === end) break;
    if (text.charCodeAt(i) !== 58) return false;
    i++;
    if (text.charCodeAt(i) === 58) {
      if (gap !== -1) return false;
      gap = count;
      i++;
    } else if (i === end) {
      return false;
    }
  }
  if (gap === -1) return count === 8;
  if (count > 7) return false;
  const after = count - gap;
  out.copyWithin(8 - after, gap, count);
  out.fill(0, gap, 8 - after);
  return true;
}

/** The longest zone {@linkcode isZone} takes: interface names are shorter (15 bytes on Linux). */
const MAX_ZONE = 32;

/**
 * Whether `text[start, end)` is a zone: an interface name or number, 1 to {@linkcode MAX_ZONE}
 * letters, digits and `-._~` (RFC 6874's ZoneID without percent-encoding). An X-Forwarded-For
 * entry that passes becomes the client's host as written, so it must not carry other text.
 */
function isZone(text: string, start: number, end: number): boolean {
  if (end <= start || end - start > MAX_ZONE) return false;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    const lower = code | 0x20;
    if (
      !((lower >= 97 && lower <= 122) || (code >= 48 && code <= 57) || code === 45 ||
        code === 46 || code === 95 || code === 126)
    ) return false;
  }
  return true;
}

/**
 * Parses an IPv4 or IPv6 address into {@linkcode scratch}, which the next call overwrites.
 * `zone` allows an IPv6 zone (`fe80::1%eth0`, see {@linkcode isZone}), which is not compared: a
 * peer on a link-local address may carry one.
 *
 * @returns Whether `text` was an address.
 */
function parseAddress(text: string, zone: boolean): boolean {
  if (text.includes(":")) {
    let end = text.indexOf("%");
    if (end === -1) end = text.length;
    else if (!zone || !isZone(text, end + 1, text.length)) return false;
    return parseIPv6(text, 0, end, scratch);
  }
  scratch.fill(0, 0, 5);
  scratch[5] = 0xffff;
  return parseIPv4(text, 0, text.length, scratch, 6);
}

function isMappedIPv4(words: Address): boolean {
  return words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 &&
    words[4] === 0 && words[5] === 0xffff;
}

/** The usual text of an address: dotted IPv4, or RFC 5952 IPv6 (for error messages). */
function formatAddress(words: Address, ipv4: boolean): string {
  if (ipv4) return `${words[6]! >>> 8}.${words[6]! & 0xff}.${words[7]! >>> 8}.${words[7]! & 0xff}`;
  // The longest run of two or more zero groups becomes "::", the first such run on a tie.
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = Array.from(words, (word) => word.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/** The first `prefix` bits of `words`, the rest cleared. */
function masked(words: Address, prefix: number): Address {
  const out = new Uint16Array(8);
  for (let i = 0, bits = prefix; i < 8 && bits > 0; i++, bits -= 16) {
    out[i] = words[i]! & (bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff);
  }
  return out;
}

function contains(network: Network, address: Address): boolean {
  const { words, prefix } = network;
  for (let i = 0, bits = prefix; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if ((address[i]! & mask) !== words[i]) return false;
  }
  return true;
}

/** Why `entry`, which is no address, was refused, and what to write instead. */
function entryHint(entry: string): string {
  if (entry === "localhost") return 'use "127.0.0.1" and "::1"; host names are not resolved';
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(entry);
  if (bracketed !== null && parseAddress(bracketed[1]!, false)) {
    return `drop the brackets${entry.endsWith("]") ? "" : " and the port"}: use "${bracketed[1]}"`;
  }
  const withPort = /^([0-9.]+):\d+$/.exec(entry);
  if (withPort !== null && parseAddress(withPort[1]!, false)) {
    return `drop the port: use "${withPort[1]}"`;
  }
  if (entry.includes("%")) return "drop the zone (%...): zones are not compared";
  const wildcard = /^(\d{1,3}(?:\.\d{1,3}){0,2})(?:\.\*){1,3}$/.exec(entry);
  if (wildcard !== null) {
    const known = wildcard[1]!.split(".");
    const network = [...known, "0", "0", "0"].slice(0, 4).join(".");
    return `use a CIDR network: "${network}/${8 * known.length}"`;
  }
  if (/^[a-z0-9-]+(\.[a-z0-9-]+)*\.?$/i.test(entry) && /[a-z]/i.test(entry)) {
    return "use its IP address or network; host names are not resolved";
  }
  return 'use an IPv4 or IPv6 address, a CIDR network such as "10.0.0.0/8", "unix" or "*"';
}

/** Who is trusted: a checked `trusted` option. */
class TrustList {
  /** `"*"` was given: every peer, known or not. */
  readonly anyone: boolean;
  /** `"unix"` was given: the peers of a Unix socket, which have no address. */
  readonly unix: boolean;
  readonly #networks: readonly Network[];

  constructor(entries: readonly string[]) {
    let anyone = false;
    let unix = false;
    const networks: Network[] = [];
    for (let i = 0; i < entries.length; i++) {
      const given: unknown = entries[i];
      if (typeof given !== "string") {
        throw new TypeError(
          `Invalid trusted entry ${describe(given)} at index ${i}: use a string, e.g. "10.0.0.1"`,
        );
      }
      const entry = given.trim();
      if (entry === "") {
        throw new TypeError(
          `Invalid trusted entry ${describe(given)} at index ${i}: it is empty; remove it`,
        );
      }
      if (entry === "*") {
        anyone = true;
        continue;
      }
      if (entry === "unix") {
        unix = true;
        continue;
      }
      networks.push(parseEntry(entry, given));
    }
    this.anyone = anyone;
    this.unix = unix;
    this.#networks = networks;
  }

  /** Whether `address` is a trusted peer. */
  has(address: Address): boolean {
    return this.anyone || this.listed(address);
  }

  /**
   * Whether `address` is in a listed network, `"*"` aside: an `X-Forwarded-For` entry is
   * skipped as a proxy's only then. `"*"` says who may connect, not that every address the
   * headers name is a proxy; otherwise the leftmost entry, which the client writes, would win.
   */
  listed(address: Address): boolean {
    for (const network of this.#networks) if (contains(network, address)) return true;
    return false;
  }
}

/** One `trusted` entry other than `"*"`, trimmed (`given` is as written, for messages). */
function parseEntry(entry: string, given: string): Network {
  if (/[\s,;]/.test(entry)) {
    // A list in one string, as uvicorn's --forwarded-allow-ips takes it.
    const entries = entry.split(/[\s,;]+/).filter((part) => part !== "");
    throw new TypeError(
      `Invalid trusted entry ${describe(given)}: one entry per string: use ${
        JSON.stringify(entries)
      }`,
    );
  }
  const slash = entry.indexOf("/");
  const text = slash === -1 ? entry : entry.slice(0, slash);
  if (!parseAddress(text, false)) {
    throw new TypeError(`Invalid trusted entry ${describe(given)}: ${entryHint(text)}`);
  }
  const words = scratch.slice();
  const ipv4 = !text.includes(":");
  const width = ipv4 ? 32 : 128;
  if (slash === -1) {
    const mapped = isMappedIPv4(words);
    if (words.every((word, i) => word === (i === 5 && mapped ? 0xffff : 0))) {
      // 0.0.0.0 and :: are "any address" to listen on, but no peer's address.
      throw new TypeError(
        `Invalid trusted entry ${describe(given)}: no peer connects from the unspecified ` +
          `address; use "*" for every peer, or "${mapped ? "0.0.0.0/0" : "::/0"}" for every ` +
          `${mapped ? "IPv4" : "IPv4 and IPv6"} peer`,
      );
    }
    return { words, prefix: 128 };
  }
  const length = entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(length) || Number(length) > width) {
    throw new RangeError(
      `Invalid trusted entry ${describe(given)}: an ${ipv4 ? "IPv4" : "IPv6"} prefix length ` +
        `is a whole number from 0 to ${width}, e.g. "${text}/${ipv4 ? 24 : 64}"`,
    );
  }
  const prefix = Number(length) + (ipv4 ? 96 : 0);
  if (!ipv4 && prefix < 96 && isMappedIPv4(words)) {
    // "::ffff:10.0.0.0/8", 10.0.0.0/8 meant: as written it is ::/8, every IPv4 address and more.
    const short = prefix <= 32;
    const ipv4Network = formatAddress(masked(words, 96 + (short ? prefix : 8)), true);
    throw new RangeError(
      `Invalid trusted entry ${describe(given)}: an IPv4-mapped prefix counts all 128 bits, so ` +
        `/${prefix} is wider than IPv4; use ${
          short
            ? `"${ipv4Network}/${prefix}" or "::ffff:${ipv4Network}/${96 + prefix}"`
            : `one from 96 to 128, e.g. "::ffff:${ipv4Network}/104"`
        }`,
    );
  }
  const network = masked(words, prefix);
  if (network.some((word, i) => word !== words[i])) {
    const mapped = isMappedIPv4(network);
    throw new RangeError(
      `Invalid trusted entry ${describe(given)}: it has host bits set; use "${
        mapped && !ipv4 ? "::ffff:" : ""
      }${formatAddress(network, mapped)}/${length}" for the network, or "${text}" for the one ` +
        "address",
    );
  }
  return { words: network, prefix };
}

/** Checks `options` and returns who is trusted. */
function trustList(options: ProxyHeadersOptions | undefined): TrustList {
  if (options === undefined) return new TrustList(DEFAULT_TRUSTED);
  if (typeof options !== "object" || options === null) {
    throw new TypeError(
      `Invalid options ${describe(options)}: pass an object, e.g. { trusted: ["10.0.0.1"] }`,
    );
  }
  if (Array.isArray(options)) {
    // The list itself, where { trusted: list } was meant.
    const shown = options.every((entry) => typeof entry === "string")
      ? JSON.stringify(options)
      : describe(options);
    throw new TypeError(
      `Invalid options ${shown}: pass { trusted: ${
        shown.startsWith("[") ? shown : '["10.0.0.1"]'
      } }`,
    );
  }
  rejectUnknownKeys(options, OPTION_KEYS, "proxyHeaders()");
  // Checked as what a caller without types may pass.
  const trusted: unknown = options.trusted;
  if (trusted === undefined) return new TrustList(DEFAULT_TRUSTED);
  if (!Array.isArray(trusted)) {
    // uvicorn takes a comma-separated string: show the array it means.
    const example = typeof trusted === "string"
      ? JSON.stringify(trusted.split(",").map((entry) => entry.trim()).filter((e) => e !== ""))
      : "[]";
    throw new TypeError(
      `Invalid trusted ${describe(trusted)}: use an array of addresses, e.g. ${
        example === "[]" ? '["10.0.0.1"]' : example
      }`,
    );
  }
  return new TrustList(trusted);
}

/** `x-forwarded-for` and `x-forwarded-proto` as bytes, to find them without decoding names. */
const FOR = Uint8Array.from("x-forwarded-for", (c) => c.charCodeAt(0));
const PROTO = Uint8Array.from("x-forwarded-proto", (c) => c.charCodeAt(0));

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The longest `X-Forwarded-For` entry that can be an address: `ffff:ffff:ffff:ffff:ffff:ffff:`
 * `255.255.255.255` (45 characters), a `%` and a zone.
 */
const MAX_ENTRY = 46 + MAX_ZONE;

/**
 * The client's host from the `X-Forwarded-For` fields, in order, or null to leave `client` as
 * it is. Several fields make one list (RFC 9110 §5.3). Each proxy appends the address it got the
 * request from, so entries are read from the right: the first one that is not in a listed
 * network is the client (the ones left of it are whatever that client claimed), and when all
 * are, the leftmost. `"*"` lists no network: with it alone, the rightmost entry, which the peer
 * wrote, is the client. Empty elements are skipped (RFC 9110 §5.6.1); an element that is no
 * address (`unknown`, `_hidden`, `1.2.3.4:80`) ends the search with null: nothing there can be
 * compared with the trusted list or used as an address.
 *
 * The bytes are read from the right and only as far as the answer: a client behind the proxy
 * may send thousands of entries ahead of the one the proxy appends, which alone decides.
 */
function forwardedClient(fields: readonly Uint8Array[], trusted: TrustList): string | null {
  let leftmost: string | null = null;
  for (let field = fields.length - 1; field >= 0; field--) {
    const bytes = fields[field]!;
    let end = bytes.length;
    for (;;) {
      let start = end;
      while (start > 0 && bytes[start - 1] !== 0x2c) start--; // ","
      let from = start;
      let to = end;
      while (from < to && (bytes[from] === 0x20 || bytes[from] === 0x09)) from++;
      while (to > from && (bytes[to - 1] === 0x20 || bytes[to - 1] === 0x09)) to--;
      if (from < to) {
        if (to - from > MAX_ENTRY) return null;
        const entry = latin1Text(bytes.subarray(from, to));
        if (!parseAddress(entry, true)) return null;
        if (!trusted.listed(scratch)) return entry;
        leftmost = entry;
      }
      if (start === 0) break;
      end = start - 1;
    }
  }
  return leftmost;
}

/** The longest `X-Forwarded-Proto` value read: `https` with spaces around it. */
const MAX_PROTO = 64;

/** `http`, `https`, `ws` or `wss` in any case: whether it is secure, or null for anything else. */
function forwardedSecure(value: string): boolean | null {
  switch (trimOws(value).toLowerCase()) {
    case "http":
    case "ws":
      return false;
    case "https":
    case "wss":
      return true;
    default:
      return null;
  }
}

/**
 * The scope as the proxy saw the request, or `scope` itself when its peer is not trusted or it
 * carries nothing to apply. Never changes `scope`: the server's scope is its own.
 */
function forwardedScope<S extends HttpScope | WebSocketScope>(
  scope: S,
  trusted: TrustList,
  peerTrusted: (host: string) => boolean,
): S {
  const peer = scope.client;
  if (
    !(trusted.anyone ||
      (peer !== null ? peerTrusted(peer[0]) : trusted.unix && onUnixSocket(scope)))
  ) return scope;
  let forwardedFor: Uint8Array[] | null = null;
  let proto: string | null = null;
  for (const [name, value] of scope.headers) {
    if (sameBytes(name, FOR)) {
      if (forwardedFor === null) forwardedFor = [value];
      else forwardedFor.push(value);
    } else if (sameBytes(name, PROTO)) {
      // Several fields are a list, which is no scheme; so is a value longer than any scheme with
      // room for spaces around it, which is not decoded.
      proto = proto === null && value.length <= MAX_PROTO ? latin1Text(value) : "";
    }
  }
  const host = forwardedFor === null ? null : forwardedClient(forwardedFor, trusted);
  const secure = proto === null ? null : forwardedSecure(proto);
  if (host === null && secure === null) return scope;
  const websocket = scope.type === "websocket";
  return {
    ...scope,
    client: host === null ? peer : [host, 0],
    scheme: secure === null
      ? scope.scheme
      : websocket
      ? (secure ? "wss" : "ws")
      : (secure ? "https" : "http"),
  };
}

/**
 * Whether the scope came over a Unix socket: its `server` is `[path, null]` (the scope of a Fetch
 * host that names no peer has `client` null too, but no such `server`, and is not trusted).
 */
function onUnixSocket(scope: HttpScope | WebSocketScope): boolean {
  const server = scope.server;
  return server !== null && server[1] === null;
}

/**
 * Wraps `app` so that `http` and `websocket` scopes from a trusted peer carry the client address
 * and scheme of `X-Forwarded-For` and `X-Forwarded-Proto`. See `proxyHeaders()` in `asgi.ts`.
 *
 * @param app The application.
 * @param options Who is trusted.
 * @returns The wrapped application.
 * @throws {TypeError} When an option has the wrong type or an entry is no address.
 * @throws {RangeError} When a CIDR prefix is out of range or leaves host bits set.
 */
export function forwardedApp(
  app: AsgiApplication,
  options: ProxyHeadersOptions | undefined,
): AsgiApplication {
  const trusted = trustList(options);
  // A server behind one proxy sees one peer address on every request: remember the last answer.
  let lastPeer = "";
  let lastTrusted = false;
  const peerTrusted = (host: string): boolean => {
    if (host === lastPeer) return lastTrusted;
    lastPeer = host;
    lastTrusted = parseAddress(host, true) && trusted.has(scratch);
    return lastTrusted;
  };
  return function proxyHeaders(scope: Scope, receive, send): Promise<void> {
    if (scope.type === "http" || scope.type === "websocket") {
      return app(forwardedScope(scope, trusted, peerTrusted), receive, send);
    }
    return app(scope, receive, send);
  };
}
