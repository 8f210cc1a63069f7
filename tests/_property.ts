// Copyright the stellarator authors. MIT license.
/**
 * The seed of the property tests. `deno task test` runs them on one fixed seed, so a run fails
 * only when the code changed; `deno task fuzz` runs them on fresh seeds, round after round, to
 * look for new counterexamples. `FC_SEED` picks: unset for the fixed seed, a number to replay a
 * seed that failed (fast-check prints it), `random` for a fresh one.
 *
 * @module
 */

/** The seed `deno task test` uses. */
export const FIXED_SEED = 20261128;

/**
 * The seed named by `value` (the text of `FC_SEED`): {@linkcode FIXED_SEED} when unset,
 * `undefined` for `random` (fast-check then draws one and prints it on failure), else the
 * integer it holds.
 *
 * @example
 * ```ts ignore
 * fc.assert(property, { numRuns: 100, seed: seedFrom(Deno.env.get("FC_SEED")) });
 * ```
 */
export function seedFrom(value: string | undefined): number | undefined {
  if (value === undefined || value === "") return FIXED_SEED;
  if (value === "random") return undefined;
  return parseSeed(value, "FC_SEED=");
}

/**
 * `text` read as a fast-check seed, a signed 32-bit integer, else a `RangeError` that quotes it
 * after `label` (`FC_SEED=`, `--seed=`).
 */
export function parseSeed(text: string, label: string): number {
  const seed = Number(text);
  // Decimal digits only: Number() would also take "0x10", "1e3" or " 5 ".
  if (!/^-?[0-9]{1,10}$/.test(text) || seed < -(2 ** 31) || seed >= 2 ** 31) {
    throw new RangeError(
      `${label}${JSON.stringify(text)} is not a seed: give the signed 32-bit integer fast-check ` +
        `printed with the failure`,
    );
  }
  return seed;
}

/** fast-check's parameters for `numRuns` runs on the seed `FC_SEED` names. */
export function propertyRuns(numRuns: number): { numRuns: number; seed?: number } {
  const seed = seedFrom(Deno.env.get("FC_SEED"));
  return seed === undefined ? { numRuns } : { numRuns, seed };
}
