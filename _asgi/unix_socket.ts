/**
 * The `path` option of `serve()`: its checks, and the socket file a server that died left behind.
 *
 * Neither `Deno.serve` nor `node:http` listens on a path that exists (both fail with "address in
 * use", Deno 2.9.6), and a server killed before its shutdown leaves its socket file there, so a
 * restart after a crash would fail until someone removes it. uvicorn (through asyncio) removes
 * any socket file at the path, a live server's too, which then goes on running unreachable. Here
 * a socket file is removed only when nothing accepts a connection on it; a file that is no socket
 * is never removed.
 *
 * Written with `node:fs` and `node:net`, so that it works under the node transport on Node.js
 * too; loaded only when `path` is given.
 *
 * @module
 */
import { linkSync, lstatSync, unlinkSync } from "node:fs";
import { lstat } from "node:fs/promises";
import { connect } from "node:net";
import { dirname } from "node:path";
import process from "node:process";

/** What was at the path before listening. */
export type SocketFileState =
  /** Nothing: the listener makes the file. */
  | "absent"
  /** A socket file nothing listened on: removed. */
  | "removed"
  /** A socket file a server accepts connections on: left alone. */
  | "live"
  /** A file that is no socket (a regular file, a directory): left alone. */
  | "not-socket"
  /** A socket whose state could not be learned (no permission to connect): left alone. */
  | "unknown";

/**
 * How long a connection to an existing socket file may take to be accepted. A live server
 * accepts at once (the kernel does, into its backlog); a stale file refuses at once.
 */
const PROBE_TIMEOUT_MS = 1_000;

/**
 * Removes the socket file at `path` if no server listens on it, and says what was there.
 *
 * Between the check and the listen another process could take the path: the listen then fails
 * with "address in use", as without the check. A server that bound the path but does not listen
 * yet refuses connections as a dead one does, and loses its file (see docs/asgi.md).
 *
 * @param path The socket's path.
 * @param probeSocket How the socket is probed (a test stands in for a server that takes the path
 *   meanwhile).
 * @returns What was at the path.
 */
export async function clearStaleSocket(
  path: string,
  probeSocket: (path: string) => Promise<"live" | "stale" | "unknown"> = probe,
): Promise<SocketFileState> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (error) {
    return (error as { code?: unknown }).code === "ENOENT" ? "absent" : "unknown";
  }
  if (!isSocket) return "not-socket";
  const probed = fileIdentity(path);
  const state = await probeSocket(path);
  if (state !== "stale") return state;
  // Checked again and removed in one turn, with no await between: a server started on the path
  // at the same time may have removed the stale file and listened since (two servers started at
  // once both listened, one on a removed file, 2 of 60 pairs in one process). Its file is not
  // the one probed: left alone, and the listen fails as for a live server's.
  const now = fileIdentity(path);
  // Removed meanwhile (by a server that stopped, or one starting that found it stale too).
  if (now === null) return "absent";
  if (now !== probed) return "live";
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ENOENT") return "unknown";
  }
  return "removed";
}

/** Whether a server accepts connections on the socket file at `path`. */
function probe(path: string): Promise<"live" | "stale" | "unknown"> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const settle = (state: "live" | "stale" | "unknown") => {
      clearTimeout(timer);
      socket.destroy();
      resolve(state);
    };
    const timer = setTimeout(() => settle("live"), PROBE_TIMEOUT_MS);
    socket.once("connect", () => settle("live"));
    socket.once("error", (error: Error & { code?: string }) => {
      // Refused: no listening socket behind the file. Anything else (EACCES): not known.
      settle(error.code === "ECONNREFUSED" ? "stale" : "unknown");
    });
  });
}

/**
 * What names the file at `path`, or `null` when there is none: its device, inode and birth time
 * (ext4 gave a socket file made right after another's removal the same inode; the birth time
 * tells them apart, and neither `chmod` nor a hard link changes it, as they change `ctime`).
 *
 * @param path The socket's path.
 */
export function fileIdentity(path: string): string | null {
  try {
    const stats = lstatSync(path, { bigint: true });
    return `${stats.dev}:${stats.ino}:${stats.birthtimeNs}`;
  } catch {
    return null;
  }
}

