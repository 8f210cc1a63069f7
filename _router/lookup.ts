// Copyright the stellarator authors. MIT license.
/**
 * The lookup: the finalized tree copied into one `Int32Array`, and the walk over it. It is the
 * router's only lookup, and it reads nothing but these records, the endpoints they point to
 * and, for a constrained variable or one with several ends, its regex and branches. The router
 * builds the node objects; this module lays them out and walks the copy.
 *
 * The records and the walk share this module on purpose: the walk reads the record offsets in
 * its innermost loop, and V8 reads a binding imported from another module through its module
 * cell on every use. With the walk in `router.ts` importing the offsets and `staticKid()` from
 * here, GitHub-set lookups took 8-24 % longer (many-variable and miss workloads worst; CPU-time
 * A/B in one process, 40 interleaved batches).
 *
 * In a large router the cost of a lookup is cache misses, not instructions: walking Node
 * objects touched some ten objects scattered over the heap (the node, its child arrays, its
 * label, the endpoint), and at 10 000 routes a lookup cost 2.5 times what it cost at 10.
 * So the finalized tree is copied into one Int32Array, depth-first, each static node a record
 * followed by its label, its child table and then its children: the records one lookup reads
 * sit close together, most often in consecutive cache lines.
 *
 * @module
 */

import type { Endpoint, RouteLike } from "./endpoint.ts";
import type { Branch, Node } from "./node.ts";
import { LITERAL, PLAIN, REGEX, type Token } from "./pattern.ts";

// Branch kinds of a variable with several ends; the first two are also bits of a mask.

/** Ends at the next "/" and continues in the static child starting with "/". */
export const AT_SLASH = 1;
/** Ends at the end of the path: the endpoint of the variable node. */
export const AT_END = 2;
/** The routes of a static child not starting with "/", tried one by one. */
export const LIST = 4;

// A static node's record, at index r:
const S_LENGTH = 0; // label length
const S_CODE0 = 1; // first character code of the first static child, -1 without children
const S_KID0 = 2; // record of that child
const S_FLAGS = 3; // MANY_KIDS | HAS_VARIABLES | SLOW_VARIABLES
const S_ENDPOINT = 4; // index into the endpoint array, -1 if no route ends here
const S_TABLE = 5; // MANY_KIDS: index of the child table
const S_VARIABLE = 6; // HAS_VARIABLES: the plain variable's record; SLOW_VARIABLES: the list's
const S_LABEL = 7; // label[i] for i ≥ 1 is at r + S_LABEL + i - 1 (label[0] is known to match)
// A variable's record, followed by the records of its static child starting with "/":
const V_SLOT = 0; // capture slot × 2
const V_ENDPOINT = 1; // index into the endpoint array, -1
const V_SLASH = 2; // record of the static child starting with "/", -1
const V_KIND = 3; // K_PLAIN | K_REGEX | K_CATCH_ALL
const V_EXTRA = 4; // index into the `variables` array (regex, branches), -1 if neither
const V_SIZE = 5;
// A variable list (SLOW_VARIABLES) is a count, then the records of the variables in the order
// they are tried: constrained variables in registration order, the plain one, the catch-all.
// A child table starts with a lower bound and a count. Bound ≥ 0: a range table, the child
// for code c at t + 2 + c - bound (-1 where none). Bound -1: `count` pairs of code and record.

const K_PLAIN = 0;
const K_REGEX = 1;
const K_CATCH_ALL = 2;

const MANY_KIDS = 1;
const HAS_VARIABLES = 2;
/**
 * The variable children include a constrained variable, a catch-all or a plain variable with
 * several possible ends: they are tried one by one from a variable list.
 */
const SLOW_VARIABLES = 4;

/** Static paths longer than this are left to the walk, to bound the table's size. */
const MAX_STATIC_LENGTH = 255;

/**
 * Whether {@linkcode layoutTree} builds the table of static paths. Only tests turn it off, to
 * compare the walk alone with the router (tests/router_property_test.ts).
 */
export const layoutOptions: { staticPaths: boolean } = { staticPaths: true };

/** Range tables are used from this many children on, if no wider than {@linkcode rangeSpan}. */
const RANGE_KIDS = 3;

/** The span of the codes of `node`'s static children, if a range table suits them, else 0. */
function rangeSpan<R extends RouteLike>(node: Node<R>): number {
  const codes = node.codes;
  if (codes.length < RANGE_KIDS) return 0;
  let min = codes[0]!;
  let max = min;
  for (let i = 1; i < codes.length; i++) {
    if (codes[i]! < min) min = codes[i]!;
    if (codes[i]! > max) max = codes[i]!;
  }
  const span = max - min + 1;
  return span <= Math.max(32, codes.length * 4) ? span : 0;
}

/** Whether a static node's variable children need a variable list. */
function slowVariables<R extends RouteLike>(node: Node<R>): boolean {
  return node.regexKids.length > 0 || node.catchAllKid !== undefined ||
    (node.plainKid !== undefined && node.plainKid.branches !== undefined);
}

