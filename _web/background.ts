/**
 * The background task runner of the web layer. Private: not exported from `deno.json`.
 *
 * A task holds a *reservation* from the moment it is registered until it ends. Reservations are
 * what `backgroundTaskLimit` counts for back-pressure: a registration waits while the limit is
 * reached. Tasks themselves only start once their request's response is sent, and at most `limit`
 * run at once; the rest wait in a FIFO queue.
 *
 * One exception keeps the runner free of deadlocks: a request that already holds a reservation
 * for a task it registered before responding never waits for another one. Its tasks cannot start
 * before it responds, so making it wait for room that only its own tasks could free would hang
 * it; and a request that holds nothing while it waits cannot be part of a cycle of waiters. So
 * that this exception cannot grow memory without bound, one request may hold at most `limit`
 * such reservations (the exchange refuses more with a `RangeError`); everything else waits.
 *
 * A registration waits only while someone can still use its task. The wait ends, the task logged
 * as not run and the registration resolving `false`, when the holder is cancelled (its request's
 * signal aborts: time limit, client gone before the response; a handshake's time limit, or its
 * client gone before the answer), when the signal given with the task aborts, and at shutdown. A
 * cancelled holder does not start waiting either, though it still takes room that is free at once
 * (its handler may still respond).
 *
 * Shutdown (`close`) ends every task at once except the running ones: waiting registrations are
 * released (the task is logged as not run), queued tasks and tasks held by requests that have not
 * responded are cancelled; running tasks get their signal aborted and the whole grace period.
 *
 * Every task ends exactly once, in one of: completed, failed, cut off at its time limit,
 * cancelled at shutdown, or not run (its request never responded, its wait for room ended, or the
 * app was shutting down).
 * Each ending is logged.
 *
 * @module
 */
import { describe } from "../_common/describe.ts";
import { rejectUnknownKeys } from "../_common/keys.ts";
import { logQuoted } from "../_common/log_text.ts";
import { clearableDeadline, DeadlineQueue } from "./deadline.ts";
import { seconds } from "./options.ts";

/**
 * Options of {@linkcode Request.registerBackground}.
 *
 * @example A task named in the log
 * ```ts
 * import { assert, assertEquals } from "@std/assert";
 * import {
 *   App,
 *   AsgiRouter,
 *   type RegisterBackgroundOptions,
 *   type Request,
 *   Response,
 *   Route,
 *   type WebLogger,
 * } from "@stellarator/stellarator/web";
 *
 * const logged = Promise.withResolvers<string>();
 * const logger: WebLogger = {
 *   debug() {},
 *   info: (...data) => logged.resolve(data.join(" ")),
 *   warn() {},
 *   error() {},
 * };
 * const receipts: string[] = [];
 *
 * async function pay(request: Request): Promise<void> {
 *   // Wait at most 2 s for room: past that, answer 503 rather than hold the client.
 *   const options: RegisterBackgroundOptions = {
 *     name: "send-receipt",
 *     signal: AbortSignal.timeout(2000),
 *   };
 *   if (!await request.registerBackground(() => receipts.push(request.path), options)) {
 *     return await request.respondWith(new Response({ status: 503, body: "busy" }));
 *   }
 *   await request.respondWith(new Response({ body: "paid" }));
 * }
 *
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/pay", { handler: pay })] }),
 *   logger,
 * });
 * const response = await app.fetch(new globalThis.Request("http://localhost/pay"));
 * assertEquals(await response.text(), "paid");
 * assert((await logged.promise).includes("send-receipt"));
 * assertEquals(receipts, ["/pay"]);
 * await app.shutdown();
 * ```
 */
export interface RegisterBackgroundOptions {
  /**
   * The task's name in log lines.
   *
   * @default {the function's name, or "anonymous"}
   */
  name?: string;
  /**
   * Ends the wait for room when it aborts: the task is then not run (logged) and the
   * registration resolves `false`. A signal already aborted registers nothing, even with room
   * free, as `addEventListener` adds no listener for one. It bounds the wait only: once the task
   * is registered, aborting it changes nothing (the task's own signal is what stops it).
   *
   * @default {none: wait until there is room, the request is cancelled, or shutdown}
   */
  signal?: AbortSignal;
}

/** A background task: called with a signal that aborts at its time limit and at shutdown. */
export type Task = (signal: AbortSignal) => unknown;

