/**
 * The default `maxConnections` of the node transport, from the process's limit on open files.
 *
 * Deno's `node:http` stops accepting for good once `accept()` fails with "Too many open files"
 * (measured on Deno 2.9.6), so a node server without a connection cap can be silenced by idle
 * clients. Capping connections below the fd limit keeps `accept()` from failing on a quiet
 * machine; on a busy one it can still fail (over-cap sockets hold an fd until their close has
 * run), so the node transport also checks its listener under fd pressure and binds it again.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";

/** Where Linux states a process's resource limits. */
const LIMITS_FILE = "/proc/self/limits";

/**
 * File descriptors left to everything but accepted connections: Deno itself holds some 25, and
 * the application has files, outgoing connections and the listening socket; Node also needs one
 * free to accept a connection it then closes for being over the cap.
 */
export const FD_MARGIN = 200;

/**
 * Whether this Deno process runs with every permission: Deno (2.9) reads `/proc/self/*` only
 * then ("Requires all access"), even with `--allow-read`, and asking otherwise could prompt.
 */
function allGranted(deno: typeof Deno): boolean {
  const names = ["read", "write", "net", "env", "sys", "run", "ffi"] as const;
  return names.every((name) => deno.permissions.querySync({ name }).state === "granted");
}

/**
 * The soft limit on open files (RLIMIT_NOFILE) of this process, read from `/proc/self/limits`.
 *
 * @param text The file's text; read from the system when left out.
 * @returns The limit, or `undefined` off Linux, when unlimited, or when the file cannot be
 *   read. Under Deno it is read only with every permission granted (`-A`): see `allGranted`.
 */
export function softFdLimit(text?: string): number | undefined {
  if (text === undefined) {
    if (process.platform !== "linux") return undefined;
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno !== undefined && !allGranted(deno)) return undefined;
    try {
      text = readFileSync(LIMITS_FILE, "utf8");
    } catch {
      return undefined;
    }
  }
  // "Max open files            1024                 524288               files"
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  if (soft === undefined || !/^\d+$/.test(soft)) return undefined;
  return Number(soft);
}

/**
 * The most connections a node server takes by default: the soft fd limit minus
 * {@linkcode FD_MARGIN}, and at least half the limit (a low limit is mostly connections too).
 *
 * @param limit The soft limit on open files, `undefined` when unknown.
 * @returns The cap, or `Infinity` when the limit is unknown.
 */
export function defaultMaxConnections(limit: number | undefined): number {
  if (limit === undefined) return Infinity;
  return Math.max(1, limit - FD_MARGIN, Math.floor(limit / 2));
}
