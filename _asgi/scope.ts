// Copyright the stellarator authors. MIT license.
/**
 * An HTTP request's ASGI scope, as both transports build it: the request's byte strings (raw
 * path, query, header values) copied into one shared buffer by one packer (`BytePack`), header
 * names from a bounded cache of names seen before (`NameBytes`), checked on every use, and the
 * target's forms (`originForm`, `authorityEnd`, `namesAnotherHost`,
 * `targetNamesAnotherHost`). Private: not exported from `deno.json`.
 *
 * @module
 */
import type { HttpScope } from "./types.ts";
import { EMPTY, reserve, SLAB_MAX } from "./bytes.ts";
import { unquote } from "./percent.ts";
import { isHostValue } from "./fields.ts";

/** What a scope takes from the state a server's requests share (`Core`). */
export interface ScopeSource {
  /** The ASGI `root_path`. */
  readonly rootPath: string;
  /** Its bytes, which `raw_path` starts with. */
  readonly rootPathBytes: Uint8Array;
  /** The lifespan, whose `state` each scope gets a shallow copy of. */
  readonly lifespan: { readonly state: Record<string, unknown> };
}

const utf8Encoder = new TextEncoder();

/**
 * Copies the byte strings of one request (raw path, query, header names and values) into a
 * shared buffer and hands out views of it (see `bytes.ts` for why, and what it costs). One packer
 * serves every request: `httpScope` opens it and fills it without yielding, so no request's
 * packing interleaves with another's, and none allocates a packer of its own.
 */
class BytePack {
  #buffer: ArrayBuffer = new ArrayBuffer(0);
  #bytes: Uint8Array = EMPTY;
  #offset = 0;

  /** Makes room for `size` bytes, the sum of the lengths of what is to be packed. */
  open(size: number): void {
    if (size > SLAB_MAX) {
      this.#bytes = new Uint8Array(size);
      this.#buffer = this.#bytes.buffer as ArrayBuffer;
      this.#offset = 0;
      return;
    }
    const space = reserve(size);
    this.#buffer = space.buffer;
    this.#bytes = space.bytes;
    this.#offset = space.offset;
  }

  /** A string of code units below 0x100 (a WebIDL ByteString, as headers are) as its bytes. */
  latin1(text: string): Uint8Array {
    const bytes = this.#bytes;
    const start = this.#offset;
    for (let i = 0; i < text.length; i++) bytes[start + i] = text.charCodeAt(i);
    this.#offset = start + text.length;
    return new Uint8Array(this.#buffer, start, text.length);
  }

  /** `prefix` then `text` as UTF-8; request targets are ASCII nearly always. */
  target(prefix: Uint8Array, text: string): Uint8Array {
    // Most requests have no query (and no root path): no view to make for it.
    if (text.length === 0 && prefix.length === 0) return EMPTY;
    const bytes = this.#bytes;
    const start = this.#offset;
    const from = start + prefix.length;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code >= 0x80) {
        // Rare: a raw non-ASCII target. Its own array; the space reserved for it stays unused.
        const encoded = utf8Encoder.encode(text);
        const out = new Uint8Array(prefix.length + encoded.length);
        out.set(prefix);
        out.set(encoded, prefix.length);
        return out;
      }
      bytes[from + i] = code;
    }
    if (prefix.length > 0) bytes.set(prefix, start);
    this.#offset = from + text.length;
    return new Uint8Array(this.#buffer, start, this.#offset - start);
  }
}

const pack = new BytePack();

/** Header names up to this long are kept as bytes for the next request that repeats them. */
const NAME_CACHE_LENGTH = 64;
/** Beyond this many names the cache starts over, so made-up names cannot grow it. */
const NAME_CACHE_ENTRIES = 256;
/** The cached bytes live in buffers of this size, apart from the requests' own bytes. */
const NAME_ARENA_SIZE = 4 * 1024;

/**
 * The bytes of request header names seen before. A request's names nearly all repeat the last
 * one's, and a view into a shared buffer costs Deno some 70 ns and 104 B to make, more than
 * finding the name in a map: a repeated name then costs no view and no copy. The scopes of
 * requests that repeat a name share its array, as Python shares equal immutable `bytes`.
 *
 * Only names: a value (a token, a cookie) or a path is what a program might rewrite or wipe in
 * place, and a shared array would carry that into other requests; nobody writes into a header
 * name. Even so, a hit is checked against the text, so a name written into is replaced rather
 * than handed on. Cached bytes live in small buffers of their own, so a cached view never keeps
 * a request's 16 KiB buffer alive.
 */
