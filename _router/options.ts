// Copyright the stellarator authors. MIT license.
/**
 * Unknown keys in an options object: a misspelt option (`trailingslash`, `metods`) would
 * otherwise be ignored and leave the default in force without a word.
 *
 * @module
 */

import { describe } from "../_common/describe.ts";

/**
 * Throws a TypeError for the first own key of `options` that is not in `known`, suggesting the
 * closest known key. Called by constructors only, never while serving.
 *
 * @param options The options object, already known to be an object.
 * @param known The option names, in the order the message lists them.
 * @param subject Who takes the options, e.g. `AsgiRouter` or `route "/a"`.
 */
export function checkOptionKeys(
  options: object,
  known: readonly string[],
  subject: string,
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = closest(key, known);
    throw new TypeError(
      `Invalid option ${describe(key)} for ${subject}: ` +
        (near !== undefined ? `use ${near}` : `remove it, or use one of ${known.join(", ")}`),
    );
  }
}

/** The name in `known` nearest to `key` (case aside, then by edit distance), if near enough. */
function closest(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  let best: string | undefined;
  // A third of the name, at least 2 edits: "metods" finds "methods", "debug" finds nothing.
  let bestDistance = Math.max(2, Math.floor(lower.length / 3)) + 1;
  for (const name of known) {
    const distance = editDistance(lower, name.toLowerCase());
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance, one row at a time. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      next[j] = Math.min(substitute, row[j]! + 1, next[j - 1]! + 1);
    }
    row = next;
  }
  return row[b.length]!;
}
