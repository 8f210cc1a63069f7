// Copyright the stellarator authors. MIT license.
/**
 * Promises the bridge shares: `ACCEPTED` (what `send` returns for a message it took whole),
 * `RESOLVED` and `withResolvers`. Private: not exported from `deno.json`.
 *
 * @module
 */

/** An already resolved promise, shared where nothing is waited for. */
export const RESOLVED: Promise<void> = Promise.resolve();

/**
 * What `send` returns for a message it took at once, whole (or dropped because the client is
 * gone): this very promise, already resolved. A caller that recognises it knows, without an
 * await, that the message is done with; the web layer sends a fixed response's body right after
 * its head that way, and completes the request in the same turn.
 */
export const ACCEPTED: Promise<void> = Promise.resolve();

/** `Promise.withResolvers`, which Node.js 20 lacks; the node transport runs there too. */
export function withResolvers<T>(): PromiseWithResolvers<T> {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
