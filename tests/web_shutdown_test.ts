import { assert, assertEquals, assertMatch, assertStringIncludes } from "@std/assert";
import { fileURLToPath } from "node:url";
import { appForms, type FormCommand } from "./fixtures/app_forms.ts";
import { freePort, waitForServer } from "./fixtures/net.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const FIXTURE = "tests/fixtures/web_signal_app.ts";

/** How each deployment form is started: the command line and the environment. */
const FORMS = appForms(FIXTURE, [
  "deno serve",
  "deno serve --parallel",
  "Deno.serve(app.fetch)",
  "serve(app)",
]);

/** A child Deno process and its output, piped. */
interface Spawned {
  child: Deno.ChildProcess;
  output: Promise<Deno.CommandOutput>;
  /** Kills the child if it still runs (it should have exited) and waits for it. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Runs `deno <args>` in the repository with `env`, its output piped. */
function spawnDeno(args: string[], env: Record<string, string>): Spawned {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    env,
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  return {
    child,
    output,
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already exited, as it should.
      }
      await output;
    },
  };
}

/** Starts a deployment form of the fixture on `port`, its output piped. */
function spawnForm(command: FormCommand, port: number): Spawned {
  const { args, env } = command(port);
  return spawnDeno(args, env);
}

/** The process's stdout and stderr, as text. */
function logOf({ stdout, stderr }: Deno.CommandOutput): string {
  return new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
}

