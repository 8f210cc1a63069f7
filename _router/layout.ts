// Copyright the stellarator authors. MIT license.
/**
 * The flat layout of the router's tree: the finalized node objects copied into one
 * `Int32Array`, and the table of static paths in front of it. `router.ts` builds the node objects
 * and walks this copy; this module only lays it out.
 *
 * In a large router the cost of a lookup is cache misses, not instructions: walking Node
 * objects touched some ten objects scattered over the heap (the node, its child arrays, its
 * label, the endpoint), and at 10 000 routes a lookup cost 2.5 times what it cost at 10.
 * So the finalized tree is copied into one Int32Array, depth-first, each static node a record
 * followed by its label, its child table and then its children: the records one lookup reads
 * sit close together, most often in consecutive cache lines.
 *
 * The walk reads the record offsets in its innermost loop. V8 reads a binding imported from
 * another module through its module cell on every use (with the walk importing the offsets,
 * GitHub-set lookups once took 8-24 % longer), so `router.ts` copies {@linkcode RECORD} into
 * constants of its own once, at load.
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

/**
 * The record layout, for the walk in `router.ts`, which copies each value into a constant of its
 * own (see the module doc for why it does not read them from here).
 */
export const RECORD = {
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
} as const;

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

/** The flat tree a router's lookups walk (`lookup()` in `router.ts`). */
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
