/**
 * Time limits of the web layer: one timer per limit, over a queue of deadlines.
 *
 * ## Why one timer and a queue
 *
 * An App has one request time limit, and each runner one background-task limit, so deadlines
 * are made in arrival order and expire in that same order: a FIFO queue holds them all, and a
 * single `setTimeout` is armed for the oldest one. Arming a deadline is a push; clearing it,
 * once the response is complete or the task settles, marks it dead in O(1); the timer skips dead
 * entries when it fires and re-arms itself for the next live one, or stays unarmed when none is
 * left. So an App holds at most one timer per limit, however many requests are in flight, and an
 * unref'd one: it never keeps the process alive. Dead entries are dropped all at once when none
 * is live, and otherwise once they outnumber the live ones (amortized O(1) per deadline), so the
 * queue stays within twice the deadlines in flight even while one long request keeps it from
 * ever emptying.
 *
 * The design it replaces gave each request `deadline()` from `@std/async`, which arms an
 * `AbortSignal.timeout()` that nothing can cancel (so it was called with
 * `Number.MAX_SAFE_INTEGER` and a signal of ours) and builds an `AbortSignal.any()`, plus a
 * `setTimeout` per request to drive that signal. Measured in process (`app.fetch` in a loop on
 * `GET /hello/{name}`, 11 alternating rounds of 20,000 requests per run, medians of each run,
 * two runs of each design interleaved, busy 2-core machine,
 * `deno run -A tools/with_jsr_mirror.ts deno run -A tests/fixtures/web_limit_cost.ts 11 20000`):
 *
 * | design                                       | µs/request, no limit | with a 10 s limit | throughput ratio |
 * | -------------------------------------------- | -------------------- | ----------------- | ---------------- |
 * | `deadline()` + `setTimeout` + `AbortSignal`s | 5.7–6.0              | 13.2–14.9         | 0.40–0.41        |
 * | one timer over a FIFO of deadlines           | 5.6–5.7              | 6.0–6.3           | 0.93–0.95        |
 *
 * Requests one at a time are the worst case for the old design and a fair one for the new: the
 * queue empties after each request, and the timer is still not re-armed per request (below).
 *
 * ## Why the expiry answers, and nothing races the handler
 *
 * The request's deadline calls the exchange back when it passes; the exchange then aborts
 * `request.signal`, sends the 408 (or cuts the stream off) and ends the bridge's call itself,
 * while the handler's own `await` goes on undisturbed and is only logged when it settles. The
 * first version of the queue raced the handler instead: a promise and its resolvers per request,
 * an async call wrapping the handler, and a `then` on it, which `Promise.race` would also need.
 * Garbage per request beyond the App without a limit, in process (`deno task bench:profile
 * --targets=app,app-limit`, 2026-11-24): 1.19 KB racing (GET and POST alike), 0.17 KB without
 * (the entry, its callback and the request's reference to it), 0.11 KB since the queue empties
 * its slots without `fill()` (2026-11-25). The time saved is within the noise
 * of this 2-core machine: pinned `deno task bench:http --servers=app,app-limit --rounds=5`, two
 * runs of each interleaved, App with a limit ÷ App without: GET 0.93–0.98× racing, 0.93–0.95×
 * now; POST 0.96–0.98× and 0.90–1.01×. The queue's array is reused once it empties, so a request
 * arriving alone allocates no array either.
 *
 * What users see is unchanged: at the limit `request.signal` aborts with a `TimeoutError`
 * `DOMException` (as `deadline()` rejects), and a streamed body stops through `abortable()` from
 * `@std/async`, which watches that signal (without waiting for a chunk on its way:
 * `_web/abandon.ts`).
 *
 * @module
 */
import { MAX_TIMER_MS } from "../_common/timers.ts";

/** One deadline in a {@linkcode DeadlineQueue}. */
export interface Deadline {
  /** Disarms the deadline; its callback will not be called. Idempotent. */
  clear(): void;
}

