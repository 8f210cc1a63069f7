/**
 * Runs a command with `@std/*` resolvable even where jsr.io is out of reach.
 *
 * ```sh
 * deno run -A tools/with_jsr_mirror.ts deno test -A
 * ```
 *
 * The tool first probes jsr.io. If it answers, the command runs untouched, so a
 * user with internet resolves the canonical `jsr:@std/...` specifiers of
 * `deno.json` from jsr.io itself. Otherwise it builds a small JSR registry from
 * the npm package `deno-std` (the Deno standard library compiled to JavaScript,
 * one folder per package), serves it on 127.0.0.1 on a free port and runs the
 * command with `JSR_URL` pointing there. Deno honours `JSR_URL`, so nothing in
 * `deno.json` changes and nothing mirror-specific can leak into a publish.
 *
 * A leading `deno` in the command is replaced by the running Deno executable,
 * so the pinned Deno that started the tool is the one that runs the command.
 * SIGTERM is passed on to the command, and so is a SIGINT that the command did
 * not receive itself (see {@link forwardsSignal}); the tool exits with the
 * command's status. So `kill -TERM` of `deno task example` stops the server
 * too, and Ctrl-C in a terminal reaches the command once, not twice.
 *
 * @module
 */

import { dirname, join, relative } from "node:path";

/** Version of the npm package `deno-std` the mirror is built from. */
export const DENO_STD_VERSION = "1.4.0";

/**
 * Version every mirrored package is served as. It satisfies the `^1` ranges of
 * `deno.json`; the real package versions inside `deno-std` are not published.
 */
export const SERVED_VERSION = "1.0.0";

/** Where the tool looks for jsr.io. */
export const PROBE_URL = "https://jsr.io/@std/async/meta.json";

/** How long the probe waits for jsr.io before going offline. */
export const PROBE_TIMEOUT_MS = 3000;

/** Bumped whenever the layout of a built mirror changes, to invalidate caches. */
const MIRROR_FORMAT = 2;

/** A problem the user can fix; printed without a stack trace. */
export class MirrorError extends Error {
  override name = "MirrorError";
}

/** One file of a mirrored package. */
interface MirrorFile {
  /** Path inside the package, starting with `/`, e.g. `/deadline.js`. */
  path: string;
  /** Bytes as served; checksums are computed from these. */
  bytes: Uint8Array;
}

/**
 * Answers whether jsr.io is reachable: true when {@link PROBE_URL} answers with
 * a 2xx status within `timeoutMs`. Any other answer (a proxy's 403 or 502, a
 * captive portal's page) counts as unreachable, as does an error or a timeout.
 */
export async function probeJsr(
  url: string = PROBE_URL,
  timeoutMs: number = PROBE_TIMEOUT_MS,
): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/** Turns a `deno-std` folder name into its JSR package name (`data_structures` → `data-structures`). */
export function jsrPackageName(folder: string): string {
  return folder.replaceAll("_", "-");
}

/**
 * Rewrites the relative imports of one file that leave its own package into
 * `jsr:@std/<name>@^1/<path>` specifiers, so each package stands alone as JSR
 * requires. Imports inside the package stay relative.
 *
 * @param code The file's source.
 * @param fileInPackage The file's path inside its package, e.g. `async/channel.js` is `channel.js`.
 * @param packageFolder The package's folder in `deno-std`, e.g. `async`.
 */
