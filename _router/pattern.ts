// Copyright the stellarator authors. MIT license.
/**
 * The route pattern parser: `/users/{id:[0-9]+}/files/{path:*}` into literal and variable
 * tokens. Syntax errors carry the character position, so the router can point at them.
 *
 * @module
 */

import { describe, shorten, visible } from "../_common/describe.ts";
import { findRisk, type RegexFacts } from "./redos.ts";
import {
  ANY,
  consumed,
  hasCode,
  lengths,
  normalize,
  NOT_SLASH,
  parseRegex,
  QUOTE_MAX,
  type RegexNode,
  RegexProblem,
  visitInContext,
} from "./regex_syntax.ts";

/** Token kinds, ordered as the priority rules rank them (static text first). */
export const LITERAL = 0;
/** A `{name:regex}` variable. */
export const REGEX = 1;
/** A plain `{name}` variable: one non-empty segment. */
export const PLAIN = 2;
/** A `{name:*}` catch-all: the non-empty rest of the path. */
export const CATCH_ALL = 3;

/** Literal text of a pattern. */
export interface LiteralToken {
  readonly kind: typeof LITERAL;
  readonly text: string;
  /** Index of the text's first character in the pattern. */
  readonly position: number;
}

/** A variable of a pattern. */
export interface VariableToken {
  readonly kind: typeof REGEX | typeof PLAIN | typeof CATCH_ALL;
  readonly name: string;
  /**
   * The regex source for {@linkcode REGEX}, without the `^` and `$` that only restate the
   * variable's bounds; `""` otherwise.
   */
  readonly regex: string;
  /** The regex analysis for {@linkcode REGEX}. */
  readonly facts: VariableFacts | undefined;
  /** Index of the opening `{` in the pattern. */
  readonly position: number;
  /** Index of the regex source's first character in the pattern. */
  readonly regexPosition: number;
}

/** A token of a parsed pattern. */
export type Token = LiteralToken | VariableToken;

