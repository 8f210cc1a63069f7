// Copyright the stellarator authors. MIT license.
/**
 * The HTTP methods a route may serve: checking a route's list, and sharing equal lists.
 *
 * @module
 */

import { describe } from "../_common/describe.ts";

/** The methods a route may name, upper-case. */
export const KNOWN_METHODS = [
  "CONNECT",
  "DELETE",
  "GET",
  "HEAD",
  "OPTIONS",
  "PATCH",
  "POST",
  "PUT",
  "TRACE",
  // Not an HTTP method: the routes of ASGI websocket scopes, which have no method.
  "WEBSOCKET",
];

/**
 * Frozen method lists, shared by every route and endpoint with the same list: most of 10 000
 * routes serve `["GET"]`, and one array each is 10 000 objects to allocate and collect.
 */
const sharedLists = new Map<string, readonly string[]>();

/** The default list, `["GET"]`. */
export const GET_ONLY: readonly string[] = Object.freeze(["GET"]);
sharedLists.set("GET", GET_ONLY);

/** The shared frozen copy of `list`. */
export function sharedList(list: readonly string[]): readonly string[] {
  const key = list.join(" ");
  let shared = sharedLists.get(key);
  if (shared === undefined) {
    shared = Object.freeze(list.slice());
    if (sharedLists.size < 1024) sharedLists.set(key, shared);
  }
  return shared;
}

/** An RFC 9110 token: the characters a method may hold. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** `methods` upper-cased and without duplicates; a TypeError naming the route if invalid. */
export function checkMethods(path: string, methods: unknown): string[] {
  if (!Array.isArray(methods)) {
    throw new TypeError(
      `Invalid methods ${describe(methods)} for route ${describe(path)}: ` +
        `use an array, e.g. { methods: ["GET"] }`,
    );
  }
  if (methods.length === 0) {
    throw new TypeError(
      `Invalid methods [] for route ${
        describe(path)
      }: list at least one, e.g. { methods: ["GET"] }`,
    );
  }
  const out: string[] = [];
  for (const method of methods) {
    if (typeof method !== "string" || method === "") {
      throw new TypeError(
        `Invalid method ${describe(method)} for route ${describe(path)}: ` +
          `use one of ${KNOWN_METHODS.join(", ")}`,
      );
    }
    // Before upper-casing: toUpperCase() maps "poſt" to "POST" and "ı" to "I", so a method no
    // client can send would pass for a known one.
    if (!TOKEN.test(method)) {
      throw new TypeError(
        `Invalid method ${describe(method)} for route ${describe(path)}: use one of ` +
          `${
            KNOWN_METHODS.join(", ")
          }, in ASCII (a look-alike such as "ſ" or "ı" is another letter)`,
      );
    }
    const upper = method.toUpperCase();
    if (!KNOWN_METHODS.includes(upper)) {
      throw new TypeError(
        `Invalid method ${describe(method)} for route ${describe(path)}: ` +
          `use one of ${KNOWN_METHODS.join(", ")}`,
      );
    }
    if (!out.includes(upper)) out.push(upper);
  }
  return out;
}