export function rewriteCrossPackageImports(
  code: string,
  fileInPackage: string,
  packageFolder: string,
): string {
  // Static `from "..."`, side-effect `import "..."` and dynamic `import("...")`.
  const specifier = /(\bfrom\s*|\bimport\s*\(?\s*)(["'])(\.{1,2}\/[^"']+)\2/g;
  return code.replace(specifier, (whole, lead: string, quote: string, spec: string) => {
    const fromDir = dirname(join(packageFolder, fileInPackage));
    const target = join(fromDir, spec).replaceAll("\\", "/");
    const [targetFolder, ...rest] = target.split("/");
    if (targetFolder === packageFolder || targetFolder === undefined || rest.length === 0) {
      return whole;
    }
    // deno-std already spells some sibling folders the JSR way (`../data-structures/`).
    const name = jsrPackageName(targetFolder);
    const subpath = rest.join("/").replace(/\.js$/, "");
    const path = subpath === "mod" ? "" : `/${subpath}`;
    return `${lead}${quote}jsr:@std/${name}@^1${path}${quote}`;
  });
}

/**
 * Removes `@param`, `@typeParam`, `@template` and `@returns` lines from JSDoc
 * comments.
 *
 * `deno-std` ships JavaScript whose JSDoc still describes every parameter.
 * TypeScript reads a JSDoc `@param` of a JavaScript file as a declaration and
 * makes the parameter required, so `assertEquals(a, b)` fails to type-check
 * ("Expected at least 3 arguments") although `msg` is optional in the real
 * TypeScript source. Without those tags Deno infers loose types from the code
 * and type-checking of our tests passes.
 */
export function stripJsdocTypeTags(code: string): string {
  return code.replace(/\/\*\*[\s\S]*?\*\//g, (comment) =>
    comment
      .split("\n")
      .filter((line) => !/^\s*\*\s*@(param|typeParam|template|returns?)\b/.test(line))
      .join("\n"));
}

/** Hex SHA-256 of `bytes`, as JSR manifests carry it. */
async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function* walkFiles(dir: string, base = dir): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const full = join(dir, entry.name);
    if (entry.isDirectory) yield* walkFiles(full, base);
    else if (entry.isFile) yield relative(base, full).replaceAll("\\", "/");
  }
}

/**
 * Builds a JSR registry tree from an unpacked `deno-std` package folder.
 *
 * For each package folder `<f>` it writes `@std/<name>/meta.json`,
 * `@std/<name>/<V>_meta.json` (manifest with sizes and sha256 checksums of the
 * bytes written, and an export for every file under its extension-less path)
 * and the files under `@std/<name>/<V>/`.
 *
 * @param sourceDir The unpacked npm package (the folder holding `async/`, `assert/`, …).
 * @param outDir An empty folder to write the registry into.
 * @returns The JSR names of the packages written.
 */
export async function buildRegistry(sourceDir: string, outDir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(sourceDir)) {
    if (!entry.isDirectory) continue;
    const folder = entry.name;
    const files: MirrorFile[] = [];
    for await (const file of walkFiles(join(sourceDir, folder))) {
      if (!file.endsWith(".js")) continue;
      const code = await Deno.readTextFile(join(sourceDir, folder, file));
      const served = stripJsdocTypeTags(rewriteCrossPackageImports(code, file, folder));
      files.push({ path: `/${file}`, bytes: new TextEncoder().encode(served) });
    }
    if (files.length === 0) continue;
    const name = jsrPackageName(folder);
    await writePackage(join(outDir, "@std", name), name, files);
    names.push(name);
  }
  if (names.length === 0) {
    throw new MirrorError(`No packages found in "${sourceDir}": is it an unpacked deno-std?`);
  }
  return names.sort();
}

async function writePackage(dir: string, name: string, files: MirrorFile[]): Promise<void> {
  const manifest: Record<string, { size: number; checksum: string }> = {};
  const exports: Record<string, string> = {};
  for (const { path, bytes } of files) {
    manifest[path] = { size: bytes.byteLength, checksum: `sha256-${await sha256Hex(bytes)}` };
    const key = path === "/mod.js" ? "." : `.${path.replace(/\.js$/, "")}`;
    exports[key] = `.${path}`;
    const target = join(dir, SERVED_VERSION, path);
    await Deno.mkdir(dirname(target), { recursive: true });
    await Deno.writeFile(target, bytes);
  }
  const meta = { scope: "std", name, latest: SERVED_VERSION, versions: { [SERVED_VERSION]: {} } };
  await Deno.writeTextFile(join(dir, "meta.json"), JSON.stringify(meta));
  await Deno.writeTextFile(
    join(dir, `${SERVED_VERSION}_meta.json`),
    JSON.stringify({ manifest, exports }),
  );
}

/** Runs a command to completion and returns its stdout, or throws with its stderr. */
async function run(cmd: string, args: string[], cwd?: string): Promise<string> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(cmd, { args, cwd, stdin: "null" }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new MirrorError(
        `"${cmd}" is not installed: install Node.js and npm, or run where jsr.io is reachable`,
      );
    }
    throw error;
  }
  const decoder = new TextDecoder();
  if (!output.success) {
    // The first lines of npm's error say what went wrong; its stack trace does not.
    const stderr = decoder.decode(output.stderr).split("\n")
      .filter((line) => line.trim() !== "" && !/^\S*\s*(warn|error)?\s+at /.test(line))
      .filter((line) => !line.includes("npm warn"))
      .slice(0, 5).join("\n");
    throw new MirrorError(`"${cmd} ${args.join(" ")}" failed (exit ${output.code}):\n${stderr}`);
  }
  return decoder.decode(output.stdout);
}

/**
 * Returns a folder holding a built registry, building it on first use.
 *
 * The `deno-std` tarball comes from the npm registry through the ordinary npm
 * client (`npm pack`), so whatever registry and proxy npm is configured for is
 * used. The result is cached in the system's temporary folder; a build goes to
 * a scratch folder first and is renamed into place, so concurrent runs never
 * see half a mirror.
 */
