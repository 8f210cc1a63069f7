import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertStringIncludes,
} from "@std/assert";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  buildRegistry,
  ensureRegistry,
  forwardsSignal,
  main,
  MirrorError,
  rewriteCrossPackageImports,
  SERVED_VERSION,
  serveRegistry,
  stripJsdocTypeTags,
} from "../tools/with_jsr_mirror.ts";
import { freePort, waitForServer } from "./fixtures/net.ts";
import { BOUND_MS, withTimeout } from "./fixtures/timeout.ts";

/** A miniature `deno-std` package folder: two packages, one importing the other. */
async function fakeDenoStd(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "fake-deno-std-" });
  await Deno.mkdir(join(root, "async"));
  await Deno.mkdir(join(root, "data_structures"));
  await Deno.writeTextFile(
    join(root, "async", "mod.js"),
    'export * from "./channel.js";\n',
  );
  await Deno.writeTextFile(
    join(root, "async", "channel.js"),
    [
      'import { Deque } from "../data-structures/deque.js";',
      "/**",
      " * Makes a channel.",
      " * @param size How many items fit.",
      " * @returns The channel.",
      " */",
      "export function channel(size) { return new Deque(size); }",
      "",
    ].join("\n"),
  );
  await Deno.writeTextFile(
    join(root, "data_structures", "deque.js"),
    "export class Deque { constructor(size) { this.size = size; } }\n",
  );
  await Deno.writeTextFile(join(root, "README.md"), "not a package\n");
  return root;
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("rewriteCrossPackageImports() rewrites imports that leave the package", async (t) => {
  const cases: [string, string, string, string][] = [
    // [code, file in package, package folder, expected]
    [
      'import { Deque } from "../data-structures/deque.js";',
      "channel.js",
      "async",
      'import { Deque } from "jsr:@std/data-structures@^1/deque";',
    ],
    [
      'export * from "../assert/mod.js";',
      "equals.js",
      "expect",
      'export * from "jsr:@std/assert@^1";',
    ],
    [
      'import { x } from "../../internal/format.js";',
      "_negotiation/encoding.js",
      "http",
      'import { x } from "jsr:@std/internal@^1/format";',
    ],
    [
      'import { y } from "./abortable.js";',
      "deadline.js",
      "async",
      'import { y } from "./abortable.js";',
    ],
    [
      'import { z } from "../_common/assert_path.js";',
      "posix/join.js",
      "path",
      'import { z } from "../_common/assert_path.js";',
    ],
    [
      'const m = await import("../fmt/colors.js");',
      "mod.js",
      "cli",
      'const m = await import("jsr:@std/fmt@^1/colors");',
    ],
  ];
  for (const [code, file, folder, expected] of cases) {
    await t.step(`${folder}/${file}: ${code}`, () => {
      assertEquals(rewriteCrossPackageImports(code, file, folder), expected);
    });
  }
});

Deno.test("stripJsdocTypeTags() drops @param and @returns lines but keeps code and prose", () => {
  const code = [
    "/**",
    " * Adds.",
    " * @typeParam T The type.",
    " * @param a First.",
    " * @returns The sum.",
    " * @example Usage",
    " */",
    "export function add(a, b) { return a + b; } // @param in code stays",
  ].join("\n");
  assertEquals(
    stripJsdocTypeTags(code),
    [
      "/**",
      " * Adds.",
      " * @example Usage",
      " */",
      "export function add(a, b) { return a + b; } // @param in code stays",
    ].join("\n"),
  );
});