/** What the records of a constrained variable or a variable with several ends point to. */
interface VariableExtra<R extends RouteLike> {
  /** Constrained variables: sticky `(?:regex)(?=/|$)`, used when the end is the next "/". */
  readonly sticky: RegExp | undefined;
  /** Variables with several ends: the ways on, in priority order. */
  readonly branches: readonly Branch<R>[] | undefined;
}

/** The flat tree a router's lookups walk (see {@linkcode lookup}). */
export interface FlatTree<R extends RouteLike> {
  /** The records, depth-first from the root's at index 0. */
  readonly records: Int32Array;
  /** The endpoints the records point to. */
  readonly endpoints: Endpoint<R>[];
  /** The regexes and branches the variable records point to (`V_EXTRA`). */
  readonly variables: VariableExtra<R>[];
  /** The table of static paths (see {@linkcode staticTable}). */
  readonly statics: Int32Array;
  /** The length of the longest static path: the table's entries by length end there. */
  readonly longestStatic: number;
  /** The full text of every static node with an endpoint (relaxed: without trailing slash). */
  readonly staticPaths: string[];
  /** Their endpoints. */
  readonly staticEndpoints: Endpoint<R>[];
}

/**
 * The table of static paths: from a path's length, the way to the one static path it can be.
 * Entry `length` is 0 (no static path that long) or a node; each entry is 0 (no static path),
 * `~i` (only `paths[i]`, still to be compared), or the offset `o` of a node: `o` holds a
 * position and `o + 1 + (c & 31)` the entry to read next for the character code `c` at that
 * position. The first node of every length reads the last character, which the router has
 * read already in relaxed mode; deeper ones, where static paths share a length and a last
 * character, read the position that splits them most, so a lookup reads few characters even
 * at 10 000 routes. Paths no position splits (`/a` and `/A`) get 0 and are left to the walk.
 */
function staticTable(paths: readonly string[]): Int32Array {
  let longest = 0;
  for (const text of paths) longest = Math.max(longest, text.length);
  const table: number[] = new Array(paths.length === 0 ? 0 : longest + 1).fill(0);
  const lengths = new Map<number, number[]>();
  for (let i = 0; i < paths.length; i++) {
    const group = lengths.get(paths[i]!.length);
    if (group === undefined) lengths.set(paths[i]!.length, [i]);
    else group.push(i);
  }
  const entry = (group: number[], last: boolean): number => {
    if (group.length === 1 && !last) return ~group[0]!;
    // The first character ("/") is known; the last one is read first, then the position whose
    // characters fall into the most classes (bits of a mask). Paths differ most near their end,
    // so the search starts there and takes the first position that splits the group into single
    // paths or 16 classes: enough to build 2 500 static paths in a few milliseconds, cold.
    const length = paths[group[0]!]!.length;
    const enough = Math.min(group.length, 16);
    let position = last ? length - 1 : 0;
    let most = 1;
    for (let p = length - 2; p > 0 && !last && most < enough; p--) {
      let classes = 0;
      for (let g = 0; g < group.length; g++) classes |= 1 << (paths[group[g]!]!.charCodeAt(p) & 31);
      const count = bitCount(classes);
      if (count > most) {
        position = p;
        most = count;
      }
    }
    if (position === 0) return 0;
    const parts: number[][] = [];
    for (let g = 0; g < group.length; g++) {
      const code = paths[group[g]!]!.charCodeAt(position) & 31;
      (parts[code] ??= []).push(group[g]!);
    }
    const node = table.length;
    table.push(position);
    for (let code = 0; code < 32; code++) table.push(0);
    for (let code = 0; code < 32; code++) {
      if (parts[code] !== undefined) table[node + 1 + code] = entry(parts[code]!, false);
    }
    return node;
  };
  for (const [length, group] of lengths) table[length] = entry(group, true);
  return Int32Array.from(table);
}

/** The text of a shape without variables (as matched: relaxed, without trailing slash). */
function staticText(tokens: readonly Token[]): string | undefined {
  const token = tokens[0];
  return tokens.length === 1 && token!.kind === LITERAL && token!.text.length <= MAX_STATIC_LENGTH
    ? token!.text
    : undefined;
}

/**
 * A flat copy of `text`. A pattern's text is often a slice of a longer string, or of a
 * concatenation; comparing a path with it then reads through one more object, which at
 * 10 000 routes is one more cache miss per static lookup (10 % of it, measured).
 */
function flatCopy(text: string): string {
  return text.split("").join("");
}

/** The number of bits set in `bits`. */
function bitCount(bits: number): number {
  let count = 0;
  for (; bits !== 0; bits &= bits - 1) count++;
  return count;
}

