/**
 * A mark on Fetch handlers (`App.fetch`, the `fetch` of `createFetchHandler()`), so that the
 * bridge can refuse one passed where an ASGI application belongs, when it is passed (`serve()`,
 * `createFetchHandler()`, `proxyHeaders()`) instead of failing every request later: both are
 * functions, and in plain JavaScript `serve(app.fetch)` was taken, then answered each request 500
 * with "Cannot read properties of undefined". Private: not exported from `deno.json`.
 *
 * @module
 */

/** The key of the mark; its value says what to pass instead. */
export const FETCH_HANDLER: unique symbol = Symbol("stellarator.fetchHandler");

/**
 * Marks a Fetch handler with what to pass to the bridge instead of it.
 *
 * @param handler The Fetch handler.
 * @param instead What to pass instead, e.g. `the App itself (serve(app)) or app.asgi`.
 * @returns `handler`, marked.
 */
export function markFetchHandler<F extends object>(handler: F, instead: string): F {
  Object.defineProperty(handler, FETCH_HANDLER, { value: instead });
  return handler;
}

/**
 * What to pass instead of `value` when it is a marked Fetch handler.
 *
 * @param value Anything.
 * @returns The mark's advice, or `undefined` when `value` carries no mark.
 */
export function fetchHandlerMark(value: unknown): string | undefined {
  if (typeof value !== "function") return undefined;
  const mark = (value as { [FETCH_HANDLER]?: unknown })[FETCH_HANDLER];
  return typeof mark === "string" ? mark : undefined;
}
