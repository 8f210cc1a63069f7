/**
 * Route patterns for the benchmarks: a small parser for our `{name}` syntax, the
 * translation of a pattern into each peer router's syntax, and the reference
 * semantics (one anchored regex per route, ranked by priority) that every
 * workload is checked against.
 *
 * The parser here is the benchmark's own, deliberately independent of
 * `router.ts`: the harness must be able to tell when the router is wrong.
 *
 * @module
 */

/** One piece of a parsed pattern. */
export type Token =
  | { readonly kind: "literal"; readonly text: string }
  | { readonly kind: "var"; readonly name: string; readonly regex?: string }
  | { readonly kind: "catchall"; readonly name: string };

/** The peer syntaxes {@link translatePattern} can write. */
export type PeerSyntax = "find-my-way" | "rou3" | "memoirist" | "hono";

/**
 * The result of {@link translatePattern}: the peer's pattern and how to rename the
 * peer's parameter keys back to ours, or the reason the peer cannot express it.
 */
export type Translation =
  | {
    readonly ok: true;
    /** The pattern in the peer's syntax. */
    readonly pattern: string;
    /** Peer parameter key to our variable name, for keys the peer names itself (`*`). */
    readonly rename: Readonly<Record<string, string>>;
  }
  | { readonly ok: false; readonly reason: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Splits a pattern into literal text and variables.
 *
 * @param pattern A route pattern such as `/users/{id}/files/{path:*}`.
 * @returns The tokens in order; adjacent literal text is merged.
 * @throws {SyntaxError} If a brace is unbalanced, a name is invalid or two variables touch.
 */
export function parsePattern(pattern: string): Token[] {
  if (!pattern.startsWith("/")) {
    throw new SyntaxError(`Cannot parse pattern "${pattern}": it must start with "/"`);
  }
  const tokens: Token[] = [];
  let literal = "";
  let i = 0;
  while (i < pattern.length) {
    const ch = pattern[i]!;
    if (ch === "}") {
      throw new SyntaxError(`Cannot parse pattern "${pattern}": unmatched "}" at ${i}`);
    }
    if (ch !== "{") {
      literal += ch;
      i++;
      continue;
    }
    const end = closingBrace(pattern, i);
    const body = pattern.slice(i + 1, end);
    const colon = body.indexOf(":");
    const name = colon < 0 ? body : body.slice(0, colon);
    if (!NAME.test(name)) {
      throw new SyntaxError(`Cannot parse pattern "${pattern}": invalid name "${name}" at ${i}`);
    }
    if (literal !== "") {
      tokens.push({ kind: "literal", text: literal });
      literal = "";
    } else if (tokens.length > 0) {
      throw new SyntaxError(`Cannot parse pattern "${pattern}": adjacent variables at ${i}`);
    }
    const regex = colon < 0 ? undefined : body.slice(colon + 1);
    if (regex === "*") tokens.push({ kind: "catchall", name });
    else if (regex === undefined) tokens.push({ kind: "var", name });
    else tokens.push({ kind: "var", name, regex });
    i = end + 1;
  }
  if (literal !== "") tokens.push({ kind: "literal", text: literal });
  return tokens;
}

/** Index of the `}` closing the `{` at `open`, skipping escapes and character classes. */
function closingBrace(pattern: string, open: number): number {
  let depth = 0;
  let inClass = false;
  for (let i = open; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "\\") {
      i++;
    } else if (inClass) {
      if (ch === "]") inClass = false;
    } else if (ch === "[") {
      inClass = true;
    } else if (ch === "{") {
      depth++;
    } else if (ch === "}" && --depth === 0) {
      return i;
    }
  }
  throw new SyntaxError(`Cannot parse pattern "${pattern}": unclosed "{" at ${open}`);
}

/** Names of the variables of a pattern, in order. */
export function variableNames(pattern: string): string[] {
  const names: string[] = [];
  for (const token of parsePattern(pattern)) {
    if (token.kind !== "literal") names.push(token.name);
  }
  return names;
}

