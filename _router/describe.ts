// Copyright the stellarator authors. MIT license.
/**
 * How the router's error messages quote values they were given.
 *
 * @module
 */

/** A short description of a value for an error message: strings quoted, objects by kind. */
export function describe(value: unknown): string {
  if (typeof value === "string") return `"${value}"`;
  if (typeof value === "function") return "a function";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : String(value);
}

/** `text`, cut to 200 characters, for quoting a path that may be long. */
export function shorten(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