/** A queued deadline: when it expires, and what to call then. */
class Entry implements Deadline {
  readonly at: number;
  onExpire: (() => void) | undefined;
  readonly #queue: DeadlineQueue;

  constructor(queue: DeadlineQueue, at: number, onExpire: () => void) {
    this.#queue = queue;
    this.at = at;
    this.onExpire = onExpire;
  }

  clear(): void {
    if (this.onExpire === undefined) return;
    this.onExpire = undefined;
    this.#queue.cleared();
  }
}

/**
 * Deadlines that all have the same duration, so they expire in the order they were armed; one
 * timer serves them all.
 */
export class DeadlineQueue {
  /** The duration of every deadline, in milliseconds. */
  readonly ms: number;
  /**
   * The queue: entries `#head` to `#tail`, oldest first; the slots outside that range are empty.
   * The array is reused rather than replaced once the queue empties (when requests come one at a
   * time, on every request), so arming a deadline allocates its entry and nothing else.
   */
  #entries: (Entry | undefined)[] = [];
  #head = 0;
  #tail = 0;
  #live = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The timer has fired and the callbacks of due entries are running. */
  #expiring = false;
  readonly #fire = (): void => this.#expire();

  /**
   * Creates a queue of deadlines of `ms` milliseconds.
   *
   * @param ms The duration of every deadline.
   */
  constructor(ms: number) {
    this.ms = ms;
  }

  /** Deadlines armed and not yet cleared or expired. */
  get live(): number {
    return this.#live;
  }

