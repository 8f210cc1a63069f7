// Copyright the stellarator authors. MIT license.
/**
 * The flat tree that lookups walk: the finalized tree copied into one `Int32Array`.
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
import { LITERAL, PLAIN } from "./pattern.ts";
import type { Node } from "./node.ts";

// A static node's record, at index r:
export const S_LENGTH = 0; // label length
export const S_CODE0 = 1; // first character code of the first static child, -1 without children
export const S_KID0 = 2; // record of that child
export const S_FLAGS = 3; // MANY_KIDS | HAS_VARIABLES | SLOW_VARIABLES
export const S_ENDPOINT = 4; // index into the endpoint array, -1 if no route ends here
export const S_TABLE = 5; // MANY_KIDS: index of the child table
export const S_VARIABLE = 6; // HAS_VARIABLES: the plain variable's record; SLOW_VARIABLES: node index
export const S_LABEL = 7; // label[i] for i ≥ 1 is at r + S_LABEL + i - 1 (label[0] is known to match)
// A plain variable's record, when its end is the next "/" (no branches):
export const V_SLOT = 0; // capture slot × 2
export const V_ENDPOINT = 1; // index into the endpoint array, -1
export const V_SLASH = 2; // record of the static child starting with "/", -1
export const V_SIZE = 3;
// A child table starts with a lower bound and a count. Bound ≥ 0: a range table, the child
// for code c at t + 2 + c - bound (-1 where none). Bound -1: `count` pairs of code and record.

export const MANY_KIDS = 1;
export const HAS_VARIABLES = 2;
/**
 * The variable children include a constrained variable, a catch-all or a plain variable with
 * several possible ends: they are tried through the node objects.
 */
export const SLOW_VARIABLES = 4;

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

/** Whether a static node's variable children need the node objects. */
function slowVariables<R extends RouteLike>(node: Node<R>): boolean {
  return node.regexKids.length > 0 || node.catchAllKid !== undefined ||
    (node.plainKid !== undefined && node.plainKid.branches !== undefined);
}

/** The flat tree a router's lookups walk (see `searchStatic()` in router.ts). */
export interface FlatTree<R extends RouteLike> {
  readonly records: Int32Array;
  readonly endpoints: Endpoint<R>[];
  /** Static nodes with {@linkcode SLOW_VARIABLES}. */
  readonly nodes: Node<R>[];
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
  } else {
    if (node.kind === PLAIN && node.branches === undefined) size = V_SIZE;
    if (node.slashKid !== undefined) size += recordSize(node.slashKid);
  }
  return size;
}

/** Copies the finalized tree below `root` into a {@linkcode FlatTree}, depth-first. */
export function layoutTree<R extends RouteLike>(root: Node<R>): FlatTree<R> {
  const records = new Int32Array(recordSize(root));
  const endpoints: Endpoint<R>[] = [];
  const nodes: Node<R>[] = [];
  let next = 0;
  const endpointIndex = (node: Node<R>): number =>
    node.endpoint === undefined ? -1 : endpoints.push(node.endpoint) - 1;
  const emit = (node: Node<R>): number => {
    const r = next;
    if (node.kind !== LITERAL) {
      // Only the "/" child of a variable is walked from the flat tree; its other children
      // belong to branches, which match with their own matchers.
      if (node.kind === PLAIN && node.branches === undefined) {
        next += V_SIZE;
        records[r + V_SLOT] = node.slot << 1;
        records[r + V_ENDPOINT] = endpointIndex(node);
        records[r + V_SLASH] = node.slashKid === undefined ? -1 : emit(node.slashKid);
      } else if (node.slashKid !== undefined) emit(node.slashKid);
      return r;
    }
    node.record = r;
    const label = node.label;
    const kids = node.kids;
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
    const regexKids = node.regexKids;
    for (let i = 0; i < regexKids.length; i++) emit(regexKids[i]!);
    const plain = node.plainKid === undefined ? -1 : emit(node.plainKid);
    if (slowVariables(node)) {
      flags |= SLOW_VARIABLES;
      records[r + S_VARIABLE] = nodes.push(node) - 1;
    } else records[r + S_VARIABLE] = plain;
    records[r + S_FLAGS] = flags;
    records[r + S_TABLE] = table;
    return r;
  };
  emit(root);
  return { records, endpoints, nodes };
}

/** The record of the static child of record `r` for `code`, or -1. */
export function staticKid(records: Int32Array, r: number, code: number): number {
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
export function labelAt(records: Int32Array, r: number, path: string, pos: number): boolean {
  const length = records[r + S_LENGTH]!;
  if (length === 1) return true;
  if (pos + length > path.length) return false;
  const at = r + S_LABEL - 1;
  for (let i = 1; i < length; i++) {
    if (path.charCodeAt(pos + i) !== records[at + i]) return false;
  }
  return true;
}