/** A malformed pattern; `position` indexes the pattern. */
export class PatternError extends Error {
  /** Index of the offending character in the pattern. */
  readonly position: number;
  constructor(message: string, position: number) {
    super(message);
    this.position = position;
  }
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Most UTF-16 code units of literal text plus variables a pattern may hold. Each is at most one
 * level of the tree, whose finalizing, layout and walk recurse once a level: one route of 2,000
 * variables (4,000 levels) overflowed the stack, and then every lookup of its router threw a
 * RangeError; 1,500 still built and matched. No route comes near the limit (GitHub's longest
 * holds under 100).
 */
export const MAX_PATTERN_LEVELS = 1024;
/** In u-mode, `\p{Cs}` matches only a surrogate that is not half of a pair. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Parses a route pattern.
 *
 * @param pattern The pattern, e.g. `/users/{id:[0-9]+}`.
 * @returns Alternating literal and variable tokens; two variables are never adjacent and a
 * catch-all is always last.
 * @throws {PatternError} With the position of the first problem.
 */
export function parsePattern(pattern: string): Token[] {
  if (pattern[0] !== "/") {
    throw new PatternError('it must start with "/"', 0);
  }
  // The tree compares literal text code unit by code unit, so "/\uD83D{v}" would match "/😀"
  // with v = "\uDE00", cutting a character in two; rule 1 (flag u) reads "😀" as one code point
  // and never matches it.
  const lone = pattern.search(LONE_SURROGATE);
  if (lone !== -1) {
    const hex = pattern.charCodeAt(lone).toString(16).toUpperCase();
    throw new PatternError(
      `the lone surrogate "\\u${hex}" (half of a UTF-16 pair) would match half of a character ` +
        `such as "😀" in the path; write whole characters (inside a variable's regex, the ` +
        `escape "\\u${hex}" stands for a lone surrogate in the path)`,
      lone,
    );
  }
  const tokens: Token[] = [];
  // Routes have few variables: an array is cheaper to make and search than a Set.
  const names: string[] = [];
  // Literal text runs from literalStart to i; it is sliced, not concatenated, because the tree
  // compares these strings on every lookup and a flat string reads faster than a rope.
  let literalStart = -1;
  const flush = (end: number) => {
    if (literalStart === -1) return false;
    tokens.push({ kind: LITERAL, text: pattern.slice(literalStart, end), position: literalStart });
    literalStart = -1;
    return true;
  };
  // Counted as the pattern is read, so that a huge one is refused in time bounded by the limit.
  let levels = 0;
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === "}") {
      throw new PatternError('unbalanced "}"; remove it or open a variable with "{"', i);
    }
    if (c !== "{") {
      if (literalStart === -1) literalStart = i;
      // Skip the literal run at once: a loop per character costs a new router ~1 µs a route
      // while V8 still interprets this function.
      let next = pattern.indexOf("{", i);
      if (next === -1) next = pattern.length;
      const stray = pattern.indexOf("}", i);
      if (stray !== -1 && stray < next) {
        throw new PatternError('unbalanced "}"; remove it or open a variable with "{"', stray);
      }
      if (levels + next - i > MAX_PATTERN_LEVELS) {
        // At the character that crosses the limit, not at the second half of its pair (lone
        // surrogates were refused above, so a low one here ends a pair).
        const at = i + MAX_PATTERN_LEVELS - levels;
        const code = pattern.charCodeAt(at);
        throw tooDeep(code >= 0xdc00 && code <= 0xdfff ? at - 1 : at);
      }
      levels += next - i;
      i = next;
      continue;
    }
    const open = i;
    if (++levels > MAX_PATTERN_LEVELS) throw tooDeep(open);
    if (!flush(open) && tokens.length > 0) {
      throw new PatternError(
        "two variables with nothing between them; separate them with literal text",
        open,
      );
    }
    let j = open + 1;
    while (j < pattern.length && pattern[j] !== ":" && pattern[j] !== "}") j++;
    if (j >= pattern.length) {
      throw new PatternError('unbalanced "{"; close the variable with "}"', open);
    }
    const name = pattern.slice(open + 1, j);
    if (name === "") {
      throw new PatternError('empty variable name; write "{name}" or "{name:regex}"', open + 1);
    }
    if (!NAME.test(name)) {
      throw new PatternError(
        `invalid variable name ${
          describe(name)
        }; use letters, digits and "_", not starting with a digit`,
        open + 1,
      );
    }
    if (names.includes(name)) {
      throw new PatternError(
        `duplicate variable name "${name}"; give each variable its own name`,
        open + 1,
      );
    }
    names.push(name);
    if (pattern[j] === "}") {
      tokens.push({
        kind: PLAIN,
        name,
        regex: "",
        facts: undefined,
        position: open,
        regexPosition: j,
      });
      i = j + 1;
      continue;
    }
    const regexStart = j + 1;
    const close = findClose(pattern, open, regexStart);
    const regex = pattern.slice(regexStart, close);
    i = close + 1;
    if (regex === "") {
      throw new PatternError(
        `empty regex for "${name}"; write "{${name}}" for a plain variable`,
        regexStart,
      );
    }
    if (regex === "*") {
      if (i < pattern.length) {
        throw new PatternError(
          `the catch-all "{${name}:*}" must end the pattern; move it to the end`,
          i,
        );
      }
      tokens.push({
        kind: CATCH_ALL,
        name,
        regex: "",
        facts: undefined,
        position: open,
        regexPosition: regexStart,
      });
      continue;
    }
    checkLooksMeant(name, regex, regexStart, i === pattern.length);
    const facts = regexFacts(pattern, name, regexStart, close, i === pattern.length);
    tokens.push({
      kind: REGEX,
      name,
      regex: facts.source,
      facts,
      position: open,
      regexPosition: regexStart,
    });
  }
  flush(pattern.length);
  return tokens;
}