/** Where the runner writes its log lines; `console` fits. */
export interface TaskLogger {
  /** Tasks that completed, and late results of abandoned tasks. */
  debug(...data: unknown[]): void;
  /** Tasks that completed. */
  info(...data: unknown[]): void;
  /** Tasks cut off, cancelled or never run. */
  warn(...data: unknown[]): void;
  /** Tasks that failed. */
  error(...data: unknown[]): void;
}

/**
 * How a promise turned out, as a value: promises of outcomes never reject, so a race between one
 * and a time limit needs no error handling.
 */
export type Outcome = { ok: true } | { ok: false; error: unknown };

/** The outcome of every success (shared: nothing to allocate). */
export const SUCCESS: Outcome = { ok: true };

/**
 * Wraps an error as an outcome.
 *
 * @param error The error.
 * @returns The outcome.
 */
export function failure(error: unknown): Outcome {
  return { ok: false, error };
}

const OPTION_NAMES: readonly string[] = ["name", "signal"];

/**
 * Checks the arguments of `registerBackground()`, for requests and WebSockets alike.
 *
 * @param task What was passed as the task.
 * @param options What was passed as the options.
 * @returns The options, checked.
 * @throws {TypeError} When `task` is not a function, or `options` is not `{ name, signal }` with
 *   a string name and an `AbortSignal`.
 */
export function checkedTaskOptions(
  task: unknown,
  options: unknown,
): RegisterBackgroundOptions | undefined {
  if (typeof task !== "function") {
    throw new TypeError(
      `Invalid background task ${describe(task)}: pass a function, e.g. ` +
        `() => work("argument")`,
    );
  }
  if (options === undefined) return undefined;
  // A bare string (`registerBackground(task, "mail")`), a misspelt key or a name of another
  // type was taken and ignored: the task ran under the function's name.
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `Invalid options ${describe(options)}: pass { name, signal }, e.g. { name: "send-mail" }`,
    );
  }
  // The signal itself, or its controller, has no keys of its own to refuse: it passed, and was
  // ignored, and the wait for room it was meant to bound was not.
  if (options instanceof AbortSignal) {
    throw new TypeError(
      "Invalid options an AbortSignal: pass it as { signal }, e.g. " +
        "{ signal: AbortSignal.timeout(2000) }",
    );
  }
  if (options instanceof AbortController) {
    throw new TypeError(
      "Invalid options an AbortController: pass its signal as { signal }, e.g. " +
        "{ signal: controller.signal }",
    );
  }
  rejectUnknownKeys(options, OPTION_NAMES, "registerBackground()");
  const { name, signal } = options as { name?: unknown; signal?: unknown };
  if (name !== undefined && typeof name !== "string") {
    throw new TypeError(`Invalid name ${describe(name)}: use a string`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    // The controller for its signal is the likeliest slip.
    throw new TypeError(
      signal instanceof AbortController
        ? "Invalid signal an AbortController for registerBackground(): pass its signal, e.g. " +
          "{ signal: controller.signal }"
        : `Invalid signal ${describe(signal)} for registerBackground(): pass an AbortSignal, ` +
          "e.g. { signal: AbortSignal.timeout(2000) }",
    );
  }
  return options as RegisterBackgroundOptions;
}

/** One registered task and its bookkeeping. */
export class TaskEntry {
  /** Sequence number within the runner, for log lines. */
  readonly id: number;
  /** The task's name, for log lines. */
  readonly name: string;
  /** The task. */
  readonly task: Task;
  /** Aborts at the time limit and at shutdown; its signal is the task's argument. */
  readonly controller: AbortController = new AbortController();
  /** Set once the ending is logged; nothing is logged twice. */
  ended = false;
  /** Set once the reservation is given back; nothing is given back twice. */
  released = false;
  /** Set when shutdown aborted the signal, so the ending reads "cancelled at shutdown". */
  cancelled = false;
  /** Settles when the task settles or is cut off; awaited (within the grace period) at shutdown. */
  done: Promise<void> = Promise.resolve();

  constructor(id: number, name: string, task: Task) {
    this.id = id;
    this.name = name;
    this.task = task;
  }

  /**
   * How log lines name the task. The name is the application's, often built from a client's
   * data (`mail to ${address}`): quoted by `logQuoted`, so that it cannot forge a line.
   */
  get label(): string {
    return `Background task ${logQuoted(this.name)} (#${this.id})`;
  }
}

/**
 * A request, or a WebSocket handshake, as the tasks it registers see it: until it answers, it
 * holds them (they start once it answers), it may refuse new ones (its time limit passed), and
 * once cancelled it no longer waits for room.
 */