class NameBytes {
  readonly #map = new Map<string, Uint8Array>();
  #arena = new ArrayBuffer(NAME_ARENA_SIZE);
  #arenaBytes = new Uint8Array(this.#arena);
  #offset = 0;

  /** The bytes of `name`, a ByteString of at most `NAME_CACHE_LENGTH` code units. */
  get(name: string): Uint8Array {
    const cached = this.#map.get(name);
    if (cached !== undefined && same(cached, name)) return cached;
    if (this.#map.size >= NAME_CACHE_ENTRIES) this.#map.clear();
    const length = name.length;
    if (this.#offset + length > NAME_ARENA_SIZE) {
      this.#arena = new ArrayBuffer(NAME_ARENA_SIZE);
      this.#arenaBytes = new Uint8Array(this.#arena);
      this.#offset = 0;
    }
    const start = this.#offset;
    const bytes = this.#arenaBytes;
    for (let i = 0; i < length; i++) bytes[start + i] = name.charCodeAt(i);
    this.#offset = start + length;
    const view = new Uint8Array(this.#arena, start, length);
    this.#map.set(name, view);
    return view;
  }
}

/** Whether `bytes` still hold the code units of `text`. */
function same(bytes: Uint8Array, text: string): boolean {
  if (bytes.length !== text.length) return false;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== text.charCodeAt(i)) return false;
  }
  return true;
}

const nameBytes = new NameBytes();

/** What a transport has read of a request before the application runs. */
export interface RequestHead {
  /** The method, as sent. */
  method: string;
  /** `"http"` or `"https"`. */
  scheme: string;
  /** `"1.0"`, `"1.1"`… */
  httpVersion: string;
  /** The path of the request target, still percent-encoded. */
  rawPath: string;
  /** The query after `?`, or `""`. */
  query: string;
  /** Header fields as `[name, value, name, value…]`, names lower case, values as ByteStrings. */
  fields: string[];
  /** The client's address. */
  client: [string, number] | null;
  /** The listening address. */
  server: [string, number | null] | null;
}

/**
 * The origin form (path and query) of a request target: an absolute-form target
 * (`http://host/path`, which proxies send) loses its scheme and authority.
 */
export function originForm(target: string): string {
  if (target.charCodeAt(0) === 47 /* "/" */) return target;
  const authority = target.indexOf("://");
  if (authority === -1) return target;
  const end = authorityEnd(target, authority + 3);
  // "http://host?q" has an empty path, which origin form writes "/".
  return end === target.length || target.charCodeAt(end) !== 47
    ? "/" + target.slice(end)
    : target.slice(end);
}

/**
 * Where the authority of a URL that starts at `start` ends: at the first "/", "?" or "#"
 * (RFC 3986 §3.2), or at its end. Taking the first "/" alone once read
 * "http://host?next=/admin" as path "/admin".
 */
export function authorityEnd(url: string, start: number): number {
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 /* "/" */ || c === 63 /* "?" */ || c === 35 /* "#" */) return i;
  }
  return url.length;
}

/**
 * Whether the authority of an absolute-form target, `url.slice(start, end)`, names another host
 * than the Host field `host`. A client must send them identical but for the target's userinfo
 * (RFC 9112 §3.2.2), and HTTP/2's host field must name the entity of `:authority` (RFC 9113
 * §8.3.1, which asks for RFC 3986 §6.2.3's normalisation before comparing): so case is ignored,
 * and an empty port or the scheme's default one is the same as none. Any other difference
 * counts: a server that read one and an application that read the other would serve two hosts;
 * so does an authority holding a byte no host or userinfo holds (see {@linkcode isHostValue}).
 *
 * @param url The target, or the URL Deno made of it (the scheme ends at `start - 3`).
 * @param start Where the authority starts, after "://".
 * @param end Where it ends (see {@linkcode authorityEnd}).
 * @param host The Host field's value.
 */