// Regression (issue 10, point 8): under `deno serve` and `Deno.serve(app.fetch)` a signal used to
// end the process with lifespan shutdown never run and background tasks abandoned mid-flight.
// Each form must now let the in-flight request finish, stop or abandon the tasks within the
// grace period (1 s here), log them, run lifespan shutdown and exit with code 0.
Deno.test("App shuts down gracefully on SIGINT and SIGTERM in every deployment form", async (t) => {
  for (const [form, command] of Object.entries(FORMS)) {
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      await t.step(`${form}, ${signal}`, async () => {
        const port = freePort();
        const { child, output } = spawnForm(command, port);
        try {
          const hello = await waitForServer(`http://127.0.0.1:${port}/hello`);
          assertEquals(await hello.text(), "hello");
          const task = await fetch(`http://127.0.0.1:${port}/task`);
          assertEquals(await task.text(), "task registered");
          const stubborn = await fetch(`http://127.0.0.1:${port}/stubborn`);
          assertEquals(await stubborn.text(), "stubborn registered");
          const slow = fetch(`http://127.0.0.1:${port}/slow`).then(async (response) =>
            `${response.status} ${await response.text()}`
          );
          await new Promise((resolve) => setTimeout(resolve, 150));
          const signalled = performance.now();
          child.kill(signal);
          assertEquals(await slow, "200 slow done", "the in-flight request finishes");
          const { code, stdout, stderr } = await output;
          const took = performance.now() - signalled;
          const log = new TextDecoder().decode(stdout);
          assertEquals(
            code,
            0,
            `exit code; stdout:\n${log}\nstderr:\n${new TextDecoder().decode(stderr)}`,
          );
          // The stubborn task holds shutdown for the whole 1 s grace period, no longer; the
          // bound adds 2 s for a busy machine (process exit, a slow CI runner).
          assert(took >= 900 && took < 3000, `exited ${Math.round(took)} ms after ${signal}`);
          assertStringIncludes(log, "[lifespan] lifespan.startup");
          assertStringIncludes(log, "[lifespan] lifespan.shutdown");
          // Task numbers are per App, and `--parallel` runs one App per worker.
          assertMatch(
            log,
            /Background task "until-aborted" \(#\d\) cancelled at shutdown: it stopped after/,
          );
          assertMatch(
            log,
            /Background task "stubborn" \(#\d\) cancelled at shutdown: it did not stop within the grace period of 1 s after its signal was aborted, so it was abandoned/,
          );
          assert(
            log.indexOf("cancelled at shutdown") < log.indexOf("lifespan.shutdown"),
            `the task ends before lifespan shutdown:\n${log}`,
          );
        } finally {
          try {
            child.kill("SIGKILL");
          } catch {
            // Already exited, as it should.
          }
          await output;
        }
      });
    }
  }
});

// Regressions: a process with a metrics port beside its main one exited on a signal as soon as
// the idle metrics App was done, cutting off the main server's request in flight (empty reply)
// and its lifespan shutdown. Found probing with two Apps under Deno.serve(app.fetch); then, by
// the review of that fix, with the main App under a serve() that the same signal stops.
Deno.test("App exits on a signal only once every server of the process has shut down", async (t) => {
  for (
    const [setup, fixture] of [
      ["two Apps under Deno.serve(app.fetch)", "web_two_apps.ts"],
      ["an App beside a serve() stopped by the same signal", "web_app_beside_serve.ts"],
    ]
  ) {
    await t.step(setup!, async () => {
      const [port, port2] = [freePort(), freePort()];
      await using spawned = spawnDeno(
        ["run", "--allow-net", "--allow-env", `tests/fixtures/${fixture}`],
        { PORT: String(port), PORT2: String(port2) },
      );
      assertEquals(await (await waitForServer(`http://127.0.0.1:${port}/`)).text(), "main");
      // The metrics App watches the signals once a server has called its fetch.
      assertEquals(await (await waitForServer(`http://127.0.0.1:${port2}/`)).text(), "metrics");
      const slow = fetch(`http://127.0.0.1:${port}/slow`).then(async (response) =>
        `${response.status} ${await response.text()}`
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      spawned.child.kill("SIGTERM");
      assertEquals(await slow, "200 main slow done", "the main server's request finishes");
      const output = await spawned.output;
      const log = logOf(output);
      assertEquals(output.code, 0, log);
      assertStringIncludes(log, "[lifespan] main lifespan.shutdown");
      assertStringIncludes(log, "[lifespan] metrics lifespan.shutdown");
    });
  }
});

// Found probing: `deno serve --parallel` workers have no WorkerGlobalScope, so each App took
// itself for the main thread and called Deno.exit() once its own shutdown was done: an idle
// worker ended the process while another worker's request was still running (the client got
// no response) and that worker's App never ran its lifespan shutdown.
Deno.test("App under deno serve --parallel exits only when every worker has shut down", async () => {
  const port = freePort();
  await using spawned = spawnDeno([
    "serve",
    "--parallel",
    "--allow-net",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "tests/fixtures/web_parallel_app.ts",
  ], { DENO_JOBS: "2" });
  await waitForServer(`http://127.0.0.1:${port}/`).then((response) => response.text());
  // Both workers must have started their App (and so watch the signals): ask on new
  // connections until two have answered (the kernel spreads connections over the workers).
  const workers = new Set<string>();
  for (let i = 0; i < 200 && workers.size < 2; i++) {
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      headers: { connection: "close" },
    });
    workers.add(await response.text());
  }
  assertEquals(workers.size, 2, "two workers answered");
  const slow = fetch(`http://127.0.0.1:${port}/slow`).then(async (response) =>
    `${response.status} ${await response.text()}`
  );
  await new Promise((resolve) => setTimeout(resolve, 300));
  spawned.child.kill("SIGTERM");
  assertMatch(await slow, /^200 [0-9a-f-]{36} slow done$/, "the request in flight finishes");
  const output = await spawned.output;
  const log = logOf(output);
  assertEquals(output.code, 0, log);
  for (const worker of workers) {
    assertStringIncludes(log, `[lifespan] ${worker} lifespan.shutdown`);
  }
});

