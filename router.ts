/**
 * A radix-tree HTTP path router for ASGI-style applications. Dependency-free and
 * free of Deno APIs.
 *
 * @module
 */

/** The version of the router's matching rules. */
export const ROUTER_RULES_VERSION = 1;
