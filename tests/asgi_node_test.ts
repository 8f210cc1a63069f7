/**
 * The node transport on Node.js itself. Node.js 20 cannot load TypeScript, so the test bundles
 * tests/fixtures/asgi_node_server.ts (which imports asgi.ts) to one JavaScript file with
 * `deno bundle` and runs that with `node`. Skipped, with the reason printed, when no `node` is on
 * PATH.
 */
import { assertEquals, assertMatch } from "@std/assert";
import { fileURLToPath } from "node:url";
import { rawRequest } from "./fixtures/asgi_harness.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

async function nodeVersion(): Promise<string | undefined> {
  try {
    const output = await new Deno.Command("node", { args: ["--version"], stdout: "piped" })
      .output();
    const version = new TextDecoder().decode(output.stdout).trim();
    // Deno answers for a missing `node` itself ("deno 2.x ..."): only a real Node.js counts.
    return output.success && /^v\d+\.\d+\.\d+$/.test(version) ? version : undefined;
  } catch {
    return undefined;
  }
}

/** Decodes text that rawRequest() read byte by byte. */
function utf8(latin1: string): string {
  return new TextDecoder().decode(Uint8Array.from(latin1, (c) => c.charCodeAt(0)));
}

const version = await nodeVersion();
if (version === undefined) console.log("asgi_node_test: skipped, no Node.js `node` on PATH");

Deno.test({
  name: `serve() with transport "node" runs on Node.js ${version ?? "(not installed)"}`,
  ignore: version === undefined,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "asgi_node_" });
    try {
      const bundle = `${dir}/server.mjs`;
      const built = await new Deno.Command(Deno.execPath(), {
        args: ["bundle", "--platform", "deno", "-o", bundle, "tests/fixtures/asgi_node_server.ts"],
        cwd: root,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assertEquals(built.success, true, new TextDecoder().decode(built.stderr));
      const child = new Deno.Command("node", {
        args: [bundle],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let seen = "";
      let port = 0;
      while (port === 0) {
        const { done, value } = await stdout.read();
        if (done) break;
        seen += value;
        port = Number(seen.match(/listening (\d+)/)?.[1] ?? 0);
      }
      try {
        // A GET with a body, which Deno.serve would drop: the node transport delivers it.
        const raw = await rawRequest(
          port,
          "GET /caf%C3%A9 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        );
        assertMatch(raw, /^HTTP\/1\.1 200 OK\r\n/);
        assertEquals(
          JSON.parse(utf8(raw.slice(raw.indexOf("\r\n\r\n") + 4))),
          { runtime: "node", method: "GET", path: "/café", body: "hello" },
        );
        const chunked = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode("chunk one, "));
            controller.enqueue(new TextEncoder().encode("chunk two"));
            controller.close();
          },
        });
        const response = await fetch(`http://127.0.0.1:${port}/upload`, {
          method: "POST",
          body: chunked,
        });
        assertEquals((await response.json()).body, "chunk one, chunk two");
      } finally {
        // Closing stdin asks the fixture to shut down (lifespan shutdown included).
        await child.stdin.close();
        while (!(await stdout.read()).done) { /* drain */ }
      }
      const status = await child.status;
      const stderr = await new Response(child.stderr).text();
      assertEquals([status.code, stderr], [0, ""]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
