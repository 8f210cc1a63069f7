/**
 * A property of the background runner's wait for room: registrations whose room frees in the
 * same turn as their holder is cancelled, their own `signal` aborts, or the runner closes. Asked
 * for by the review of 2026-11-29 (V1) of the change that ended such waits early
 * (`registerBackground()` resolving a boolean): a reservation given to a registration that had
 * just given up would be leaked (one slot fewer for ever), one taken twice would let a task too
 * many run.
 *
 * Random scenarios of 10 to 40 registrations on a runner of 1 to 3 slots, each task held by a
 * gate; random steps open gates, abort signals, cancel holders, in pairs within one turn, and
 * may close the runner. Checked: every registration settles; `false` exactly for a task logged
 * as not run, which never ran; `true` for one that ran, or was cancelled at shutdown before it
 * started (room given in the turn the runner closed); every task ended in one log line; nothing
 * left running, queued or waiting; and after it all exactly `limit` fresh registrations get room
 * at once and the next one waits: the count of reservations is back where it began.
 *
 * @module
 */
import { assert, assertEquals } from "@std/assert";
import fc from "npm:fast-check@4.10.2";
import { BackgroundRunner, type TaskEntry, type TaskHolder } from "../_web/background.ts";
import { propertyRuns } from "./_property.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

/** A holder that has responded: it starts what it is given, and may be cancelled. */
function answeredHolder(runner: BackgroundRunner) {
  const cancel = new AbortController();
  const holder: TaskHolder = {
    heldTasks: () => 0,
    refusal: () => undefined,
    cancellation: () => cancel.signal.aborted ? "its holder was cancelled" : undefined,
    waitSignal: () => cancel.signal,
    place: (entry: TaskEntry) => {
      runner.start(entry);
      return true;
    },
    tooManyTasks: () => new RangeError("no test registers that many"),
  };
  return { holder, cancel: () => cancel.abort() };
}

/** Lets queued microtasks and one timer turn run. */
function turn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

type Step =
  | { kind: "open" | "abort" | "cancel"; at: number }
  | { kind: "openThenAbort" | "abortThenOpen"; at: number; other: number }
  | { kind: "close" }
  | { kind: "turn" };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constantFrom("open", "abort", "cancel"), at: fc.nat(39) }),
  fc.record({
    kind: fc.constantFrom("openThenAbort", "abortThenOpen"),
    at: fc.nat(39),
    other: fc.nat(39),
  }),
  fc.constant({ kind: "close" as const }),
  fc.constant({ kind: "turn" as const }),
) as fc.Arbitrary<Step>;

Deno.test("BackgroundRunner.register() keeps the count of reservations through waits that end in the turn room frees", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 3 }),
      fc.array(fc.boolean(), { minLength: 10, maxLength: 40 }),
      fc.array(step, { maxLength: 120 }),
      async (limit, withSignal, steps) => {
        const lines: string[] = [];
        const log = {
          debug() {},
          info: (line: string) => void lines.push(line),
          warn: (line: string) => void lines.push(line),
          error: (line: string) => void lines.push(line),
        };
        const runner = new BackgroundRunner(limit, undefined, log);
        const count = withSignal.length;
        const gates = withSignal.map(() => Promise.withResolvers<void>());
        const signals = withSignal.map(() => new AbortController());
        const holders = withSignal.map(() => answeredHolder(runner));
        const ran = withSignal.map(() => false);
        const results = withSignal.map((signalled, i) =>
          runner.register(
            holders[i]!.holder,
            async (signal) => {
              ran[i] = true;
              const aborted = new Promise((resolve) => signal.addEventListener("abort", resolve));
              await Promise.race([gates[i]!.promise, aborted]);
            },
            `t${i}`,
            signalled ? signals[i]!.signal : undefined,
          )
        );
        let closing: Promise<void> | undefined;
        for (const s of steps) {
          if (s.kind === "close") closing ??= runner.close(BOUND_MS);
          else if (s.kind === "turn") await turn();
          else {
            const at = s.at % count;
            if (s.kind === "open") gates[at]!.resolve();
            else if (s.kind === "abort") signals[at]!.abort();
            else if (s.kind === "cancel") holders[at]!.cancel();
            else if (s.kind === "openThenAbort") {
              gates[at]!.resolve();
              signals[s.other % count]!.abort();
            } else if (s.kind === "abortThenOpen") {
              signals[at]!.abort();
              gates[s.other % count]!.resolve();
            }
          }
        }
        for (const gate of gates) gate.resolve();
        const settled = await withTimeout(Promise.all(results), BOUND_MS, "every registration");
        await withTimeout(closing ?? Promise.resolve(), BOUND_MS, "the runner to close");
        for (let i = 0; i < 20 && runner.running + runner.queued > 0; i++) await turn();
        assertEquals([runner.running, runner.queued, runner.waiting], [0, 0, 0]);
        assertEquals(lines.length, count, `one line per task:\n${lines.join("\n")}`);
        settled.forEach((registered, i) => {
          const line = lines.find((text) => text.includes(`"t${i}"`)) ?? "";
          if (registered) {
            assert(ran[i] || line.includes("cancelled at shutdown"), `t${i} true: ${line}`);
          } else {
            assert(!ran[i] && line.includes("not run"), `t${i} false: ${line}`);
          }
        });
        if (closing !== undefined) runner.open();
        // `limit` registrations get room at once, the next waits.
        const gate = Promise.withResolvers<void>();
        const got: boolean[] = [];
        const probes: Promise<boolean>[] = [];
        for (let i = 0; i <= limit; i++) {
          let done = false;
          const probe = runner.register(
            answeredHolder(runner).holder,
            () => gate.promise,
            "probe",
            undefined,
          );
          void probe.then(() => done = true);
          probes.push(probe);
          await turn();
          got.push(done);
        }
        assertEquals(got, [...Array(limit).fill(true), false]);
        gate.resolve();
        await withTimeout(Promise.all(probes), BOUND_MS, "the probes");
        await runner.close(BOUND_MS);
      },
    ),
    propertyRuns(150),
  );
});
