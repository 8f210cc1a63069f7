/**
 * createFetchHandler() as the default export of a module run by `deno serve`, alone and with
 * `--parallel`, where each worker runs its own lifespan.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { fileURLToPath } from "node:url";
import { freePort, waitForServer } from "./fixtures/net.ts";
import { withTimeout } from "./fixtures/timeout.ts";
import { rawRequest } from "./fixtures/web_helpers.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

async function get(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url);
    return await response.text();
  } catch {
    return undefined; // Not listening yet.
  }
}

/**
 * Asks `GET /w` on fresh connections until `wanted` workers have answered or `tries` run out.
 *
 * @returns The ids of the workers that answered.
 */
async function workersAnswering(port: number, wanted: number, tries: number): Promise<Set<string>> {
  const workers = new Set<string>();
  for (let i = 0; i < tries && workers.size < wanted; i++) {
    const response = await rawRequest(port, "GET", "/w");
    workers.add(response.body.replace(/^\/w from /, ""));
  }
  return workers;
}

for (const parallel of [false, true]) {
  Deno.test(
    `createFetchHandler() serves under deno serve${
      parallel ? " --parallel" : ""
    }, lifespan per worker`,
    async () => {
      const port = freePort();
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "serve",
          ...(parallel ? ["--parallel"] : []),
          "--allow-net",
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "tests/fixtures/asgi_serve_app.ts",
        ],
        cwd: root,
        env: { DENO_JOBS: "2" },
        stdout: "null",
        stderr: "piped",
      }).spawn();
      try {
        const first = await waitForServer(`http://127.0.0.1:${port}/first`);
        assertMatch(await first.text(), /^\/first from [0-9a-f-]{36}$/);
        const bodies = await Promise.all(
          Array.from({ length: 8 }, (_, i) => get(`http://127.0.0.1:${port}/r${i}`)),
        );
        bodies.forEach((text, i) =>
          assertMatch(text ?? "", new RegExp(`^/r${i} from [0-9a-f-]{36}$`))
        );
        if (parallel) {
          // fetch() keeps one connection alive, which one worker serves: ask on new connections
          // until two workers have answered (the kernel spreads connections over the workers).
          const workers = await withTimeout(
            workersAnswering(port, 2, 200),
            20_000,
            "two workers to answer",
          );
          assert(workers.size >= 2, `only ${workers.size} worker answered 200 connections`);
        }
      } finally {
        child.kill("SIGTERM");
        const stderr = await new Response(child.stderr).text();
        await child.status;
        assertEquals(stderr.includes("Error"), false, stderr);
      }
    },
  );
}