  /**
   * Arms a deadline `ms` milliseconds from now. The clock starts here, before the caller starts
   * the work it limits, so the limit is never later than promised.
   *
   * @param onExpire Called once when the deadline passes, unless cleared first.
   * @returns The deadline, to clear once it no longer matters.
   */
  arm(onExpire: () => void): Deadline {
    const entry = new Entry(this, performance.now() + this.ms, onExpire);
    this.#entries[this.#tail++] = entry;
    this.#live++;
    // While the queue expires entries, it arms its timer once they are done (#rearm).
    if (this.#timer === undefined && !this.#expiring) this.#schedule(entry.at);
    return entry;
  }

  /**
   * Slots the queue holds, live deadlines and cleared ones not yet dropped: at most about twice
   * `live`, plus `COMPACT_AT`.
   */
  get slots(): number {
    return this.#tail - this.#head;
  }

  /** Called by an entry that was cleared. */
  cleared(): void {
    if (--this.#live > 0) {
      // Cleared entries are dropped when the timer passes them, or all at once when nothing is
      // live. Neither comes while one long request stays armed under a steady load, so without
      // this the queue would keep every cleared entry for a whole limit: 113 MB of heap after
      // 12 s at 86k requests/s with a 30 s limit and one slow request in flight (2026-11-25).
      // Compacting once the dead outnumber the live keeps the queue at most twice its live
      // entries, at a cost of at most two slots visited per deadline armed or cleared.
      const span = this.#tail - this.#head;
      if (span > COMPACT_AT && span > 2 * this.#live) this.#compact();
      return;
    }
    // Nothing live: empty the queue. The timer stays: clearing it here and arming it again on
    // the next request would cost a timer per request whenever requests come one at a time, the
    // cost this design removes. It fires once, finds nothing, and is not re-armed; it is unref'd,
    // so it never keeps the process alive.
    this.#empty();
  }

  /** Moves the live entries, in order, to the front of the queue and drops the cleared ones. */
  #compact(): void {
    const entries = this.#entries;
    const tail = this.#tail;
    let to = 0;
    for (let i = this.#head; i < tail; i++) {
      const entry = entries[i]!;
      if (entry.onExpire !== undefined) entries[to++] = entry;
    }
    this.#head = 0;
    this.#tail = to;
    // A burst left a large array behind: let it go rather than keep its slots empty.
    if (entries.length > KEPT_SLOTS && to * 4 < entries.length) {
      this.#entries = entries.slice(0, to);
    } else emptySlots(entries, to, tail);
  }

  /** Drops every entry (all dead), keeping the array unless a burst made it large. */
  #empty(): void {
    if (this.#tail > KEPT_SLOTS) this.#entries = [];
    else emptySlots(this.#entries, this.#head, this.#tail);
    this.#head = 0;
    this.#tail = 0;
  }

  #schedule(at: number): void {
    // Timers count whole milliseconds and may fire up to one early against performance.now():
    // one more millisecond spares a second turn of the timer for an entry found not yet due.
    // Never beyond MAX_TIMER_MS, which a limit may reach: past it a timer fires after 1 ms.
    const ms = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(at - performance.now()) + 1));
    const timer = setTimeout(this.#fire, ms);
    if (typeof Deno !== "undefined") Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  #expire(): void {
    this.#timer = undefined;
    this.#expiring = true;
    try {
      // Never early: an entry not yet due waits for the next turn of the timer. Only deadlines
      // that expire pay for that, and those are the exception.
      let now = performance.now();
      // The fields are read afresh on each turn: a callback may arm or clear deadlines.
      while (this.#head < this.#tail) {
        const entries = this.#entries;
        const entry = entries[this.#head]!;
        // The clock is read again before an entry is left for the next turn: the callbacks (a
        // 408 each) may have run for a while, and a deadline that fell due meanwhile waited for
        // a timer armed after the handlers' own, due in that time too. 10,000 requests failing
        // 80 ms into a 50 ms limit got 3,728 500s for their 408s (fault probe, 2026-11-29).
        if (
          entry.onExpire !== undefined && entry.at > now && entry.at > (now = performance.now())
        ) {
          break;
        }
        entries[this.#head++] = undefined;
        const onExpire = entry.onExpire;
        if (onExpire === undefined) continue;
        entry.onExpire = undefined;
        this.#live--;
        onExpire();
      }
    } finally {
      this.#expiring = false;
      this.#rearm();
    }
  }

  /**
   * After an expiry: one timer for the oldest entry left, whatever the callbacks armed. (A timer
   * armed for a deadline a callback made would fire up to a whole duration after an older one
   * still waiting in the queue.)
   */
  #rearm(): void {
    // Move the live part to the front now and then, not on every expiry: a copy per expiry would
    // cost as much as the timers this replaces.
    if (this.#head > COMPACT_AT && this.#head * 2 > this.#tail) this.#compact();
    // Empty unless a callback threw: then the rest, due or not, waits for the next turn.
    if (this.#head === this.#tail) return this.#empty();
    this.#schedule(this.#entries[this.#head]!.at);
  }
}

/**
 * Empties `entries[from]` to `entries[to - 1]`. A loop, not `fill()`: the queue empties on nearly
 * every request that comes alone, most often with one slot to clear, and a call of the `fill`
 * builtin costs some 100 ns where the loop's one store costs 2 (Deno 2.9.6).
 */
function emptySlots(entries: (Entry | undefined)[], from: number, to: number): void {
  for (let i = from; i < to; i++) entries[i] = undefined;
}

/** Queue slots kept for reuse once the queue empties; a larger array is let go. */
const KEPT_SLOTS = 4096;
/** The queue is compacted only beyond this many slots, so that small queues never are. */
const COMPACT_AT = 1024;

/**
 * A promise under a one-off time limit whose timer can be cleared (used at shutdown, where the
 * grace period is armed once).
 */
export interface LimitedPromise<T> {
  /** Settles as the given promise, or rejects with a `TimeoutError` at the limit. */
  promise: Promise<T>;
  /** Cancels the limit's timer; call it once the promise has settled. */
  clear(): void;
}

/**
 * Runs `promise` under a limit of `ms` milliseconds whose timer can be cleared.
 *
 * @param promise The promise to limit.
 * @param ms The limit in milliseconds.
 * @returns The limited promise and its `clear()`.
 */
export function clearableDeadline<T>(promise: Promise<T>, ms: number): LimitedPromise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new DOMException("The time limit was reached", "TimeoutError")),
      ms,
    );
  });
  return {
    promise: Promise.race([promise, expired]),
    clear: () => clearTimeout(timer),
  };
}
