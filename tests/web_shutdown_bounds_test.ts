import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { fileURLToPath } from "node:url";
import { appForms } from "./fixtures/app_forms.ts";
import { freePort, waitForServer } from "./fixtures/net.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const FIXTURE = "tests/fixtures/web_stuck_app.ts";

/** The deployment forms in which the App handles signals itself. */
const FORMS = appForms(FIXTURE, ["deno serve", "Deno.serve(app.fetch)"]);

/** A fixture process: its base URL, and its end (exit code, stdout) once it exits or is killed. */
interface Stuck {
  base: string;
  port: number;
  signal(signal: Deno.Signal): void;
  /** Resolves when the process exits, or kills it after `boundMs` and says so. */
  exited(boundMs: number): Promise<{ code: number; log: string; killed: boolean }>;
}

async function startStuck(form: string, env: Record<string, string>): Promise<Stuck> {
  const port = freePort();
  const command = FORMS[form]!(port);
  const child = new Deno.Command(Deno.execPath(), {
    args: command.args,
    env: { ...command.env, ...env },
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  const base = `http://127.0.0.1:${port}`;
  try {
    await (await waitForServer(`${base}/hello`)).text();
  } catch (error) {
    child.kill("SIGKILL");
    await output;
    throw error;
  }
  return {
    base,
    port,
    signal: (signal) => child.kill(signal),
    async exited(boundMs) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let killed = false;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          killed = true;
          child.kill("SIGKILL");
          resolve();
        }, boundMs);
      });
      await Promise.race([output, bound]);
      clearTimeout(timer);
      const { code, stdout, stderr } = await output;
      const log = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
      return { code, log, killed };
    },
  };
}

// Regression (shutdown probe of 0185c78, D3): with a lifespan function that never settled at
// shutdown, SIGTERM logged "lifespan.shutdown" and the process never exited.
Deno.test("App exits with code 1 after SIGTERM when the lifespan function outlasts its time limit", async (t) => {
  for (const form of Object.keys(FORMS)) {
    await t.step(form, async () => {
      const stuck = await startStuck(form, { STUCK: "lifespan" });
      const signalled = performance.now();
      stuck.signal("SIGTERM");
      const { code, log, killed } = await stuck.exited(8000);
      const took = performance.now() - signalled;
      assert(!killed, `still running 8 s after SIGTERM:\n${log}`);
      assertEquals(code, 1, log);
      // Nothing to drain, then the lifespan function's own 1 s; 2 s more for a busy machine.
      assert(took >= 900 && took < 3000, `exited ${Math.round(took)} ms after SIGTERM`);
      assertStringIncludes(log, "[lifespan] lifespan.shutdown");
      assertStringIncludes(
        log,
        "did not finish shutting down within lifespanShutdownTimeLimit 1 s",
      );
    });
  }
});

// Found probing: after a lifespan startup that failed (every request answered 503), SIGTERM
// exited 0, though the docs promise 1 when the lifespan function failed; uvicorn exits 3 on a
// failed startup.
Deno.test("App exits with code 1 after SIGTERM when its lifespan function failed at startup", async (t) => {
  for (const form of Object.keys(FORMS)) {
    await t.step(form, async () => {
      const stuck = await startStuck(form, { STUCK: "startup" });
      assertEquals((await fetch(`${stuck.base}/hello`)).status, 503);
      stuck.signal("SIGTERM");
      const { code, log, killed } = await stuck.exited(8000);
      assert(!killed, `still running 8 s after SIGTERM:\n${log}`);
      assertEquals(code, 1, log);
      assertStringIncludes(log, "Lifespan startup failed: Error: database unreachable");
      assertStringIncludes(
        log,
        "Exiting with code 1: lifespan startup failed, so the app answered every request 503",
      );
    });
  }
});

/** Asks for `path` on a raw connection and reads nothing of the answer; close it when done. */
async function unread(port: number, path: string): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
  return conn;
}

// Regression (shutdown probe of 0185c78, D4): after the drain had used the grace period, the
// signal's shutdown waited a whole period more for responses still being written, so SIGTERM
// exited after twice shutdownGracePeriod (10.5 s with the default 5 s).
Deno.test("App exits one grace period after SIGTERM, not two, with a response still unwritten", async (t) => {
  for (const form of Object.keys(FORMS)) {
    await t.step(form, async () => {
      const stuck = await startStuck(form, {});
      // A response its client never reads stays unwritten; a handler that never settles holds
      // the drain for the whole grace period.
      const conn = await unread(stuck.port, "/big");
      const hung = fetch(`${stuck.base}/hang`).then(
        (response) => response.body?.cancel(),
        () => {},
      );
      try {
        await new Promise((resolve) => setTimeout(resolve, 300));
        const signalled = performance.now();
        stuck.signal("SIGTERM");
        const { code, log, killed } = await stuck.exited(8000);
        const took = performance.now() - signalled;
        assert(!killed, `still running 8 s after SIGTERM:\n${log}`);
        assertEquals(code, 0, log);
        // The 1 s grace period, then the 20 ms the last bytes get; twice the period before.
        assert(took >= 900 && took < 1700, `exited ${Math.round(took)} ms after SIGTERM`);
      } finally {
        conn.close();
        await hung;
      }
    });
  }
});

// Regression (shutdown probe of 0185c78, D5): under Deno.serve(app.fetch) a request still running
// when the grace period ended got no response (curl: "Empty reply from server"), and its
// request.signal never aborted.
Deno.test("App answers 503 after SIGTERM to requests still running when the grace period ends", async (t) => {
  for (const form of Object.keys(FORMS)) {
    await t.step(form, async () => {
      const stuck = await startStuck(form, {});
      const answer = (path: string) =>
        fetch(`${stuck.base}${path}`).then(
          async (response) => `${response.status} ${await response.text()}`,
          (error) => `no response: ${error}`,
        );
      const hang = answer("/hang");
      const cooperative = answer("/cooperative");
      await new Promise((resolve) => setTimeout(resolve, 300));
      stuck.signal("SIGTERM");
      const { code, log, killed } = await stuck.exited(8000);
      assert(!killed, `still running 8 s after SIGTERM:\n${log}`);
      assertEquals(code, 0, log);
      assertEquals(await hang, "503 Service Unavailable", log);
      assertEquals(await cooperative, "503 Service Unavailable", log);
      assertStringIncludes(
        log,
        "[cooperative] aborted: AbortError: The app shut down: the request was still running " +
          "at the end of the shutdown grace period of 1 s",
      );
    });
  }
});
