// Copyright the stellarator authors. MIT license.
/**
 * Building the router's tree: a route's shape is inserted (`insertText` for its literal runs,
 * `variableKid` for each variable), then the whole tree is finalized (`prepare`: weights, first
 * routes and each variable's ordered branches) before the next lookup lays it out flat
 * (`layout.ts`) for the walk (`walk.ts`). Private: not exported from `deno.json`.
 *
 * @module
 */

import { CATCH_ALL, LITERAL, PLAIN, REGEX, type VariableToken } from "./pattern.ts";
import { GreedyMatcher, RegexMatcher } from "./suffix.ts";
import { characterCount, priorityOrder, tokenIndexOfSlot } from "./priority.ts";
import type { Endpoint, RouteLike } from "./endpoint.ts";
import { RECORD } from "./layout.ts";
import { addKid, allKids, type Branch, endsInsidePair, Node } from "./node.ts";

const { AT_SLASH, AT_END, LIST } = RECORD;
const SLASH = 0x2f;

/** "No route below": a small integer, not Infinity, so the field stays a V8 Smi. */
const NO_ROUTE = 2 ** 30;

/** Finalizes `node` and everything below it, children first. */
export function prepare<R extends RouteLike>(node: Node<R>): void {
  let weight = 0;
  let first = node.endpoint?.order ?? NO_ROUTE;
  const kids = node.regexKids.length === 0 && node.plainKid === undefined &&
      node.catchAllKid === undefined
    ? node.kids
    : allKids(node);
  for (let i = 0; i < kids.length; i++) {
    const kid = kids[i]!;
    prepare(kid);
    if (kid.weight > weight) weight = kid.weight;
    if (kid.first < first) first = kid.first;
  }
  node.weight = weight + (node.kind === LITERAL ? characterCount(node.label) : 0);
  node.first = first;
  if (node.kind === PLAIN || node.kind === REGEX) finalizeVariable(node);
}

export function insertText<R extends RouteLike>(node: Node<R>, text: string): Node<R> {
  while (text !== "") {
    const code = text.charCodeAt(0);
    const index = node.codes.indexOf(code);
    if (index === -1) {
      const kid = new Node<R>(LITERAL, text);
      addKid(node, code, kid);
      return kid;
    }
    let kid = node.kids[index]!;
    const label = kid.label;
    let common = 1;
    while (common < label.length && common < text.length && label[common] === text[common]) {
      common++;
    }
    if (common < label.length) {
      const middle = new Node<R>(LITERAL, label.slice(0, common));
      kid.label = label.slice(common);
      addKid(middle, kid.label.charCodeAt(0), kid);
      node.kids[index] = middle;
      kid = middle;
    }
    node = kid;
    text = text.slice(common);
  }
  return node;
}

export function variableKid<R extends RouteLike>(
  node: Node<R>,
  token: VariableToken,
  slot: number,
): Node<R> {
  if (token.kind === PLAIN) {
    return node.plainKid ??= new Node<R>(PLAIN, `{${token.name}}`, token, slot);
  }
  if (token.kind === CATCH_ALL) {
    return node.catchAllKid ??= new Node<R>(CATCH_ALL, `{${token.name}:*}`, token, slot);
  }
  let kid = node.regexKids.find((kid) => kid.regex === token.regex);
  if (kid === undefined) {
    kid = new Node<R>(REGEX, `{${token.name}:${token.regex}}`, token, slot);
    node.regexKids = node.regexKids.concat(kid);
  }
  return kid;
}

function endpointsBelow<R extends RouteLike>(
  node: Node<R>,
  out: Endpoint<R>[] = [],
): Endpoint<R>[] {
  if (node.endpoint !== undefined) out.push(node.endpoint);
  for (const kid of allKids(node)) endpointsBelow(kid, out);
  return out;
}

function listBranch<R extends RouteLike>(
  variable: Node<R>,
  endpoints: Endpoint<R>[],
): Branch<R> {
  const ordered = priorityOrder(endpoints);
  const matchers = ordered.map((endpoint) => {
    const suffix = endpoint.tokens.slice(tokenIndexOfSlot(endpoint.tokens, variable.slot));
    return suffix.some((token) => token.kind === REGEX)
      ? new RegexMatcher(suffix, variable.slot)
      : new GreedyMatcher(suffix, variable.slot);
  });
  return { kind: LIST, endpoints: ordered, matchers };
}

function finalizeVariable<R extends RouteLike>(node: Node<R>): void {
  const slashIndex = node.codes.indexOf(SLASH);
  node.slashKid = slashIndex === -1 ? undefined : node.kids[slashIndex];
  if (node.kind === REGEX && node.canMatchSlash) {
    const below = endpointsBelow(node);
    node.branches = below.length === 0 ? [] : [listBranch(node, below)];
    return;
  }
  if (node.kids.length === (node.slashKid === undefined ? 0 : 1)) {
    node.branches = undefined;
    return;
  }
  const ranked: { branch: Branch<R>; weight: number; first: number }[] = [];
  const none: readonly never[] = [];
  if (node.slashKid !== undefined) {
    ranked.push({
      branch: { kind: AT_SLASH, endpoints: none, matchers: none },
      weight: node.slashKid.weight,
      first: node.slashKid.first,
    });
  }
  if (node.endpoint !== undefined) {
    ranked.push({
      branch: { kind: AT_END, endpoints: none, matchers: none },
      weight: 0,
      first: node.endpoint.order,
    });
  }
  for (const kid of node.kids) {
    if (kid === node.slashKid) continue;
    if (kid.label.length === 1 && endsInsidePair(kid.label)) {
      // The tree cut "😀" and "😁" after their shared first half; rule 2 reads each as one
      // character, so each pair is a branch of its own, ranked against "/" and the others.
      for (const half of kid.kids) {
        ranked.push({
          branch: listBranch(node, endpointsBelow(half)),
          weight: 1 + half.weight,
          first: half.first,
        });
      }
      continue;
    }
    ranked.push({
      branch: listBranch(node, endpointsBelow(kid)),
      weight: kid.weight,
      first: kid.first,
    });
  }
  ranked.sort((a, b) => b.weight - a.weight || a.first - b.first);
  node.branches = ranked.map((item) => item.branch);
}
