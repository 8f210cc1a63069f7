// Copyright the stellarator authors. MIT license.
/**
 * The error a handler gets when the server refused its request's body for exceeding
 * `maxBodySize`. Public through `web.ts`. Private module: not exported from `deno.json`.
 *
 * @module
 */

/**
 * The server refused the request's body: it grew past `maxBodySize` while being read (a chunked
 * body, one of no declared length, or one over HTTP/2). `request.bytes()` and `request.text()`
 * reject with it, and `request.signal` aborts with it as its reason, instead of the
 * `AbortError` "The client disconnected" of a client that left: this client is still there,
 * and got the bridge's 413 (or, if the response had started, a response cut off). What the
 * handler sends afterwards is dropped, and letting the error escape is no failure of the
 * handler: the App logs it at debug level only. A body whose `content-length` exceeds the
 * limit never reaches the handler.
 *
 * @example Telling a body over the limit from a client that left
 * ```ts
 * import {
 *   App,
 *   AsgiRouter,
 *   BodyTooLargeError,
 *   type Request,
 *   Response,
 *   Route,
 * } from "@stellarator/stellarator/web";
 * import { assertEquals } from "@std/assert";
 *
 * const refused = Promise.withResolvers<number>();
 * async function upload(request: Request): Promise<void> {
 *   try {
 *     const body = await request.bytes();
 *     await request.respondWith(new Response({ body: `${body.length} bytes` }));
 *   } catch (error) {
 *     if (!(error instanceof BodyTooLargeError)) throw error;
 *     // The client has its 413 already: nothing more to send.
 *     refused.resolve(error.maxBodySize);
 *   }
 * }
 * const app = new App({
 *   router: new AsgiRouter({ routes: [new Route("/upload", { handler: upload, methods: ["POST"] })] }),
 *   fetchOptions: { maxBodySize: 1000 },
 *   handleSignals: false,
 * });
 * const body = new ReadableStream({
 *   start(controller) {
 *     controller.enqueue(new Uint8Array(800));
 *     controller.enqueue(new Uint8Array(800));
 *     controller.close();
 *   },
 * });
 * const response = await app.fetch(
 *   new globalThis.Request("http://localhost/upload", { method: "POST", body }),
 * );
 * assertEquals(response.status, 413);
 * await response.body?.cancel();
 * assertEquals(await refused.promise, 1000);
 * await app.shutdown();
 * ```
 */
export class BodyTooLargeError extends Error {
  /** The limit the body exceeded, in bytes: the server's `maxBodySize`. */
  readonly maxBodySize: number;

  /**
   * Creates the error.
   *
   * @param maxBodySize The limit the body exceeded, in bytes.
   * @param message What happened; by default a sentence that quotes the limit and the fix.
   *
   * @example Usage
   * ```ts
   * import { BodyTooLargeError } from "@stellarator/stellarator/web";
   * import { assertEquals } from "@std/assert";
   * const error = new BodyTooLargeError(1000);
   * assertEquals([error.name, error.maxBodySize], ["BodyTooLargeError", 1000]);
   * ```
   */
  constructor(maxBodySize: number, message?: string) {
    super(
      message ??
        `Request body exceeds maxBodySize ${maxBodySize} bytes: raise maxBodySize to accept ` +
          `larger bodies`,
    );
    this.name = "BodyTooLargeError";
    this.maxBodySize = maxBodySize;
  }
}
