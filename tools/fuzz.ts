// Copyright the stellarator authors. MIT license.
/**
 * Runs the property tests round after round, each on a fresh seed, and stops at the first
 * failure with the command that replays it. `deno task test` runs them on one fixed seed (see
 * tests/_property.ts); this is the search for new counterexamples.
 *
 * ```sh
 * deno task fuzz              # 20 rounds
 * deno task fuzz --rounds=100
 * deno task fuzz --seed=1767168662   # replay the seed a failed round printed
 * ```
 *
 * @module
 */

import { parseSeed } from "../tests/_property.ts";
import { spawnCommand } from "./with_jsr_mirror.ts";

/** The test files that hold fast-check properties. */
export const PROPERTY_FILES = [
  "tests/router_property_test.ts",
  "tests/router_suffix_matcher_test.ts",
  "tests/asgi_percent_test.ts",
  "tests/asgi_text_bytes_test.ts",
  "tests/asgi_http_differential_test.ts",
  "tests/asgi_websocket_fuzz_test.ts",
  "tests/web_chaos_property_test.ts",
  "tests/asgi_receive_chain_property_test.ts",
  "tests/web_background_race_property_test.ts",
];

/** What a run does: `rounds` rounds on fresh seeds, or one round on `seed`. */
export interface FuzzPlan {
  rounds: number;
  seed?: number;
}

/**
 * The plan `args` asks for: `--rounds=N` (1 to 10 000, default 20) or `--seed=S` to replay
 * the seed a failed round printed.
 */
export function planFrom(args: readonly string[]): FuzzPlan {
  let rounds: number | undefined;
  let seed: number | undefined;
  for (const arg of args) {
    const match = /^--(rounds|seed)=(.*)$/.exec(arg);
    if (match === null) {
      throw new TypeError(
        `unknown argument ${JSON.stringify(arg)}: give --rounds=N, or --seed=S to replay a seed`,
      );
    }
    if (match[1] === "seed") {
      seed = parseSeed(match[2]!, "--seed=");
      continue;
    }
    rounds = Number(match[2]);
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 10_000) {
      throw new RangeError(
        `--rounds=${match[2]} is not a round count: give a whole number from 1 to 10000`,
      );
    }
  }
  if (seed === undefined) return { rounds: rounds ?? 20 };
  if (rounds !== undefined) throw new TypeError("--seed replays one round: leave --rounds out");
  return { rounds: 1, seed };
}

/**
 * The signals that stop a run, with their numbers for its exit code (128 + N, as shells report).
 * The round they come in is ended by them too: `spawnCommand` passes them on (or leaves a Ctrl-C
 * to the terminal, which sends it to the round as well), and no round follows. Without this, a
 * SIGTERM ended the tool at once and left its round running without a parent. Windows has no
 * SIGTERM to listen to.
 */
const STOPPING_SIGNALS: readonly [Deno.Signal, number][] = Deno.build.os === "windows"
  ? [["SIGINT", 2]]
  : [["SIGINT", 2], ["SIGTERM", 15]];

/** A fresh seed in fast-check's range (a signed 32-bit integer). */
export function freshSeed(): number {
  return crypto.getRandomValues(new Int32Array(1))[0]!;
}

async function main(): Promise<number> {
  let plan: FuzzPlan;
  try {
    plan = planFrom(Deno.args);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const { rounds } = plan;
  let stopped: [Deno.Signal, number] | undefined;
  const listeners = STOPPING_SIGNALS.map((entry) => [entry[0], () => stopped ??= entry] as const);
  for (const [signal, listener] of listeners) Deno.addSignalListener(signal, listener);
  try {
    for (let round = 1; round <= rounds; round++) {
      const seed = plan.seed ?? freshSeed();
      console.log(`round ${round} of ${rounds}: FC_SEED=${seed}`);
      const code = await spawnCommand(
        ["deno", "test", "-A", "--quiet", ...PROPERTY_FILES],
        { FC_SEED: String(seed) },
        new URL("../", import.meta.url),
      );
      if (stopped !== undefined) {
        // Not a failure of the round: it was cut short, so nothing to replay.
        console.error(`round ${round} stopped by ${stopped[0]}`);
        return code > 128 ? code : 128 + stopped[1];
      }
      if (code !== 0) {
        console.error(
          `round ${round} failed. Replay it with:\n  deno task fuzz --seed=${seed}`,
        );
        return 1;
      }
    }
  } finally {
    for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
  }
  console.log(`${rounds} rounds passed`);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
