/**
 * examples/asgi_minimal.ts, the seed's low-level example (spec 4.2): each row of its table on both
 * transports, run as the program `deno task example:asgi` runs, plus its 404 and 405 fallbacks
 * with their exact headers, its disconnect rule and its lifespan answers.
 */
import { assertEquals, assertMatch } from "@std/assert";
import { fileURLToPath } from "node:url";
import type { ReceiveMessage, SendMessage } from "../asgi.ts";
import { app } from "../examples/asgi_minimal.ts";
import { REPEAT_WINDOW_MS, stopOnSignals } from "../examples/_signals.ts";
import { bytes, rawRequest, TRANSPORTS } from "./fixtures/asgi_harness.ts";
import { runExampleProgram } from "./fixtures/example_program.ts";
import { runOnTakenPort } from "./fixtures/taken_port.ts";
import { httpScope } from "./fixtures/web_helpers.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Starts the example as a program and returns its port and a way to stop it. */
async function runExample(transport: string): Promise<{
  port: number;
  signalUntilExit: (signal: Deno.Signal) => Promise<{ code: number; stderr: string }>;
  stop: () => Promise<{ code: number; stderr: string }>;
}> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-sys",
      "examples/asgi_minimal.ts",
    ],
    cwd: root,
    env: { PORT: "0", TRANSPORT: transport },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  let port = 0;
  while (port === 0) {
    const { done, value } = await lines.read();
    if (done) throw new Error(`The example exited before listening: ${seen}`);
    seen += value;
    const match = seen.match(/Listening on http:\/\/127\.0\.0\.1:(\d+)\//);
    if (match) port = Number(match[1]);
  }
  return {
    port,
    async signalUntilExit(signal: Deno.Signal) {
      await lines.cancel();
      let exited = false;
      const status = child.status.finally(() => exited = true);
      // A process group and the JSR mirror both deliver a SIGINT sent to the group, so the example
      // gets it twice at an instant it cannot choose: signal on, a few ms apart, until it exits,
      // but only within the window in which a second signal is the same one (a later one is a
      // second Ctrl-C, which exits at once with 130).
      const until = performance.now() + REPEAT_WINDOW_MS - 100;
      for (let sent = 0; performance.now() < until && !exited; sent++) {
        try {
          child.kill(signal);
        } catch {
          break; // gone between the check and the kill
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const stderr = await new Response(child.stderr).text();
      return { code: (await status).code, stderr };
    },
    async stop() {
      child.kill("SIGTERM");
      await lines.cancel();
      const stderr = await new Response(child.stderr).text();
      const { code } = await child.status;
      return { code, stderr };
    },
  };
}

/** The response to `request`, as status line, headers without `date`, and body. */
async function exchange(
  port: number,
  method: string,
  path: string,
  body: string,
): Promise<{ status: string; headers: string[]; body: string }> {
  const length = body === "" ? "" : `Content-Length: ${body.length}\r\n`;
  const raw = await rawRequest(
    port,
    `${method} ${path} HTTP/1.1\r\nHost: x\r\n${length}Connection: close\r\n\r\n${body}`,
  );
  const [head = "", ...rest] = raw.split("\r\n\r\n");
  const [status = "", ...headers] = head.split("\r\n");
  return {
    status,
    headers: headers.map((h) => h.toLowerCase()).filter((h) => !h.startsWith("date:")).sort(),
    body: new TextDecoder().decode(Uint8Array.from(rest.join("\r\n\r\n"), (c) => c.charCodeAt(0))),
  };
}

for (const transport of TRANSPORTS) {
  Deno.test(`examples/asgi_minimal.ts [${transport}] answers each row of the seed's table`, async (t) => {
    const example = await runExample(transport);
    // Both transports echo the request's "Connection: close"; nothing else is theirs but date.
    const framing = ["connection: close"];
    try {
      const rows: [string, string, string, string, string, string][] = [
        // method, path, request body, status line, content-type, response body
        ["GET", "/", "", "HTTP/1.1 200 OK", "text/plain; charset=utf-8", "OK"],
        // Deno.serve drops a GET body (Fetch semantics); node:http delivers it.
        [
          "GET",
          "/",
          "hello",
          "HTTP/1.1 200 OK",
          "text/plain; charset=utf-8",
          transport === "node" ? "hello" : "OK",
        ],
        [
          "POST",
          "/other_handler/abc1",
          "",
          "HTTP/1.1 200 OK",
          "application/json",
          '{"name":"abc1"}',
        ],
        [
          "POST",
          "/other_handler/abc1",
          "payload",
          "HTTP/1.1 200 OK",
          "text/plain; charset=utf-8",
          "payload",
        ],
      ];
      for (const [method, path, body, status, type, expected] of rows) {
        await t.step(
          `${method} ${path} ${JSON.stringify(body)} → ${JSON.stringify(expected)}`,
          async () => {
            const response = await exchange(example.port, method, path, body);
            assertEquals(response.status, status);
            assertEquals(
              response.headers,
              [
                ...framing,
                `content-length: ${new TextEncoder().encode(expected).length}`,
                `content-type: ${type}`,
              ].sort(),
            );
            assertEquals(response.body, expected);
          },
        );
      }
      const fallbacks: [string, string, string, string[]][] = [
        ["GET", "/missing", "404 Not Found", []],
        // Fails [a-z1-9]+: an unknown endpoint.
        ["POST", "/other_handler/ABC", "404 Not Found", []],
        ["POST", "/", "405 Method Not Allowed", ["allow: get"]],
        ["GET", "/other_handler/abc", "405 Method Not Allowed", ["allow: post"]],
      ];
      for (const [method, path, reason, allow] of fallbacks) {
        await t.step(`${method} ${path} → ${reason}`, async () => {
          const response = await exchange(example.port, method, path, "");
          assertEquals(response.status, `HTTP/1.1 ${reason}`);
          assertEquals(
            response.headers,
            [
              ...framing,
              ...allow,
              `content-length: ${response.body.length}`,
              "content-type: text/html; charset=utf-8",
            ].sort(),
          );
          assertMatch(response.body, new RegExp(`^<!DOCTYPE html>.*<h1>${reason}</h1>`));
        });
      }
    } finally {
      const { code, stderr } = await example.stop();
      assertEquals(stderr, "");
      assertEquals(code, 0, "SIGTERM shuts the example down gracefully");
    }
  });
}

for (const transport of TRANSPORTS) {
  Deno.test(`examples/asgi_minimal.ts [${transport}] exits 0 on a SIGINT that keeps coming`, async () => {
    // Regression (newcomer walk-through, 2026-11-29): a SIGINT to `deno task example:asgi`'s
    // process group (a supervisor's kill) ended it with 130 about one time in five: the second
    // copy arrived after the example had removed its listeners, before the process was gone.
    const example = await runExample(transport);
    const { code, stderr } = await example.signalUntilExit("SIGINT");
    assertEquals(stderr, "");
    assertEquals(code, 0);
  });
}

for (const transport of TRANSPORTS) {
  Deno.test(`examples/asgi_minimal.ts [${transport}] exits at once on a second Ctrl-C while an upload holds the shutdown`, async () => {
    // Probe of 2026-11-29 (signals and process exit): a second Ctrl-C did nothing, and an upload
    // still arriving held `deno task example:asgi` for its whole shutdownTimeout, 30 s, where
    // uvicorn and the web layer's App exit at once on a second signal.
    await using example = await runExampleProgram("examples/asgi_minimal.ts", transport);
    using upload = await Deno.connect({ hostname: "127.0.0.1", port: example.port });
    await upload.write(
      bytes("POST /other_handler/abc HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nhi"),
    );
    // Answered only once the connection before it has been taken in: the upload is in flight.
    const answer = await rawRequest(
      example.port,
      "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assertMatch(answer, /^HTTP\/1\.1 200 /);
    example.kill("SIGINT");
    const held = await example.exited(REPEAT_WINDOW_MS + 100);
    assertEquals(held, undefined, "the upload holds the shutdown");
    example.kill("SIGINT");
    assertEquals(await example.exited(5000), 130);
    await example.output(
      /Received SIGINT: shutting down[^]*Received SIGINT again: exiting without waiting/,
      1000,
    );
  });
}

Deno.test("examples/_signals.ts stopOnSignals() stops on the first signal and exits on a later one", async (t) => {
  const cases: [string, [Deno.Signal, number][], string[]][] = [
    ["one signal", [["SIGTERM", 0]], ["stop"]],
    ["a copy within the window", [["SIGINT", 0], ["SIGINT", 5], ["SIGTERM", 499]], ["stop"]],
    ["Ctrl-C twice", [["SIGINT", 0], ["SIGINT", 500]], ["stop", "exit 130"]],
    ["SIGINT, then SIGTERM", [["SIGINT", 0], ["SIGTERM", 2000]], ["stop", "exit 143"]],
  ];
  for (const [name, signals, expected] of cases) {
    await t.step(name, () => {
      let time = 0;
      const calls: string[] = [];
      const listeners = new Map<Deno.Signal, () => void>();
      const unlisten = stopOnSignals(() => calls.push("stop"), {
        log: () => {},
        exit: (code) => void calls.push(`exit ${code}`),
        now: () => time,
        signals: ["SIGINT", "SIGTERM"],
        addSignalListener: (signal, listener) => listeners.set(signal, listener),
        removeSignalListener: (signal) => listeners.delete(signal),
      });
      for (const [signal, at] of signals) {
        time = at;
        listeners.get(signal)!();
      }
      assertEquals(calls, expected);
      unlisten();
      assertEquals(listeners.size, 0);
    });
  }
});

Deno.test("examples/asgi_minimal.ts app sends nothing when receive() returns http.disconnect", async (t) => {
  const cases: [string, string][] = [["GET", "/"], ["POST", "/other_handler/abc"]];
  for (const [method, path] of cases) {
    await t.step(`${method} ${path}`, async () => {
      const sent: SendMessage[] = [];
      await app(
        httpScope(method, path),
        () => Promise.resolve({ type: "http.disconnect" }),
        (message) => {
          sent.push(message);
          return Promise.resolve();
        },
      );
      assertEquals(sent, []);
    });
  }
});

Deno.test("examples/asgi_minimal.ts app completes lifespan startup and shutdown", async () => {
  const incoming: ReceiveMessage[] = [{ type: "lifespan.startup" }, { type: "lifespan.shutdown" }];
  const sent: SendMessage[] = [];
  await app(
    { type: "lifespan", asgi: { version: "3.0", spec_version: "2.0" }, state: {} },
    () => Promise.resolve(incoming.shift()!),
    (message) => {
      sent.push(message);
      return Promise.resolve();
    },
  );
  assertEquals(sent, [{ type: "lifespan.startup.complete" }, {
    type: "lifespan.shutdown.complete",
  }]);
});

Deno.test("examples/asgi_minimal.ts on a taken port exits 1 with the bridge's line, no uncaught stack", async () => {
  // Regression (newcomer walk-through, 2026-11-29): `PORT=<taken> deno task example:asgi` printed
  // the bridge's clear line, then "error: Uncaught (in promise) AddrInUse" and a stack of Deno's
  // internals, which buried it.
  const { code, output } = await runOnTakenPort("examples/asgi_minimal.ts");
  assertEquals(code, 1);
  assertMatch(output, /port \d+ is taken; stop what listens there, or pass another port/);
  assertEquals(/Uncaught|\n\s+at /.test(output), false, output);
});
