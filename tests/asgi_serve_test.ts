/**
 * createFetchHandler() as the default export of a module run by `deno serve`, alone and with
 * `--parallel`, where each worker runs its own lifespan.
 */
import { assertEquals, assertMatch } from "@std/assert";
import { fileURLToPath } from "node:url";
import { freePort, waitForServer } from "./fixtures/net.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

async function get(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url);
    return await response.text();
  } catch {
    return undefined; // Not listening yet.
  }
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
      } finally {
        child.kill("SIGTERM");
        const stderr = await new Response(child.stderr).text();
        await child.status;
        assertEquals(stderr.includes("Error"), false, stderr);
      }
    },
  );
}