export function namesAnotherHost(url: string, start: number, end: number, host: string): boolean {
  const scheme = url.slice(0, start - 3).toLowerCase();
  const at = url.lastIndexOf("@", end - 1);
  if (at >= start) {
    // Only host bytes before the "@" too: Deno passed "http://evil\@good/p" with Host good on,
    // where a WHATWG URL parser (a proxy in JavaScript) reads "\" as "/" and the host as evil
    // (node's parser refuses the target). A userinfo holds no other byte (RFC 3986 §3.2.1).
    if (!isHostValue(url.slice(start, at).replaceAll("@", ""))) return true;
    start = at + 1;
  }
  if (!isHostValue(url.slice(start, end))) return true;
  const port = scheme === "https" || scheme === "wss"
    ? ":443"
    : scheme === "http" || scheme === "ws"
    ? ":80"
    : ":";
  return withoutPort(url.slice(start, end), port) !== withoutPort(host, port);
}

/**
 * Whether `target`, a request target as sent, is in absolute form with an authority that names
 * another host than the Host field `host` ({@linkcode namesAnotherHost}). Origin form, `*` and
 * authority form name none. The node transport's check; the deno one's sees Deno's URL instead.
 */
export function targetNamesAnotherHost(target: string, host: string): boolean {
  if (target.charCodeAt(0) === 47 /* "/" */) return false;
  const scheme = target.indexOf("://");
  if (scheme === -1) return false;
  return namesAnotherHost(target, scheme + 3, authorityEnd(target, scheme + 3), host);
}

/** `authority` in lower case, without an empty port or the default one, `port` (":80"). */
function withoutPort(authority: string, port: string): string {
  const lower = authority.toLowerCase();
  if (lower.endsWith(":")) return lower.slice(0, -1);
  return lower.endsWith(port) ? lower.slice(0, -port.length) : lower;
}

/**
 * Builds the HTTP scope of a request. The head's fields come as arguments rather than in a
 * `RequestHead` record: the transports call this once per request, and the record was garbage.
 *
 * @param core The shared state.
 * @param method The method, as sent.
 * @param scheme `"http"` or `"https"`.
 * @param httpVersion `"1.0"`, `"1.1"`…
 * @param rawPath The path of the request target, still percent-encoded.
 * @param query The query after `?`, or `""`.
 * @param fields Header fields as `[name, value, name, value…]`, names lower case.
 * @param count How many entries of `fields` are the request's (a transport may reuse a longer
 *   array from request to request).
 * @param client The client's address.
 * @param server The listening address: a frozen pair shared by the listener's requests, as
 *   uvicorn shares one tuple between the requests of a connection.
 * @returns The scope.
 */
export function httpScope(
  core: ScopeSource,
  method: string,
  scheme: string,
  httpVersion: string,
  rawPath: string,
  query: string,
  fields: string[],
  count: number,
  client: [string, number] | null,
  server: [string, number | null] | null,
): HttpScope {
  const root = core.rootPathBytes;
  let size = root.length + rawPath.length + query.length;
  for (let i = 0; i < count; i += 2) {
    const length = fields[i]!.length;
    if (length > NAME_CACHE_LENGTH) size += length;
    size += fields[i + 1]!.length;
  }
  pack.open(size);
  // Sized up front: an empty array grown by push() gets room for 17 pairs.
  const headers = new Array<[Uint8Array, Uint8Array]>(count >> 1);
  for (let i = 0; i + 1 < count; i += 2) {
    const name = fields[i]!;
    headers[i >> 1] = [
      name.length > NAME_CACHE_LENGTH ? pack.latin1(name) : nameBytes.get(name),
      pack.latin1(fields[i + 1]!),
    ];
  }
  const path = rawPath.indexOf("%") === -1 ? rawPath : unquote(rawPath);
  return {
    type: "http",
    asgi: { version: "3.0", spec_version: "2.1" },
    http_version: httpVersion,
    method,
    scheme,
    path: core.rootPath === "" ? path : core.rootPath + path,
    raw_path: pack.target(root, rawPath),
    query_string: pack.target(EMPTY, query),
    root_path: core.rootPath,
    headers,
    client,
    server,
    state: { ...core.lifespan.state },
    extensions: {},
  };
}
