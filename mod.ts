/**
 * Stellarator: a radix-tree path router and a faithful ASGI 3.0 bridge for `Deno.serve`.
 *
 * This entry point re-exports the dependency-free layers, the router
 * (`@stellarator/stellarator/router`) and the ASGI bridge (`@stellarator/stellarator/asgi`).
 * The experimental web layer, which depends on `@std/async` and `@std/http`, is imported from
 * `@stellarator/stellarator/web`.
 *
 * An ASGI application that routes with an {@linkcode AsgiRouter}, called here through
 * {@linkcode createFetchHandler}; `serve(app)` would listen on 127.0.0.1:8000:
 *
 * ```ts
 * import {
 *   AsgiRouter,
 *   createFetchHandler,
 *   type Receive,
 *   Route,
 *   type Scope,
 *   type Send,
 *   textBytes,
 * } from "@stellarator/stellarator";
 * import { assertEquals } from "@std/assert";
 *
 * const router = new AsgiRouter({ routes: [new Route("/hello/{name}", { handler: () => {} })] });
 *
 * async function app(scope: Scope, _receive: Receive, send: Send): Promise<void> {
 *   if (scope.type !== "http") return; // no lifespan support
 *   const match = router.match(scope.path); // undefined: no route, answer 404
 *   const body = match ? `Hello, ${match.context.name}!` : "Not Found";
 *   await send({ type: "http.response.start", status: match ? 200 : 404 });
 *   await send({ type: "http.response.body", body: textBytes(body) });
 * }
 *
 * const handler = createFetchHandler(app, { lifespan: "off" });
 * const response = await handler.fetch(new Request("http://localhost/hello/ada"));
 * assertEquals(await response.text(), "Hello, ada!");
 * ```
 *
 * @module
 */
export * from "./router.ts";
export * from "./asgi.ts";