Deno.test("App takes a second signal within 0.5 s as the first, and a later one as exit now (regression: a process group's SIGTERM cut off requests in flight)", async (t) => {
  for (
    const [name, gapMs, expected, first] of [
      // 50 ms apart, as a wrapper passes it on (two at once the kernel delivers as one).
      [
        "twice within 50 ms: one graceful shutdown",
        50,
        { code: 0, slow: "200 slow done" },
        "SIGTERM",
      ],
      // A wrapper may turn the Ctrl+C it got into a SIGTERM for its child.
      [
        "SIGINT, then SIGTERM within 50 ms: the same",
        50,
        { code: 0, slow: "200 slow done" },
        "SIGINT",
      ],
      // The slow request ends at 0.4 s, before the second signal: what differs is the exit code.
      ["again after 0.7 s: exit at once", 700, { code: 143, slow: "200 slow done" }, "SIGTERM"],
    ] as const
  ) {
    await t.step(name, async () => {
      const port = freePort();
      const { child, output } = spawnForm(FORMS["Deno.serve(app.fetch)"]!, port);
      try {
        await (await waitForServer(`http://127.0.0.1:${port}/hello`)).text();
        // The stubborn task holds shutdown for its 1 s grace period, so a second signal 0.7 s
        // later still finds it shutting down.
        await (await fetch(`http://127.0.0.1:${port}/stubborn`)).text();
        const slow = fetch(`http://127.0.0.1:${port}/slow`).then(
          async (response) => `${response.status} ${await response.text()}`,
          () => "cut off",
        );
        await new Promise((resolve) => setTimeout(resolve, 150));
        child.kill(first);
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        child.kill("SIGTERM");
        const { code, stdout } = await output;
        const log = new TextDecoder().decode(stdout);
        assertEquals({ code, slow: await slow }, expected, log);
        if (gapMs < 500) assertStringIncludes(log, "taken as the same one");
        else assertStringIncludes(log, "Received SIGTERM again: exiting without waiting");
      } finally {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already exited, as it should.
        }
        await output;
      }
    });
  }
});

/** How many tasks the load test registers; WEB_SHUTDOWN_TASKS=50000 for the figure. */
const TASKS = Number(Deno.env.get("WEB_SHUTDOWN_TASKS") ?? 5000);

// Regression (issue 10, point 4): with registrations waiting for room, SIGTERM took 43.6 s (the
// bridge waited its 30 s shutdownTimeout for the waiting handlers, then the App its grace period,
// and 496 running tasks got 0 s to stop). Now the process must exit within the documented
// bound, the 5 s shutdownGracePeriod (plus a margin for a busy machine), with every task ended
// and logged.
Deno.test(`App under load exits within the grace period on SIGTERM with ${TASKS} tasks registered`, async () => {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", "--allow-env", "tests/fixtures/web_load_app.ts"],
    env: { PORT: String(port) },
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  try {
    const base = `http://127.0.0.1:${port}`;
    await (await waitForServer(`${base}/hello`)).text();
    const perRequest = 500;
    const requests = Math.ceil(TASKS / perRequest);
    for (let i = 0; i < requests; i += 10) {
      const batch = Array.from(
        { length: Math.min(10, requests - i) },
        () => fetch(`${base}/register/${perRequest}`).then((response) => response.text()),
      );
      assertEquals(new Set(await Promise.all(batch)), new Set(["registering"]));
    }
    // Load goes on while the signal arrives: ten clients asking /hello until the server stops.
    let stop = false;
    const load = Array.from({ length: 10 }, async () => {
      while (!stop) {
        try {
          await (await fetch(`${base}/hello`)).text();
        } catch {
          return;
        }
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    child.kill("SIGTERM");
    const { code, stdout } = await output;
    stop = true;
    await Promise.all(load);
    const lines = new TextDecoder().decode(stdout).trim().split("\n");
    const summary = JSON.parse(lines.at(-1)!);
    console.log(summary);
    assertEquals(code, 0);
    assertEquals(summary.attempted, TASKS, "every registration was attempted");
    assertEquals(summary.lost, 0, "every task ends logged");
    assertEquals(summary.other, 0);
    assert(
      summary.exitAfterSignalMs < 5000 + 2000,
      `exited ${summary.exitAfterSignalMs} ms after SIGTERM`,
    );
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited, as it should.
    }
    await output;
  }
});
