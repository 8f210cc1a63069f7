/**
 * What Linux tells about CPU use, for the HTTP benchmark: a process's CPU time, each core's busy
 * time, and whether a server and its load generator can be pinned to cores of their own.
 * Everything returns `undefined` (or says why not) where `/proc` or `taskset` is missing.
 *
 * @module
 */

/** Linux's USER_HZ, the unit of the times in /proc/<pid>/stat and /proc/stat (100 on mainstream kernels). */
const CLOCK_TICKS = 100;

/** CPU time of a process, in seconds, split as Linux accounts it. */
export interface CpuTimes {
  /** Time running its own code (JavaScript, V8, Deno's Rust) in user space. */
  readonly user: number;
  /** Time the kernel spent on its behalf: system calls, the TCP stack of loopback traffic. */
  readonly system: number;
}

/**
 * CPU time a process has used so far, user and system apart, in seconds (all its threads, from
 * `/proc/<pid>/stat`), or undefined where /proc is not available.
 *
 * @param pid The process id.
 * @returns Seconds of CPU time.
 */
export function cpuTimes(pid: number): CpuTimes | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // Fields after the command name (which may hold spaces) start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { user: Number(fields[11]) / CLOCK_TICKS, system: Number(fields[12]) / CLOCK_TICKS };
  } catch {
    return undefined;
  }
}

/**
 * Busy time of each core so far, in seconds (every state but idle and iowait, from `/proc/stat`),
 * indexed by core number; undefined where /proc is not available.
 *
 * @returns Seconds per core.
 */
export function coreBusySeconds(): number[] | undefined {
  try {
    const busy: number[] = [];
    for (const line of Deno.readTextFileSync("/proc/stat").split("\n")) {
      const m = /^cpu(\d+) (.*)$/.exec(line);
      if (m === null) continue;
      const t = m[2]!.trim().split(/\s+/).map(Number);
      // user nice system idle iowait irq softirq steal (guest time is already in user).
      const total = t.slice(0, 8).reduce((a, b) => a + b, 0);
      busy[Number(m[1])] = (total - t[3]! - t[4]!) / CLOCK_TICKS;
    }
    return busy.length === 0 ? undefined : busy;
  } catch {
    return undefined;
  }
}

/** Where the server and the load generator run. */
export type Pinning =
  | { readonly pinned: true; readonly serverCore: number; readonly loadCore: number }
  | { readonly pinned: false; readonly reason: string };

/**
 * Parses a CPU list such as `0-3,6` (the format of `Cpus_allowed_list`).
 *
 * @param list The list.
 * @returns The core numbers, ascending.
 */
export function parseCpuList(list: string): number[] {
  const cores = new Set<number>();
  for (const part of list.trim().split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (m === null) continue;
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    for (let c = from; c <= to; c++) cores.add(c);
  }
  return [...cores].sort((a, b) => a - b);
}

/**
 * Decides whether the server can run on one core and the load generator on another: needs Linux,
 * two cores this process may use, and a `taskset` that works. The server gets the first allowed
 * core, the load generator the second.
 *
 * @param wanted False when the caller asked not to pin (`--no-pin`).
 * @returns The cores, or why not.
 */
export async function choosePinning(wanted = true): Promise<Pinning> {
  if (!wanted) return { pinned: false, reason: "--no-pin was given" };
  if (Deno.build.os !== "linux") {
    return { pinned: false, reason: `taskset is Linux-only (this is ${Deno.build.os})` };
  }
  let cores: number[];
  try {
    const status = Deno.readTextFileSync("/proc/self/status");
    cores = parseCpuList(/^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1] ?? "");
  } catch (error) {
    return { pinned: false, reason: `cannot read /proc/self/status: ${error}` };
  }
  if (cores.length < 2) {
    return {
      pinned: false,
      reason: `this process may use ${cores.length} core(s) (${
        cores.join(",")
      }); pinning needs two`,
    };
  }
  const [serverCore, loadCore] = cores as [number, number];
  try {
    const { success, stderr } = await new Deno.Command("taskset", {
      args: ["-c", String(serverCore), "true"],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (!success) {
      return {
        pinned: false,
        reason: `taskset failed: ${new TextDecoder().decode(stderr).trim()}`,
      };
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      return {
        pinned: false,
        reason: "taskset is not installed (Debian/Ubuntu: apt-get install -y util-linux)",
      };
    }
    throw error;
  }
  return { pinned: true, serverCore, loadCore };
}

/**
 * The command line that runs `command` on `core` when pinned, or as is.
 *
 * @param command The program and its arguments.
 * @param core The core, or undefined to leave the scheduler free.
 * @returns The program and its arguments, through taskset when pinned.
 */
export function onCore(command: readonly string[], core: number | undefined): string[] {
  // taskset execs the program, so the process id seen by the caller is the program's own.
  return core === undefined ? [...command] : ["taskset", "-c", String(core), ...command];
}
