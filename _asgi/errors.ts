// Copyright the stellarator authors. MIT license.
/**
 * The bridge's errors that applications raise or catch: `AsgiProtocolError` (a `send()` that
 * broke the protocol), `ResponseCutOffError` (a response cut off on purpose) and `LifespanError`
 * (lifespan startup or shutdown failed). Public through `asgi.ts`. Private module: not exported
 * from `deno.json`.
 *
 * @module
 */

/**
 * A `send()` call broke the ASGI protocol: the application's mistake, raised by that `send()`,
 * with the message it sent and the fix in its text. If the application lets it escape, the
 * request ends as for any exception (a 500 when nothing was sent yet) and it is logged.
 *
 * @example A body sent before the response's start
 * ```ts
 * import { AsgiProtocolError, createFetchHandler } from "@stellarator/stellarator/asgi";
 * import { assertEquals, assertInstanceOf } from "@std/assert";
 *
 * let raised: unknown;
 * const handler = createFetchHandler(async (scope, _receive, send) => {
 *   if (scope.type !== "http") return;
 *   try {
 *     await send({ type: "http.response.body", body: new Uint8Array() });
 *   } catch (error) {
 *     raised = error;
 *     throw error;
 *   }
 * }, { lifespan: "off", logger: { error() {}, warn() {}, info() {} } });
 * const response = await handler.fetch(new Request("http://localhost/"));
 * assertEquals(response.status, 500);
 * assertInstanceOf(raised, AsgiProtocolError);
 * ```
 */
export class AsgiProtocolError extends Error {
  /**
   * Creates the error.
   *
   * @param message What broke the protocol.
   *
   * @example Usage
   * ```ts
   * import { AsgiProtocolError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new AsgiProtocolError('Cannot send "http.response.body" before "http.response.start"');
   * assertEquals(error.name, "AsgiProtocolError");
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "AsgiProtocolError";
  }
}

/**
 * Raised by an application to cut its own response off on purpose, a time limit say: the bridge
 * ends the exchange as for any exception (500 before the start; after it, the connection closed
 * without completing the response), but logs one warning line, `Response cut off: <message>`,
 * instead of "Exception in ASGI application" with a stack. The web layer raises it when a stream
 * outlives the request time limit.
 */
export class ResponseCutOffError extends Error {
  /**
   * Creates the error.
   *
   * @param message Why the response is cut off; it is logged as the warning.
   * @param options The underlying cause, if any.
   *
   * @example A stream cut at a deadline
   * ```ts
   * import { ResponseCutOffError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new ResponseCutOffError("GET /feed was still streaming at its limit of 1 s");
   * assertEquals(error.name, "ResponseCutOffError");
   * ```
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ResponseCutOffError";
  }
}

/**
 * Lifespan startup or shutdown failed: the application said so, or raised with lifespan `"on"`.
 * `serve()`'s `addr` and `finished` reject with it when startup fails; `phase` says which.
 *
 * @example Telling a failed startup from a port that is taken
 * ```ts
 * import { LifespanError } from "@stellarator/stellarator/asgi";
 *
 * function explain(error: unknown): string {
 *   if (error instanceof LifespanError) return `lifespan ${error.phase} failed: ${error.message}`;
 *   return `could not serve: ${error}`;
 * }
 * console.assert(explain(new LifespanError("startup", "no database")).startsWith("lifespan"));
 * ```
 */
export class LifespanError extends Error {
  /** The phase that failed. */
  readonly phase: "startup" | "shutdown";

  /**
   * Creates the error.
   *
   * @param phase The phase that failed.
   * @param message The application's message, or a description of what went wrong.
   * @param options The underlying error, if the application raised.
   *
   * @example Usage
   * ```ts
   * import { LifespanError } from "@stellarator/stellarator/asgi";
   * import { assertEquals } from "@std/assert";
   * const error = new LifespanError("startup", "Database unreachable");
   * assertEquals(error.phase, "startup");
   * ```
   */
  constructor(phase: "startup" | "shutdown", message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LifespanError";
    this.phase = phase;
  }
}