/**
 * The regexes Starlette's convertor names stand for there (`{id:int}`), as this router writes
 * them, given whether the variable ends the pattern. Here a regex is a regex, so `int` would
 * match only the text "int": a newcomer's route that answers 404 to every request it was
 * written for. `path` is a catch-all only at the end, where `{p:*}` may stand; before that it is
 * `.+`, since Starlette lets `{p:path}` sit anywhere.
 */
const CONVERTORS: Readonly<Record<string, (name: string, last: boolean) => string>> = Object
  .assign(
    Object.create(null),
    {
      str: (name: string) => `{${name}}`,
      path: (name: string, last: boolean) => last ? `{${name}:*}` : `{${name}:.+}`,
      int: (name: string) => `{${name}:[0-9]+}`,
      float: (name: string) => `{${name}:[0-9]+(?:\\.[0-9]+)?}`,
      uuid: (name: string) =>
        `{${name}:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}}`,
    },
  );

/**
 * Refuses a regex that is surely not the one meant: a Starlette convertor name, or one with a
 * space at either edge (`{id: \d+}`), which the path would have to hold there. `last` says
 * whether the variable ends the pattern. The rewrite each error names is one the parser takes.
 */
function checkLooksMeant(name: string, regex: string, start: number, last: boolean): void {
  const convertor = CONVERTORS[regex];
  if (convertor !== undefined) {
    throw new PatternError(
      `"{${name}:${regex}}" is a Starlette convertor, which this router does not have: its ` +
        `regex "${regex}" would match only the text "${regex}"; write "${convertor(name, last)}" ` +
        `(or "{${name}:(?:${regex})}" to match that text)`,
      start,
    );
  }
  const edge = regex.startsWith(" ") ? start : regex.endsWith(" ") ? start + regex.length - 1 : -1;
  if (edge === -1) return;
  let body = regex.replace(/^ +/, "");
  let end = body.length;
  while (end > 0 && body[end - 1] === " ") end--;
  let backslashes = 0;
  while (backslashes < end && body[end - 1 - backslashes] === "\\") backslashes++;
  // "\ " at the end is an escaped space (which the u flag refuses): the space was meant, so it
  // stays, written "\x20"; cut off, it would leave a backslash escaping the closing brace.
  const escaped = backslashes % 2 === 1 && end < body.length;
  body = escaped ? body.slice(0, end - 1) + "\\x20" : body.slice(0, end);
  const rewrite = body === "" ? `{${name}}` : CONVERTORS[body]?.(name, last) ?? `{${name}:${body}}`;
  const quoted = `"${visible(shorten(rewrite, QUOTE_MAX))}"`;
  throw new PatternError(
    escaped && edge !== start
      ? `the regex of "${name}" ends with "\\ ", an escape the u flag refuses; write ${quoted}`
      : `the regex of "${name}" ${edge === start ? "starts" : "ends"} with a space, which the ` +
        `path would have to hold there; write ${quoted} (or "\\x20" for a space the path ` +
        `must hold)`,
    edge,
  );
}

/**
 * The error for a pattern that crosses {@linkcode MAX_PATTERN_LEVELS} at `position`.
 *
 * The count is of the pattern as written: a relaxed router drops a trailing "/", so it would
 * hold one more, but a route does not know the router it will join.
 */
function tooDeep(position: number): PatternError {
  return new PatternError(
    `the pattern holds more than ${MAX_PATTERN_LEVELS} UTF-16 code units of literal text ` +
      `plus variables (a variable counts one, "😀" two), deeper than the router's tree may ` +
      `grow; shorten it, or end it with a catch-all such as "{rest:*}" and split the rest in ` +
      `the handler`,
    position,
  );
}

/**
 * The index of the `}` closing the variable opened at `open`, whose regex starts at `start`.
 *
 * @throws {PatternError} Naming what is left open: a class `[` (which swallows every `}` after
 * it, so the variable's `{` is not the fault), a group `(` when the variable's `}` comes first
 * (a bare `}` never belongs to a `u`-mode regex, so it can only close the variable), or else
 * the variable's `{`.
 */