/**
 * Keeps the socket file of another server from the removal that closing ours brings: both
 * runtimes unlink the path as a Unix listener closes (node at once, Deno shortly after its
 * shutdown starts), whatever file is there by then. When the file at `path` is not `ours` (the
 * path was freed and another server listens on it now), a spare hard link beside it holds it;
 * the returned function links it back at `path` if the path is free, and with `last` removes the
 * spare. A file that cannot be linked (another file system's rules) is left to its fate.
 *
 * @param path The socket's path.
 * @param ours What named our socket file once we listened (see {@linkcode fileIdentity}).
 * @returns What to call once the listener may have unlinked the path, and again with `last`
 *   once it has surely done so.
 */
export function shelterForeignSocket(
  path: string,
  ours: string | null,
): (last: boolean) => void {
  const now = fileIdentity(path);
  if (ours === null || now === null || now === ours) return () => {};
  const spare = `${path}.${crypto.randomUUID()}.keep`;
  try {
    linkSync(path, spare);
  } catch {
    return () => {};
  }
  return (last) => {
    try {
      linkSync(spare, path);
    } catch {
      // Still there (not unlinked yet), or a file made since: left alone.
    }
    if (last) {
      try {
        unlinkSync(spare);
      } catch {
        // Gone already.
      }
    }
  };
}

/**
 * What runs a listen so that the socket file it makes has the permission bits `mode` (the `mode`
 * option) from the start: the process umask is set to leave exactly them for the synchronous
 * bind, and put back at once. A socket file is made with `0o777` less the umask.
 *
 * Not a `chmod` of the path after the listen: chmod follows a symbolic link, and a user who may
 * write in the socket's directory could put one at the path in between, so that the server gave
 * the mode to a file of its choosing (a root-owned `0o600` file became `0o666`, review of
 * 2026-11-29); nor is there a moment with the umask's mode. The umask is the whole process's:
 * a file another thread makes during the bind (an asynchronous file call already under way) gets
 * it too, for those few microseconds.
 *
 * @param mode Permission bits, at most 0o777.
 * @returns What runs a listen that binds before it returns.
 */
export function bindWithMode(mode: number): <T>(listen: () => T) => T {
  const mask = 0o777 & ~mode;
  return (listen) => {
    const previous = process.umask(mask);
    try {
      return listen();
    } finally {
      process.umask(previous);
    }
  };
}

/**
 * The fix for a listen error on a Unix socket, from what was at the path, or `""`.
 *
 * @param state What `clearStaleSocket` found.
 * @param path The socket's path.
 * @param error The listen error: a missing directory is named as such.
 */
export function socketHint(state: SocketFileState, path: string, error?: unknown): string {
  const quoted = JSON.stringify(path);
  switch (state) {
    case "live":
      return `: a server listens on ${quoted} already; stop it, or pass another path`;
    case "not-socket":
      return `: ${quoted} exists and is no socket, so it was left alone; remove it, or pass ` +
        "another path";
    case "unknown":
      // A socket file this process may not connect to (another user's, mode 0o755): the
      // listen fails with "address in use", whether a server listens there or not.
      if (addrInUse(error)) {
        return `: a socket file is at ${quoted}, and whether a server listens on it could not ` +
          "be learned (this process may not connect to it); remove it if no server uses it, " +
          "or pass another path";
      }
      return "";
    default:
      // The runtimes say "No such file or directory" (`ENOENT`), as if the socket were missing.
      return notFound(error)
        ? `: the directory ${JSON.stringify(dirname(path))} does not exist; create it first ` +
          "(mkdir -p), or pass another path"
        : "";
  }
}

/** Whether `error` is the runtime's "address in use". */
function addrInUse(error: unknown): boolean {
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  return (deno !== undefined && error instanceof deno.errors.AddrInUse) ||
    (error as { code?: unknown } | null)?.code === "EADDRINUSE";
}

/** Whether `error` is the runtime's "no such file or directory". */
function notFound(error: unknown): boolean {
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  return (deno !== undefined && error instanceof deno.errors.NotFound) ||
    (error as { code?: unknown } | null)?.code === "ENOENT";
}
