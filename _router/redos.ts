// Copyright the stellarator authors. MIT license.
/**
 * The ReDoS guard: refuses a regex on which a backtracking engine could take more than
 * {@linkcode MAX_STEPS_PER_CHAR} steps per character of the path (measured by
 * `ambiguity.ts`), and says which part of it and what to write instead.
 *
 * Lookarounds are run by the engine as separate matches, so their bodies pass the same test,
 * and their runs are added to the count: a lookaround at the start of the regex is reached at
 * one position, so its steps spread over the input; elsewhere it can be reached at every
 * position, so only a bounded body is accepted, counted whole.
 *
 * @module
 */

import { describe as quoteValue, shorten } from "../_common/describe.ts";
import {
  fails,
  MAX_CLASSES,
  MAX_LINKS,
  MAX_STEPS_PER_CHAR,
  MAX_VECTORS,
  measure,
} from "./ambiguity.ts";
import {
  hasCode,
  lengths,
  parseRegex,
  QUOTE_MAX,
  type Ranges,
  type RegexNode,
  RegexProblem,
  visitInContext,
} from "./regex_syntax.ts";

export { hostileInputs, MAX_STEPS_PER_CHAR, measure } from "./ambiguity.ts";

/** The smallest part of `node` (which fails {@linkcode measure}) that fails on its own. */
function culprit(node: RegexNode): RegexNode {
  switch (node.type) {
    case "quant":
      return fails(node.body) ? culprit(node.body) : node;
    case "alt": {
      const alt = node.alts.find(fails);
      return alt === undefined ? node : culprit(alt);
    }
    case "seq": {
      const items = node.items;
      for (let size = 1; size < items.length; size++) {
        for (let i = 0; i + size <= items.length; i++) {
          const window = items.slice(i, i + size);
          const part: RegexNode = size === 1 ? window[0]! : {
            type: "seq",
            items: window,
            start: window[0]!.start,
            end: window[size - 1]!.end,
          };
          if (fails(part)) return size === 1 ? culprit(part) : part;
        }
      }
      return node;
    }
    default:
      return node;
  }
}

/** `text` (a regex source) with each unbounded repeat bounded to `bound` more iterations. */
function boundRepeats(node: RegexNode, text: string, offset: number, bound: number): string {
  const edits: [number, number, string][] = [];
  visitInContext(node, (inner) => {
    if (inner.type !== "quant" || inner.max !== Infinity) return;
    const lazy = text[inner.end - 1 - offset] === "?" &&
        inner.end - inner.body.end > 1
      ? "?"
      : "";
    const most = inner.min <= 1 ? bound : inner.min + bound;
    edits.push([inner.body.end, inner.end, `{${inner.min},${most}}${lazy}`]);
  });
  let out = text.slice(node.start - offset, node.end - offset);
  for (const [start, end, replacement] of edits.sort((a, b) => b[0] - a[0])) {
    out = out.slice(0, start - node.start) + replacement + out.slice(end - node.start);
  }
  return out;
}

/**
 * A rewrite of `part` with bounded repeats that passes the guard within `root`, if one is
 * found: what the refusal suggests.
 */