function findClose(pattern: string, open: number, start: number): number {
  let depth = 0;
  let classAt = -1;
  // Where the groups still open start, innermost last.
  const groups: number[] = [];
  for (let k = start; k < pattern.length; k++) {
    const ch = pattern[k];
    if (ch === "\\") k++;
    else if (classAt !== -1) {
      if (ch === "]") classAt = -1;
    } else if (ch === "[") classAt = k;
    else if (ch === "(") groups.push(k);
    else if (ch === ")") groups.pop();
    else if (ch === "{") depth++;
    else if (ch === "}") {
      if (depth > 0) depth--;
      else if (groups.length === 0) return k;
      else {
        throw new PatternError(
          'unclosed group "("; close it with ")", or escape a literal "(" as "\\("',
          groups.at(-1)!,
        );
      }
    }
  }
  if (classAt !== -1) {
    throw new PatternError(
      'unclosed character class "["; close it with "]", or escape a literal "[" as "\\["',
      classAt,
    );
  }
  throw new PatternError('unbalanced "{"; close the variable with "}"', open);
}

/** A variable regex's facts, with its tree (positions index the pattern). */
export interface VariableFacts extends RegexFacts {
  /** The regex as the router runs it: restating anchors removed. */
  readonly source: string;
  /** The parsed regex; its positions index the whole pattern. */
  readonly tree: RegexNode;
}

/**
 * Parses and checks the regex of variable `name`, at `start`..`end` in `pattern`.
 *
 * The router gives `^` and `$` the meaning "start" and "end of the variable" where that is
 * all they can mean: a `^` that nothing of the variable can precede and a `$` that nothing can
 * follow are dropped. Anything else that would look outside the variable, or never hold, is
 * refused here: `^` elsewhere (a variable never starts the path), `$` where text must follow
 * (except in a lookahead of the pattern's last variable, where it is the end of the path),
 * `\b` and `\B` where they could compare with a character outside the variable, and
 * lookbehinds that can look before the variable's start.
 */
function regexFacts(
  pattern: string,
  name: string,
  start: number,
  end: number,
  last: boolean,
): VariableFacts {
  const regex = pattern.slice(start, end);
  let groups: number;
  try {
    new RegExp(regex, "u");
    // exec() compiles the regex, which can fail where new RegExp() parsed it: V8's compiler
    // recurses over the regex and overflows its stack on long ones ("\\p{L}" 12,935 times).
    // An empty alternative in front makes the regex match "", which yields all its groups.
    groups = new RegExp("|" + regex, "u").exec("")!.length - 1;
  } catch (error) {
    throw new PatternError(`the regex does not compile: ${engineMessage(error)}`, start);
  }
  let tree: RegexNode;
  try {
    tree = parseRegex(regex, start);
  } catch (error) {
    if (error instanceof RegexProblem) {
      throw new PatternError(`the regex of "${name}" ${error.message}`, error.position);
    }
    throw error;
  }
  const dropped: [number, number][] = [];
  visitInContext(tree, (node, { before, after, look }) => {
    const refuse = (why: string) => {
      throw new PatternError(`the regex of "${name}" has ${why}`, node.start);
    };
    if (node.type === "look" && node.behind) {
      const [, longest] = lengths(node.body);
      if (longest > before[0]) {
        refuse(
          `the lookbehind "${shorten(pattern.slice(node.start, node.end), QUOTE_MAX)}", which ` +
            `can look at text before the variable starts; write that text as literal text of ` +
            `the pattern, or look behind only at characters the variable has matched`,
        );
      }
    }
    if (node.type !== "assert") return;
    if (node.kind === "^") {
      if (look === undefined && before[1] === 0) dropped.push([node.start, node.end]);
      else {
        refuse(
          `"^" where characters of the variable can come before it, so it never holds (a ` +
            `variable never starts the path); use "^" only at the start of the regex, where it ` +
            `means the start of the variable, or remove it`,
        );
      }
    } else if (node.kind === "$") {
      if (look === undefined && after[1] === 0) dropped.push([node.start, node.end]);
      else if (!(last && after[0] === 0)) {
        refuse(
          `"$" where text must follow it, so it never holds; use "$" only at the end of the ` +
            `regex, where it means the end of the variable (or, in the pattern's last ` +
            `variable, inside a lookahead), or remove it`,
        );
      }
    } else if (look !== undefined || before[0] === 0 || after[0] === 0) {
      refuse(
        `"${node.kind}" at an edge of the variable, where it would compare with a character ` +
          `outside it; remove it (the pattern's literal text fixes the variable's edges) or ` +
          `use it only between characters of the variable`,
      );
    }
  });
  let source = regex;
  for (const [from, to] of dropped.reverse()) {
    source = source.slice(0, from - start) + source.slice(to - start);
  }
  const consumes = normalize(consumed(tree));
  let risk: RegexProblem | undefined | null = null;
  return {
    source,
    tree,
    canMatchSlash: hasCode(consumes, 0x2f),
    consumes,
    groups,
    get risk() {
      if (risk === null) {
        const found = cachedRisk(regex, () => findRisk(parseRegex(regex), regex));
        risk = found && new RegexProblem(
          `in the regex of "${name}", ${found.message}`,
          start + found.position,
          true,
        );
      }
      return risk;
    },
  };
}

