/**
 * A property of `receive()` made several at a time, over real sockets on each transport: random
 * scenarios where the application makes 1 to 10 calls at once, round after round, while the
 * client sends its body in pieces (by length or chunked), completes it, leaves, stalls past
 * `stallTimeout` or goes past `maxBodySize`, and the application answers 200, 204, 205, 304 or
 * HEAD, whole or streamed, before, during or after the body.
 *
 * Checked per scenario, against docs/asgi.md: every call resolves; in the order of the calls the
 * body's chunks come first, each once and in order (their bytes a prefix of what the client
 * sent), then only `http.disconnect`; a body the client completed reaches the application whole
 * when nothing ended the exchange first (a streamed answer ended after the read, or an answer
 * sent after it); a client that left or stalled ends in `http.disconnect`; nothing is logged as
 * an error. The scenarios run in a process of their own (tests/fixtures/asgi_receive_scenarios.ts)
 * with a watchdog: a loop of microtasks once froze the whole process (241ee58). The server's fds
 * must come back and its shutdown be prompt. `FC_SEED` replays a seed (tests/_property.ts).
 *
 * @module
 */
import { assert, assertEquals } from "@std/assert";
import fc from "npm:fast-check@4.10.2";
import { TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { MAX_BODY, type Outcome, type Scenario } from "./fixtures/asgi_receive_scenarios.ts";
import { propertyRuns } from "./_property.ts";

const FIXTURE = new URL("./fixtures/asgi_receive_scenarios.ts", import.meta.url).pathname;
const CONFIG = new URL("../deno.json", import.meta.url).pathname;
/** Scenarios per process, and processes per transport. */
const BATCH = 6;
const RUNS = 4;

const scenario: fc.Arbitrary<Scenario> = fc.record({
  method: fc.constantFrom("POST", "POST", "HEAD"),
  status: fc.constantFrom(200, 204, 205, 304),
  mode: fc.constantFrom("whole", "stream"),
  respondAt: fc.constantFrom("before", "during", "after"),
  respondDelay: fc.integer({ min: 0, max: 150 }),
  framing: fc.constantFrom("length", "chunked"),
  // At most 1800 bytes: within MAX_BODY unless the client is to go past it.
  pieces: fc.array(fc.integer({ min: 1, max: 450 }), { minLength: 1, maxLength: 4 }),
  gaps: fc.array(fc.integer({ min: 0, max: 80 }), { minLength: 3, maxLength: 3 }),
  client: fc.constantFrom("complete", "complete", "leave", "stall", "oversize"),
  stopAfter: fc.integer({ min: 0, max: 3 }),
  receives: fc.constantFrom(1, 2, 3, 10),
}).map((plan) => {
  // A HEAD request without a body: Deno.serve reads none after a HEAD head.
  if (plan.method === "HEAD") {
    plan.pieces = [0];
    plan.framing = "length";
  } else if (plan.client === "oversize") {
    // Chunked: a stated length past the limit gets its 413 before the application runs.
    plan.pieces = [...plan.pieces, MAX_BODY + 1];
    plan.framing = "chunked";
  }
  if (plan.method === "HEAD" && plan.client === "oversize") plan.client = "complete";
  if (plan.client === "leave" || plan.client === "stall") {
    plan.stopAfter = Math.min(plan.stopAfter, plan.pieces.length - 1);
  }
  return plan as Scenario;
});

async function run(transport: string, scenarios: Scenario[]): Promise<string[]> {
  const command = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG, FIXTURE],
    env: { TRANSPORT: transport, SCENARIOS: JSON.stringify(scenarios) },
    stdout: "piped",
    stderr: "piped",
  });
  const child = command.spawn();
  // Some 1 s per scenario at most; a frozen process never prints its last line.
  const watchdog = setTimeout(() => child.kill("SIGKILL"), 10_000 + scenarios.length * 4_000);
  const { stdout, stderr } = await child.output();
  clearTimeout(watchdog);
  const lines = new TextDecoder().decode(stdout).trim().split("\n").filter((l) => l !== "");
  assertEquals(
    lines.length,
    scenarios.length + 1,
    `the fixture froze or failed:\n${new TextDecoder().decode(stderr)}`,
  );
  return lines;
}

/** What docs/asgi.md promises of one scenario, checked against what the application got. */
function judge(plan: Scenario, outcome: Outcome): void {
  assert(outcome.returned, "the application returned");
  assertEquals(outcome.errors, []);
  const messages = outcome.messages;
  const pending = messages.findIndex((message) => message === null);
  assertEquals(pending, -1, `receive() #${pending} never resolved`);
  let body = "";
  let ended = -1;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (ended >= 0) {
      assertEquals(message.type, "http.disconnect", `call #${i} after the body's end`);
      continue;
    }
    if (message.type === "http.request") body += message.body;
    if (message.type !== "http.request" || !message.more) ended = i;
  }
  assert(ended >= 0, "the calls end in the body's end or a disconnect");
  assert(outcome.sent.startsWith(body), `the chunks, in order, are what was sent`);
  const last = messages[ended]!;
  if (plan.client === "oversize") {
    assertEquals(last.type, "http.disconnect");
    assert(body.length <= MAX_BODY);
  } else if (plan.client !== "complete") {
    if (body.length < plan.pieces.reduce((a, b) => a + b, 0)) {
      assertEquals(last.type, "http.disconnect", "a client that left or stalled");
    }
  } else if (plan.mode === "stream" || plan.respondAt === "after") {
    assertEquals(body, outcome.sent, "the whole body");
    assertEquals(last.type, "http.request");
  }
}

for (const transport of TRANSPORTS) {
  Deno.test(`receive() (${transport}): calls made together resolve in order, the body once, whatever the answer and the client do`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(scenario, { minLength: BATCH, maxLength: BATCH }),
        async (scenarios) => {
          const lines = await run(transport, scenarios);
          for (let i = 0; i < scenarios.length; i++) {
            try {
              judge(scenarios[i]!, JSON.parse(lines[i]!));
            } catch (error) {
              throw new Error(
                `Scenario ${JSON.stringify(scenarios[i])}\ngot ${lines[i]}\n${
                  (error as Error).message
                }`,
              );
            }
          }
          const { fdsBefore, fdsAfter, shutdownMs } = JSON.parse(lines.at(-1)!);
          assertEquals(fdsAfter, fdsBefore, "the server's fds come back");
          assert(shutdownMs < 1500, `shutdown took ${shutdownMs} ms`);
        },
      ),
      { ...propertyRuns(RUNS), endOnFailure: true },
    );
  });
}
