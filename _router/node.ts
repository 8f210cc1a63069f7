// Copyright the stellarator authors. MIT license.
/**
 * The nodes of the radix tree the router builds: static nodes hold radix-compressed literal
 * text, each variable is a node of its own. The router inserts and finalizes them; lookups read
 * only the flat copy `./layout.ts` makes of them.
 *
 * @module
 */

import type { Endpoint, RouteLike } from "./endpoint.ts";
import { REGEX, type VariableToken } from "./pattern.ts";
import type { SuffixMatcher } from "./suffix.ts";

/** One way a variable with several ends may go on; a variable's branches are in priority order. */
export interface Branch<R extends RouteLike> {
  /** Where the variable ends: `AT_SLASH`, `AT_END` or `LIST` (defined with the walk). */
  readonly kind: number;
  /** For `LIST`: the routes in priority order; empty otherwise. */
  readonly endpoints: readonly Endpoint<R>[];
  /** For `LIST`: the matcher of each route, parallel to `endpoints`. */
  readonly matchers: readonly SuffixMatcher[];
}

/**
 * A tree node. Static nodes hold radix-compressed literal text; a variable node matches one
 * variable. Children are tried in priority order: the static child for the next character,
 * constrained variables in registration order, the plain variable, the catch-all.
 *
 * Lookups do not walk these objects: `layoutTree()` copies the finalized tree into one flat
 * array, which is all a lookup reads (with the regexes and branches of variables it points to).
 */
export class Node<R extends RouteLike> {
  /** Static: the non-empty text on the edge into this node. Variable: its display text. */
  label: string;
  /** The routes ending here, if any. */
  endpoint: Endpoint<R> | undefined;
  /** The plain `{name}` child, if any (one per node: names do not make a shape). */
  plainKid: Node<R> | undefined;
  /** Variables (after finalizing): the static child starting with "/". */
  slashKid: Node<R> | undefined;
  /** Variables (after finalizing): undefined when the end is fixed, else the branches. */
  branches: Branch<R>[] | undefined;
  /** `LITERAL` for static nodes, else the variable kind. */
  readonly kind: number;
  /** Variables: the capture slot (number of variables before this one in the route). */
  readonly slot: number;
  /**
   * First character code of each static child, parallel to {@linkcode kids}. These arrays
   * and {@linkcode regexKids} start as one shared empty array and are replaced when a child is
   * added: most nodes have none or one, and 10 000 routes make 15 000 nodes.
   */
  codes: number[] = NO_CODES;
  /** Static children; no two share a first character. */
  kids: Node<R>[] = NO_NODES;
  /** Constrained-variable children, in registration order. */
  regexKids: Node<R>[] = NO_NODES;
  /** The `{name:*}` child, if any. */
  catchAllKid: Node<R> | undefined;
  /** Constrained variables: the regex source, which identifies the node among siblings. */
  readonly regex: string;
  /** Constrained variables: sticky `(?:regex)(?=/|$)`, used when the end is the next "/". */
  readonly sticky: RegExp | undefined;
  /** Constrained variables: whether the regex can match "/" (then the end is not fixed). */
  readonly canMatchSlash: boolean;
  /** Scratch for finalizing: most literal characters of a route from this node on. */
  weight = 0;
  /** Scratch for finalizing: earliest registration in this subtree. */
  first = 0;

  constructor(kind: number, label: string, token?: VariableToken, slot = 0) {
    this.kind = kind;
    this.label = label;
    this.regex = token?.regex ?? "";
    this.slot = slot;
    this.canMatchSlash = token?.facts?.canMatchSlash ?? false;
    this.sticky = kind === REGEX ? new RegExp(stickySource(this.regex), "uy") : undefined;
  }
}

/** The source of a constrained variable's sticky regex (flags `uy`): `regex` up to the next "/". */
export function stickySource(regex: string): string {
  return `(?:${regex})(?=/|$)`;
}

// Shared empty child lists. Not frozen, so that they keep the elements kinds of the arrays that
// replace them (a frozen array has a map of its own, and every load site would see two); never
// pushed to: addKid() replaces them, regex children are added with concat().
const NO_CODES: number[] = [];
const NO_NODES: never[] = [null as never];
NO_NODES.length = 0;

/**
 * Whether a static label ends with the first half of a UTF-16 pair: the tree cut it there, since
 * two patterns go on with different characters that share that half. A pattern holds no lone
 * surrogate, so every child of such a node is static and starts with a second half.
 */
export function endsInsidePair(label: string): boolean {
  const code = label.charCodeAt(label.length - 1);
  return code >= 0xd800 && code <= 0xdbff;
}

/** Adds a static child (`code` is its label's first character). */
export function addKid<R extends RouteLike>(node: Node<R>, code: number, kid: Node<R>): void {
  if (node.kids.length === 0) {
    node.codes = [code];
    node.kids = [kid];
  } else {
    node.codes.push(code);
    node.kids.push(kid);
  }
}

/** Every child of `node`, in the order the walk tries them. */
export function allKids<R extends RouteLike>(node: Node<R>): Node<R>[] {
  const kids = [...node.kids, ...node.regexKids];
  if (node.plainKid !== undefined) kids.push(node.plainKid);
  if (node.catchAllKid !== undefined) kids.push(node.catchAllKid);
  return kids;
}
