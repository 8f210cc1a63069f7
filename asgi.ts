/**
 * A bridge that runs ASGI 3.0 applications on `Deno.serve`.
 *
 * @module
 */

/** The ASGI protocol version this bridge speaks. */
export const ASGI_VERSION = "3.0";