function boundedRewrite(
  part: RegexNode,
  root: RegexNode,
  source: string,
  offset: number,
): string | undefined {
  const before = source.slice(root.start - offset, part.start - offset);
  const after = source.slice(part.end - offset, root.end - offset);
  for (const bound of [64, 16]) {
    const text = boundRepeats(part, source, offset, bound);
    if (text === source.slice(part.start - offset, part.end - offset)) return undefined;
    try {
      if (!fails(parseRegex(before + text + after))) return text;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * A rewrite of `part` where each unbounded repeat of `.`, `\S` or a negated class that is
 * followed by a literal character excludes it (`[^/]+\.` as `[^/.]+\.`), if it passes the
 * guard within `root`: the usual fix for `name.ext`-like regexes.
 */
function exclusiveRewrite(
  part: RegexNode,
  root: RegexNode,
  source: string,
  offset: number,
): string | undefined {
  if (part.type !== "seq") return undefined;
  const slice = (node: RegexNode) => source.slice(node.start - offset, node.end - offset);
  const edits: [number, number, string][] = [];
  part.items.forEach((item, i) => {
    const next = part.items[i + 1];
    if (item.type !== "quant" || item.max !== Infinity || next?.type !== "set") return;
    if (next.ranges.length !== 2 || next.ranges[0] !== next.ranges[1]) return;
    if (!hasCode((item.body as { ranges?: Ranges }).ranges ?? [], next.ranges[0]!)) return;
    const char = slice(next);
    const body = slice(item.body);
    const narrowed = body === "."
      ? `[^${char}\\n\\r\\u2028\\u2029]`
      : body === "\\S"
      ? `[^\\s${char}]`
      : /^\[\^[^\]]*\]$/.test(body)
      ? body.slice(0, -1) + char + "]"
      : undefined;
    if (narrowed !== undefined) edits.push([item.body.start, item.body.end, narrowed]);
  });
  if (edits.length === 0) return undefined;
  let text = slice(part);
  for (const [start, end, replacement] of edits.reverse()) {
    text = text.slice(0, start - part.start) + replacement + text.slice(end - part.start);
  }
  const before = source.slice(root.start - offset, part.start - offset);
  const after = source.slice(part.end - offset, root.end - offset);
  try {
    return fails(parseRegex(before + text + after)) ? undefined : text;
  } catch {
    return undefined;
  }
}

/**
 * `text` quoted for a message, cut to {@linkcode QUOTE_MAX} code units, as the pattern itself is
 * quoted: backslashes as written, so a rewrite pasted from the message is the regex meant.
 */
function quote(text: string): string {
  return quoteValue(shorten(text, QUOTE_MAX));
}

function describe(part: RegexNode, source: string, offset: number): string {
  return quote(source.slice(part.start - offset, part.end - offset));
}

/** `a?a?aa` as `a{2,4}`: a run of one atom, repeated or not, as one counted repeat. */
function mergedRepeat(part: RegexNode, source: string, offset: number): string | undefined {
  if (part.type !== "seq" || part.items.length < 2) return undefined;
  let atom: string | undefined;
  let min = 0;
  let max = 0;
  for (const item of part.items) {
    const body = item.type === "quant" ? item.body : item;
    const text = source.slice(body.start - offset, body.end - offset);
    if (body.type !== "set" || (atom !== undefined && text !== atom)) return undefined;
    atom = text;
    min += item.type === "quant" ? item.min : 1;
    max += item.type === "quant" ? item.max : 1;
  }
  if (max === Infinity && min <= 1) return atom + (min === 0 ? "*" : "+");
  return `${atom}{${min},${max === Infinity ? "" : max}}`;
}

/** Why a measured part fails, and what to write instead. */
function explain(
  part: RegexNode,
  root: RegexNode,
  source: string,
  offset: number,
  rewrite: boolean,
): string {
  const text = describe(part, source, offset);
  const merged = mergedRepeat(part, source, offset);
  // The part first; if the rest of the regex still fails, the whole regex.
  const exclusive = rewrite && merged === undefined
    ? exclusiveRewrite(part, root, source, offset) ??
      (part !== root ? exclusiveRewrite(root, root, source, offset) : undefined)
    : undefined;
  const bounded = rewrite && merged === undefined && exclusive === undefined
    ? boundedRewrite(part, root, source, offset)
    : undefined;
  const hint = merged !== undefined
    ? `write the run as one repeat, e.g. ${quote(merged)}`
    : exclusive !== undefined
    ? `keep the character that follows a repeat out of it, e.g. ${quote(exclusive)}`
    : bounded !== undefined
    ? `bound its repeats, e.g. ${quote(bounded)}`
    : part.type === "quant"
    ? `repeat a part that can match a given text in only one way (e.g. "a+" instead of ` +
      `"(a+)+" or "(a?){9}", "(?:ab?)*" instead of "(a|ab)*")`
    : `make its parts unable to match the same characters (e.g. "[^/]*z" instead of ` +
      `".*.*z"), or bound their repeats (e.g. "{1,16}" instead of "+")`;
  return `${text} can match the same text in too many ways (more than ${MAX_STEPS_PER_CHAR} ` +
    `engine steps per character of the path), so a crafted path can make the regex engine ` +
    `backtrack for a long time; ${hint}`;
}

/**
 * Finds the first reason `root` could make the engine take more than
 * {@linkcode MAX_STEPS_PER_CHAR} steps per character, with its position and a fix.
 *
 * @param root The regex, parsed with `offset`.
 * @param source The text `root`'s positions index, minus `offset`.
 * @param offset The parser's offset.
 * @param rewrite Whether to try a bounded rewrite for the message (`source` is a regex).
 */
export function findRisk(
  root: RegexNode,
  source: string,
  offset = 0,
  rewrite = true,
): RegexProblem | undefined {
  return riskOf(root, source, offset, rewrite, new Map());
}

/**
 * {@linkcode findRisk}, with the verdicts on lookaround bodies already judged. The visit below
 * reaches a lookaround nested in another both from the root and from the outer one's body, so
 * without them each level doubled the work: 20 nested `(?=…)` took 1.7 s, 25 about a minute.
 */
function riskOf(
  root: RegexNode,
  source: string,
  offset: number,
  rewrite: boolean,
  judged: Map<RegexNode, RegexProblem | undefined>,
): RegexProblem | undefined {
  const verdict = measure(root);
  let risk: RegexProblem | undefined;
  if (verdict.kind === "large") {
    risk = new RegexProblem(
      `the repeat ${describe(verdict.node, source, offset)} unrolls to too many parts for the ` +
        `ReDoS guard to check (counted and nested repeats multiply them); use smaller bounds ` +
        `or fewer nested repeats`,
      verdict.node.start,
      true,
    );
  } else if (verdict.kind === "dense") {
    risk = new RegexProblem(
      `${
        verdict.node === root ? "the regex" : `the repeat ${describe(verdict.node, source, offset)}`
      } ` +
        `links its characters in more than ${MAX_LINKS} ways for the ReDoS guard to check (each ` +
        `character that can end a part links to every one that can start the next, so wide ` +
        `alternations, above all under a repeat, and runs of optional parts make many); use ` +
        `fewer alternatives or optional parts, e.g. a class such as "[abc]" for "a|b|c", or one ` +
        `counted repeat such as "a{0,9}" for "a?a?…"`,
      verdict.node.start,
      true,
    );
  } else if (verdict.kind === "varied" && verdict.ranges) {
    risk = new RegexProblem(
      `the regex's character sets have too many ranges for the ReDoS guard to check (each ` +
        `character a class lists apart from its neighbours is a range of its own); use classes ` +
        `of a few wide ranges, e.g. "[^/]" for one that lists thousands of characters`,
      root.start,
      true,
    );
  } else if (verdict.kind === "varied") {
    risk = new RegexProblem(
      `the regex tells apart more than ${MAX_CLASSES} kinds of characters for the ReDoS guard ` +
        `to check (each distinct character, and each class that overlaps others, makes more); ` +
        `use a class that covers many of them, e.g. "[^/]{1,64}" for a long run of distinct ` +
        `characters`,
      root.start,
      true,
    );
  } else if (verdict.kind === "complex") {
    risk = new RegexProblem(
      `the regex has more than ${MAX_VECTORS} states for the ReDoS guard to check; simplify it`,
      root.start,
      true,
    );
  } else if (verdict.kind === "ambiguous") {
    const part = culprit(root);
    risk = new RegexProblem(explain(part, root, source, offset, rewrite), part.start, true);
  }
  if (risk !== undefined || verdict.kind !== "ok") return risk;
  // A lookaround runs its body as a separate match each time a path reaches it. One at the
  // start of the regex is reached at one position only, so its work spreads over the input:
  // its steps per character add up. Elsewhere it may be reached at every position, so its
  // whole run counts, and only a bounded body keeps that a constant.
  let extra = 0;
  let costliest: { node: RegexNode; cost: number } | undefined;
  visitInContext(root, (node, context) => {
    if (risk !== undefined || node.type !== "look") return;
    let inner = judged.get(node.body);
    if (!judged.has(node.body)) {
      inner = riskOf(node.body, source, offset, rewrite, judged);
      judged.set(node.body, inner);
    }
    const longest = lengths(node.body)[1];
    if (inner !== undefined) {
      risk = new RegexProblem(`inside a lookaround, ${inner.message}`, inner.position, true);
    } else if (longest === Infinity && context.before[1] > 0) {
      risk = new RegexProblem(
        `the lookaround ${describe(node, source, offset)} has an unbounded body and can be ` +
          `tried at each of many positions, each time scanning to the end of the path; ` +
          `bound its body (e.g. "{0,64}" instead of "*") or move it to the start of the regex`,
        node.start,
        true,
      );
    } else {
      const body = measure(node.body);
      const steps = body.kind === "ok" ? body.steps : Infinity;
      const cost = context.before[1] === 0 ? steps : steps * (longest + 1);
      extra += cost;
      if (costliest === undefined || cost > costliest.cost) costliest = { node, cost };
    }
  });
  if (risk === undefined && costliest !== undefined) {
    const total = verdict.steps * (1 + extra);
    if (total > MAX_STEPS_PER_CHAR) {
      risk = new RegexProblem(
        `the lookaround ${describe(costliest.node, source, offset)} runs its body again for ` +
          `each path that reaches it, which makes up to ${total} engine steps per character ` +
          `of the path (more than ${MAX_STEPS_PER_CHAR}); shorten its body or move it to the ` +
          `start of the regex`,
        costliest.node.start,
        true,
      );
    }
  }
  return risk;
}

/** What the router needs to know about a variable's regex. */
export interface RegexFacts {
  /** Whether a match can contain `/`, so the variable can span path segments. */
  readonly canMatchSlash: boolean;
  /** Every code point a match can contain. */
  readonly consumes: Ranges;
  /** Number of capturing groups of its own. */
  readonly groups: number;
  /**
   * A backtracking risk found by {@linkcode findRisk}, if any. Computed when first read, so
   * that a router with `allowUnsafeRegex` never pays for it.
   */
  readonly risk: RegexProblem | undefined;
}
export { hasCode } from "./regex_syntax.ts";
