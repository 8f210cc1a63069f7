// Copyright the stellarator authors. MIT license.
// tools/fuzz.ts and the seed of the property tests (tests/_property.ts).
import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { delay } from "@std/async";
import { FIXED_SEED, parseSeed, seedFrom } from "./_property.ts";
import { planFrom, PROPERTY_FILES } from "../tools/fuzz.ts";

const root = new URL("../", import.meta.url);

Deno.test("seedFrom() reads FC_SEED: the fixed seed when unset, none for random, else the integer", async (t) => {
  const cases: [string | undefined, number | undefined][] = [
    [undefined, FIXED_SEED],
    ["", FIXED_SEED],
    ["random", undefined],
    ["1767168662", 1767168662],
    ["-5", -5],
    ["2147483647", 2147483647],
    ["-2147483648", -2147483648],
  ];
  for (const [value, seed] of cases) {
    await t.step(String(JSON.stringify(value)), () => assertEquals(seedFrom(value), seed));
  }
});

Deno.test("parseSeed() refuses what is not a 32-bit integer, quoting it", async (t) => {
  for (
    const text of [
      "abc",
      "1.5",
      "2147483648",
      "-2147483649",
      " ",
      "1e3x",
      "Random",
      "0x10",
      "1e3",
      " 5",
      "+5",
    ]
  ) {
    await t.step(JSON.stringify(text), () => {
      const error = assertThrows(() => parseSeed(text, "FC_SEED="), RangeError) as RangeError;
      assertStringIncludes(error.message, `FC_SEED=${JSON.stringify(text)} is not a seed`);
    });
  }
});

Deno.test("planFrom() reads --rounds and --seed, and refuses the rest with a message", async (t) => {
  assertEquals(planFrom([]), { rounds: 20 });
  assertEquals(planFrom(["--rounds=3"]), { rounds: 3 });
  assertEquals(planFrom(["--seed=-42"]), { rounds: 1, seed: -42 });
  const refused: [string[], string][] = [
    [["--rounds=0"], "--rounds=0 is not a round count"],
    [["--rounds=2.5"], "--rounds=2.5 is not a round count"],
    [["--rounds=10001"], "--rounds=10001 is not a round count"],
    [["--seed=x"], '--seed="x" is not a seed'],
    [["--seed=1", "--rounds=2"], "--seed replays one round"],
    [["--rounds=2", "--seed=1"], "--seed replays one round"],
    [["--runs=2"], 'unknown argument "--runs=2"'],
  ];
  for (const [args, message] of refused) {
    await t.step(args.join(" "), () => {
      assertStringIncludes((assertThrows(() => planFrom(args)) as Error).message, message);
    });
  }
});

Deno.test("tools/fuzz.ts exits 2 with the message on a bad argument", async () => {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tools/fuzz.ts", "--rounds=many"],
    cwd: root,
    stdout: "null",
    stderr: "piped",
  }).output();
  assertEquals(code, 2);
  assertStringIncludes(new TextDecoder().decode(stderr), "--rounds=many is not a round count");
});

Deno.test("PROPERTY_FILES lists every test file with properties, and each property takes the seed", async () => {
  const found: string[] = [];
  for await (const entry of Deno.readDir(new URL("tests/", root))) {
    if (!entry.name.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(new URL(`tests/${entry.name}`, root));
    // A line that starts with the import (this file only names it inside a regex).
    if (!/^import fc from "npm:fast-check@/m.test(text)) continue;
    found.push(`tests/${entry.name}`);
    // Each fc.assert takes its parameters from propertyRuns(), so FC_SEED reaches all of them.
    const asserts = text.split("fc.assert(").length - 1;
    const seeded = text.split("propertyRuns(").length - 1;
    assertEquals(seeded, asserts, `${entry.name}: ${asserts} fc.assert calls, ${seeded} seeded`);
  }
  assertEquals(found.sort(), [...PROPERTY_FILES].sort());
});

/** The pid of the first child of `pid` (Linux), or undefined while it has none. */
async function childOf(pid: number): Promise<number | undefined> {
  const text = await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`).catch(() => "");
  const first = text.trim().split(" ")[0];
  return first ? Number(first) : undefined;
}

// Review of 75c5267: a SIGTERM (which `deno task` and tools/with_jsr_mirror.ts pass on to the
// tool) ended tools/fuzz.ts at once with 143 and left the round's `deno test` running without a
// parent to the end of the round, printing after the tool had exited.
Deno.test({
  name: "tools/fuzz.ts passes SIGTERM and SIGINT on to its round, then stops with 128 + N",
  ignore: Deno.build.os !== "linux",
  async fn(t) {
    for (const [signal, status] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
      await t.step(signal, async () => {
        const tool = new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", "tools/fuzz.ts", "--rounds=3"],
          cwd: root,
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        let round: number | undefined;
        try {
          for (let i = 0; i < 600 && round === undefined; i++) {
            await delay(50);
            round = await childOf(tool.pid);
          }
          assert(round !== undefined, "no round started within 30 s");
          tool.kill(signal);
          const { code } = await tool.status;
          // The tool waited for its round: the round is gone, and no other round began.
          const roundAlive = await Deno.stat(`/proc/${round}`).then(() => true, () => false);
          assertEquals(roundAlive, false, "the round outlived the tool");
          assertEquals(code, status);
          const [stdout, stderr] = await Promise.all([
            new Response(tool.stdout).text(),
            new Response(tool.stderr).text(),
          ]);
          assertEquals(stdout.includes("round 2 of 3"), false);
          assertStringIncludes(stderr, `round 1 stopped by ${signal}`);
        } finally {
          // A round left running by the tool is this test's to end.
          if (round !== undefined) {
            try {
              Deno.kill(round, "SIGKILL");
            } catch {
              // Already gone.
            }
          }
        }
      });
    }
  },
});