/**
 * Translates one of our patterns into a peer router's syntax.
 *
 * Peers differ in what they can say: memoirist and Hono take only whole-segment
 * parameters, find-my-way ends a parameter name only at `-`, `.` or `/`, and only
 * find-my-way, rou3 and Hono take regex constraints. Where a peer cannot say the
 * same thing, the peer is left out of that route set and the reason is printed.
 *
 * @param pattern One of our patterns (`{name}`, `{name:regex}`, `{name:*}`).
 * @param syntax The peer syntax to write.
 * @returns The translated pattern, or `{ ok: false, reason }`.
 * @throws {SyntaxError} If `pattern` itself is malformed.
 */
export function translatePattern(pattern: string, syntax: PeerSyntax): Translation {
  const tokens = parsePattern(pattern);
  const rename: Record<string, string> = {};
  let out = "";
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    const before = tokens[i - 1];
    const after = tokens[i + 1];
    const opensSegment = before === undefined ||
      (before.kind === "literal" && before.text.endsWith("/"));
    const closesSegment = after === undefined ||
      (after.kind === "literal" && after.text.startsWith("/"));
    const where = `"${pattern}"`;
    if (token.kind === "literal") {
      const text = escapeLiteral(token.text, syntax, i > 0);
      if (text === undefined) {
        return {
          ok: false,
          reason: `${syntax} would read literal "${token.text}" in ${where} as syntax`,
        };
      }
      out += text;
      continue;
    }
    if (token.kind === "catchall") {
      if (after !== undefined || !opensSegment) {
        return {
          ok: false,
          reason: `${syntax} takes a catch-all only as a whole last segment: ${where}`,
        };
      }
      if (syntax === "rou3") out += `**:${token.name}`;
      else if (syntax === "hono") out += `:${token.name}{.+}`;
      else {
        out += "*";
        rename["*"] = token.name;
      }
      continue;
    }
    const wholeSegment = opensSegment && closesSegment;
    if (token.regex !== undefined) {
      if (syntax === "memoirist") {
        return { ok: false, reason: `memoirist has no regex constraints: ${where}` };
      }
      if (syntax === "hono") {
        if (!wholeSegment) {
          return { ok: false, reason: `hono takes a variable only as a whole segment: ${where}` };
        }
        out += `:${token.name}{${token.regex}}`;
      } else {
        if (syntax === "rou3" && /[/]/.test(token.regex)) {
          return { ok: false, reason: `rou3 regexes see one segment: ${where}` };
        }
        out += `:${token.name}(${token.regex})`;
      }
      continue;
    }
    if (!wholeSegment) {
      if (syntax === "memoirist" || syntax === "hono") {
        return {
          ok: false,
          reason: `${syntax} takes a variable only as a whole segment: ${where}`,
        };
      }
      if (syntax === "find-my-way" && after?.kind === "literal" && !/^[-.]/.test(after.text)) {
        return {
          ok: false,
          reason: `find-my-way ends a parameter name only at "-", "." or "/": ${where}`,
        };
      }
    }
    out += `:${token.name}`;
  }
  return { ok: true, pattern: out, rename };
}

/**
 * Writes literal text in a peer's syntax, or undefined if the peer cannot.
 * `afterVariable` matters for rou3, whose names would swallow a following `_x`.
 */
function escapeLiteral(
  text: string,
  syntax: PeerSyntax,
  afterVariable: boolean,
): string | undefined {
  switch (syntax) {
    case "find-my-way":
      return /[*()?]/.test(text) ? undefined : text.replaceAll(":", "::");
    case "rou3": {
      const escaped = text.replace(/[:*?+(){}\\]/g, "\\$&");
      return afterVariable && /^[A-Za-z0-9_]/.test(escaped) ? `\\${escaped}` : escaped;
    }
    case "memoirist":
      return /[:*]/.test(text) ? undefined : text;
    case "hono":
      return /[:*{}?]/.test(text) ? undefined : text;
  }
}

/**
 * Compiles a pattern to its reference regex: the whole pattern as one anchored
 * regex, literal text escaped, each variable a capture group with its regex
 * (`[^/]+` for a plain one, `.+` for a catch-all). This is the meaning of a route.
 *
 * @param pattern One of our patterns.
 * @returns The regex and the variable names in group order.
 * @throws {SyntaxError} If the pattern or one of its regexes is malformed.
 */
