// Copyright the stellarator authors. MIT license.
/**
 * The walk: finding a path's endpoint in the flat copy of the tree that `layout.ts` makes (rule
 * by rule as `router.ts`'s module doc writes them), with the table of static paths first. The
 * router's hot path: no allocation, no exception, no call to outside code. Private: not
 * exported from `deno.json`.
 *
 * @module
 */

import type { Endpoint, RouteLike } from "./endpoint.ts";
import { type FlatTree, RECORD } from "./layout.ts";

// The record layout of `layout.ts`, copied into constants of this module: the walk reads
// them in its innermost loop, and an imported binding is read through its module cell each time.
const {
  S_LENGTH,
  S_CODE0,
  S_KID0,
  S_FLAGS,
  S_ENDPOINT,
  S_TABLE,
  S_VARIABLE,
  S_LABEL,
  V_SLOT,
  V_ENDPOINT,
  V_SLASH,
  V_KIND,
  V_EXTRA,
  K_REGEX,
  K_CATCH_ALL,
  AT_SLASH,
  AT_END,
  LIST,
  MANY_KIDS,
  HAS_VARIABLES,
  SLOW_VARIABLES,
} = RECORD;

/** The record of the static child of record `r` for `code`, or -1. */
function staticKid(records: Int32Array, r: number, code: number): number {
  if (code === records[r + S_CODE0]) return records[r + S_KID0]!;
  if ((records[r + S_FLAGS]! & MANY_KIDS) === 0) return -1;
  const t = records[r + S_TABLE]!;
  const low = records[t]!;
  const count = records[t + 1]!;
  if (low >= 0) {
    const i = code - low;
    return i >= 0 && i < count ? records[t + 2 + i]! : -1;
  }
  for (let i = 1; i < count; i++) {
    if (records[t + 2 + i * 2] === code) return records[t + 3 + i * 2]!;
  }
  return -1;
}

/**
 * Whether the label of the static node at record `r` occurs in `path` at `pos`; its first
 * character is already known to match.
 */
function labelAt(records: Int32Array, r: number, path: string, pos: number): boolean {
  const length = records[r + S_LENGTH]!;
  if (length === 1) return true;
  if (pos + length > path.length) return false;
  const at = r + S_LABEL - 1;
  for (let i = 1; i < length; i++) {
    if (path.charCodeAt(pos + i) !== records[at + i]) return false;
  }
  return true;
}

/**
 * Finds the endpoint for `path` in `flat`, leaving the start and end of each variable in `caps`.
 *
 * A path that is a static route's whole text is first looked for in the table of static paths
 * (see {@linkcode staticTable}): its last character, a character or two more where static paths
 * share a length and a last character, then one string comparison, instead of reading the path
 * character by character (each `charCodeAt` of a fresh sliced string costs some 2-3 ns). Paths
 * of a length no static path has read nothing more. The table gives
 * exactly the walk's answer. The walk tries static children first, so it reaches the same
 * node along the same static text and returns its endpoint before trying any variable; and by
 * the priority rule, every other route matching that path has a variable where the static
 * route has literal text or its end, so the static route wins (tests/router_property_test.ts
 * checks the two against each other on random route sets). No `Map` of paths: hashing a fresh
 * string costs a runtime call, ~50-70 ns, on every lookup, hit or miss.
 *
 * @param flat The router's flat tree.
 * @param path The path, starting with "/" (and without its trailing slash if relaxed).
 * @param last The last code unit of `path` if the caller has read it, else -1.
 * @param caps The capture slots, two per variable of the deepest route.
 * @returns The endpoint, or undefined.
 */
export function lookup<R extends RouteLike>(
  flat: FlatTree<R>,
  path: string,
  last: number,
  caps: Int32Array,
): Endpoint<R> | undefined {
  const statics = flat.statics;
  const n = path.length;
  if (n <= flat.longestStatic) {
    let entry = statics[n]!;
    while (entry > 0) {
      const p = statics[entry]!;
      const code = p === n - 1 && last >= 0 ? last : path.charCodeAt(p);
      entry = statics[entry + 1 + (code & 31)]!;
    }
    if (entry < 0 && path === flat.staticPaths[~entry]) return flat.staticEndpoints[~entry];
  }
  tree = flat;
  return searchStatic(0, path, 1, caps) as Endpoint<R> | undefined;
}

/**
 * The flat tree of the router doing the current lookup (set by {@linkcode lookup}; lookups
 * are synchronous and call no outside code, so one module-wide slot is enough).
 */
let tree: FlatTree<RouteLike> = {
  records: new Int32Array(0),
  endpoints: [],
  variables: [],
  statics: new Int32Array(0),
  longestStatic: 0,
  staticPaths: [],
  staticEndpoints: [],
};

