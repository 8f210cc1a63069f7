// Copyright the stellarator authors. MIT license.
/**
 * The WebSocket frame fuzzer: plays the same random frame sequences (valid and hostile, see
 * tests/fixtures/ws_fuzz/frames.ts) against `serve(app, { transport: "deno" })`,
 * `{ transport: "node" }` and uvicorn (`--ws websockets`), each in a process of its own, and
 * prints where they disagree, what each application received, and each process's health (alive,
 * file descriptors before and after, stderr).
 *
 * ```sh
 * deno run -A tools/with_jsr_mirror.ts deno run -A tools/ws_fuzz.ts --seed=1 --cases=200
 * ```
 *
 * Options: `--seed` (1), `--cases` (100), `--hostility` (0.5: the chance that an item of a
 * sequence breaks a rule), `--max-size` (4096, every server's message limit), `--port` (19500:
 * the servers take the next three), `--parallel` (1: connections at a time to each server),
 * `--servers` (`deno,node,uvicorn`), `--out` (a JSON file for
 * every outcome).
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import {
  CaseGenerator,
  type FuzzCase,
  type Outcome,
  play,
} from "../tests/fixtures/ws_fuzz/frames.ts";

const DIR = new URL("../tests/fixtures/ws_fuzz/", import.meta.url);

function option(name: string, fallback: string): string {
  const prefix = `--${name}=`;
  return Deno.args.find((arg) => arg.startsWith(prefix))?.slice(prefix.length) ?? fallback;
}

const seed = Number(option("seed", "1"));
const count = Number(option("cases", "100"));
const hostility = Number(option("hostility", "0.5"));
const maxSize = Number(option("max-size", "4096"));
const basePort = Number(option("port", "19500"));
const names = option("servers", "deno,node,uvicorn").split(",");
const out = option("out", "");
const parallel = Number(option("parallel", "1"));

interface Server {
  name: string;
  port: number;
  child: Deno.ChildProcess;
  stderr: Promise<string>;
  exited: boolean;
}

function fds(pid: number): number {
  try {
    return [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
  } catch {
    return -1;
  }
}

async function start(name: string, port: number): Promise<Server> {
  const command = name === "uvicorn"
    ? new Deno.Command("/usr/bin/python3", {
      args: [
        "-m",
        "uvicorn",
        "--app-dir",
        fileURLToPath(DIR),
        "app:app",
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        "--ws",
        "websockets",
        "--ws-max-size",
        String(maxSize),
        "--lifespan",
        "off",
        "--log-level",
        "warning",
      ],
      stdout: "null",
      stderr: "piped",
    })
    : new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--config",
        fileURLToPath(new URL("../deno.json", import.meta.url)),
        fileURLToPath(new URL("server.ts", DIR)),
        name,
        String(port),
        String(maxSize),
      ],
      stdout: "null",
      stderr: "piped",
    });
  const child = command.spawn();
  const stderr = new Response(child.stderr).text();
  const server: Server = { name, port, child, stderr, exited: false };
  child.status.then(() => (server.exited = true));
  const until = performance.now() + 30_000;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return server;
    } catch (error) {
      if (performance.now() > until || server.exited) {
        throw new Error(`${name} did not listen on ${port}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** What is compared between servers: close code, TCP close, what the application received. */
function summary(outcome: Outcome): string {
  if (outcome.refused !== undefined) return `refused ${outcome.refused}`;
  const app = outcome.app === null
    ? "app: none"
    : `app: ${
      outcome.app.m.map(([kind, data]) => `${kind}${data.length}`).join(",") || "-"
    } d=${outcome.app.d}`;
  return `close=${outcome.close} eof=${outcome.eof} ${app}`;
}

const generator = new CaseGenerator(seed, maxSize);
const cases: FuzzCase[] = Array.from({ length: count }, () => generator.next(hostility));
const servers: Server[] = [];
for (const [i, name] of names.entries()) servers.push(await start(name, basePort + 1 + i));
const results = new Map<string, Outcome[]>();
const startedAt = performance.now();
const fdsBefore = new Map(servers.map((server) => [server.name, fds(server.child.pid)]));
try {
  await Promise.all(servers.map(async (server) => {
    const outcomes: Outcome[] = [];
    results.set(server.name, outcomes);
    let next = 0;
    // `parallel` lanes, each taking the next case when it is done with one.
    await Promise.all(Array.from({ length: parallel }, async () => {
      while (next < cases.length && !server.exited) {
        const i = next++;
        try {
          outcomes[i] = await play(server.port, `${seed}-${i}`, cases[i]!);
        } catch (error) {
          outcomes[i] = {
            close: null,
            eof: false,
            echoes: [],
            pongs: [],
            app: null,
            refused: `client error: ${error}`,
          };
        }
      }
    }));
  }));
} finally {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (const server of servers) {
    const after = fds(server.child.pid);
    console.log(
      `${server.name}: ${server.exited ? "EXITED" : "alive"}, fds ${
        fdsBefore.get(server.name)
      } -> ${after}`,
    );
    if (!server.exited) server.child.kill("SIGTERM");
    await server.child.status;
    const stderr = (await server.stderr).trim();
    if (stderr !== "") {
      // Distinct lines with their figures blanked, so a crash or a rejection stands out.
      const counts = new Map<string, number>();
      for (const line of stderr.split("\n")) {
        const key = line.replace(/[0-9]+/g, "N").slice(0, 160);
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      for (const [line, n] of counts) console.log(`  stderr ${n}x: ${line}`);
    }
  }
}
console.log(
  `seed ${seed}: ${count} cases, hostility ${hostility}, maxSize ${maxSize}, ` +
    `${((performance.now() - startedAt) / 1000).toFixed(1)} s`,
);

let disagreements = 0;
let oracleFailures = 0;
const groups = new Map<string, string[]>();
for (const [i, fuzzCase] of cases.entries()) {
  const lines = servers.map((server) => {
    const outcome = results.get(server.name)![i];
    return `${server.name.padEnd(7)} ${outcome === undefined ? "not run" : summary(outcome)}`;
  });
  if (fuzzCase.expected !== null) {
    const want = JSON.stringify(fuzzCase.expected);
    for (const server of servers) {
      const outcome = results.get(server.name)![i];
      if (
        outcome === undefined || JSON.stringify(outcome.app?.m) !== want ||
        outcome.app?.d !== 1000 || outcome.close !== 1000
      ) {
        oracleFailures++;
        console.log(`ORACLE #${i} [${fuzzCase.kinds}] ${server.name}: ${summary(outcome!)}`);
      }
    }
  }
  const distinct = new Set(lines.map((line) => line.slice(8)));
  if (distinct.size > 1) {
    disagreements++;
    const key = lines.map((line) => line.replace(/app: [^ ]*/, "app: …")).join("\n    ");
    const group = groups.get(key) ?? [];
    group.push(`#${i} [${fuzzCase.kinds}]`);
    groups.set(key, group);
  }
}
for (const [key, members] of groups) {
  console.log(`\n${members.length} case(s): ${members.slice(0, 6).join(" ")}\n    ${key}`);
}
console.log(
  `\n${disagreements} of ${count} cases disagree (${groups.size} patterns); ` +
    `${oracleFailures} valid-sequence oracle failures`,
);
if (out !== "") {
  await Deno.writeTextFile(
    out,
    JSON.stringify({
      seed,
      cases: cases.map((c) => c.kinds),
      results: Object.fromEntries(results),
    }),
  );
}
