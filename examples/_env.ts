/**
 * How the examples read `PORT` and `TRANSPORT` from the environment: checked, so that a typo
 * fails with the value quoted instead of serving somewhere else (`PORT=` once meant a random
 * port, `TRANSPORT=nod` the deno transport).
 *
 * @module
 */

/** Where and how an example serves. */
export interface ListenSettings {
  /** The port, 8000 unless `PORT` says otherwise. */
  port: number;
  /** The transport, `"deno"` unless `TRANSPORT` says otherwise. */
  transport: "deno" | "node";
}

/**
 * Reads `PORT` (a whole number from 0 to 65535; 0 for any free port) and `TRANSPORT` (`deno` or
 * `node`).
 *
 * @example
 * ```ts
 * import { assertEquals, assertThrows } from "@std/assert";
 * import { listenSettings } from "./_env.ts";
 *
 * assertEquals(listenSettings(() => undefined), { port: 8000, transport: "deno" });
 * assertEquals(listenSettings((name) => name === "PORT" ? "0" : "node"), {
 *   port: 0,
 *   transport: "node",
 * });
 * assertThrows(() => listenSettings((name) => name === "PORT" ? "" : undefined), RangeError);
 * ```
 *
 * @param env Reads a variable.
 * @returns The settings.
 * @throws {RangeError} When `PORT` or `TRANSPORT` is invalid.
 */
export function listenSettings(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): ListenSettings {
  const text = env("PORT");
  const port = text === undefined ? 8000 : /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 0 && port <= 65535)) {
    throw new RangeError(`Cannot use PORT "${text}": give a port from 0 to 65535`);
  }
  const transport = env("TRANSPORT") ?? "deno";
  if (transport !== "deno" && transport !== "node") {
    throw new RangeError(`Cannot use TRANSPORT "${transport}": give "deno" or "node"`);
  }
  return { port, transport };
}