export interface TaskHolder {
  /** Tasks it holds: reserved, waiting for its answer to start. */
  heldTasks(): number;
  /** Why a task registered now would never run (its time limit passed), else `undefined`. */
  refusal(): string | undefined;
  /**
   * Why a registration should not wait for room now (everything `refusal()` gives, and a
   * request whose client left before its response), else `undefined`.
   */
  cancellation(): string | undefined;
  /**
   * Aborts once `cancellation()` gives a reason, so that a registration waiting for room stops
   * waiting. Asked for only by such a registration: it may cost the holder a signal of its own.
   */
  waitSignal(): AbortSignal;
  /**
   * Takes a task that holds a reservation: starts it (answered), holds it (not yet), or
   * discards it (the holder failed or timed out meanwhile); says whether it took it.
   */
  place(entry: TaskEntry): boolean;
  /** The error for a registration beyond `backgroundTaskLimit`, naming the holder. */
  tooManyTasks(held: number): RangeError;
}

/** Why a registration that waited for room got none: the runner closed. */
const SHUTTING_DOWN = "the app is shutting down";

/** Runs background tasks under a time limit, a concurrency limit and the app's lifespan. */
export class BackgroundRunner {
  /** At most this many tasks run at once, and registrations wait beyond it. */
  readonly limit: number;
  /** Each task's time limit in milliseconds, or `undefined` for none. */
  readonly timeLimitMs: number | undefined;
  #log: TaskLogger;
  /** The deadlines of the task time limit, when there is one. */
  #deadlines: DeadlineQueue | undefined;
  #nextId = 1;
  /** Reservations held: by requests that have not responded yet, queued tasks, running tasks. */
  #reserved = 0;
  /** Tasks whose request has responded, waiting for a running slot, oldest first. */
  #queue: TaskEntry[] = [];
  #running = new Set<TaskEntry>();
  /** Tasks held by requests that have not responded yet; cancelled at shutdown. */
  #held = new Set<TaskEntry>();
  /**
   * Registrations waiting for a reservation, oldest first (a Set keeps insertion order); each
   * resolves with `undefined` once reserved, or with why it gave up (see `#wait`).
   */
  #waiters = new Set<PromiseWithResolvers<string | undefined>>();
  #closed = false;

  constructor(limit: number, timeLimitMs: number | undefined, log: TaskLogger) {
    this.limit = limit;
    this.timeLimitMs = timeLimitMs;
    this.#deadlines = timeLimitMs === undefined ? undefined : new DeadlineQueue(timeLimitMs);
    this.#log = log;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running.size;
  }

  /** Tasks waiting for a running slot. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Registrations waiting for room. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /** Whether shutdown has closed the runner. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Makes an entry for a task; it holds no reservation yet.
   *
   * @param task The task.
   * @param name Its name for log lines; the function's name when empty.
   * @returns The entry.
   */
  #entry(task: Task, name: string | undefined): TaskEntry {
    return new TaskEntry(this.#nextId++, name || task.name || "anonymous", task);
  }

