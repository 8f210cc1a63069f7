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
      `Invalid option ${describe(key)} for ${subject}: use ${
        near === undefined ? `one of ${known.join(", ")}` : near
      }`,
    );
  }
}

/** The known key nearest to `key` (same letters in another case, or at most 2 edits), if any. */
function closest(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    if (candidate.toLowerCase() === lower) return candidate;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/** Levenshtein distance; option names are short. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
