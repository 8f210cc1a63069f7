import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { fileURLToPath } from "node:url";
import { freePort, waitForServer } from "./fixtures/net.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const FIXTURE = "tests/fixtures/web_signal_app.ts";

/** How each deployment form is started: the command line and the environment. */
const FORMS: Record<string, (port: number) => { args: string[]; env: Record<string, string> }> = {
  "deno serve": (port) => ({
    args: [
      "serve",
      "--allow-net",
      "--allow-env",
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      FIXTURE,
    ],
    env: {},
  }),
  "Deno.serve(app.fetch)": (port) => ({
    args: ["run", "--allow-net", "--allow-env", FIXTURE],
    env: { FORM: "fetch", PORT: String(port) },
  }),
  "serve(app)": (port) => ({
    args: ["run", "--allow-net", "--allow-env", FIXTURE],
    env: { FORM: "serve", PORT: String(port) },
  }),
};

// Regression (issue 10, point 8): under `deno serve` and `Deno.serve(app.fetch)` a signal used to
// end the process with lifespan shutdown never run and background tasks abandoned mid-flight.
// Each form must now let the in-flight request finish, stop the task within the grace period
// (2 s here), log it, run lifespan shutdown and exit with code 0.
Deno.test("App shuts down gracefully on SIGINT and SIGTERM in every deployment form", async (t) => {
  for (const [form, command] of Object.entries(FORMS)) {
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      await t.step(`${form}, ${signal}`, async () => {
        const port = freePort();
        const { args, env } = command(port);
        const child = new Deno.Command(Deno.execPath(), {
          args,
          env,
          cwd: root,
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const output = child.output();
        try {
          const hello = await waitForServer(`http://127.0.0.1:${port}/hello`);
          assertEquals(await hello.text(), "hello");
          const task = await fetch(`http://127.0.0.1:${port}/task`);
          assertEquals(await task.text(), "task registered");
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
          // 400 ms of request, then 100 ms for the task to stop; the bound is the 2 s grace
          // period plus a second for a busy machine, not the time it usually takes.
          assert(took < 3000, `exited ${Math.round(took)} ms after ${signal}`);
          assertStringIncludes(log, "[lifespan] lifespan.startup");
          assertStringIncludes(log, "[lifespan] lifespan.shutdown");
          assertStringIncludes(
            log,
            '[warn] Background task "until-aborted" (#1) cancelled at shutdown: it stopped after',
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