/** Finds the endpoint for `path` below the static node at record `r`, whose text ends at `pos`. */
function searchStatic(
  r: number,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<RouteLike> | undefined {
  const records = tree.records;
  const n = path.length;
  // One loop, recursing only where there is something to backtrack to: down a static child of a
  // node without variable children (which fails exactly when that child fails), and on from a
  // plain variable ending at the next "/" (nothing is tried after it).
  for (;;) {
    for (;;) {
      if (pos === n) {
        const endpoint = records[r + S_ENDPOINT]!;
        if (endpoint >= 0) return tree.endpoints[endpoint];
        break;
      }
      const kid = staticKid(records, r, path.charCodeAt(pos));
      if (kid === -1 || !labelAt(records, kid, path, pos)) break;
      if ((records[r + S_FLAGS]! & HAS_VARIABLES) === 0) {
        r = kid;
        pos += records[kid + S_LENGTH]!;
        continue;
      }
      const found = searchStatic(kid, path, pos + records[kid + S_LENGTH]!, caps);
      if (found !== undefined) return found;
      break;
    }
    const flags = records[r + S_FLAGS]!;
    if ((flags & HAS_VARIABLES) === 0) return undefined;
    if ((flags & SLOW_VARIABLES) !== 0) {
      return searchVariables(records[r + S_VARIABLE]!, path, pos, caps);
    }
    // The common case, a plain variable ending at the next "/", as atSegmentEnd() does it.
    if (pos === n) return undefined;
    const v = records[r + S_VARIABLE]!;
    const e = path.indexOf("/", pos);
    if (e === pos) return undefined;
    const slot = records[v + V_SLOT]!;
    if (e === -1) {
      const endpoint = records[v + V_ENDPOINT]!;
      if (endpoint < 0) return undefined;
      caps[slot] = pos;
      caps[slot + 1] = n;
      return tree.endpoints[endpoint];
    }
    const kid = records[v + V_SLASH]!;
    if (kid === -1 || !labelAt(records, kid, path, e)) return undefined;
    caps[slot] = pos;
    caps[slot + 1] = e;
    r = kid;
    pos = e + records[kid + S_LENGTH]!;
  }
}

/** Tries the variables of the variable list at record `list`, whose text starts at `pos`. */
function searchVariables(
  list: number,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<RouteLike> | undefined {
  const records = tree.records;
  const count = records[list]!;
  for (let i = 1; i <= count; i++) {
    const v = records[list + i]!;
    const kind = records[v + V_KIND]!;
    // Only a regex may match the empty string, and regexes come first.
    if (kind !== K_REGEX && pos === path.length) return undefined;
    if (kind === K_CATCH_ALL) {
      const slot = records[v + V_SLOT]!;
      caps[slot] = pos;
      caps[slot + 1] = path.length;
      return tree.endpoints[records[v + V_ENDPOINT]!];
    }
    const found = searchVariable(v, path, pos, caps);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Finds the endpoint for `path` below the variable at record `v`, which starts at `pos`. */
function searchVariable(
  v: number,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<RouteLike> | undefined {
  const extra = tree.records[v + V_EXTRA]!;
  const branches = extra === -1 ? undefined : tree.variables[extra]!.branches;
  if (branches === undefined) return atSegmentEnd(v, path, pos, caps, AT_SLASH | AT_END);
  for (let b = 0; b < branches.length; b++) {
    const branch = branches[b]!;
    if (branch.kind === LIST) {
      const matchers = branch.matchers;
      for (let i = 0; i < matchers.length; i++) {
        if (matchers[i]!.run(path, pos, caps)) return branch.endpoints[i];
      }
    } else {
      const found = atSegmentEnd(v, path, pos, caps, branch.kind);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/**
 * The variable at record `v` ends where its segment ends: continue in the "/" child
 * (`allow & AT_SLASH`) or finish at its endpoint (`allow & AT_END`).
 */
function atSegmentEnd(
  v: number,
  path: string,
  pos: number,
  caps: Int32Array,
  allow: number,
): Endpoint<RouteLike> | undefined {
  const records = tree.records;
  const e = path.indexOf("/", pos);
  const extra = records[v + V_EXTRA]!;
  const sticky = extra === -1 ? undefined : tree.variables[extra]!.sticky;
  if (sticky !== undefined) {
    sticky.lastIndex = pos;
    if (!sticky.test(path)) return undefined;
  } else if (e === pos) return undefined;
  const slot = records[v + V_SLOT]!;
  if (e === -1) {
    const endpoint = records[v + V_ENDPOINT]!;
    if ((allow & AT_END) === 0 || endpoint < 0) return undefined;
    caps[slot] = pos;
    caps[slot + 1] = path.length;
    return tree.endpoints[endpoint];
  }
  const kid = records[v + V_SLASH]!;
  if (kid === -1 || (allow & AT_SLASH) === 0 || !labelAt(records, kid, path, e)) return undefined;
  caps[slot] = pos;
  caps[slot + 1] = e;
  return searchStatic(kid, path, e + records[kid + S_LENGTH]!, caps);
}