export async function ensureRegistry(
  cacheRoot: string = join(Deno.env.get("TMPDIR") ?? "/tmp", "stellarator-jsr-mirror"),
  log: (message: string) => void = (message) => console.error(message),
): Promise<string> {
  const dir = join(cacheRoot, `deno-std-${DENO_STD_VERSION}-f${MIRROR_FORMAT}`);
  try {
    await Deno.stat(join(dir, "@std", "async", "meta.json"));
    return dir;
  } catch {
    // Not built yet.
  }
  await Deno.mkdir(cacheRoot, { recursive: true });
  const scratch = await Deno.makeTempDir({ dir: cacheRoot, prefix: "build-" });
  try {
    try {
      log(
        `jsr.io is unreachable: building an offline JSR mirror from deno-std@${DENO_STD_VERSION}`,
      );
      await run("npm", ["pack", `deno-std@${DENO_STD_VERSION}`], scratch);
    } catch (error) {
      if (!(error instanceof MirrorError)) throw error;
      throw new MirrorError(
        `jsr.io is unreachable and the offline mirror could not fetch deno-std@${DENO_STD_VERSION} ` +
          `from the npm registry.\n${error.message}\n` +
          "Fix: make the npm registry reachable (check `npm config get registry` and proxy " +
          "settings), or run where jsr.io is reachable",
      );
    }
    await run("tar", ["xzf", `deno-std-${DENO_STD_VERSION}.tgz`], scratch);
    const out = join(scratch, "registry");
    await buildRegistry(join(scratch, "package"), out);
    try {
      await Deno.rename(out, dir);
    } catch (error) {
      // Another run finished the same build first; its copy is as good as ours.
      if (!(error instanceof Deno.errors.AlreadyExists) && !(await exists(dir))) throw error;
    }
    return dir;
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** A running mirror server. */
export interface MirrorServer {
  /** Base URL to put in `JSR_URL`, ending in `/`. */
  url: string;
  /** Stops the server. */
  close(): Promise<void>;
}

/**
 * The port the mirror tries first. Deno caches downloads by URL, so a stable
 * address lets later runs reuse them; when it is taken (another run is
 * serving), the operating system picks a free one.
 */
export const PREFERRED_PORT = 47873;

/** Serves a registry folder on 127.0.0.1, on {@link PREFERRED_PORT} or else a free port. */
export function serveRegistry(dir: string, port: number = PREFERRED_PORT): MirrorServer {
  try {
    return listenRegistry(dir, port);
  } catch (error) {
    if (port === 0 || !(error instanceof Deno.errors.AddrInUse)) throw asMirrorError(error);
    try {
      return listenRegistry(dir, 0);
    } catch (error) {
      throw asMirrorError(error);
    }
  }
}

function asMirrorError(error: unknown): MirrorError {
  return new MirrorError(
    `Could not listen on 127.0.0.1 for the offline JSR mirror: ${(error as Error).message}\n` +
      "Fix: free a local port or allow local listening (--allow-net)",
  );
}

function listenRegistry(dir: string, port: number): MirrorServer {
  const root = dir.endsWith("/") ? dir : `${dir}/`;
  const server = Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, async (request) => {
    const path = decodeURIComponent(new URL(request.url).pathname);
    if (path.includes("..")) return new Response("Bad path", { status: 400 });
    try {
      const bytes = await Deno.readFile(root + path.slice(1));
      const type = path.endsWith(".json") ? "application/json" : "text/javascript";
      return new Response(bytes, { headers: { "content-type": type } });
    } catch {
      return new Response("Not found", { status: 404 });
    }
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/`,
    close: () => server.shutdown(),
  };
}

/** What {@link main} needs from the outside world; tests replace parts of it. */
export interface MainOptions {
  /** Answers whether jsr.io is reachable. */
  probe?: () => Promise<boolean>;
  /** Returns a folder holding a built registry. */
  ensure?: () => Promise<string>;
  /** Runs the command with extra environment and returns its exit code. */
  spawn?: (command: string[], env: Record<string, string>) => Promise<number>;
  /** Where messages for the user go. */
  log?: (message: string) => void;
}

/**
 * The signals passed on to the command. `deno task` hands a SIGTERM to this tool only, so a
 * command that never hears of it is left running without a parent, still holding its port. SIGINT
 * is passed on only when the command did not get it too; see {@link forwardsSignal}. Windows
 * delivers Ctrl-C to every process of the console and cannot send a signal to a child, so nothing
 * is passed on there.
 */
const FORWARDED_SIGNALS: readonly Deno.Signal[] = Deno.build.os === "windows"
  ? []
  : ["SIGINT", "SIGTERM"];

/**
 * Answers whether a signal this tool received should be passed on to the command.
 *
 * Ctrl-C in a terminal sends SIGINT to every process of the terminal's foreground process group,
 * and the command, which this tool started without a group of its own, is in that group too.
 * Passing the SIGINT on would deliver it twice, and a server that takes a second signal as "exit
 * now" (the web layer's `App` does) would drop its in-flight requests. So a SIGINT is passed on
 * only when this tool is not in the foreground group of a terminal: then it was sent to the tool
 * alone, e.g. `kill -INT <pid>` from a script. What remains ambiguous is a `kill -INT` of this
 * tool alone while it runs in a terminal's foreground: that one is not passed on.
 *
 * SIGTERM is always passed on: no terminal key sends it, and `deno task` hands it to this tool
 * only.
 *
 * @param signal The signal received.
 * @param stat The text of `/proc/self/stat` when the signal came (Linux), or `undefined` where
 *   it cannot be read. Without it a SIGINT is passed on, as before: a Ctrl-C then reaches the
 *   command twice, but a `kill -INT` of this tool alone is never lost, which would leave the
 *   command and the tool running.
 * @returns Whether to send `signal` to the command.
 */
export function forwardsSignal(signal: Deno.Signal, stat: string | undefined): boolean {
  if (signal !== "SIGINT" || stat === undefined) return true;
  // Fields after the command name, which sits in parentheses and may hold spaces and ")":
  // state (3), ppid (4), pgrp (5), session (6), tty_nr (7), tpgid (8); see proc(5).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const pgrp = Number(fields[2]);
  const tpgid = Number(fields[5]);
  // Without a controlling terminal tpgid is -1, never a process group.
  if (!Number.isInteger(pgrp) || !Number.isInteger(tpgid) || pgrp <= 0) return true;
  return tpgid !== pgrp;
}

/** `/proc/self/stat`, or `undefined` where there is no such file or no right to read it. */
function readOwnStat(): string | undefined {
  const path = "/proc/self/stat";
  // Deno asks for --allow-all to read it; asking the user in the middle of a Ctrl-C would be worse
  // than passing the SIGINT on.
  if (
    Deno.build.os !== "linux" ||
    Deno.permissions.querySync({ name: "read", path }).state !== "granted"
  ) {
    return undefined;
  }
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Runs `command` (a leading `deno` is the running Deno) with `env` added to the environment and
 * waits for it. SIGTERM received meanwhile is passed on to it, and so is SIGINT unless the
 * command got it too from the terminal ({@link forwardsSignal}). `tools/fuzz.ts` runs its rounds
 * with it too.
 *
 * @param command The command and its arguments.
 * @param env Variables added to the environment.
 * @param cwd The command's working directory; this tool's when left out.
 * @returns The command's exit code: 128 + N when a signal N ended it.
 */
export async function spawnCommand(
  command: string[],
  env: Record<string, string>,
  cwd?: string | URL,
): Promise<number> {
  const [first, ...args] = command;
  const cmd = first === "deno" ? Deno.execPath() : first!;
  const child = new Deno.Command(cmd, { args, env, cwd, stdin: "inherit" }).spawn();
  const listeners: [Deno.Signal, () => void][] = FORWARDED_SIGNALS.map((signal) => [
    signal,
    () => {
      // Read when the signal comes: a shell's job control may have moved the job since.
      if (!forwardsSignal(signal, readOwnStat())) return;
      try {
        child.kill(signal);
      } catch {
        // It exited between the signal and now; its status is on the way.
      }
    },
  ]);
  // On Windows a listener still keeps Ctrl-C from ending this tool before the command it waits for.
  if (Deno.build.os === "windows") listeners.push(["SIGINT", () => {}]);
  for (const [signal, listener] of listeners) Deno.addSignalListener(signal, listener);
  try {
    // Deno reports a command killed by signal N with code 128 + N, as shells do.
    return (await child.status).code;
  } finally {
    for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
  }
}

/**
 * Runs `command`, through the offline mirror when jsr.io is unreachable.
 *
 * SIGTERM received while the command runs is passed on to it, and so is SIGINT unless the
 * command got it too from the terminal ({@link forwardsSignal}); the tool waits for it to exit.
 *
 * @returns The command's exit code: 128 + N when a signal N ended it (143 for SIGTERM), 1 with a
 *   message on a mirror failure, 2 on bad usage.
 */
export async function main(command: string[], options: MainOptions = {}): Promise<number> {
  const {
    probe = probeJsr,
    ensure = ensureRegistry,
    spawn = spawnCommand,
    log = (message: string) => console.error(message),
  } = options;
  if (command.length === 0) {
    log("Usage: deno run -A tools/with_jsr_mirror.ts <command> [args...]");
    return 2;
  }
  if (Deno.env.get("JSR_URL") || await probe()) {
    return await spawn(command, {});
  }
  let server: MirrorServer;
  try {
    server = serveRegistry(await ensure());
  } catch (error) {
    if (!(error instanceof MirrorError)) throw error;
    log(`with_jsr_mirror: ${error.message}`);
    return 1;
  }
  try {
    return await spawn(command, { JSR_URL: server.url });
  } finally {
    await server.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
