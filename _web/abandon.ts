/**
 * Closing a streamed response body without waiting for a chunk still on its way. Private: not
 * exported from `deno.json`.
 *
 * A streamed body is read one chunk at a time, each wait through `abortable()` from `@std/async`,
 * which stops waiting for the next chunk when `request.signal` aborts; the iterator is then asked
 * to close, and not waited for. (Not `abortable()` over the whole iterable: it held every chunk
 * sent until the stream ended, see `Exchange.#stream`.) An async generator suspended in an
 * `await` of its own closes only once that await settles, so `respondWith()` waited with it: a
 * stream waiting for its next event held the handler of every client that had left, for as long
 * as no event came (hostile-client probe of the web layer, 2026-11-29: 20 of 20 handlers held).
 * Wrapped in a {@linkcode Detachable}, the iterator is asked to close and left to do so:
 * JavaScript cannot interrupt its await, but nobody waits for it, and its `finally` runs once the
 * await settles.
 *
 * @module
 */

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * An async iterator whose `return()` waits for the iterator it wraps only when that one is idle
 * (suspended at a `yield`, or not begun); while it is producing a chunk, `return()` asks it to
 * close and resolves at once. Closes it once, however often it is asked.
 */
export class Detachable<T> implements AsyncIterableIterator<T, undefined, undefined> {
  readonly #iterator: AsyncIterator<T>;
  /** A `next()` has not settled yet. */
  #producing = false;
  /** The iterator finished, failed or was asked to close: nothing left to close. */
  #done = false;

  /** @param iterable The body. */
  constructor(iterable: AsyncIterable<T>) {
    this.#iterator = iterable[Symbol.asyncIterator]();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The iterator's next chunk, with what it says about its state noted first. */
  next(): Promise<IteratorResult<T, undefined>> {
    const result = Promise.resolve(this.#iterator.next());
    this.#producing = true;
    // Registered before the caller's own handlers (abortable races this promise), so the state
    // is current when they run.
    result.then((step) => {
      this.#producing = false;
      if (step.done) this.#done = true;
    }, () => {
      this.#producing = false;
      this.#done = true;
    });
    return result as Promise<IteratorResult<T, undefined>>;
  }

  /** Closes the iterator: awaited when it is idle, left to close by itself while it produces. */
  return(): Promise<IteratorReturnResult<undefined>> {
    if (this.#done) return Promise.resolve(DONE);
    this.#done = true;
    const closing = Promise.resolve(this.#iterator.return?.()).then(() => DONE);
    if (!this.#producing) return closing;
    closing.catch(() => {});
    return Promise.resolve(DONE);
  }
}
