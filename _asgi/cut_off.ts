/**
 * The one error an application raises on purpose. Private: not exported from `deno.json`.
 *
 * @module
 */

/**
 * Raised by an application that cuts off a response it has started, on purpose, and has already
 * logged why: the web layer raises it when its request time limit passes while a streamed body
 * is still being sent. The bridge closes the connection, as for any error after the response
 * started, so the client cannot take the truncated body for a whole one, but logs nothing:
 * intended behaviour is not an "Exception in ASGI application".
 */
export class ResponseCutOff extends Error {
  /**
   * Creates the error.
   *
   * @param message What was cut off and why, as the application logged it.
   */
  constructor(message: string) {
    super(message);
    this.name = "ResponseCutOff";
  }
}