/**
 * The part of a route the regex engine runs as one regex (see `RegexMatcher` in router.ts):
 * the suffix from the first variable whose end is not the next `/`, when it holds a
 * constrained variable. Positions index the pattern.
 *
 * @returns The index of the suffix's first token and the suffix as one tree, or undefined.
 */
export function suffixTree(
  pattern: string,
  tokens: readonly Token[],
): { from: number; tree: RegexNode } | undefined {
  let from = -1;
  for (let i = 0; i < tokens.length && from === -1; i++) {
    const token = tokens[i]!;
    if (token.kind === LITERAL || token.kind === CATCH_ALL) continue;
    const next = tokens[i + 1];
    if (
      (token.kind === REGEX && token.facts!.canMatchSlash) ||
      (next !== undefined && next.kind === LITERAL && next.text.charCodeAt(0) !== 0x2f)
    ) from = i;
  }
  if (from === -1 || !tokens.slice(from).some((token) => token.kind === REGEX)) return undefined;
  const items: RegexNode[] = [];
  for (const token of tokens.slice(from)) {
    if (token.kind === LITERAL) {
      // By code point, as the engine reads the suffix (flag u): "😀" is one character.
      for (let k = 0; k < token.text.length;) {
        const code = token.text.codePointAt(k)!;
        const at = token.position + k;
        k += code > 0xffff ? 2 : 1;
        items.push({ type: "set", ranges: [code, code], start: at, end: token.position + k });
      }
      continue;
    }
    if (token.kind === REGEX) {
      const end = findClose(pattern, token.position, token.regexPosition) + 1;
      items.push({ type: "seq", items: [token.facts!.tree], start: token.position, end });
      continue;
    }
    const end = pattern.indexOf("}", token.position) + 1;
    const ranges = token.kind === PLAIN ? NOT_SLASH : ANY;
    const body: RegexNode = { type: "set", ranges, start: token.position, end };
    items.push({ type: "quant", body, min: 1, max: Infinity, start: token.position, end });
  }
  // The end of the last token, not of the pattern: relaxed routes drop a trailing "/" from
  // their tokens, and the guard's verdict (cached by this text) is on the tokens.
  const tree: RegexNode = { type: "seq", items, start: items[0]!.start, end: items.at(-1)!.end };
  return { from, tree };
}

