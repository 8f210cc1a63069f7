import { assertEquals } from "@std/assert";
import { fileURLToPath } from "node:url";
import { freePort, waitForServer } from "./fixtures/net.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

Deno.test("App as the default export answers requests under `deno serve`", async () => {
  const port = freePort();
  // The environment is inherited, so JSR_URL from the offline mirror reaches the child.
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "serve",
      "--allow-net",
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "tests/fixtures/web_serve_app.ts",
    ],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const response = await waitForServer(`http://127.0.0.1:${port}/hello/ann`);
    assertEquals(
      `${response.status} ${await response.text()}`,
      "200 hello ann (lifespan started: true)",
    );
    const missing = await fetch(`http://127.0.0.1:${port}/nothing`);
    assertEquals([missing.status, await missing.text()], [404, "Not Found"]);
  } finally {
    child.kill("SIGTERM");
    const output = await child.output();
    if (!output.success && output.signal !== "SIGTERM") {
      console.error(new TextDecoder().decode(output.stderr));
    }
  }
});
