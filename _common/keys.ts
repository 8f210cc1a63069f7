// Copyright the stellarator authors. MIT license.
/**
 * Unknown keys in an options object: a misspelt option (`requestTimeLimt`, `maxBodysize`) was
 * silently ignored, so a limit the caller meant to set was never set. TypeScript catches such a
 * key only in an object literal written at the call. Private: not exported from `deno.json`; it
 * imports nothing but `describe.ts`, so every layer may use it.
 *
 * @module
 */
import { describe } from "./describe.ts";

/**
 * Throws for the first own key of `options` that `known` does not list, naming the closest
 * known one.
 *
 * @param options The options object (already checked to be an object).
 * @param known Every key the function takes.
 * @param subject Where the options went, for the message: `new App()`, `serve()`.
 * @throws {TypeError} `Invalid option "x" for subject: use y`.
 */
export function rejectUnknownKeys(
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

/**
 * The name in `known` meant by `key`, case aside: the one name it begins (`host` for `hostname`,
 * which edit distance put nearer `port`), else the nearest by edit distance, if near enough.
 */
function closest(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const extended = lower.length >= 3
    ? known.filter((name) => name.toLowerCase().startsWith(lower))
    : [];
  if (extended.length === 1) return extended[0];
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