  /**
   * Registers a task of a request (or a WebSocket handshake) that may not have answered yet: it
   * takes a reservation, waiting for room when the limit is reached (back-pressure), then hands
   * the task to `holder.place`.
   *
   * A reservation granted at once is placed in the same turn, so the holder's count of tasks is
   * right for the next registration even when a handler registers several without awaiting each
   * (`Promise.all`): counting only after an await let each of them wait for room that only the
   * request's own tasks could free, a deadlock.
   *
   * @param holder The request or handshake.
   * @param task The task.
   * @param name Its name for log lines; the function's name when empty.
   * @param signal Ends the wait for room when it aborts; registers nothing if aborted already.
   * @returns `true` once the task is placed, `false` when it ended (logged) without running.
   * @throws {RangeError} When the holder already holds `limit` tasks.
   */
  async register(
    holder: TaskHolder,
    task: Task,
    name: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    // A holder of reservations never waits for room (its tasks cannot start before it answers,
    // so waiting could deadlock), so it may hold only so many: beyond the limit, one request
    // could otherwise fill memory with tasks (50,000 in 163 ms in issue 10).
    if (holder.heldTasks() >= this.limit) throw holder.tooManyTasks(holder.heldTasks());
    const entry = this.#entry(task, name);
    let why = holder.refusal() ??
      (signal?.aborted ? "its signal was aborted when it was registered" : undefined);
    if (why === undefined) {
      if (this.#closed) why = SHUTTING_DOWN;
      else if (!this.#reserve(holder.heldTasks() > 0)) {
        // A request whose client has left does not start waiting: nobody is left to wait for.
        why = holder.cancellation() ?? await this.#wait(holder, signal);
      }
    }
    if (why !== undefined) {
      this.discard(entry, why, false);
      return false;
    }
    if (holder.heldTasks() >= this.limit) {
      // Only after waiting: the holder's other registrations were granted meanwhile.
      entry.ended = true;
      this.#release(entry);
      throw holder.tooManyTasks(holder.heldTasks());
    }
    return holder.place(entry);
  }

  /**
   * Takes a reservation if there is room now.
   *
   * @param holding Whether the caller's request already holds a reservation for a task that
   *   cannot start before it responds; such a caller never waits (see the module doc).
   * @returns Whether it took one.
   */
  #reserve(holding: boolean): boolean {
    if (holding || (this.#waiters.size === 0 && this.#reserved < this.limit)) {
      this.#reserved++;
      return true;
    }
    return false;
  }

  /**
   * Waits for room (back-pressure) until a reservation is made on the caller's behalf, the
   * holder is cancelled, `signal` aborts, or the runner closes. Both listeners go when the wait
   * ends: a long-lived signal collects none.
   *
   * A wait that only a freed slot could end kept the handler, its request and the task for as
   * long as the slots stayed taken: a request's time limit (20,000 timed-out requests behind two
   * long tasks: 154 MB of heap), or its client leaving (2,000 handlers never returned, 14.6 MB).
   *
   * @returns `undefined` once reserved, else why it gave up.
   */
  async #wait(holder: TaskHolder, signal: AbortSignal | undefined): Promise<string | undefined> {
    const waiter = Promise.withResolvers<string | undefined>();
    this.#waiters.add(waiter);
    const giveUp = (why: string) => {
      if (this.#waiters.delete(waiter)) waiter.resolve(why);
    };
    const cancelled = holder.waitSignal();
    const onCancel = () => giveUp(holder.cancellation() ?? "its request was cancelled");
    const onAbort = () => giveUp("its signal aborted before room freed");
    cancelled.addEventListener("abort", onCancel);
    signal?.addEventListener("abort", onAbort);
    if (cancelled.aborted) onCancel();
    try {
      return await waiter.promise;
    } finally {
      cancelled.removeEventListener("abort", onCancel);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Ends a task that will never run, with its reason, and gives its reservation back.
   *
   * @param entry The task.
   * @param reason Why it does not run, e.g. "its request timed out".
   * @param reserved Whether it holds a reservation.
   */
  discard(entry: TaskEntry, reason: string, reserved: boolean): void {
    this.#held.delete(entry);
    if (reserved) this.#release(entry);
    else entry.released = true;
    this.#end(entry, "warn", `${entry.label} not run: ${reason}`);
  }

  /**
   * Hands over a task whose request has responded: it starts now if a slot is free, else it is
   * queued. The entry must hold a reservation.
   *
   * @param entry The task.
   */
  start(entry: TaskEntry): void {
    this.#held.delete(entry);
    if (this.#closed) {
      this.#release(entry);
      this.#end(entry, "warn", `${entry.label} cancelled at shutdown before it started`);
    } else if (this.#running.size < this.limit) {
      this.#run(entry);
    } else {
      this.#queue.push(entry);
    }
  }

  /**
   * Notes a reserved task that its request keeps until it responds, so that shutdown can end it
   * if the request never does.
   *
   * @param entry The task.
   */
  hold(entry: TaskEntry): void {
    this.#held.add(entry);
  }

  /** Reopens the runner after a shutdown, for a server that starts the app again. */
  open(): void {
    this.#closed = false;
  }

  /**
   * Shuts the runner down: waiting registrations are released (their tasks are logged as not
   * run), queued tasks and tasks held by requests that have not responded are cancelled, running
   * tasks get their signal aborted and are awaited for at most `graceMs`; those still running then
   * are abandoned. Every one of them is logged.
   *
   * @param graceMs How long running tasks may take to stop.
   * @returns Resolves when every task has stopped or been abandoned.
   */
  async close(graceMs: number): Promise<void> {
    this.#closed = true;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const waiter of waiters) waiter.resolve(SHUTTING_DOWN);
    const unstarted = [...this.#queue.splice(0), ...this.#held];
    this.#held.clear();
    for (const entry of unstarted) {
      this.#release(entry);
      this.#end(entry, "warn", `${entry.label} cancelled at shutdown before it started`);
    }
    const running = [...this.#running];
    if (running.length === 0) return;
    const reason = new DOMException("The application is shutting down", "AbortError");
    for (const entry of running) {
      entry.cancelled = true;
      entry.controller.abort(reason);
    }
    // A timer of our own, cleared when the tasks stop: deadline()'s AbortSignal.timeout() would
    // stay armed for the whole grace period.
    const limited = clearableDeadline(Promise.all(running.map((entry) => entry.done)), graceMs);
    try {
      await limited.promise;
    } catch {
      for (const entry of running) {
        if (entry.ended) continue;
        this.#end(
          entry,
          "warn",
          `${entry.label} cancelled at shutdown: it did not stop within the grace period of ` +
            `${seconds(graceMs)} after its signal was aborted, so it was abandoned`,
        );
        this.#running.delete(entry);
        this.#release(entry);
      }
    } finally {
      limited.clear();
    }
  }

  #run(entry: TaskEntry): void {
    this.#running.add(entry);
    entry.done = this.#supervise(entry);
  }

  async #supervise(entry: TaskEntry): Promise<void> {
    const startedAt = performance.now();
    const { promise: outcome, resolve: settle } = Promise.withResolvers<Outcome>();
    // `undefined` stands for the time limit: `outcome` never settles with it.
    const { promise: first, resolve } = Promise.withResolvers<Outcome | undefined>();
    // The clock starts before the task is called, so the limit is never later than promised.
    const limit = this.#deadlines?.arm(() => resolve(undefined));
    outcome.then(resolve);
    try {
      Promise.resolve(entry.task(entry.controller.signal)).then(
        () => settle(SUCCESS),
        (error) => settle(failure(error)),
      );
    } catch (error) {
      settle(failure(error));
    }
    try {
      const result = await first;
      if (result !== undefined) {
        const took = seconds(performance.now() - startedAt);
        if (entry.cancelled) {
          this.#end(
            entry,
            "warn",
            `${entry.label} cancelled at shutdown: it stopped after ${took}`,
          );
        } else if (result.ok) {
          this.#end(entry, "info", `${entry.label} completed in ${took}`);
        } else {
          this.#end(entry, "error", `${entry.label} failed after ${took}:`, result.error);
        }
        return;
      }
      // The task reached its time limit. JavaScript cannot stop a promise; aborting the signal
      // is how the task is asked to stop.
      const limitText = seconds(this.timeLimitMs ?? 0);
      entry.controller.abort(
        new DOMException(`Background task time limit of ${limitText} exceeded`, "TimeoutError"),
      );
      this.#end(
        entry,
        "warn",
        entry.cancelled
          ? `${entry.label} cancelled at shutdown: it reached its time limit of ${limitText} first`
          : `${entry.label} cut off at its time limit of ${limitText}: its signal was aborted ` +
            `and its result is ignored (a task that ignores its signal runs on unobserved)`,
      );
      void outcome.then((late) => {
        const after = seconds(performance.now() - startedAt);
        if (!late.ok && late.error === entry.controller.signal.reason) {
          this.#log.debug(`${entry.label} stopped ${after} after it started, on its signal`);
        } else {
          this.#log.debug(
            `${entry.label} settled ${after} after it started, past its limit; ignored:`,
            late.ok ? "completed" : late.error,
          );
        }
      });
    } finally {
      limit?.clear();
      this.#running.delete(entry);
      this.#release(entry);
      this.#pump();
    }
  }

  /** Starts queued tasks while slots are free. */
  #pump(): void {
    while (this.#queue.length > 0 && this.#running.size < this.limit && !this.#closed) {
      this.#run(this.#queue.shift()!);
    }
  }

  #release(entry: TaskEntry): void {
    if (entry.released) return;
    entry.released = true;
    this.#reserved--;
    // Hand freed room to the oldest waiters, reserving on their behalf so that a burst of
    // waiters cannot all slip in at once.
    while (this.#waiters.size > 0 && this.#reserved < this.limit) {
      this.#reserved++;
      const oldest = this.#waiters.values().next().value!;
      this.#waiters.delete(oldest);
      oldest.resolve(undefined);
    }
  }

  #end(entry: TaskEntry, level: keyof TaskLogger, ...data: unknown[]): void {
    if (entry.ended) return;
    entry.ended = true;
    this.#log[level](...data);
  }
}
