/**
 * Reading a streamed response body under a signal. Private: not exported from `deno.json`.
 *
 * `abortable()` from `@std/async` stops waiting for the next chunk when the signal aborts, then
 * awaits the iterator's `return()`. A generator suspended in an `await` of its own closes only
 * once that await settles, so `respondWith()` waited with it: a stream waiting for its next event
 * held the handler of every client that had left, for as long as no event came (hostile-client
 * probe of the web layer, 2026-11-29: 20 of 20 handlers held). Here the iterator is asked to
 * close and abandoned: JavaScript cannot interrupt its await, but nobody waits for it, and its
 * `finally` runs once the await settles.
 *
 * @module
 */

/**
 * Yields what `iterable` yields until `signal` aborts, then throws the signal's reason at once.
 * When it stops early (aborted, or its consumer stopped), the iterator is closed: awaited when
 * it is idle, abandoned to close by itself when it is still producing a chunk.
 *
 * @param iterable The body.
 * @param signal Aborts at the request time limit, at shutdown, or when the client leaves.
 * @returns The chunks.
 * @throws {unknown} The signal's reason, or what the iterator throws.
 */
export async function* abandonable<T>(
  iterable: AsyncIterable<T>,
  signal: AbortSignal,
): AsyncGenerator<T, void, undefined> {
  signal.throwIfAborted();
  const iterator = iterable[Symbol.asyncIterator]();
  const { promise: aborted, reject } = Promise.withResolvers<never>();
  const abort = () => reject(signal.reason);
  signal.addEventListener("abort", abort, { once: true });
  let finished = false;
  let producing = false;
  try {
    for (;;) {
      producing = true;
      const result = await Promise.race([aborted, iterator.next()]);
      producing = false;
      if (result.done) {
        finished = true;
        return;
      }
      yield result.value;
    }
  } catch (error) {
    // The iterator threw: it is done, there is nothing to close.
    if (producing && !signal.aborted) finished = true;
    throw error;
  } finally {
    signal.removeEventListener("abort", abort);
    if (!finished) {
      if (producing) Promise.resolve(iterator.return?.()).catch(() => {});
      else await iterator.return?.();
    }
  }
}