Deno.test("buildRegistry() writes a registry whose checksums match the served bytes", async () => {
  const source = await fakeDenoStd();
  const out = await Deno.makeTempDir({ prefix: "registry-" });
  const names = await buildRegistry(source, out);
  assertEquals(names, ["async", "data-structures"]);

  const server = serveRegistry(out, 0);
  try {
    const meta = await (await fetch(`${server.url}@std/async/meta.json`)).json();
    assertEquals(meta, {
      scope: "std",
      name: "async",
      latest: SERVED_VERSION,
      versions: { [SERVED_VERSION]: {} },
    });
    const versionMeta = await (await fetch(`${server.url}@std/async/${SERVED_VERSION}_meta.json`))
      .json();
    assertEquals(versionMeta.exports, {
      ".": "./mod.js",
      "./channel": "./channel.js",
    });
    for (const [path, entry] of Object.entries(versionMeta.manifest)) {
      const response = await fetch(`${server.url}@std/async/${SERVED_VERSION}${path}`);
      assertEquals(response.status, 200);
      const bytes = new Uint8Array(await response.arrayBuffer());
      assertEquals(entry, { size: bytes.byteLength, checksum: `sha256-${await sha256(bytes)}` });
    }
    const channel = await (await fetch(`${server.url}@std/async/${SERVED_VERSION}/channel.js`))
      .text();
    assertStringIncludes(channel, '"jsr:@std/data-structures@^1/deque"');
    assert(!channel.includes("@param"), "JSDoc @param tags are stripped");
    assertEquals((await fetch(`${server.url}@std/nothing/meta.json`)).status, 404);
    await (await fetch(`${server.url}@std/../../etc/passwd`)).body?.cancel();
  } finally {
    await server.close();
    await Deno.remove(source, { recursive: true });
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("buildRegistry() rejects a folder that holds no packages", async () => {
  const empty = await Deno.makeTempDir();
  try {
    await assertRejects(() => buildRegistry(empty, join(empty, "out")), MirrorError, "deno-std");
  } finally {
    await Deno.remove(empty, { recursive: true });
  }
});

Deno.test("main() runs the command untouched when jsr.io answers", async () => {
  const spawned: Record<string, string>[] = [];
  const code = await main(["deno", "--version"], {
    probe: () => Promise.resolve(true),
    ensure: () => Promise.reject(new Error("the mirror must not be built")),
    spawn: (_command, env) => {
      spawned.push(env);
      return Promise.resolve(0);
    },
  });
  assertEquals(code, 0);
  assertEquals(spawned, [{}]);
});

Deno.test("main() serves the mirror through JSR_URL when jsr.io is unreachable", async () => {
  const source = await fakeDenoStd();
  const out = await Deno.makeTempDir({ prefix: "registry-" });
  await buildRegistry(source, out);
  const previous = Deno.env.get("JSR_URL");
  Deno.env.delete("JSR_URL");
  try {
    let status = 0;
    const code = await main(["deno", "test"], {
      probe: () => Promise.resolve(false),
      ensure: () => Promise.resolve(out),
      spawn: async (command, env) => {
        assertEquals(command, ["deno", "test"]);
        assertMatch(env.JSR_URL!, /^http:\/\/127\.0\.0\.1:\d+\/$/);
        const response = await fetch(`${env.JSR_URL}@std/data-structures/meta.json`);
        status = response.status;
        await response.body?.cancel();
        return 7;
      },
    });
    assertEquals(code, 7, "the command's exit code is passed on");
    assertEquals(status, 200);
  } finally {
    if (previous !== undefined) Deno.env.set("JSR_URL", previous);
    await Deno.remove(source, { recursive: true });
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("main() ends with a message and exit code 1 when the mirror cannot be built", async () => {
  const previous = Deno.env.get("JSR_URL");
  Deno.env.delete("JSR_URL");
  const messages: string[] = [];
  try {
    const code = await main(["deno", "test"], {
      probe: () => Promise.resolve(false),
      ensure: () => Promise.reject(new MirrorError("npm is unreachable")),
      spawn: () => Promise.reject(new Error("the command must not run")),
      log: (message) => messages.push(message),
    });
    assertEquals(code, 1);
    assertEquals(messages, ["with_jsr_mirror: npm is unreachable"]);
  } finally {
    if (previous !== undefined) Deno.env.set("JSR_URL", previous);
  }
});

Deno.test("main() prints usage and exits 2 without a command", async () => {
  const messages: string[] = [];
  assertEquals(await main([], { log: (message) => messages.push(message) }), 2);
  assertStringIncludes(messages[0]!, "Usage");
});

/** A `/proc/<pid>/stat` line with the given command name, process group and terminal group. */
function statLine(comm: string, pgrp: number, tpgid: number): string {
  // pid (comm) state ppid pgrp session tty_nr tpgid flags ...
  return `4242 (${comm}) S 4241 ${pgrp} ${pgrp} 34816 ${tpgid} 4194560 1650 0 0 0\n`;
}

// Newcomer review against 0185c78, item 1: Ctrl-C reached the command twice, once from the
// terminal and once from this tool, and an App took the second as "exit now" (130).
Deno.test("forwardsSignal() passes SIGINT on only when the command did not get it too", async (t) => {
  const cases: [string, Deno.Signal, string | undefined, boolean][] = [
    // [case, signal, /proc/self/stat, expected]
    [
      "Ctrl-C: this tool is in the terminal's foreground group",
      "SIGINT",
      statLine("deno", 500, 500),
      false,
    ],
    ["no controlling terminal (a script's kill -INT)", "SIGINT", statLine("deno", 500, -1), true],
    ["a terminal whose foreground is another group", "SIGINT", statLine("deno", 500, 612), true],
    [
      "a command name with spaces and parentheses",
      "SIGINT",
      statLine("a) 1 2 3 (b", 77, 77),
      false,
    ],
    ["no /proc (not Linux, or no right to read it)", "SIGINT", undefined, true],
    ["an unreadable stat line", "SIGINT", "garbage", true],
    [
      "SIGTERM in the foreground group: deno task hands it to the tool only",
      "SIGTERM",
      statLine("deno", 500, 500),
      true,
    ],
    ["SIGTERM without /proc", "SIGTERM", undefined, true],
  ];
  for (const [name, signal, stat, expected] of cases) {
    await t.step(name, () => assertEquals(forwardsSignal(signal, stat), expected));
  }
});

Deno.test({
  name: "ensureRegistry() refuses with a clear message when the npm registry is unreachable",
  ignore: !works("npm", ["--version"]),
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "mirror-cache-" });
    const saved = ["npm_config_registry", "npm_config_fetch_retries"].map((k) =>
      [k, Deno.env.get(k)] as const
    );
    // Port 1 on loopback refuses at once; no retries keep the test short.
    Deno.env.set("npm_config_registry", "http://127.0.0.1:1/");
    Deno.env.set("npm_config_fetch_retries", "0");
    try {
      // The mirror's std is typed loosely (see stripJsdocTypeTags), hence the cast.
      const error = await assertRejects(
        () => ensureRegistry(cache, () => {}),
        MirrorError,
      ) as MirrorError;
      assertStringIncludes(error.message, "could not fetch deno-std@");
      assertStringIncludes(error.message, "ECONNREFUSED");
      assertStringIncludes(error.message, "Fix: make the npm registry reachable");
    } finally {
      for (const [key, value] of saved) {
        if (value === undefined) Deno.env.delete(key);
        else Deno.env.set(key, value);
      }
      await Deno.remove(cache, { recursive: true });
    }
  },
});

/** Whether `command args` runs and exits 0 (a tool this test needs is installed and works). */
function works(command: string, args: string[]): boolean {
  try {
    return new Deno.Command(command, { args, stdin: "null", stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

const root = fileURLToPath(new URL("..", import.meta.url));

/** Starts the tool as `deno task` would, with the JSR_URL of this run so it skips the probe. */
function spawnTool(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tools/with_jsr_mirror.ts", ...args],
    cwd: root,
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

/**
 * Starts the tool in a session of its own, away from any terminal the test runs in: there a
 * SIGINT of the tool's own was not sent by a terminal and must be passed on. `setsid` execs in
 * place (Deno's child leads no group), so the child's pid is the tool's.
 */
function spawnToolWithoutTerminal(args: string[]): Deno.ChildProcess {
  return new Deno.Command("setsid", {
    args: [Deno.execPath(), "run", "-A", "tools/with_jsr_mirror.ts", ...args],
    cwd: root,
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

/** Resolves with the first line `stream` prints, then drains the rest so the child never blocks. */
async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const lines = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await lines.read();
    if (done) break;
    text += value;
  }
  (async () => {
    while (!(await lines.read()).done);
  })().catch(() => {});
  return text.split("\n")[0]!;
}

/**
 * The process ids below `pid`, read from /proc while they are still its descendants: once the
 * tool is gone an orphan hangs off PID 1, and a failing test must still be able to end it.
 */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      // The command name in parentheses may hold spaces; the parent id follows the last ")".
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry.name)]);
    } catch {
      // It exited while we looked.
    }
  }
  const found: number[] = [];
  const walk = (id: number) => {
    for (const child of children.get(id) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/** Ends every process of `pids` still alive, so a failed run leaves nothing holding a port. */
function killSurvivors(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // Gone already, as it should be.
    }
  }
}

// A command that reports SIGTERM through its exit code, so the test sees it was passed on.
const TRAPS_SIGTERM = 'Deno.addSignalListener("SIGTERM", () => Deno.exit(7)); ' +
  'console.log("ready"); setTimeout(() => {}, 60_000);';

Deno.test({
  name: "main() passes SIGTERM on to the command and exits with its status",
  ignore: Deno.build.os !== "linux",
  async fn() {
    const tool = spawnTool(["deno", "eval", TRAPS_SIGTERM]);
    let below: number[] = [];
    try {
      assertEquals(
        await withTimeout(firstLine(tool.stdout), 30_000, "the command to start"),
        "ready",
      );
      below = descendants(tool.pid);
      tool.kill("SIGTERM");
      const status = await withTimeout(tool.status, BOUND_MS, "the tool to exit after SIGTERM");
      assertEquals(status.code, 7);
    } finally {
      killSurvivors([tool.pid, ...below]);
      await tool.status;
    }
  },
});

const HAS_SETSID = Deno.build.os === "linux" && works("setsid", ["true"]);
// `script` (util-linux) runs a command in a new pseudo-terminal; "\x03" written to its stdin
// reaches the pty, whose line discipline sends SIGINT to the foreground group, as Ctrl-C does.
const HAS_PTY = Deno.build.os === "linux" && works("script", ["-qec", "true", "/dev/null"]);
const HAS_PYTHON = works("python3", ["-c", "pass"]);
for (
  const [missing, reason] of [
    [!HAS_PTY, "`script` (util-linux) cannot open a pseudo-terminal here"],
    [!HAS_SETSID, "no `setsid` (util-linux) to run the tool away from a terminal"],
    [!HAS_PYTHON, "no python3 on PATH (.ci/run installs python3-websockets, which brings it)"],
  ] as const
) {
  if (missing) console.log(`with_jsr_mirror_test: SIGINT tests skipped where needed: ${reason}`);
}

// A command that counts every SIGINT delivered to it and exits with 10 + the count a second after
// the first. Python's C-level handler writes one byte to the wakeup fd per delivery, so two
// deliveries count as two; a Deno listener may see two signals close together as one.
const COUNTS_SIGINT = `
import os, select, signal, sys, time
r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w)
signal.signal(signal.SIGINT, lambda *_: None)
print("ready", flush=True)
count, first, start = 0, None, time.monotonic()
while time.monotonic() - start < 30:
    wait = 30 if first is None else first + 1 - time.monotonic()
    if wait <= 0:
        break
    if select.select([r], [], [], wait)[0]:
        count += len(os.read(r, 64))
        first = first or time.monotonic()
print(f"SIGINT x{count}", flush=True)
sys.exit(10 + count)
`;

// Newcomer review against 0185c78, item 1: in a terminal, Ctrl-C reached the command twice (the
// terminal signals the whole foreground group, then this tool passed it on): exit 12 here.
Deno.test({
  name: "main() in a terminal: Ctrl-C reaches the command once",
  ignore: !HAS_PTY || !HAS_PYTHON,
  async fn() {
    const counter = await Deno.makeTempFile({ suffix: ".py" });
    await Deno.writeTextFile(counter, COUNTS_SIGINT);
    const terminal = new Deno.Command("script", {
      // The shell expands the variables, so no path needs quoting inside the command string.
      args: [
        "-qfec",
        'exec "$TOOL_DENO" run -A tools/with_jsr_mirror.ts python3 "$COUNTER"',
        "/dev/null",
      ],
      cwd: root,
      env: { SHELL: "/bin/sh", TOOL_DENO: Deno.execPath(), COUNTER: counter },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const keys = terminal.stdin.getWriter();
    let output = "";
    const reading = terminal.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (text) => void (output += text) }),
    );
    let below: number[] = [];
    try {
      // "ready" comes from the command, which the tool starts only after adding its listeners.
      const started = Date.now();
      while (!output.includes("ready") && Date.now() - started < 30_000) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assertStringIncludes(output, "ready", "the command started in the terminal");
      below = descendants(terminal.pid);
      await keys.write(new TextEncoder().encode("\x03"));
      const status = await withTimeout(terminal.status, 10_000, "the command to count and exit");
      await withTimeout(reading, BOUND_MS, "the terminal's output to end");
      assertStringIncludes(output, "SIGINT x1", output);
      assertEquals(status.code, 11, "script exits with the command's status, 10 + SIGINTs seen");
    } finally {
      await keys.close().catch(() => {});
      killSurvivors([terminal.pid, ...below]);
      await terminal.status;
      await reading.catch(() => {});
      await Deno.remove(counter);
    }
  },
});

Deno.test({
  name: "main() outside a terminal: kill -INT of the tool alone reaches the command",
  ignore: !HAS_SETSID || !HAS_PYTHON,
  async fn() {
    const tool = spawnToolWithoutTerminal(["python3", "-c", COUNTS_SIGINT]);
    let below: number[] = [];
    try {
      assertEquals(
        await withTimeout(firstLine(tool.stdout), 30_000, "the command to start"),
        "ready",
      );
      below = descendants(tool.pid);
      tool.kill("SIGINT");
      const status = await withTimeout(tool.status, 10_000, "the tool to exit after SIGINT");
      assertEquals(status.code, 11, "the command saw exactly one SIGINT");
    } finally {
      killSurvivors([tool.pid, ...below]);
      await tool.status;
    }
  },
});

Deno.test("main() exits with 128 + N when signal N ends the command", async () => {
  const tool = spawnTool(["deno", "eval", 'Deno.kill(Deno.pid, "SIGTERM")']);
  const status = await withTimeout(tool.status, 30_000, "the tool to exit");
  await tool.stdout.cancel();
  assertEquals([status.code, status.signal], [143, null]);
});

// Issue 10, item 9: `kill -TERM` of `deno task example` used to end only the tool, leaving the
// example server re-parented to PID 1 and still holding its port.
Deno.test({
  name: "main() under deno task: kill -TERM of deno task example leaves no orphan on the port",
  ignore: Deno.build.os !== "linux",
  async fn() {
    const port = freePort();
    const task = new Deno.Command(Deno.execPath(), {
      args: ["task", "example"],
      cwd: root,
      env: { PORT: String(port) },
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    let log = "";
    const reading = task.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (text) => void (log += text) }),
    );
    let below: number[] = [];
    try {
      const answer = await withTimeout(
        waitForServer(`http://127.0.0.1:${port}/`),
        60_000,
        "the example to listen",
      );
      await answer.body?.cancel();
      below = descendants(task.pid);
      task.kill("SIGTERM");
      const status = await withTimeout(task.status, BOUND_MS, "deno task to exit after SIGTERM");
      await withTimeout(reading, BOUND_MS, "the example to exit (its output to end)");
      assertEquals(status.code, 0, log);
      assertStringIncludes(log, "Lifespan shutdown");
      // The port is free again only if the example itself stopped.
      Deno.listen({ hostname: "127.0.0.1", port }).close();
    } finally {
      killSurvivors([task.pid, ...below]);
      await task.status;
      await reading.catch(() => {});
    }
  },
});