/**
 * The ReDoS guard's verdict on {@linkcode suffixTree}: each variable may be safe on its own
 * while two together are not (`/s/{file:.+}.{ext}` backtracks quadratically).
 *
 * @returns The problem, with its position in the pattern, or undefined.
 */
export function suffixRisk(pattern: string, tokens: readonly Token[]): RegexProblem | undefined {
  const suffix = suffixTree(pattern, tokens);
  if (suffix === undefined) return undefined;
  const start = suffix.tree.start;
  const found = suffixVerdict(pattern, suffix.tree);
  if (found === undefined) return undefined;
  const name = (tokens[suffix.from] as VariableToken).name;
  const fix = exclusiveVariable(pattern, tokens, suffix.from);
  const message = fix === undefined ? found.message : found.message.replace(/; [^;]*$/, `; ${fix}`);
  return new RegexProblem(
    `the regex engine matches the route from "{${name}}" on as one regex, where ${message}`,
    start + found.position,
    true,
  );
}

/** The guard's verdict on a route's suffix `tree`, without a rewrite; positions from its start. */
function suffixVerdict(pattern: string, tree: RegexNode): RegexProblem | undefined {
  const start = tree.start;
  return cachedRisk(pattern.slice(start, tree.end), () => {
    const risk = findRisk(tree, pattern, 0, false);
    return risk && new RegexProblem(risk.message, risk.position - start, true);
  });
}

/**
 * A plain variable after literal text, rewritten to exclude the text's last character
 * (`{ext}` after "." as `{ext:[^/.]+}`), when that makes the route's suffix pass the guard.
 */
function exclusiveVariable(
  pattern: string,
  tokens: readonly Token[],
  from: number,
): string | undefined {
  for (let k = tokens.length - 1; k > from; k--) {
    const token = tokens[k]!;
    const before = tokens[k - 1]!;
    if (token.kind !== PLAIN || before.kind !== LITERAL) continue;
    // The last code point: half of a pair would make a pattern Route() refuses.
    const char = escapeRegex(Array.from(before.text).at(-1)!);
    const written = `{${token.name}}`;
    const narrowed = `{${token.name}:[^/${char}]+}`;
    const fixed = pattern.slice(0, token.position) + narrowed +
      pattern.slice(token.position + written.length);
    try {
      // The verdict alone: looking for a rewrite of the rewrite too was factorial in the number
      // of plain variables (seven segments after "/s/{file:.+}.{ext}": 1.7 s to refuse).
      const suffix = suffixTree(fixed, parsePattern(fixed));
      if (suffix === undefined || suffixVerdict(fixed, suffix.tree) === undefined) {
        return `write ${describe(narrowed)} for ${describe(written)}`;
      }
    } catch {
      // The narrowed pattern does not parse: no suggestion.
    }
  }
  return undefined;
}

/**
 * Verdicts by source text, positions relative to its start: apps repeat a few regexes over
 * many routes, and measuring one costs 20-50 µs (a thousand `{id:[0-9]+}` routes would spend
 * most of their building time on it). Bounded, so that generated patterns cannot grow it.
 */
const RISKS = new Map<string, RegexProblem | undefined>();
const MAX_RISKS = 1024;

function cachedRisk(
  text: string,
  compute: () => RegexProblem | undefined,
): RegexProblem | undefined {
  if (RISKS.has(text)) return RISKS.get(text);
  const risk = compute();
  if (RISKS.size >= MAX_RISKS) RISKS.clear();
  RISKS.set(text, risk);
  return risk;
}

/**
 * The message of the regex engine's `error`, with the regex it quotes cut to a head when long:
 * the engine quotes the whole regex, 64 KB for a regex too long to compile.
 */
export function engineMessage(error: unknown): string {
  const message = (error as Error).message;
  if (message.length <= 200) return message;
  const reason = message.lastIndexOf(": ");
  return `${shorten(message, 80)}${reason === -1 ? "" : message.slice(reason)}`;
}

/** Escapes literal text for use inside a `u`-mode regex. */
export function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}
