/**
 * Stellarator: a radix-tree path router and a faithful ASGI 3.0 bridge for `Deno.serve`.
 *
 * This entry point re-exports the dependency-free layers, {@link ./router.ts} and
 * {@link ./asgi.ts}. The experimental web layer, which depends on `@std/async` and
 * `@std/http`, is imported from `@stellarator/stellarator/web`.
 *
 * @module
 */
export * from "./router.ts";
export * from "./asgi.ts";
