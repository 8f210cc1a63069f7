// Copyright the stellarator authors. MIT license.
/**
 * The brute-force reference for the router's matching rules: every route's whole pattern as one
 * anchored regex, the routes sorted by the priority rule of router.ts's module doc, the first
 * regex that matches wins. Written independently of the library (its own pattern tokenizer, a
 * pairwise comparator instead of the library's trie walk) so that both can be checked against
 * each other. It assumes valid patterns.
 *
 * @module
 */

type RefToken =
  | { type: "literal"; text: string }
  | { type: "plain"; name: string }
  | { type: "catchAll"; name: string }
  | { type: "regex"; name: string; regex: string };

/** Splits a pattern into literal text and variables. */
export function tokenize(pattern: string): RefToken[] {
  const tokens: RefToken[] = [];
  let literal = "";
  let i = 0;
  while (i < pattern.length) {
    if (pattern[i] !== "{") {
      literal += pattern[i++];
      continue;
    }
    if (literal) tokens.push({ type: "literal", text: literal });
    literal = "";
    let depth = 0;
    let inClass = false;
    let j = i + 1;
    for (; j < pattern.length; j++) {
      const c = pattern[j];
      if (c === "\\") j++;
      else if (inClass) inClass = c !== "]";
      else if (c === "[") inClass = true;
      else if (c === "{") depth++;
      else if (c === "}" && depth-- === 0) break;
    }
    const body = pattern.slice(i + 1, j);
    const colon = body.indexOf(":");
    if (colon === -1) tokens.push({ type: "plain", name: body });
    else if (body.slice(colon + 1) === "*") {
      tokens.push({ type: "catchAll", name: body.slice(0, colon) });
    } else {
      tokens.push({ type: "regex", name: body.slice(0, colon), regex: body.slice(colon + 1) });
    }
    i = j + 1;
  }
  if (literal) tokens.push({ type: "literal", text: literal });
  return tokens;
}

/** Drops one trailing "/" of literal text, except from the root pattern "/". */
function relax(tokens: RefToken[]): RefToken[] {
  const last = tokens.at(-1);
  if (last?.type !== "literal" || !last.text.endsWith("/")) return tokens;
  if (tokens.length === 1 && last.text === "/") return tokens;
  const text = last.text.slice(0, -1);
  return [...tokens.slice(0, -1), ...(text ? [{ type: "literal" as const, text }] : [])];
}

/** One comparable key per literal character (code point), per variable, and "" for the end. */
function keysOf(tokens: RefToken[]): string[] {
  const keys: string[] = [];
  for (const token of tokens) {
    if (token.type === "literal") keys.push(...token.text);
    else if (token.type === "regex") keys.push(`<regex ${token.regex}>`);
    else keys.push(`<${token.type}>`);
  }
  keys.push("");
  return keys;
}

/** Whether `key` is one literal character: a code point, so "😀" (two code units) is one. */
function isCharacter(key: string): boolean {
  return key !== "" && Array.from(key).length === 1;
}

function rank(key: string): number {
  if (key === "" || isCharacter(key)) return 0; // a character or the end
  if (key.startsWith("<regex ")) return 1;
  return key === "<plain>" ? 2 : 3;
}

function literalCount(keys: string[], from: number): number {
  let count = 0;
  for (let i = from; i < keys.length; i++) if (isCharacter(keys[i]!)) count++;
  return count;
}

interface Shape {
  keys: string[];
  order: number;
  regex: RegExp;
  /** Per variable, in pattern order: its group number. */
  groups: number[];
  patterns: string[];
  /** Context key and variable index, first route's names first. */
  names: [string, number][];
}

function samePrefix(a: string[], b: string[], length: number): boolean {
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Rule 2 as a pairwise comparator: at the first differing key, literal text and the end beat
 * a constrained variable, which beats a plain one, which beats a catch-all; two regexes: the
 * one registered first at that place; two literal keys: most literal characters from there on
 * among the shapes sharing that prefix, then registered first at that place.
 */
function compare(a: Shape, b: Shape, all: Shape[]): number {
  let i = 0;
  while (a.keys[i] === b.keys[i]) i++;
  const ra = rank(a.keys[i]!);
  const rb = rank(b.keys[i]!);
  if (ra !== rb) return ra - rb;
  const sharing = (s: Shape) => all.filter((o) => samePrefix(o.keys, s.keys, i + 1));
  const firstOf = (s: Shape) => Math.min(...sharing(s).map((o) => o.order));
  if (ra === 0) {
    const weight = (s: Shape) => Math.max(...sharing(s).map((o) => literalCount(o.keys, i)));
    const byWeight = weight(b) - weight(a);
    if (byWeight !== 0) return byWeight;
  }
  return firstOf(a) - firstOf(b);
}

function escape(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}

/** The result of a reference lookup. */
export interface ReferenceMatch {
  /** Patterns registered for the matched shape, registration order. */
  patterns: string[];
  context: Record<string, string>;
}

/** A router made of one anchored regex per shape, tried in priority order. */
export class ReferenceRouter {
  #shapes: Shape[] = [];
  #relaxed: boolean;
  #maxPathLength: number;

  constructor(
    patterns: readonly string[],
    options: { trailingSlash?: "relaxed" | "strict"; maxPathLength?: number } = {},
  ) {
    this.#relaxed = (options.trailingSlash ?? "relaxed") === "relaxed";
    this.#maxPathLength = options.maxPathLength ?? 8192;
    const byKey = new Map<string, Shape>();
    patterns.forEach((pattern, order) => {
      let tokens = tokenize(pattern);
      if (this.#relaxed) tokens = relax(tokens);
      const keys = keysOf(tokens);
      const id = keys.join("\u0001");
      let shape = byKey.get(id);
      if (shape === undefined) {
        let source = "^";
        let group = 1;
        const groups: number[] = [];
        for (const token of tokens) {
          if (token.type === "literal") {
            source += escape(token.text);
            continue;
          }
          groups.push(group++);
          if (token.type === "plain") source += "([^/]+)";
          else if (token.type === "catchAll") source += "([^]+)";
          else {
            source += `(${token.regex})`;
            group += new RegExp(`|${token.regex}`, "u").exec("")!.length - 1;
          }
        }
        shape = {
          keys,
          order,
          regex: new RegExp(source + "$", "u"),
          groups,
          patterns: [],
          names: [],
        };
        byKey.set(id, shape);
      }
      shape.patterns.push(pattern);
      tokens.filter((t) => t.type !== "literal").forEach((token, index) => {
        const name = (token as { name: string }).name;
        if (!shape.names.some(([n]) => n === name)) shape.names.push([name, index]);
      });
    });
    const all = [...byKey.values()];
    this.#shapes = all.sort((a, b) => compare(a, b, all));
  }

  /** The patterns of the shapes in priority order (one pattern each). */
  get order(): string[] {
    return this.#shapes.map((shape) => shape.patterns[0]!);
  }

  /** The first shape, in priority order, whose regex matches the whole path. */
  match(path: string): ReferenceMatch | undefined {
    if (path.length > this.#maxPathLength) return undefined;
    if (this.#relaxed && path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    for (const shape of this.#shapes) {
      const m = shape.regex.exec(path);
      if (m === null) continue;
      const context: Record<string, string> = {};
      for (const [name, index] of shape.names) context[name] = m[shape.groups[index]!]!;
      return { patterns: shape.patterns, context };
    }
    return undefined;
  }
}