/** Number of Int32Array elements the records of `node`'s subtree take. */
function recordSize<R extends RouteLike>(node: Node<R>): number {
  let size = 0;
  if (node.kind === LITERAL) {
    size = S_LABEL + node.label.length - 1;
    if (node.kids.length > 1) {
      const span = rangeSpan(node);
      size += 2 + (span > 0 ? span : node.kids.length * 2);
    }
    const kids = node.kids;
    for (let i = 0; i < kids.length; i++) size += recordSize(kids[i]!);
    const regexKids = node.regexKids;
    for (let i = 0; i < regexKids.length; i++) size += recordSize(regexKids[i]!);
    if (node.plainKid !== undefined) size += recordSize(node.plainKid);
    if (node.catchAllKid !== undefined) size += recordSize(node.catchAllKid);
    if (slowVariables(node)) {
      size += 1 + regexKids.length + (node.plainKid === undefined ? 0 : 1) +
        (node.catchAllKid === undefined ? 0 : 1);
    }
  } else {
    // Only the "/" child of a variable is walked from the records; its other children belong
    // to branches, which match with their own matchers.
    size = V_SIZE;
    if (node.slashKid !== undefined) size += recordSize(node.slashKid);
  }
  return size;
}

/** Copies the finalized tree below `root` into a {@linkcode FlatTree}, depth-first. */
export function layoutTree<R extends RouteLike>(root: Node<R>): FlatTree<R> {
  const records = new Int32Array(recordSize(root));
  const endpoints: Endpoint<R>[] = [];
  const variables: VariableExtra<R>[] = [];
  const staticPaths: string[] = [];
  const staticEndpoints: Endpoint<R>[] = [];
  let next = 0;
  const endpointIndex = (node: Node<R>): number =>
    node.endpoint === undefined ? -1 : endpoints.push(node.endpoint) - 1;
  const emit = (node: Node<R>): number => {
    const r = next;
    if (node.kind !== LITERAL) {
      next += V_SIZE;
      records[r + V_SLOT] = node.slot << 1;
      records[r + V_ENDPOINT] = endpointIndex(node);
      records[r + V_KIND] = node.kind === PLAIN
        ? K_PLAIN
        : node.kind === REGEX
        ? K_REGEX
        : K_CATCH_ALL;
      records[r + V_EXTRA] = node.sticky === undefined && node.branches === undefined
        ? -1
        : variables.push({ sticky: node.sticky, branches: node.branches }) - 1;
      records[r + V_SLASH] = node.slashKid === undefined ? -1 : emit(node.slashKid);
      return r;
    }
    const label = node.label;
    const kids = node.kids;
    const text = node.endpoint === undefined ? undefined : staticText(node.endpoint.tokens);
    if (text !== undefined && layoutOptions.staticPaths) {
      staticPaths.push(flatCopy(text));
      staticEndpoints.push(node.endpoint!);
    }
    records[r + S_LENGTH] = label.length;
    records[r + S_CODE0] = kids.length === 0 ? -1 : node.codes[0]!;
    records[r + S_ENDPOINT] = endpointIndex(node);
    for (let i = 1; i < label.length; i++) records[r + S_LABEL + i - 1] = label.charCodeAt(i);
    next = r + S_LABEL + label.length - 1;
    let flags = 0;
    let table = -1;
    let span = 0;
    let low = 0;
    if (kids.length > 1) {
      flags |= MANY_KIDS;
      table = next;
      span = rangeSpan(node);
      if (span > 0) {
        low = Math.min(...node.codes);
        records[table] = low;
        records[table + 1] = span;
        records.fill(-1, table + 2, table + 2 + span);
        next += 2 + span;
      } else {
        records[table] = -1;
        records[table + 1] = kids.length;
        next += 2 + kids.length * 2;
      }
    }
    for (let i = 0; i < kids.length; i++) {
      const kid = emit(kids[i]!);
      const code = node.codes[i]!;
      if (i === 0) records[r + S_KID0] = kid;
      if (span > 0) records[table + 2 + code - low] = kid;
      else if (table !== -1) {
        records[table + 2 + i * 2] = code;
        records[table + 3 + i * 2] = kid;
      }
    }
    if (
      node.regexKids.length > 0 || node.plainKid !== undefined || node.catchAllKid !== undefined
    ) {
      flags |= HAS_VARIABLES;
    }
    const tried = [...node.regexKids];
    if (node.plainKid !== undefined) tried.push(node.plainKid);
    if (node.catchAllKid !== undefined) tried.push(node.catchAllKid);
    const variableRecords = tried.map(emit);
    if (slowVariables(node)) {
      flags |= SLOW_VARIABLES;
      records[r + S_VARIABLE] = next;
      records[next] = variableRecords.length;
      records.set(variableRecords, next + 1);
      next += 1 + variableRecords.length;
    } else records[r + S_VARIABLE] = variableRecords[0] ?? -1;
    records[r + S_FLAGS] = flags;
    records[r + S_TABLE] = table;
    return r;
  };
  emit(root);
  const statics = staticTable(staticPaths);
  let longestStatic = 0;
  for (const text of staticPaths) longestStatic = Math.max(longestStatic, text.length);
  return { records, endpoints, variables, statics, longestStatic, staticPaths, staticEndpoints };
}

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
