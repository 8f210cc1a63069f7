// Copyright the stellarator authors. MIT license.
/**
 * Rule 2 of the router's module doc, as a sort: the priority order of the routes below a
 * variable that can end at several places, which the walk then tries one by one.
 *
 * @module
 */

import { LITERAL, type Token } from "./pattern.ts";

/** What the sort needs of an endpoint: its shape and when it was first registered. */
export interface Ranked {
  /** The normalized tokens of the shape. */
  readonly tokens: readonly Token[];
  /** Registration index of its first route: the tie-breaker "registered first". */
  readonly order: number;
}

/**
 * Token keys of a shape: one per literal character (a code point, so `😀` is one key, as rule 2
 * reads it), one per variable (`"\0"`, its kind, its regex), and the end (`""`).
 */
function priorityKeys(tokens: readonly Token[]): string[] {
  const keys: string[] = [];
  for (const token of tokens) {
    if (token.kind === LITERAL) keys.push(...token.text);
    else keys.push(`\0${token.kind}${token.regex}`);
  }
  keys.push("");
  return keys;
}

/** Whether `key` is a variable's: two code units or more, the first `"\0"`. */
function isVariableKey(key: string): boolean {
  return key.length > 1 && key.charCodeAt(0) === 0;
}

/**
 * The number of characters (code points) of literal text, the weight rule 2 gives it. A
 * pattern holds no lone surrogate, so every low surrogate ends a pair; a text cut inside a pair
 * (a tree label) counts the pair where its high half is.
 */
export function characterCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xdc00 && code <= 0xdfff) count--;
  }
  return count;
}

/** The token class of a key: {@linkcode LITERAL} for characters and the end. */
function keyClass(key: string): number {
  return isVariableKey(key) ? key.charCodeAt(1) - 0x30 : LITERAL;
}

/** Sorts endpoints by rule 2: a depth-first walk of the token trie, children ranked. */
export function priorityOrder<E extends Ranked>(endpoints: readonly E[]): E[] {
  const keyed = endpoints.map((endpoint) => {
    const keys = priorityKeys(endpoint.tokens);
    const literalsFrom: number[] = new Array(keys.length + 1).fill(0);
    for (let i = keys.length - 1; i >= 0; i--) {
      literalsFrom[i] = literalsFrom[i + 1]! + (keys[i] === "" || isVariableKey(keys[i]!) ? 0 : 1);
    }
    return { endpoint, keys, literalsFrom };
  });
  const out: E[] = [];
  const visit = (group: typeof keyed, depth: number): void => {
    if (group.length === 1) {
      out.push(group[0]!.endpoint);
      return;
    }
    const byKey = new Map<string, typeof keyed>();
    for (const item of group) {
      const key = item.keys[depth]!;
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [item]);
      else list.push(item);
    }
    const ranked = [...byKey].map(([key, items]) => ({
      key,
      items,
      cls: keyClass(key),
      weight: Math.max(...items.map((item) => item.literalsFrom[depth]!)),
      first: Math.min(...items.map((item) => item.endpoint.order)),
    }));
    ranked.sort((a, b) =>
      a.cls - b.cls || (a.cls === LITERAL ? b.weight - a.weight : 0) || a.first - b.first
    );
    for (const { items } of ranked) visit(items, depth + 1);
  };
  visit(keyed, 0);
  return out;
}

/** The index of the first token of a route at or after variable number `slot`. */
export function tokenIndexOfSlot(tokens: readonly Token[], slot: number): number {
  let seen = 0;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i]!.kind === LITERAL) continue;
    if (seen === slot) return i;
    seen++;
  }
  return tokens.length;
}