export function referenceRegExp(pattern: string): { regex: RegExp; names: string[] } {
  const names: string[] = [];
  let source = "^";
  for (const token of parsePattern(pattern)) {
    if (token.kind === "literal") {
      source += token.text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
      continue;
    }
    const body = token.kind === "catchall" ? ".+" : token.regex ?? "[^/]+";
    // Named groups keep the user's own capturing groups from shifting ours.
    source += `(?<v${names.length}>${body})`;
    names.push(token.name);
  }
  return { regex: new RegExp(`${source}$`), names };
}

/**
 * The priority key of a pattern: one rank per position, literal text 0 per
 * character, a constrained variable 1, a plain variable 2, a catch-all 3.
 * Sorting keys lexicographically (stable, so registration order breaks ties)
 * puts the route that wins a path before the routes it beats.
 *
 * @param pattern One of our patterns.
 * @returns The key.
 * @throws {SyntaxError} If the pattern is malformed.
 */
export function priorityKey(pattern: string): number[] {
  const key: number[] = [];
  for (const token of parsePattern(pattern)) {
    if (token.kind === "literal") { for (let i = 0; i < token.text.length; i++) key.push(0); }
    else if (token.kind === "catchall") key.push(3);
    else key.push(token.regex === undefined ? 2 : 1);
  }
  return key;
}

/**
 * Compares two priority keys lexicographically; a key that is a prefix of the other comes first.
 *
 * @param a A key from {@link priorityKey}.
 * @param b Another key.
 * @returns Negative if `a` wins, positive if `b` wins, 0 on a tie.
 */
export function comparePriority(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/** A route found by {@link referenceMatch}: its index in the list and its context. */
export interface ReferenceHit {
  /** Index of the route in the registration list. */
  readonly index: number;
  /** Variable name to captured text. */
  readonly params: Record<string, string>;
}

/**
 * Brute-force lookup by the reference semantics: every route's regex is tried,
 * and among those that match the highest priority wins (earliest on ties).
 * Slow on purpose; used to check workloads, never timed.
 *
 * @param patterns The routes in registration order.
 * @param options `trailingSlash`: `"relaxed"` ignores one trailing slash on routes and
 *   paths (except the root), `"strict"` (default) does not.
 * @returns A lookup function; it returns undefined when nothing matches.
 * @throws {SyntaxError} If a pattern is malformed.
 */
export function referenceMatcher(
  patterns: readonly string[],
  options: { trailingSlash?: "strict" | "relaxed" } = {},
): (path: string) => ReferenceHit | undefined {
  const relaxed = options.trailingSlash === "relaxed";
  const trim = (text: string) =>
    relaxed && text.length > 1 && text.endsWith("/") ? text.slice(0, -1) : text;
  const compiled = patterns.map((original, index) => {
    const pattern = trim(original);
    const first = parsePattern(pattern)[0]!;
    // A whole literal first segment lets a lookup skip every route that starts elsewhere.
    const head = first.kind === "literal" ? /^\/([^/]*)(\/|$)/.exec(first.text) : null;
    const segment = head !== null && (head[2] === "/" || parsePattern(pattern).length === 1)
      ? head[1]!
      : undefined;
    return { index, segment, key: priorityKey(pattern), ...referenceRegExp(pattern) };
  });
  compiled.sort((a, b) => comparePriority(a.key, b.key) || a.index - b.index);
  const candidates = new Map<string, typeof compiled>();
  return (input) => {
    const path = trim(input);
    const first = /^\/([^/]*)/.exec(path)?.[1] ?? "";
    let list = candidates.get(first);
    if (list === undefined) {
      list = compiled.filter((r) => r.segment === undefined || r.segment === first);
      candidates.set(first, list);
    }
    for (const route of list) {
      const m = route.regex.exec(path);
      if (m === null) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => params[name] = m.groups![`v${i}`]!);
      return { index: route.index, params };
    }
    return undefined;
  };
}
