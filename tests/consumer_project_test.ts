/**
 * The README's "Use it in your project" section, tried as a user would: a project of its own in a
 * temporary folder whose `deno.json` maps the package name to this checkout. The same imports then
 * work unchanged after `deno add jsr:@stellarator/stellarator`.
 *
 * Regression: importing `web.ts` from another project by file path failed with `Import
 * "@std/async/abortable" not a dependency` (issue 12); the import map form is what works.
 */
import { assertEquals, assertStringIncludes } from "@std/assert";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const CHECKOUT = fileURLToPath(new URL("..", import.meta.url));

/** The `imports` a consumer's deno.json needs, as the README shows them, for a clone at `root`. */
function consumerImports(root: string): Record<string, string> {
  return {
    "@stellarator/stellarator": join(root, "mod.ts"),
    "@stellarator/stellarator/router": join(root, "router.ts"),
    "@stellarator/stellarator/asgi": join(root, "asgi.ts"),
    "@stellarator/stellarator/web": join(root, "web.ts"),
    "@std/async": "jsr:@std/async@^1",
    "@std/http": "jsr:@std/http@^1",
    "@std/assert": "jsr:@std/assert@^1",
  };
}

const MAIN = `
import { App, AsgiRouter, type Request, Response, Route } from "@stellarator/stellarator/web";
import { ASGI_VERSION } from "@stellarator/stellarator/asgi";
import { AsgiRouter as Same } from "@stellarator/stellarator";

async function hello(request: Request): Promise<void> {
  await request.respondWith(new Response({ body: \`Hello, \${request.context.name}\` }));
}
const app = new App({
  router: new AsgiRouter({ routes: [new Route("/hello/{name}", { handler: hello })] }),
  requestTimeLimit: 1,
});
const response = await app.fetch(new globalThis.Request("http://localhost/hello/you"));
console.log(response.status, await response.text(), ASGI_VERSION, Same === AsgiRouter);
`;

async function runIn(dir: string, ...args: string[]): Promise<{ code: number; out: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, out: decode(output.stdout) + decode(output.stderr) };
}

Deno.test("a consumer project imports every entry point through its import map", async () => {
  const dir = await Deno.makeTempDir({ prefix: "stellarator-consumer-" });
  try {
    await Deno.writeTextFile(
      join(dir, "deno.json"),
      JSON.stringify({ imports: consumerImports(CHECKOUT) }, null, 2),
    );
    await Deno.writeTextFile(join(dir, "main.ts"), MAIN);
    // `deno task test` runs under the offline mirror, so JSR_URL reaches the child too.
    const checked = await runIn(dir, "check", "main.ts");
    assertEquals(checked.code, 0, checked.out);
    const ran = await runIn(dir, "run", "main.ts");
    assertEquals(ran.code, 0, ran.out);
    assertStringIncludes(ran.out, "200 Hello, you 3.0 true");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
