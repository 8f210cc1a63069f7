// Copyright the stellarator authors. MIT license.
/**
 * A radix-tree path router for ASGI-style applications: no dependencies, no Deno APIs (it runs
 * unchanged in Node, Bun and browsers), all conflicts found when a route is added, and lookups
 * that never throw and allocate little more than the result.
 *
 * ```ts
 * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * const router = new AsgiRouter({
 *   routes: [
 *     new Route("/users/new", { handler: () => "form" }),
 *     new Route("/users/{id}", { handler: () => "user", methods: ["GET", "DELETE"] }),
 *   ],
 * });
 * assertEquals(router.match("/users/new")?.routes[0]?.path, "/users/new");
 * assertEquals(router.match("/users/42")?.context, { id: "42" });
 * assertEquals(router.match("/users/42")?.allowed, ["DELETE", "GET"]);
 * ```
 *
 * ## Patterns
 *
 * A pattern is literal text plus variables and must start with `/`:
 *
 * | Variable        | Matches                                                              |
 * | --------------- | -------------------------------------------------------------------- |
 * | `{name}`        | one non-empty path segment: `[^/]+`                                  |
 * | `{name:regex}`  | what the JavaScript regex (compiled with the `u` flag) matches there; it may span `/` if the regex allows it (`{path:.+}`) |
 * | `{name:*}`      | catch-all: the non-empty rest of the path, slashes included; must end the pattern |
 *
 * Regexes may hold balanced braces (`{uid:[0-9a-f]{8}}`), braces inside character classes and
 * groups of their own. Inside a variable, `^` and `$` mean the start and the end of the
 * variable: `/y/{a:^\d+$}.png` is `/y/{a:\d+}.png`. They are allowed only there (and `$`
 * also in a lookahead of the pattern's last variable, where it is the end of the path); so are
 * `\b` and `\B` only between two characters of the variable, and lookbehinds only over what
 * the variable has matched. Everything else that would look outside the variable or never
 * hold is refused when the route is made, as are backreferences and named groups (the regex
 * is embedded in a larger one). Regexes the ReDoS guard cannot prove fast are refused when
 * the route is added to a router (see `allowUnsafeRegex`).
 * Names match `[A-Za-z_][A-Za-z0-9_]*` and are unique within a route.
 * Several variables may share a segment when literal text separates them (`/{name}.{ext}`,
 * `/compare/{base}...{head}`); `{a}{b}` is refused. `{` and `}` cannot be literal text.
 *
 * ## Matching rules
 *
 * 1. **Reference semantics.** A route matches a path exactly when its whole pattern, read as
 *    one anchored regex (`^…$`, flag `u`, literal text escaped, `{x}` as `([^/]+)`, `{x:re}` as
 *    `(re)`, `{x:*}` as `([^]+)`), matches the whole path; the context holds what that regex's
 *    groups capture, with the engine's usual greedy, left-to-right backtracking. So
 *    `/{name}.{ext}` gives `{name: "a.b", ext: "c"}` for `/a.b.c`. The tree is only an
 *    optimisation of this rule and never disagrees with it.
 * 2. **Priority.** When several routes match, the first in this order wins. Compare two
 *    patterns token by token (a token is one literal character, one variable, or the end of
 *    the pattern); at the first token where they differ:
 *    - literal text or the end of the pattern beats a constrained variable `{x:re}`, which
 *      beats a plain `{x}`, which beats a catch-all `{x:*}`;
 *    - two constrained variables with different regexes: the one whose regex was registered
 *      first at that place wins;
 *    - two different literal characters, or a character against the end of the pattern (this
 *      only matters after a variable that can end at several places): the side whose routes
 *      carry the most literal characters from that token on wins, then the side registered
 *      first. So `/{user1}:{branch1}...{user2}:{branch2}` beats `/{base}...{head}` and
 *      `/{name}.{ext}` beats `/{name}`.
 *
 *    Hence `/users/new` beats `/users/{id}` whatever the registration order, while
 *    `/users/{id}` still matches `/users/newer`.
 * 3. **Backtracking.** If the preferred branch fails deeper down, the next candidate is tried:
 *    with `/text/hello`, `/text/{e}/test` and `/{c}`, the path `/text/hellos/test` gives
 *    `{e: "hellos"}`; with `/{object}/{id}` and `/secret/{id}/path`, `/secret/978` gives
 *    `{object: "secret", id: "978"}`.
 * 4. **A failed regex is an unknown endpoint**: `/other_handler/{name:[a-z1-9]+}` does not
 *    match `/other_handler/Bob`.
 * 5. **Empty variables never match** unless their regex matches the empty string: `/u//posts`
 *    does not match `/u/{id}/posts`, and `/` does not match `/{id}`.
 * 6. **Trailing slash.** `"relaxed"` (default) drops one trailing slash from every pattern and
 *    every path before matching, except from the root `/`: `/claw/` and `/claw` are one route
 *    and both paths reach it. `"strict"` keeps them apart.
 * 7. **No decoding.** The router matches the string it is given, code unit by code unit; any
 *    Unicode works. Percent-decoding is the caller's job (the ASGI bridge passes the decoded
 *    `path`).
 * 8. **Length cap.** Paths longer than `maxPathLength` (default 8192 UTF-16 code units) match
 *    nothing, so no hostile path can keep a regex busy for long.
 * 9. **Context objects** are plain objects, fresh for every match, with one own key per
 *    variable. Any name works as a plain key: `__proto__` becomes an own property (it never
 *    changes the prototype), and `constructor` or `toString` shadow the inherited members for
 *    that route. Test keys with `Object.hasOwn`, since a route without a `constructor`
 *    variable still inherits `ctx.constructor`. Routes of one shape share an endpoint whose
 *    context is made before the method picks a route: when they name the variables differently
 *    (`/x/{a}` for GET, `/x/{b}` for POST), the context holds each value under every name.
 *
 * ## The tree
 *
 * Static text is radix-compressed; each variable is a node of its own. For `/`, `/users`,
 * `/users/new`, `/users/{id}`, `/users/{id}/posts`, `/files/{name}.{ext}` and
 * `/static/{path:*}`, `router.toString()` prints:
 *
 * ```text
 * / ● GET
 * ├── users ● GET
 * │   └── /
 * │       ├── new ● GET
 * │       └── {id} ● GET
 * │           └── /posts ● GET
 * ├── files/
 * │   └── {name} ↺
 * │       └── .
 * │           └── {ext} ● GET
 * └── static/
 *     └── {path:*} ● GET
 * ```
 *
 * At each node the lookup tries the static child for the next character, then constrained
 * variables in registration order, then the plain variable, then the catch-all. A variable
 * followed by `/` or by the end ends at the next `/`, so it is found with one `indexOf`. A
 * variable marked `↺` can end at several places (literal text follows it in its segment, or its
 * regex can span `/`); below it, the routes are tried one by one in priority order, each with a
 * linear-time matcher, so `/{user1}:{branch1}...{user2}:{branch2}` cannot be made to
 * backtrack for long.
 *
 * The walk reads a flat copy of the tree, made when routes change: one `Int32Array` of node
 * records laid out depth-first, each static node followed by its label, its child table and
 * its children, so that a lookup in a large router reads a few neighbouring cache lines
 * instead of some ten objects spread over the heap. Constrained variables, catch-alls and
 * variables with several ends are handed back to the node objects.
 *
 * After `compileAfter` lookups (default 1000) the router turns the tree into a JavaScript
 * function of its own (`new Function`): a `switch` on character codes per node, the same
 * `indexOf` and the same order of attempts, so its answers are the tree's (the property tests
 * run both). Trees of more than 512 nodes (roughly 300 routes) are never compiled: V8 leaves
 * functions that large unoptimized, and the walk is faster there. Where a
 * Content-Security-Policy forbids generated code, the router keeps walking the tree. Context
 * objects are built by small generated functions too, one per set of variable names.
 *
 * ## Errors
 *
 * Everything is checked when a route is added, never while serving: {@linkcode RouteConflict}
 * for the same shape with overlapping methods, {@linkcode InvalidRoutePattern} for malformed
 * patterns and ReDoS-prone regexes, `TypeError` for missing handlers and unknown methods.
 *
 * @module
 */

import {
  CATCH_ALL,
  escapeRegex,
  LITERAL,
  parsePattern,
  PatternError,
  PLAIN,
  REGEX,
  suffixRisk,
  type Token,
  type VariableToken,
} from "./_router/pattern.ts";
import { hasCode } from "./_router/redos.ts";

// ---------------------------------------------------------------------------------------------
// Public types

/**
 * Any function can be a handler; the router only stores and forwards it.
 *
 * @example A low-level ASGI handler
 * ```ts
 * import type { AnyHandler } from "@stellarator/stellarator/router";
 *
 * const handler: AnyHandler = async (context, scope, receive, send) => {
 *   await send({ type: "http.response.start", status: 200 });
 * };
 * ```
 */
// deno-lint-ignore no-explicit-any
export type AnyHandler = (...args: any[]) => unknown;

/**
 * The variables a path matched: variable name to matched text. The router returns plain
 * objects in which every variable, even one named `__proto__`, is an own property.
 *
 * @example Reading a context
 * ```ts
 * import { AsgiRouter, Route, type PathContext } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * const router = new AsgiRouter({ routes: [new Route("/u/{name}", { handler: () => {} })] });
 * const context: PathContext = router.match("/u/ada")!.context;
 * assertEquals(context.name, "ada");
 * ```
 */
export type PathContext = Record<string, string>;

/**
 * Options of a {@linkcode Route}.
 *
 * @typeParam H The handler type.
 *
 * @example Options for a POST route
 * ```ts
 * import { Route, type RouteOptions } from "@stellarator/stellarator/router";
 *
 * const options: RouteOptions<() => string> = { handler: () => "ok", methods: ["POST"] };
 * new Route("/items", options);
 * ```
 */
export interface RouteOptions<H> {
  /** The function called for matching requests. */
  handler: H;
  /**
   * HTTP methods the route serves, case-insensitive, stored upper-case: any of `GET`, `HEAD`,
   * `POST`, `PUT`, `DELETE`, `CONNECT`, `OPTIONS`, `TRACE`, `PATCH`.
   *
   * @default {["GET"]}
   */
  methods?: readonly string[];
}

/**
 * The options object an {@linkcode EndpointHandler} accepts as its last argument.
 *
 * @example Dispatching a POST
 * ```ts
 * import { AsgiRouter, Route, type DispatchOptions } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * const router = new AsgiRouter({
 *   routes: [
 *     new Route("/", { handler: (request: string) => `got ${request}`, methods: ["POST"] }),
 *   ],
 * });
 * const [handler] = router.getRoute("/");
 * const options: DispatchOptions = { method: "POST" };
 * assertEquals(await handler("body", options), "got body");
 * ```
 */
export interface DispatchOptions {
  /**
   * The request method, compared exactly with the routes' (upper-case) methods.
   *
   * @default {scope.method if the second argument is an object with a string `method`, else "GET"}
   */
  method?: string;
}

/**
 * The function {@linkcode AsgiRouter.getRoute} returns for a path: it picks the route of the
 * path that serves the request method and calls that route's handler with the same arguments.
 *
 * The method is found like this:
 * 1. if the last argument is a plain object (its prototype is `Object.prototype` or `null`;
 *    a router context never is) with a string `method`, that string;
 * 2. else, if the second argument is a non-null object with a string `method` (an ASGI scope in
 *    `handler(context, scope, receive, send)`), that string;
 * 3. else `"GET"`.
 *
 * The returned promise rejects with {@linkcode MethodNotAllowed} when no route of the path
 * serves the method, and otherwise settles like the route handler's result.
 *
 * @typeParam H The route handler type; the endpoint handler takes its arguments, optionally
 * followed by {@linkcode DispatchOptions}.
 *
 * @example Calling a low-level ASGI handler
 * ```ts
 * import { AsgiRouter, Route, type EndpointHandler } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * type Low = (context: Record<string, string>, scope: { method: string }) => Promise<string>;
 * const router = new AsgiRouter<Low>({
 *   routes: [
 *     new Route("/{name}", { handler: async (context) => context.name!, methods: ["POST"] }),
 *   ],
 * });
 * const [handler, context]: [EndpointHandler<Low>, Record<string, string>] = router
 *   .getRoute("/ada");
 * assertEquals(await handler(context, { method: "POST" }), "ada");
 * ```
 */
export type EndpointHandler<H extends AnyHandler = AnyHandler> = (
  ...args: Parameters<H> | [...Parameters<H>, DispatchOptions]
) => Promise<Awaited<ReturnType<H>>>;

/**
 * The result of {@linkcode AsgiRouter.match}: the routes registered for the matched pattern,
 * their methods and the path's variables. Enough to answer 404 and 405 (with `Allow`) without
 * exceptions.
 *
 * @typeParam H The handler type.
 *
 * @example Answering 405 with an Allow header
 * ```ts
 * import { AsgiRouter, Route, type RouteMatch } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * const router = new AsgiRouter({ routes: [new Route("/", { handler: () => "home" })] });
 * const match: RouteMatch | undefined = router.match("/");
 * assertEquals(match?.routeFor("POST"), undefined);
 * assertEquals(match?.allowed.join(", "), "GET");
 * ```
 */
export interface RouteMatch<H extends AnyHandler = AnyHandler> {
  /** Every route registered for the matched pattern, in registration order. */
  readonly routes: readonly Route<H>[];
  /** The union of their methods, upper-case and sorted. */
  readonly allowed: readonly string[];
  /** The path's variables. A fresh object per match, yours to keep or change. */
  readonly context: PathContext;
  /**
   * The route serving `method`.
   *
   * @param method An upper-case HTTP method, compared exactly.
   * @returns The route, or `undefined` when none serves it (answer 405).
   */
  routeFor(method: string): Route<H> | undefined;
}

/**
 * Options of an {@linkcode AsgiRouter}.
 *
 * @typeParam H The handler type.
 *
 * @example A strict router
 * ```ts
 * import { AsgiRouter, type AsgiRouterOptions } from "@stellarator/stellarator/router";
 *
 * const options: AsgiRouterOptions<() => void> = { trailingSlash: "strict" };
 * new AsgiRouter(options);
 * ```
 */
export interface AsgiRouterOptions<H extends AnyHandler = AnyHandler> {
  /**
   * Routes to add, in order, as with {@linkcode AsgiRouter.addRoute}.
   *
   * @default {[]}
   */
  routes?: Iterable<Route<H>>;
  /**
   * `"relaxed"` drops one trailing slash from patterns and paths (not from the root `/`);
   * `"strict"` matches them as written.
   *
   * @default {"relaxed"}
   */
  trailingSlash?: "relaxed" | "strict";
  /**
   * Longest path, in UTF-16 code units, the router looks at; longer paths match nothing.
   *
   * @default {8192}
   */
  maxPathLength?: number;
  /**
   * Accept regexes the ReDoS guard refuses. The guard admits a regex only if the engine takes
   * at most 128 steps per character of the path on it, whatever the path (it counts the ways
   * the regex can match each prefix), which keeps any lookup under 10 ms at the default
   * `maxPathLength`; it also refuses routes where the engine would have to place two
   * ambiguous variables. Only for regexes you trust on paths you trust.
   *
   * @default {false}
   */
  allowUnsafeRegex?: boolean;
  /**
   * Lookups served by walking the tree after the route set changes, before the router generates
   * a lookup function specialised to its routes (with `new Function`; same results, up to 1.4
   * times as fast on small trees). `0` compiles at the first lookup; `Infinity` never compiles, for
   * environments whose Content-Security-Policy forbids `unsafe-eval` (where the router also
   * falls back by itself). Trees of more than 512 nodes (roughly 300 routes) are never compiled,
   * whatever this says: V8 leaves functions that large unoptimized, and walking is faster.
   * Compiling takes about 1 ms per 100 routes, so the default keeps it out of start-up and
   * short-lived routers.
   *
   * @default {1000}
   */
  compileAfter?: number;
}

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * Base class of the router's errors.
 *
 * @example Catching any router error
 * ```ts
 * import { AsgiRouter, RouterError } from "@stellarator/stellarator/router";
 * import { assertInstanceOf, assertThrows } from "@std/assert";
 *
 * const error = assertThrows(() => new AsgiRouter().getRoute("/nowhere"));
 * assertInstanceOf(error, RouterError);
 * ```
 */
export class RouterError extends Error {
  /**
   * Creates the error.
   *
   * @param message What went wrong.
   */
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * No route matches the path (404).
 *
 * @example A miss
 * ```ts
 * import { AsgiRouter, UnknownEndpoint } from "@stellarator/stellarator/router";
 * import { assertEquals, assertThrows } from "@std/assert";
 *
 * const error = assertThrows(() => new AsgiRouter().getRoute("/x"), UnknownEndpoint);
 * if (error instanceof UnknownEndpoint) {
 *   assertEquals(error.path, "/x");
 *   assertEquals(error.reason, "no-route");
 * }
 * ```
 */
export class UnknownEndpoint extends RouterError {
  /** The path as given. */
  readonly path: string;
  /** `"no-route"` when no pattern matches, `"path-too-long"` beyond `maxPathLength`. */
  readonly reason: "no-route" | "path-too-long";
  /**
   * Creates the error.
   *
   * @param path The path as given.
   * @param reason Why nothing matched.
   * @param maxPathLength The router's limit, quoted when the path exceeds it.
   */
  constructor(
    path: string,
    reason: "no-route" | "path-too-long" = "no-route",
    maxPathLength = DEFAULT_MAX_PATH_LENGTH,
  ) {
    super(
      reason === "no-route"
        ? `No route matches "${shorten(path)}"`
        : `Path of ${path.length} characters is longer than maxPathLength (${maxPathLength}), ` +
          `so no route matches it; raise maxPathLength if such paths are legitimate`,
    );
    this.path = path;
    this.reason = reason;
  }
}

/**
 * A route matches the path but none serves the method (405).
 *
 * @example The wrong method
 * ```ts
 * import { AsgiRouter, MethodNotAllowed, Route } from "@stellarator/stellarator/router";
 * import { assertEquals, assertRejects } from "@std/assert";
 *
 * const router = new AsgiRouter({ routes: [new Route("/", { handler: () => "ok" })] });
 * const [handler] = router.getRoute("/");
 * const error = await assertRejects(() => handler({ method: "POST" }), MethodNotAllowed);
 * if (error instanceof MethodNotAllowed) assertEquals(error.allowed, ["GET"]);
 * ```
 */
export class MethodNotAllowed extends RouterError {
  /** The method asked for. */
  readonly method: string;
  /** The methods the path's routes serve, upper-case and sorted (for an `Allow` header). */
  readonly allowed: readonly string[];
  /**
   * Creates the error.
   *
   * @param method The method asked for.
   * @param allowed The methods served.
   * @param pattern The matched pattern, quoted in the message.
   */
  constructor(method: string, allowed: readonly string[], pattern = "") {
    super(
      `Method "${method}" is not allowed${pattern === "" ? "" : ` on route "${pattern}"`}; ` +
        `use one of ${allowed.join(", ")}`,
    );
    this.method = method;
    this.allowed = allowed;
  }
}

/**
 * A route has the same shape as one already added (variable names aside) and shares a method
 * with it.
 *
 * @example Two GET routes for one shape
 * ```ts
 * import { AsgiRouter, Route, RouteConflict } from "@stellarator/stellarator/router";
 * import { assertEquals, assertThrows } from "@std/assert";
 *
 * const router = new AsgiRouter({ routes: [new Route("/x/{a}", { handler: () => {} })] });
 * const error = assertThrows(
 *   () => router.addRoute(new Route("/x/{b}", { handler: () => {} })),
 *   RouteConflict,
 * );
 * if (error instanceof RouteConflict) {
 *   assertEquals(error.conflictsWith.path, "/x/{a}");
 *   assertEquals(error.methods, ["GET"]);
 * }
 * ```
 */
export class RouteConflict extends RouterError {
  /** The route that was being added. */
  readonly route: Route;
  /** The route already registered. */
  readonly conflictsWith: Route;
  /** The methods both serve, upper-case and sorted. */
  readonly methods: readonly string[];
  /**
   * Creates the error.
   *
   * @param route The route being added.
   * @param conflictsWith The route already registered.
   * @param methods The shared methods.
   */
  constructor(route: Route, conflictsWith: Route, methods: readonly string[]) {
    super(
      `Cannot add route "${route.path}" for ${methods.join(", ")}: it conflicts with ` +
        `"${conflictsWith.path}", which already serves ${methods.length > 1 ? "them" : "it"}; ` +
        `give one of them other methods or another path`,
    );
    this.route = route;
    this.conflictsWith = conflictsWith;
    this.methods = methods;
  }
}

/**
 * A malformed route pattern, or a regex the ReDoS guard refuses.
 *
 * @example A missing brace
 * ```ts
 * import { InvalidRoutePattern, Route } from "@stellarator/stellarator/router";
 * import { assertEquals, assertThrows } from "@std/assert";
 *
 * const error = assertThrows(
 *   () => new Route("/a/{b", { handler: () => {} }),
 *   InvalidRoutePattern,
 * );
 * if (error instanceof InvalidRoutePattern) assertEquals(error.position, 3);
 * ```
 */
export class InvalidRoutePattern extends RouterError {
  /** The pattern. */
  readonly pattern: string;
  /** Index of the offending character in the pattern. */
  readonly position: number;
  /** The problem, without the pattern. */
  readonly reason: string;
  /**
   * Creates the error.
   *
   * @param pattern The pattern.
   * @param position Index of the offending character.
   * @param reason The problem and its fix.
   */
  constructor(pattern: string, position: number, reason: string) {
    super(`Invalid route pattern "${pattern}" at position ${position}: ${reason}`);
    this.pattern = pattern;
    this.position = position;
    this.reason = reason;
  }
}

// ---------------------------------------------------------------------------------------------
// Routes

const DEFAULT_MAX_PATH_LENGTH = 8192;
const KNOWN_METHODS = [
  "CONNECT",
  "DELETE",
  "GET",
  "HEAD",
  "OPTIONS",
  "PATCH",
  "POST",
  "PUT",
  "TRACE",
];
const SLASH = 0x2f;

/** Reads a route's parsed pattern; set by {@linkcode Route}'s static block. */
let tokensOf: (route: Route) => Token[] | undefined;

function describe(value: unknown): string {
  if (typeof value === "string") return `"${value}"`;
  if (typeof value === "function") return "a function";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : String(value);
}

function shorten(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/**
 * A pattern, its handler and the methods it serves. The pattern is checked when the route is
 * constructed; conflicts and the ReDoS guard when it is added to a router.
 *
 * @typeParam H The handler type.
 *
 * @example Routes
 * ```ts
 * import { Route } from "@stellarator/stellarator/router";
 * import { assertEquals } from "@std/assert";
 *
 * const home = new Route("/", { handler: () => "home" });
 * assertEquals(home.methods, ["GET"]);
 * const user = new Route("/other_handler/{name:[a-z1-9]+}", {
 *   handler: () => "user",
 *   methods: ["post"],
 * });
 * assertEquals(user.methods, ["POST"]);
 * ```
 */
export class Route<H extends AnyHandler = AnyHandler> {
  /** The pattern as written. */
  readonly path: string;
  /** The handler. */
  readonly handler: H;
  /** The methods served, upper-case, without duplicates, in the order given. */
  readonly methods: readonly string[];
  readonly #tokens: Token[];

  static {
    tokensOf = (route) => #tokens in route ? route.#tokens : undefined;
  }

  /**
   * Creates a route.
   *
   * @param path The pattern, starting with `/`.
   * @param options The handler and methods.
   * @throws {TypeError} If `path` is not a string, the handler is not a function, or `methods`
   * is empty or names an unknown method.
   * @throws {InvalidRoutePattern} If the pattern is malformed or a regex does not compile.
   */
  constructor(path: string, options: RouteOptions<H>) {
    if (typeof path !== "string") {
      throw new TypeError(
        `Route pattern must be a string like "/users/{id}", got ${describe(path)}`,
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new TypeError(
        `Route "${path}" needs an options object, got ${describe(options)}; ` +
          `pass { handler: (...args) => ... }`,
      );
    }
    const { handler, methods } = options;
    if (typeof handler !== "function") {
      throw new TypeError(
        `Route "${path}" needs a handler function, got ${describe(handler)}; ` +
          `pass { handler: (...args) => ... }`,
      );
    }
    this.path = path;
    this.handler = handler;
    this.methods = methods === undefined ? GET_ONLY : sharedList(checkMethods(path, methods));
    try {
      this.#tokens = parsePattern(path);
    } catch (error) {
      if (error instanceof PatternError) {
        throw new InvalidRoutePattern(path, error.position, error.message);
      }
      throw error;
    }
    Object.freeze(this);
  }
}

/**
 * Frozen method lists, shared by every route and endpoint with the same list: most of 10 000
 * routes serve `["GET"]`, and one array each is 10 000 objects to allocate and collect.
 */
const sharedLists = new Map<string, readonly string[]>();

const GET_ONLY: readonly string[] = Object.freeze(["GET"]);
sharedLists.set("GET", GET_ONLY);

function sharedList(list: readonly string[]): readonly string[] {
  const key = list.join(" ");
  let shared = sharedLists.get(key);
  if (shared === undefined) {
    shared = Object.freeze(list.slice());
    if (sharedLists.size < 1024) sharedLists.set(key, shared);
  }
  return shared;
}

function checkMethods(path: string, methods: unknown): string[] {
  if (!Array.isArray(methods)) {
    throw new TypeError(
      `Route "${path}" needs methods as an array, got ${describe(methods)}; ` +
        `pass e.g. { methods: ["GET"] }`,
    );
  }
  if (methods.length === 0) {
    throw new TypeError(
      `Route "${path}" has no methods; pass at least one, e.g. { methods: ["GET"] }`,
    );
  }
  const out: string[] = [];
  for (const method of methods) {
    if (typeof method !== "string" || method === "") {
      throw new TypeError(
        `Route "${path}" has an empty or non-string method ${describe(method)}; ` +
          `use one of ${KNOWN_METHODS.join(", ")}`,
      );
    }
    const upper = method.toUpperCase();
    if (!KNOWN_METHODS.includes(upper)) {
      throw new TypeError(
        `Route "${path}" has an unknown method "${method}"; use one of ${KNOWN_METHODS.join(", ")}`,
      );
    }
    if (!out.includes(upper)) out.push(upper);
  }
  return out;
}

/** Drops one trailing slash from the last literal (relaxed mode), except from the root. */
function relaxTokens(tokens: Token[]): Token[] {
  const last = tokens[tokens.length - 1];
  if (
    last === undefined || last.kind !== LITERAL || !last.text.endsWith("/") ||
    (tokens.length === 1 && last.text === "/")
  ) return tokens;
  const text = last.text.slice(0, -1);
  const out = tokens.slice(0, -1);
  if (text !== "") out.push({ ...last, text });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Endpoints: everything registered for one shape

class Endpoint<H extends AnyHandler> {
  /** The routes of this shape, registration order; replaced (never mutated) on change. */
  routes: readonly Route<H>[] = [];
  /** Union of their methods, sorted; replaced on change. */
  allowed: readonly string[] = [];
  /** Method of each route method pair, parallel to {@linkcode byMethod}; replaced on change. */
  methods: readonly string[] = NO_STRINGS;
  byMethod: readonly Route<H>[] = [];
  /** `methods[0]` and `byMethod[0]`, for the common one-method endpoint. */
  firstMethod = "";
  firstRoute: Route<H> | undefined;
  /** Context keys and the capture slot each reads: first route's names first. */
  keys: readonly string[] = NO_STRINGS;
  slots: readonly number[] = [];
  /** The normalized tokens of the shape (names from the first route). */
  readonly tokens: readonly Token[];
  /** Registration index of the first route: the tie-breaker "registered first". */
  readonly order: number;
  #handler: EndpointHandler<H> | undefined;

  constructor(tokens: readonly Token[], order: number) {
    this.tokens = tokens;
    this.order = order;
  }

  /** The handler {@linkcode AsgiRouter.getRoute} returns, made on first use. */
  get handler(): EndpointHandler<H> {
    return this.#handler ??= makeEndpointHandler(this);
  }

  // Arrays are built at their final size and replaced, never grown: a pushed-to array reserves
  // room for 17 elements, and a build of 10 000 routes spent half its time collecting garbage.
  add(route: Route<H>, tokens: readonly Token[]): void {
    this.routes = Object.freeze(this.routes.length === 0 ? [route] : this.routes.concat(route));
    if (this.methods.length === 0) {
      this.methods = route.methods;
      if (route.methods.length === 1) {
        // The common endpoint: one route, one method. One frozen array serves as both lists.
        this.allowed = route.methods;
        this.byMethod = this.routes;
      } else {
        this.allowed = sharedList(route.methods.slice().sort());
        this.byMethod = route.methods.map(() => route);
      }
    } else {
      this.methods = this.methods.concat(route.methods);
      this.allowed = sharedList([...new Set(this.methods)].sort());
      this.byMethod = this.byMethod.concat(route.methods.map(() => route));
    }
    this.firstMethod = this.methods[0]!;
    this.firstRoute = this.byMethod[0];
    let slot = 0;
    let keys: string[] | undefined;
    let slots: number[] | undefined;
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i]!;
      if (token.kind === LITERAL) continue;
      if (!this.keys.includes(token.name) && !(keys?.includes(token.name) ?? false)) {
        (keys ??= []).push(token.name);
        (slots ??= []).push(slot);
      }
      slot++;
    }
    if (keys !== undefined) {
      // concat() makes exact-size copies; the pushed-to arrays die young.
      this.keys = this.keys.concat(keys);
      this.slots = this.slots.concat(slots!);
    }
    // Compiled on the first match: new Function costs ~10 µs, too much for 10 000 routes at once.
    this.context = this.keys.length === 0 ? emptyContext : compileContextOnFirstUse;
  }

  routeFor(method: string): Route<H> | undefined {
    // Most endpoints serve one method: answered from the endpoint itself, without touching the
    // arrays (three objects scattered over the heap, so cache misses in large routers).
    if (method === this.firstMethod) return this.firstRoute;
    const methods = this.methods;
    for (let i = 1; i < methods.length; i++) {
      if (methods[i] === method) return this.byMethod[i];
    }
    return undefined;
  }

  /** The context for `path`, read from the capture slots of the last lookup. */
  context: (path: string, caps: Int32Array) => PathContext = emptyContext;
}

function emptyContext(): PathContext {
  return {};
}

const NO_STRINGS: readonly string[] = Object.freeze([]);

/** An endpoint's first `context` (a method, so shared and no closure per endpoint). */
function compileContextOnFirstUse<H extends AnyHandler>(
  this: Endpoint<H>,
  path: string,
  caps: Int32Array,
): PathContext {
  this.context = compileContext(this.keys, this.slots);
  return this.context(path, caps);
}

/**
 * A function building the context object for the given keys and capture slots.
 *
 * Storing keys from an array (`context[keys[i]] = …`) makes V8's store sites megamorphic once a
 * router has many key sets, and every property then takes a slow path (~15 ns each); a small
 * generated function per endpoint returns an object literal with constant keys in a few ns.
 * The keys are variable names (identifiers, quoted anyway), so no outside text reaches the
 * generated code. `__proto__` is written as a computed key, which defines an own property
 * instead of setting the prototype. Where a Content-Security-Policy forbids `new Function`,
 * the loop is the fallback.
 */
function compileContext(
  keys: readonly string[],
  slots: readonly number[],
): (path: string, caps: Int32Array) => PathContext {
  if (keys.length === 0) return emptyContext;
  // One function per key set, shared by every endpoint with it: a function per endpoint is
  // called too rarely in a large router to leave V8's interpreter (a lookup at 10 000 routes
  // took twice as long), and a cache of functions is also a smaller heap.
  const signature = keys.join(",") + ";" + slots.join(",");
  let shared = sharedContexts.get(signature);
  if (shared === undefined) {
    shared = makeContext(keys, slots);
    if (sharedContexts.size < 4096) sharedContexts.set(signature, shared);
  }
  return shared;
}

/** Context builders by key set: module-wide, as they depend on nothing else. */
const sharedContexts = new Map<string, (path: string, caps: Int32Array) => PathContext>();

function makeContext(
  keys: readonly string[],
  slots: readonly number[],
): (path: string, caps: Int32Array) => PathContext {
  const entries = keys.map((key, i) => {
    const slot = slots[i]! << 1;
    const name = key === "__proto__" ? `["__proto__"]` : JSON.stringify(key);
    return `${name}: p.slice(c[${slot}], c[${slot + 1}])`;
  });
  try {
    return new Function("p", "c", `return { ${entries.join(", ")} };`) as (
      path: string,
      caps: Int32Array,
    ) => PathContext;
  } catch {
    return (path, caps) => {
      const context: PathContext = {};
      for (let i = 0; i < keys.length; i++) {
        const slot = slots[i]! << 1;
        Object.defineProperty(context, keys[i]!, {
          value: path.slice(caps[slot]!, caps[slot + 1]!),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return context;
    };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function dispatchMethod(args: unknown[]): string {
  const last = args[args.length - 1];
  if (isPlainObject(last) && typeof last.method === "string") return last.method;
  const scope = args[1];
  if (typeof scope === "object" && scope !== null) {
    const method = (scope as { method?: unknown }).method;
    if (typeof method === "string") return method;
  }
  return "GET";
}

function makeEndpointHandler<H extends AnyHandler>(endpoint: Endpoint<H>): EndpointHandler<H> {
  async function endpointHandler(...args: unknown[]): Promise<unknown> {
    const method = dispatchMethod(args);
    const route = endpoint.routeFor(method);
    if (route === undefined) {
      throw new MethodNotAllowed(method, endpoint.allowed, endpoint.routes[0]?.path);
    }
    return await route.handler(...args);
  }
  return endpointHandler as EndpointHandler<H>;
}

class Match<H extends AnyHandler> implements RouteMatch<H> {
  readonly context: PathContext;
  readonly #endpoint: Endpoint<H>;
  constructor(endpoint: Endpoint<H>, context: PathContext) {
    this.#endpoint = endpoint;
    this.context = context;
  }
  get routes(): readonly Route<H>[] {
    return this.#endpoint.routes;
  }
  get allowed(): readonly string[] {
    return this.#endpoint.allowed;
  }
  routeFor(method: string): Route<H> | undefined {
    return this.#endpoint.routeFor(method);
  }
}

// ---------------------------------------------------------------------------------------------
// Matchers for the routes below a variable that can end at several places

/** Matches the rest of one route from the start of its first variable. */
interface SuffixMatcher {
  /** Whether the suffix matches `path` from `pos` to the end; writes its capture slots. */
  run(path: string, pos: number, caps: Int32Array): boolean;
}

const UNKNOWN = -2;
/** "No route below": a small integer, not Infinity, so the field stays a V8 Smi. */
const NO_ROUTE = 2 ** 30;

/**
 * Matches a suffix made of plain variables, catch-alls and literal text, exactly as the
 * backtracking regex `([^/]+)L0([^/]+)L1…$` would (each variable greedy), in linear time.
 *
 * A plain variable never contains `/`, so the segment each variable starts in is fixed by the
 * slashes of the literal text before it. Whether the rest matches from an end `e` of variable
 * `j` does not depend on where `j` started, so the greedy choice for `j` is one number per
 * lookup: the largest valid end in its segment (`best[j]`), found by scanning the occurrences
 * of the following literal from the right and computed at most once. The regex engine instead
 * re-explores the same ends for every start and takes seconds on crafted 2 KB paths.
 */
class GreedyMatcher implements SuffixMatcher {
  /** Literal text after each variable; `""` only after the last. */
  readonly #literals: string[];
  readonly #catchAll: boolean;
  /** Capture slot of the first variable. */
  readonly #slot: number;
  /** Per lookup: the greedy end of each variable in its segment, -1 for none. */
  readonly #best: Int32Array;

  constructor(suffix: readonly Token[], slot: number) {
    const literals: string[] = [];
    for (let i = 0; i < suffix.length; i++) {
      if (suffix[i]!.kind === LITERAL) continue;
      const next = suffix[i + 1];
      literals.push(next !== undefined && next.kind === LITERAL ? next.text : "");
    }
    this.#literals = literals;
    this.#catchAll = suffix[suffix.length - 1]!.kind === CATCH_ALL;
    this.#slot = slot;
    this.#best = new Int32Array(literals.length);
  }

  run(path: string, pos: number, caps: Int32Array): boolean {
    const best = this.#best;
    // A loop, not best.fill(): a builtin call costs more than the two or three stores.
    for (let j = 0; j < best.length; j++) best[j] = UNKNOWN;
    if (this.#end(0, pos, path) <= pos) return false;
    const literals = this.#literals;
    let start = pos;
    let slot = this.#slot << 1;
    for (let j = 0; j < literals.length; j++) {
      caps[slot++] = start;
      caps[slot++] = best[j]!;
      start = best[j]! + literals[j]!.length;
    }
    return true;
  }

  /** The greedy end of variable `j`, given any start `q` in its segment; -1 if none. */
  #end(j: number, q: number, path: string): number {
    const best = this.#best;
    if (best[j] !== UNKNOWN) return best[j]!;
    const n = path.length;
    const literals = this.#literals;
    const literal = literals[j]!;
    const last = j === literals.length - 1;
    let result = -1;
    if (last && this.#catchAll) result = n;
    else {
      let segEnd = path.indexOf("/", q);
      if (segEnd === -1) segEnd = n;
      if (last) {
        const e = n - literal.length;
        if (literal === "") result = segEnd === n ? n : -1;
        else if (e >= 0 && e <= segEnd && path.startsWith(literal, e)) result = e;
      } else {
        let e = path.lastIndexOf(literal, segEnd);
        // Misses mostly end here: the literal is nowhere before the segment's end.
        const segStart = e === -1 ? 0 : path.lastIndexOf("/", q - 1) + 1;
        while (e > segStart) {
          const next = e + literal.length;
          if (this.#end(j + 1, next, path) > next) {
            result = e;
            break;
          }
          e = path.lastIndexOf(literal, e - 1);
        }
      }
    }
    best[j] = result;
    return result;
  }
}

/**
 * Matches a suffix containing a constrained variable with the regex engine itself (sticky,
 * `d` flag for positions): exactly the reference semantics. The ReDoS guard admits only
 * suffixes with at most one variable of ambiguous length.
 */
class RegexMatcher implements SuffixMatcher {
  readonly #regex: RegExp;
  readonly #groups: number[];
  readonly #slot: number;

  constructor(suffix: readonly Token[], slot: number) {
    let source = "";
    let group = 1;
    const groups: number[] = [];
    for (const token of suffix) {
      if (token.kind === LITERAL) {
        source += escapeRegex(token.text);
        continue;
      }
      groups.push(group);
      if (token.kind === PLAIN) source += "([^/]+)";
      else if (token.kind === CATCH_ALL) source += "([^]+)";
      else {
        source += `(${token.regex})`;
        group += token.facts!.groups;
      }
      group++;
    }
    this.#regex = new RegExp(source + "$", "dyu");
    this.#groups = groups;
    this.#slot = slot;
  }

  run(path: string, pos: number, caps: Int32Array): boolean {
    const regex = this.#regex;
    regex.lastIndex = pos;
    const match = regex.exec(path);
    if (match === null) return false;
    const indices = match.indices!;
    const groups = this.#groups;
    let slot = this.#slot << 1;
    for (let i = 0; i < groups.length; i++) {
      const span = indices[groups[i]!]!;
      caps[slot++] = span[0];
      caps[slot++] = span[1];
    }
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// The tree

/** Branch kinds of a variable with several ends; the first two are also bits of a mask. */
const AT_SLASH = 1; // ends at the next "/" and continues in the static child starting with "/"
const AT_END = 2; // ends at the end of the path: the endpoint of the variable node
const LIST = 4; // the routes of a static child not starting with "/", tried one by one

interface Branch<H extends AnyHandler> {
  readonly kind: typeof AT_SLASH | typeof AT_END | typeof LIST;
  /** For {@linkcode LIST}: the routes in priority order, each with its matcher. */
  readonly endpoints: readonly Endpoint<H>[];
  readonly matchers: readonly SuffixMatcher[];
}

/**
 * A tree node. Static nodes hold radix-compressed literal text; a variable node matches one
 * variable. Children are tried in priority order: the static child for the next character,
 * constrained variables in registration order, the plain variable, the catch-all.
 *
 * Lookups do not walk these objects: {@linkcode layoutTree} copies what the common case reads
 * into one flat array (see {@linkcode searchStatic}). They serve building, the generated
 * lookups, and the rare cases the flat array leaves to them (constrained variables,
 * catch-alls, variables with several ends).
 */
class Node<H extends AnyHandler> {
  /** Static: the non-empty text on the edge into this node. Variable: its display text. */
  label: string;
  /** After finalizing, static nodes: where this node's record starts in the flat tree. */
  record = -1;
  /** The routes ending here, if any. */
  endpoint: Endpoint<H> | undefined;
  plainKid: Node<H> | undefined;
  /** Variables (after finalizing): the static child starting with "/". */
  slashKid: Node<H> | undefined;
  /** Variables (after finalizing): undefined when the end is fixed, else the branches. */
  branches: Branch<H>[] | undefined;
  /** {@linkcode LITERAL} for static nodes, else the variable kind. */
  readonly kind: number;
  /** Variables: the capture slot (number of variables before this one in the route). */
  readonly slot: number;
  /**
   * First character code of each static child, parallel to {@linkcode kids}. These arrays
   * and {@linkcode regexKids} start as one shared empty array and are replaced when a child is
   * added: most nodes have none or one, and 10 000 routes make 15 000 nodes.
   */
  codes: number[] = NO_CODES;
  kids: Node<H>[] = NO_NODES;
  /** Constrained-variable children, in registration order. */
  regexKids: Node<H>[] = NO_NODES;
  catchAllKid: Node<H> | undefined;
  /** Constrained variables: the regex source, which identifies the node among siblings. */
  readonly regex: string;
  /** Constrained variables: sticky `(?:regex)(?=/|$)`, used when the end is the next "/". */
  readonly sticky: RegExp | undefined;
  /** Constrained variables: whether the regex can match "/" (then the end is not fixed). */
  readonly canMatchSlash: boolean;
  /** Scratch for finalizing: most literal characters of a route from this node on. */
  weight = 0;
  /** Scratch for finalizing: earliest registration in this subtree. */
  first = 0;
  /** Scratch for finalizing: number of nodes in this subtree. */
  size = 1;

  constructor(kind: number, label: string, token?: VariableToken, slot = 0) {
    this.kind = kind;
    this.label = label;
    this.regex = token?.regex ?? "";
    this.slot = slot;
    this.canMatchSlash = token?.facts?.canMatchSlash ?? false;
    this.sticky = kind === REGEX ? new RegExp(`(?:${this.regex})(?=/|$)`, "uy") : undefined;
  }
}

// Shared empty child lists. Not frozen, so that they keep the elements kinds of the arrays that
// replace them (a frozen array has a map of its own, and every load site would see two); never
// pushed to: addKid() replaces them, regex children are added with concat().
const NO_CODES: number[] = [];
const NO_NODES: never[] = [null as never];
NO_NODES.length = 0;

/** Adds a static child (`code` is its label's first character). */
function addKid<H extends AnyHandler>(node: Node<H>, code: number, kid: Node<H>): void {
  if (node.kids.length === 0) {
    node.codes = [code];
    node.kids = [kid];
  } else {
    node.codes.push(code);
    node.kids.push(kid);
  }
}

// ---------------------------------------------------------------------------------------------
// The flat tree that lookups walk
//
// In a large router the cost of a lookup is cache misses, not instructions: walking Node
// objects touched some ten objects scattered over the heap (the node, its child arrays, its
// label, the endpoint), and at 10 000 routes a lookup cost 2.5 times what it cost at 10.
// So the finalized tree is copied into one Int32Array, depth-first, each static node a record
// followed by its label, its child table and then its children: the records one lookup reads
// sit close together, most often in consecutive cache lines.
//
// A static node's record, at index r:
const S_LENGTH = 0; // label length
const S_CODE0 = 1; // first character code of the first static child, -1 without children
const S_KID0 = 2; // record of that child
const S_FLAGS = 3; // MANY_KIDS | HAS_VARIABLES | SLOW_VARIABLES
const S_ENDPOINT = 4; // index into the endpoint array, -1 if no route ends here
const S_TABLE = 5; // MANY_KIDS: index of the child table
const S_VARIABLE = 6; // HAS_VARIABLES: the plain variable's record; SLOW_VARIABLES: node index
const S_LABEL = 7; // label[i] for i ≥ 1 is at r + S_LABEL + i - 1 (label[0] is known to match)
// A plain variable's record, when its end is the next "/" (no branches):
const V_SLOT = 0; // capture slot × 2
const V_ENDPOINT = 1; // index into the endpoint array, -1
const V_SLASH = 2; // record of the static child starting with "/", -1
const V_SIZE = 3;
// A child table starts with a lower bound and a count. Bound ≥ 0: a range table, the child
// for code c at t + 2 + c - bound (-1 where none). Bound -1: `count` pairs of code and record.

const MANY_KIDS = 1;
const HAS_VARIABLES = 2;
/**
 * The variable children include a constrained variable, a catch-all or a plain variable with
 * several possible ends: they are tried through the node objects.
 */
const SLOW_VARIABLES = 4;

/** Range tables are used from this many children on, if no wider than {@linkcode rangeSpan}. */
const RANGE_KIDS = 3;

/** The span of the codes of `node`'s static children, if a range table suits them, else 0. */
function rangeSpan<H extends AnyHandler>(node: Node<H>): number {
  const codes = node.codes;
  if (codes.length < RANGE_KIDS) return 0;
  let min = codes[0]!;
  let max = min;
  for (let i = 1; i < codes.length; i++) {
    if (codes[i]! < min) min = codes[i]!;
    if (codes[i]! > max) max = codes[i]!;
  }
  const span = max - min + 1;
  return span <= Math.max(32, codes.length * 4) ? span : 0;
}

/** Whether a static node's variable children need the node objects. */
function slowVariables<H extends AnyHandler>(node: Node<H>): boolean {
  return node.regexKids.length > 0 || node.catchAllKid !== undefined ||
    (node.plainKid !== undefined && node.plainKid.branches !== undefined);
}

/** The flat tree a router's lookups walk (see {@linkcode searchStatic}). */
interface FlatTree<H extends AnyHandler> {
  readonly records: Int32Array;
  readonly endpoints: Endpoint<H>[];
  /** Static nodes with {@linkcode SLOW_VARIABLES}. */
  readonly nodes: Node<H>[];
}

/** Number of Int32Array elements the records of `node`'s subtree take. */
function recordSize<H extends AnyHandler>(node: Node<H>): number {
  let size = 0;
  if (node.kind === LITERAL) {
    size = S_LABEL + node.label.length - 1;
    if (node.kids.length > 1) {
      const span = rangeSpan(node);
      size += 2 + (span > 0 ? span : node.kids.length * 2);
    }
    const kids = node.kids;
    for (let i = 0; i < kids.length; i++) size += recordSize(kids[i]!);
    const regexKids = node.regexKids;
    for (let i = 0; i < regexKids.length; i++) size += recordSize(regexKids[i]!);
    if (node.plainKid !== undefined) size += recordSize(node.plainKid);
  } else {
    if (node.kind === PLAIN && node.branches === undefined) size = V_SIZE;
    if (node.slashKid !== undefined) size += recordSize(node.slashKid);
  }
  return size;
}

/** Copies the finalized tree below `root` into a {@linkcode FlatTree}, depth-first. */
function layoutTree<H extends AnyHandler>(root: Node<H>): FlatTree<H> {
  const records = new Int32Array(recordSize(root));
  const endpoints: Endpoint<H>[] = [];
  const nodes: Node<H>[] = [];
  let next = 0;
  const endpointIndex = (node: Node<H>): number =>
    node.endpoint === undefined ? -1 : endpoints.push(node.endpoint) - 1;
  const emit = (node: Node<H>): number => {
    const r = next;
    if (node.kind !== LITERAL) {
      // Only the "/" child of a variable is walked from the flat tree; its other children
      // belong to branches, which match with their own matchers.
      if (node.kind === PLAIN && node.branches === undefined) {
        next += V_SIZE;
        records[r + V_SLOT] = node.slot << 1;
        records[r + V_ENDPOINT] = endpointIndex(node);
        records[r + V_SLASH] = node.slashKid === undefined ? -1 : emit(node.slashKid);
      } else if (node.slashKid !== undefined) emit(node.slashKid);
      return r;
    }
    node.record = r;
    const label = node.label;
    const kids = node.kids;
    records[r + S_LENGTH] = label.length;
    records[r + S_CODE0] = kids.length === 0 ? -1 : node.codes[0]!;
    records[r + S_ENDPOINT] = endpointIndex(node);
    for (let i = 1; i < label.length; i++) records[r + S_LABEL + i - 1] = label.charCodeAt(i);
    next = r + S_LABEL + label.length - 1;
    let flags = 0;
    let table = -1;
    let span = 0;
    let low = 0;
    if (kids.length > 1) {
      flags |= MANY_KIDS;
      table = next;
      span = rangeSpan(node);
      if (span > 0) {
        low = Math.min(...node.codes);
        records[table] = low;
        records[table + 1] = span;
        records.fill(-1, table + 2, table + 2 + span);
        next += 2 + span;
      } else {
        records[table] = -1;
        records[table + 1] = kids.length;
        next += 2 + kids.length * 2;
      }
    }
    for (let i = 0; i < kids.length; i++) {
      const kid = emit(kids[i]!);
      const code = node.codes[i]!;
      if (i === 0) records[r + S_KID0] = kid;
      if (span > 0) records[table + 2 + code - low] = kid;
      else if (table !== -1) {
        records[table + 2 + i * 2] = code;
        records[table + 3 + i * 2] = kid;
      }
    }
    if (
      node.regexKids.length > 0 || node.plainKid !== undefined || node.catchAllKid !== undefined
    ) {
      flags |= HAS_VARIABLES;
    }
    const regexKids = node.regexKids;
    for (let i = 0; i < regexKids.length; i++) emit(regexKids[i]!);
    const plain = node.plainKid === undefined ? -1 : emit(node.plainKid);
    if (slowVariables(node)) {
      flags |= SLOW_VARIABLES;
      records[r + S_VARIABLE] = nodes.push(node) - 1;
    } else records[r + S_VARIABLE] = plain;
    records[r + S_FLAGS] = flags;
    records[r + S_TABLE] = table;
    return r;
  };
  emit(root);
  return { records, endpoints, nodes };
}

/**
 * The flat tree of the router doing the current lookup (set by its `#find`; lookups are
 * synchronous and call no outside code, so one module-wide slot is enough).
 */
let tree: FlatTree<AnyHandler> = { records: new Int32Array(0), endpoints: [], nodes: [] };

/** The record of the static child of record `r` for `code`, or -1. */
function staticKid(records: Int32Array, r: number, code: number): number {
  if (code === records[r + S_CODE0]) return records[r + S_KID0]!;
  if ((records[r + S_FLAGS]! & MANY_KIDS) === 0) return -1;
  const t = records[r + S_TABLE]!;
  const low = records[t]!;
  const count = records[t + 1]!;
  if (low >= 0) {
    const i = code - low;
    return i >= 0 && i < count ? records[t + 2 + i]! : -1;
  }
  for (let i = 1; i < count; i++) {
    if (records[t + 2 + i * 2] === code) return records[t + 3 + i * 2]!;
  }
  return -1;
}

/**
 * Whether the label of the static node at record `r` occurs in `path` at `pos`; its first
 * character is already known to match.
 */
function labelAt(records: Int32Array, r: number, path: string, pos: number): boolean {
  const length = records[r + S_LENGTH]!;
  if (length === 1) return true;
  if (pos + length > path.length) return false;
  const at = r + S_LABEL - 1;
  for (let i = 1; i < length; i++) {
    if (path.charCodeAt(pos + i) !== records[at + i]) return false;
  }
  return true;
}

/** Finds the endpoint for `path` below the static node at record `r`, whose text ends at `pos`. */
function searchStatic(
  r: number,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<AnyHandler> | undefined {
  const records = tree.records;
  const n = path.length;
  // One loop, recursing only where there is something to backtrack to: down a static child of a
  // node without variable children (which fails exactly when that child fails), and on from a
  // plain variable ending at the next "/" (nothing is tried after it).
  for (;;) {
    for (;;) {
      if (pos === n) {
        const endpoint = records[r + S_ENDPOINT]!;
        if (endpoint >= 0) return tree.endpoints[endpoint];
        break;
      }
      const kid = staticKid(records, r, path.charCodeAt(pos));
      if (kid === -1 || !labelAt(records, kid, path, pos)) break;
      if ((records[r + S_FLAGS]! & HAS_VARIABLES) === 0) {
        r = kid;
        pos += records[kid + S_LENGTH]!;
        continue;
      }
      const found = searchStatic(kid, path, pos + records[kid + S_LENGTH]!, caps);
      if (found !== undefined) return found;
      break;
    }
    const flags = records[r + S_FLAGS]!;
    if ((flags & HAS_VARIABLES) === 0) return undefined;
    if ((flags & SLOW_VARIABLES) !== 0) {
      return searchVariables(tree.nodes[records[r + S_VARIABLE]!]!, path, pos, caps);
    }
    // The common case, a plain variable ending at the next "/", as atSegmentEnd() does it.
    if (pos === n) return undefined;
    const v = records[r + S_VARIABLE]!;
    const e = path.indexOf("/", pos);
    if (e === pos) return undefined;
    const slot = records[v + V_SLOT]!;
    if (e === -1) {
      const endpoint = records[v + V_ENDPOINT]!;
      if (endpoint < 0) return undefined;
      caps[slot] = pos;
      caps[slot + 1] = n;
      return tree.endpoints[endpoint];
    }
    const kid = records[v + V_SLASH]!;
    if (kid === -1 || !labelAt(records, kid, path, e)) return undefined;
    caps[slot] = pos;
    caps[slot + 1] = e;
    r = kid;
    pos = e + records[kid + S_LENGTH]!;
  }
}

/** Tries the variable children of static node `node`, whose text ends at `pos`. */
function searchVariables<H extends AnyHandler>(
  node: Node<H>,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<H> | undefined {
  const regexKids = node.regexKids;
  for (let i = 0; i < regexKids.length; i++) {
    const found = searchVariable(regexKids[i]!, path, pos, caps);
    if (found !== undefined) return found;
  }
  const n = path.length;
  if (pos === n) return undefined;
  if (node.plainKid !== undefined) {
    const found = searchVariable(node.plainKid, path, pos, caps);
    if (found !== undefined) return found;
  }
  const catchAll = node.catchAllKid;
  if (catchAll !== undefined) {
    const slot = catchAll.slot << 1;
    caps[slot] = pos;
    caps[slot + 1] = n;
    return catchAll.endpoint;
  }
  return undefined;
}

/** Finds the endpoint for `path` below variable node `node`, whose variable starts at `pos`. */
function searchVariable<H extends AnyHandler>(
  node: Node<H>,
  path: string,
  pos: number,
  caps: Int32Array,
): Endpoint<H> | undefined {
  const branches = node.branches;
  if (branches === undefined) return atSegmentEnd(node, path, pos, caps, AT_SLASH | AT_END);
  for (let b = 0; b < branches.length; b++) {
    const branch = branches[b]!;
    if (branch.kind === LIST) {
      const matchers = branch.matchers;
      for (let i = 0; i < matchers.length; i++) {
        if (matchers[i]!.run(path, pos, caps)) return branch.endpoints[i];
      }
    } else {
      const found = atSegmentEnd(node, path, pos, caps, branch.kind);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/**
 * The variable ends where its segment ends: continue in the "/" child (`allow & AT_SLASH`) or
 * finish at the endpoint (`allow & AT_END`).
 */
function atSegmentEnd<H extends AnyHandler>(
  node: Node<H>,
  path: string,
  pos: number,
  caps: Int32Array,
  allow: number,
): Endpoint<H> | undefined {
  const e = path.indexOf("/", pos);
  if (node.kind === REGEX) {
    const sticky = node.sticky!;
    sticky.lastIndex = pos;
    if (!sticky.test(path)) return undefined;
  } else if (e === pos) return undefined;
  const slot = node.slot << 1;
  if (e === -1) {
    if ((allow & AT_END) === 0) return undefined;
    caps[slot] = pos;
    caps[slot + 1] = path.length;
    return node.endpoint;
  }
  const kid = node.slashKid;
  if (kid === undefined || (allow & AT_SLASH) === 0) return undefined;
  const records = tree.records;
  const r = kid.record;
  if (!labelAt(records, r, path, e)) return undefined;
  caps[slot] = pos;
  caps[slot + 1] = e;
  return searchStatic(r, path, e + records[r + S_LENGTH]!, caps) as Endpoint<H> | undefined;
}

// ---------------------------------------------------------------------------------------------
// Priority order of the routes below a variable (rule 2 of the module doc)

/** Token keys of a shape, one per literal character, variable, and the end (`""`). */
function priorityKeys(tokens: readonly Token[]): string[] {
  const keys: string[] = [];
  for (const token of tokens) {
    if (token.kind === LITERAL) keys.push(...token.text.split(""));
    else keys.push(`\0${token.kind}${token.regex}`);
  }
  keys.push("");
  return keys;
}

function keyClass(key: string): number {
  return key.length === 1 || key === "" ? LITERAL : key.charCodeAt(1) - 0x30;
}

/** Sorts endpoints by rule 2: a depth-first walk of the token trie, children ranked. */
function priorityOrder<H extends AnyHandler>(
  endpoints: readonly Endpoint<H>[],
): Endpoint<H>[] {
  const keyed = endpoints.map((endpoint) => {
    const keys = priorityKeys(endpoint.tokens);
    const literalsFrom: number[] = new Array(keys.length + 1).fill(0);
    for (let i = keys.length - 1; i >= 0; i--) {
      literalsFrom[i] = literalsFrom[i + 1]! + (keys[i]!.length === 1 ? 1 : 0);
    }
    return { endpoint, keys, literalsFrom };
  });
  const out: Endpoint<H>[] = [];
  const visit = (group: typeof keyed, depth: number): void => {
    if (group.length === 1) {
      out.push(group[0]!.endpoint);
      return;
    }
    const byKey = new Map<string, typeof keyed>();
    for (const item of group) {
      const key = item.keys[depth]!;
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [item]);
      else list.push(item);
    }
    const ranked = [...byKey].map(([key, items]) => ({
      key,
      items,
      cls: keyClass(key),
      weight: Math.max(...items.map((item) => item.literalsFrom[depth]!)),
      first: Math.min(...items.map((item) => item.endpoint.order)),
    }));
    ranked.sort((a, b) =>
      a.cls - b.cls || (a.cls === LITERAL ? b.weight - a.weight : 0) || a.first - b.first
    );
    for (const { items } of ranked) visit(items, depth + 1);
  };
  visit(keyed, 0);
  return out;
}

/** The index of the first token of a route at or after variable number `slot`. */
function tokenIndexOfSlot(tokens: readonly Token[], slot: number): number {
  let seen = 0;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i]!.kind === LITERAL) continue;
    if (seen === slot) return i;
    seen++;
  }
  return tokens.length;
}

/**
 * The index of the first variable whose end is not fixed by the next "/" (literal text other
 * than "/" follows it in its segment, or its regex can match "/"), or -1.
 */
function firstAmbiguousVariable(tokens: readonly Token[]): number {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === LITERAL || token.kind === CATCH_ALL) continue;
    if (token.kind === REGEX && token.facts!.canMatchSlash) return i;
    const next = tokens[i + 1];
    if (next !== undefined && next.kind === LITERAL && next.text.charCodeAt(0) !== SLASH) return i;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The router

/**
 * A radix-tree router: add {@linkcode Route}s, then look paths up with
 * {@linkcode AsgiRouter.match} (never throws) or {@linkcode AsgiRouter.getRoute} (throws
 * {@linkcode UnknownEndpoint}). The matching rules are in the module documentation.
 *
 * @typeParam H The handler type shared by the routes.
 *
 * @example The seed's example routes
 * ```ts
 * import { AsgiRouter, MethodNotAllowed, Route, UnknownEndpoint } from "@stellarator/stellarator/router";
 * import { assertEquals, assertRejects, assertThrows } from "@std/assert";
 *
 * const router = new AsgiRouter({
 *   routes: [
 *     new Route("/", { handler: async () => "OK" }),
 *     new Route("/other_handler/{name:[a-z1-9]+}", {
 *       handler: async (context: Record<string, string>) => context.name,
 *       methods: ["POST"],
 *     }),
 *   ],
 * });
 * const [handler, context] = router.getRoute("/other_handler/bob1");
 * assertEquals(context, { name: "bob1" });
 * assertEquals(await handler(context, { method: "POST" }), "bob1");
 * await assertRejects(() => handler(context, { method: "GET" }), MethodNotAllowed);
 * assertThrows(() => router.getRoute("/other_handler/Bob"), UnknownEndpoint);
 * ```
 */
export class AsgiRouter<H extends AnyHandler = AnyHandler> {
  readonly #relaxed: boolean;
  readonly #maxPathLength: number;
  readonly #allowUnsafeRegex: boolean;
  readonly #root: Node<H> = new Node(LITERAL, "/");
  #routes: Route<H>[] = [];
  /** A frozen copy of {@linkcode #routes}, made when asked for, dropped when a route is added. */
  #routesView: readonly Route<H>[] | undefined;
  /** Capture slots of the current lookup: start and end index of each variable. */
  #caps = new Int32Array(16);
  /** The string the last lookup matched: the path, without its trailing slash if relaxed. */
  #target = "";
  readonly #compileAfter: number;
  /** The generated lookup, once compiled; undefined while walking the tree. */
  #compiled: CompiledLookup<H> | undefined;
  /** Tree walks left before compiling. */
  #untilCompiled = Infinity;
  /** What lookups walk, made when the tree is finalized. */
  #tree: FlatTree<H> = layoutTree(this.#root);
  /** Whether routes were added since the variable nodes' branches were computed. */
  #dirty = false;

  /**
   * Creates a router.
   *
   * @param options Routes and matching options.
   * @throws {RangeError} If `trailingSlash`, `maxPathLength` or `compileAfter` has an invalid
   * value.
   * @throws {RouteConflict} If two of `routes` conflict.
   * @throws {InvalidRoutePattern} If the ReDoS guard refuses one of `routes`.
   */
  constructor(options: AsgiRouterOptions<H> = {}) {
    const {
      routes = [],
      trailingSlash = "relaxed",
      maxPathLength = DEFAULT_MAX_PATH_LENGTH,
      allowUnsafeRegex = false,
      compileAfter = 1000,
    } = options;
    if (trailingSlash !== "relaxed" && trailingSlash !== "strict") {
      throw new RangeError(
        `Invalid trailingSlash ${describe(trailingSlash)}; use "relaxed" or "strict"`,
      );
    }
    if (!Number.isSafeInteger(maxPathLength) || maxPathLength < 1) {
      throw new RangeError(
        `Invalid maxPathLength ${describe(maxPathLength)}; use a positive integer such as 8192`,
      );
    }
    if (
      !(compileAfter >= 0) || (!Number.isSafeInteger(compileAfter) && compileAfter !== Infinity)
    ) {
      throw new RangeError(
        `Invalid compileAfter ${describe(compileAfter)}; use a non-negative integer or Infinity`,
      );
    }
    this.#compileAfter = compileAfter;
    this.#relaxed = trailingSlash === "relaxed";
    this.#maxPathLength = maxPathLength;
    this.#allowUnsafeRegex = allowUnsafeRegex;
    for (const route of routes) this.addRoute(route);
  }

  /**
   * Every route added, in registration order.
   *
   * @example Listing routes
   * ```ts
   * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
   * import { assertEquals } from "@std/assert";
   *
   * const router = new AsgiRouter({ routes: [new Route("/a", { handler: () => {} })] });
   * assertEquals(router.routes.map((route) => route.path), ["/a"]);
   * ```
   *
   * @returns A frozen array.
   */
  get routes(): readonly Route<H>[] {
    return this.#routesView ??= Object.freeze([...this.#routes]);
  }

  /**
   * Adds a route. Routes of the same shape (same pattern, variable names aside) share one
   * endpoint and must serve disjoint methods.
   *
   * @param route The route.
   * @throws {TypeError} If `route` is not a {@linkcode Route}.
   * @throws {RouteConflict} If a route of the same shape serves one of its methods.
   * @throws {InvalidRoutePattern} If the ReDoS guard refuses it (see `allowUnsafeRegex`).
   *
   * @example Adding routes
   * ```ts
   * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
   * import { assertEquals } from "@std/assert";
   *
   * const router = new AsgiRouter();
   * router.addRoute(new Route("/items/{id}", { handler: () => "read" }));
   * router.addRoute(new Route("/items/{id}", { handler: () => "write", methods: ["PUT"] }));
   * assertEquals(router.match("/items/7")?.allowed, ["GET", "PUT"]);
   * ```
   */
  addRoute(route: Route<H>): void {
    const parsed = typeof route === "object" && route !== null ? tokensOf(route) : undefined;
    if (parsed === undefined) {
      throw new TypeError(
        `addRoute() needs a Route, got ${describe(route)}; pass new Route(path, { handler })`,
      );
    }
    const tokens = this.#relaxed ? relaxTokens(parsed) : parsed;
    this.#checkSafety(route, tokens);
    // The tree has one node per shape (literal runs, variable kinds and regexes, names aside),
    // so the node's endpoint is the shape's. A shape already present creates no node, so a
    // conflict leaves the tree as it was.
    const node = this.#insert(tokens);
    let endpoint = node.endpoint;
    if (endpoint !== undefined) {
      for (const other of endpoint.routes) {
        const shared = other.methods.filter((method) => route.methods.includes(method));
        if (shared.length > 0) throw new RouteConflict(route, other, shared.sort());
      }
    } else {
      endpoint = node.endpoint = new Endpoint<H>(tokens, this.#routes.length);
    }
    endpoint.add(route, tokens);
    this.#routes.push(route);
    this.#routesView = undefined;
    this.#dirty = true;
  }

  /**
   * Looks a path up. Never throws. Allocates the result and its context, and nothing else
   * except a path without its trailing slash (relaxed mode) and the regex engine's match for
   * routes whose constrained variable is followed by more text in its segment.
   *
   * @param path The (percent-decoded) request path.
   * @returns The match, or `undefined` when no route matches or the path is longer than
   * `maxPathLength`.
   *
   * @example 404, 405 or a handler
   * ```ts
   * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
   * import { assertEquals } from "@std/assert";
   *
   * const router = new AsgiRouter({
   *   routes: [new Route("/files/{path:*}", { handler: () => "file" })],
   * });
   * const match = router.match("/files/a/b.txt");
   * assertEquals(match?.context, { path: "a/b.txt" });
   * assertEquals(match?.routeFor("GET")?.handler(), "file");
   * assertEquals(router.match("/nope"), undefined);
   * ```
   */
  match(path: string): RouteMatch<H> | undefined {
    const endpoint = this.#find(path);
    if (endpoint === undefined) return undefined;
    return new Match(endpoint, endpoint.context(this.#target, this.#caps));
  }

  /**
   * Looks a path up, as the Python original's `get_route`.
   *
   * @param path The (percent-decoded) request path.
   * @returns The endpoint handler (see {@linkcode EndpointHandler}) and the path's context.
   * @throws {UnknownEndpoint} If no route matches; `reason` tells a miss from a path longer
   * than `maxPathLength`.
   *
   * @example Calling the endpoint handler
   * ```ts
   * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
   * import { assertEquals } from "@std/assert";
   *
   * const router = new AsgiRouter({
   *   routes: [
   *     new Route("/hi/{name}", {
   *       handler: (context: Record<string, string>) => `hi ${context.name}`,
   *     }),
   *   ],
   * });
   * const [handler, context] = router.getRoute("/hi/ada");
   * assertEquals(await handler(context, { method: "GET" }), "hi ada");
   * ```
   */
  getRoute(path: string): [EndpointHandler<H>, PathContext] {
    const endpoint = this.#find(path);
    if (endpoint === undefined) {
      throw path.length > this.#maxPathLength
        ? new UnknownEndpoint(path, "path-too-long", this.#maxPathLength)
        : new UnknownEndpoint(path);
    }
    return [endpoint.handler, endpoint.context(this.#target, this.#caps)];
  }

  /**
   * Draws the tree, one node a line: static text, `{name}`, `{name:regex}` or `{name:*}`;
   * `● METHODS` where routes end; `↺` on variables that can end at several places.
   *
   * @returns The drawing.
   *
   * @example Drawing a small tree
   * ```ts
   * import { AsgiRouter, Route } from "@stellarator/stellarator/router";
   * import { assertEquals } from "@std/assert";
   *
   * const router = new AsgiRouter({
   *   routes: [
   *     new Route("/users", { handler: () => {} }),
   *     new Route("/users/{id}", { handler: () => {}, methods: ["GET", "PUT"] }),
   *   ],
   * });
   * assertEquals(
   *   router.toString(),
   *   "/\n└── users ● GET\n    └── /\n        └── {id} ● GET, PUT",
   * );
   * ```
   */
  toString(): string {
    if (this.#dirty) this.#finalize();
    const lines = [this.#root.label + marker(this.#root)];
    drawKids(this.#root, "", lines);
    return lines.join("\n");
  }

  /** The endpoint for `path`, leaving the matched string in `#target` and spans in `#caps`. */
  #find(path: string): Endpoint<H> | undefined {
    if (this.#dirty) this.#finalize();
    if (path.length > this.#maxPathLength) return undefined;
    this.#target = path;
    const n = path.length;
    if (this.#relaxed && n > 1 && path.charCodeAt(n - 1) === SLASH) {
      this.#target = path = path.slice(0, -1);
    }
    if (path.charCodeAt(0) !== SLASH) return undefined;
    // No Map of static paths in front of the tree: a server's path is a fresh string (a slice
    // of the request URL), and hashing one costs a runtime call, ~60-70 ns, on every lookup,
    // hit or miss; the tree finds static paths in ~30-45 ns. (A Map only wins on constant
    // strings, whose hash V8 caches: 13 ns instead of 45.)
    const compiled = this.#compiled;
    tree = this.#tree as FlatTree<AnyHandler>;
    if (compiled !== undefined) return compiled(path, this.#caps);
    if (--this.#untilCompiled <= 0) this.#compile();
    return searchStatic(0, path, 1, this.#caps) as Endpoint<H> | undefined;
  }

  #checkSafety(route: Route<H>, tokens: readonly Token[]): void {
    if (this.#allowUnsafeRegex) return;
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i]!;
      if (token.kind === REGEX && token.facts!.risk !== undefined) {
        const risk = token.facts!.risk;
        throw new InvalidRoutePattern(
          route.path,
          risk.position,
          `${risk.message}; or pass allowUnsafeRegex: true if you trust the regex`,
        );
      }
    }
    // Routes handed to the regex engine (see RegexMatcher): at most one ambiguous variable.
    const from = firstAmbiguousVariable(tokens);
    if (from === -1 || !tokens.slice(from).some((token) => token.kind === REGEX)) return;
    let seen: VariableToken | undefined;
    for (let i = from; i < tokens.length; i++) {
      const token = tokens[i]!;
      const next = tokens[i + 1];
      if (token.kind === LITERAL || next === undefined || next.kind !== LITERAL) continue;
      const code = next.text.codePointAt(0)!;
      const ambiguous = token.kind === PLAIN
        ? code !== SLASH
        : token.kind === REGEX && hasCode(token.facts!.consumes, code);
      if (!ambiguous) continue;
      if (seen !== undefined) {
        throw new InvalidRoutePattern(
          route.path,
          token.position,
          `variables "${seen.name}" and "${token.name}" can both end in several places, and ` +
            `with a regex variable in the route the regex engine would have to try every ` +
            `combination on hostile paths; exclude the following text from one of them (e.g. ` +
            `[^.]+ before ".") or pass allowUnsafeRegex: true`,
        );
      }
      seen = token;
    }
    const risk = suffixRisk(route.path, tokens);
    if (risk !== undefined) {
      throw new InvalidRoutePattern(
        route.path,
        risk.position,
        `${risk.message}; or pass allowUnsafeRegex: true if you trust the route`,
      );
    }
  }

  /** The node of the shape of `tokens`, created with the nodes above it where missing. */
  #insert(tokens: readonly Token[]): Node<H> {
    let node = this.#root;
    let slot = 0;
    for (let t = 0; t < tokens.length; t++) {
      const token = tokens[t]!;
      if (token.kind === LITERAL) {
        const text = t === 0 ? token.text.slice(1) : token.text;
        if (text !== "") node = insertText(node, text);
        continue;
      }
      node = variableKid(node, token, slot++);
    }
    if (slot * 2 > this.#caps.length) this.#caps = new Int32Array(slot * 4);
    return node;
  }

  /** Computes lookup tables, weights and the branches of variables with several ends. */
  #finalize(): void {
    prepare(this.#root);
    this.#tree = layoutTree(this.#root);
    this.#compiled = undefined;
    this.#untilCompiled = this.#compileAfter;
    this.#dirty = false;
    if (this.#compileAfter === 0) this.#compile();
  }

  #compile(): void {
    this.#untilCompiled = Infinity;
    // Past a few hundred nodes the generated code outgrows what V8 optimizes, and lookups
    // through it run interpreted: slower than the walk (5× at 1 000 routes, 100× right after
    // compiling 10 000), so large trees keep walking.
    if (this.#root.size > MAX_COMPILED_NODES) return;
    try {
      this.#compiled = new LookupCompiler<H>().compile(this.#root);
    } catch {
      // new Function is forbidden here (Content-Security-Policy): keep walking the tree.
    }
  }
}

/** Finalizes `node` and everything below it, children first. */
function prepare<H extends AnyHandler>(node: Node<H>): void {
  let weight = 0;
  let first = node.endpoint?.order ?? NO_ROUTE;
  let size = 1;
  const kids = node.regexKids.length === 0 && node.plainKid === undefined &&
      node.catchAllKid === undefined
    ? node.kids
    : allKids(node);
  for (let i = 0; i < kids.length; i++) {
    const kid = kids[i]!;
    prepare(kid);
    if (kid.weight > weight) weight = kid.weight;
    if (kid.first < first) first = kid.first;
    size += kid.size;
  }
  node.weight = weight + (node.kind === LITERAL ? node.label.length : 0);
  node.first = first;
  node.size = size;
  if (node.kind === PLAIN || node.kind === REGEX) finalizeVariable(node);
}

// ---------------------------------------------------------------------------------------------
// Compiled lookups

/** A lookup generated from a finalized tree: same answers and capture slots as the walk. */
type CompiledLookup<H extends AnyHandler> = (
  path: string,
  caps: Int32Array,
) => Endpoint<H> | undefined;

/**
 * Trees with more nodes than this are never compiled. The GitHub set (143 routes) has 239
 * nodes and compiles to 38 KB of source; 1 000 generated routes make 1 574 nodes and 230 KB,
 * whose functions V8 leaves unoptimized.
 */
const MAX_COMPILED_NODES = 512;
/** Subtrees with more nodes than this get a function of their own, small enough to optimize. */
const FUNCTION_NODES = 200;
/** Labels longer than this are compared with startsWith instead of unrolled char codes. */
const UNROLL_LABEL = 16;

/** `pos + k` as short source text: `pos` is a number or `name` or `name + number`. */
function plus(pos: string, k: number): string {
  if (k === 0) return pos;
  if (/^\d+$/.test(pos)) return String(Number(pos) + k);
  const m = /^(\w+) \+ (\d+)$/.exec(pos);
  return m === null ? `${pos} + ${k}` : `${m[1]} + ${Number(m[2]) + k}`;
}

/**
 * Generates JavaScript that does what {@linkcode searchStatic} does for one tree: a `switch` on
 * the next char code per static node, unrolled label comparisons, `indexOf("/")` for variables
 * that end at the next slash, fall-through for backtracking. Variables with several possible
 * ends call back into {@linkcode searchVariable}. The source contains only numbers, label text
 * (quoted with JSON.stringify) and indices into the arrays passed in.
 */
class LookupCompiler<H extends AnyHandler> {
  readonly endpoints: Endpoint<H>[] = [];
  readonly regexes: RegExp[] = [];
  readonly walked: Node<H>[] = [];
  readonly functions: string[] = [];
  #ids = new Map<Endpoint<H>, number>();
  #next = 0;

  compile(root: Node<H>): CompiledLookup<H> {
    const body = this.#static(root, "1");
    const source = `${this.functions.join("\n")}\n` +
      `return function lookup(p, c) { const n = p.length; ${body} return undefined; };`;
    const factory = new Function("E", "R", "N", "SV", source);
    return factory(this.endpoints, this.regexes, this.walked, searchVariable);
  }

  #endpoint(endpoint: Endpoint<H>): string {
    let id = this.#ids.get(endpoint);
    if (id === undefined) {
      id = this.endpoints.push(endpoint) - 1;
      this.#ids.set(endpoint, id);
    }
    return `E[${id}]`;
  }

  /** Whether the text after the first character of `label` is at `pos`. */
  #label(label: string, pos: string): string {
    if (label.length === 1) return "true";
    if (label.length > UNROLL_LABEL) return `p.startsWith(${JSON.stringify(label)}, ${pos})`;
    const tests: string[] = [];
    for (let i = 1; i < label.length; i++) {
      tests.push(`p.charCodeAt(${plus(pos, i)}) === ${label.charCodeAt(i)}`);
    }
    return tests.join(" && ");
  }

  /** Code for static node `node` whose text ends at `pos`: returns on success, else falls on. */
  #static(node: Node<H>, pos: string): string {
    let out = "";
    if (node.endpoint !== undefined) {
      out += `if (${pos} === n) return ${this.#endpoint(node.endpoint)};`;
    }
    if (node.kids.length > 0) {
      let cases = "";
      node.kids.forEach((kid, i) => {
        cases += `case ${node.codes[i]}: if (${this.#label(kid.label, pos)}) { ` +
          `${this.#subtree(kid, plus(pos, kid.label.length))} } break; `;
      });
      out += `switch (p.charCodeAt(${pos})) { ${cases}}`;
    }
    for (const kid of node.regexKids) out += this.#variable(kid, pos);
    if (node.plainKid !== undefined) {
      out += `if (${pos} < n) { ${this.#variable(node.plainKid, pos)} }`;
    }
    const catchAll = node.catchAllKid;
    if (catchAll !== undefined) {
      const slot = catchAll.slot << 1;
      out += `if (${pos} < n) { c[${slot}] = ${pos}; c[${slot + 1}] = n; ` +
        `return ${this.#endpoint(catchAll.endpoint!)}; }`;
    }
    return out;
  }

  /** Code for a static subtree, in a function of its own when it is large. */
  #subtree(node: Node<H>, pos: string): string {
    if (node.size <= FUNCTION_NODES) return this.#static(node, pos);
    const id = this.functions.length;
    this.functions.push("");
    this.functions[id] = `function f${id}(p, q, c) { const n = p.length; ` +
      `${this.#static(node, "q")} return undefined; }`;
    const found = `r${this.#next++}`;
    return `const ${found} = f${id}(p, ${pos}, c); if (${found} !== undefined) return ${found};`;
  }

  /** Code for variable node `node` whose variable starts at `pos`. */
  #variable(node: Node<H>, pos: string): string {
    const d = this.#next++;
    if (node.branches !== undefined) {
      const index = this.walked.push(node) - 1;
      const found = `w${d}`;
      return `{ const ${found} = SV(N[${index}], p, ${pos}, c); ` +
        `if (${found} !== undefined) return ${found}; }`;
    }
    const start = `s${d}`;
    const end = `e${d}`;
    const slot = node.slot << 1;
    let out = `{ const ${start} = ${pos}; `;
    let close = "}";
    if (node.kind === REGEX) {
      const index = this.regexes.push(node.sticky!) - 1;
      out += `R[${index}].lastIndex = ${start}; if (R[${index}].test(p)) { `;
      close = "} }";
    }
    out += `const ${end} = p.indexOf("/", ${start}); `;
    if (node.endpoint !== undefined) {
      out += `if (${end} === -1) { c[${slot}] = ${start}; c[${slot + 1}] = n; ` +
        `return ${this.#endpoint(node.endpoint)}; } `;
    }
    const kid = node.slashKid;
    if (kid !== undefined) {
      const nonEmpty = node.kind === REGEX ? `${end} !== -1` : `${end} > ${start}`;
      out += `if (${nonEmpty} && ${this.#label(kid.label, end)}) { c[${slot}] = ${start}; ` +
        `c[${slot + 1}] = ${end}; ${this.#subtree(kid, plus(end, kid.label.length))} } `;
    }
    return out + close;
  }
}

function insertText<H extends AnyHandler>(node: Node<H>, text: string): Node<H> {
  while (text !== "") {
    const code = text.charCodeAt(0);
    const index = node.codes.indexOf(code);
    if (index === -1) {
      const kid = new Node<H>(LITERAL, text);
      addKid(node, code, kid);
      return kid;
    }
    let kid = node.kids[index]!;
    const label = kid.label;
    let common = 1;
    while (common < label.length && common < text.length && label[common] === text[common]) {
      common++;
    }
    if (common < label.length) {
      const middle = new Node<H>(LITERAL, label.slice(0, common));
      kid.label = label.slice(common);
      addKid(middle, kid.label.charCodeAt(0), kid);
      node.kids[index] = middle;
      kid = middle;
    }
    node = kid;
    text = text.slice(common);
  }
  return node;
}

function variableKid<H extends AnyHandler>(
  node: Node<H>,
  token: VariableToken,
  slot: number,
): Node<H> {
  if (token.kind === PLAIN) {
    return node.plainKid ??= new Node<H>(PLAIN, `{${token.name}}`, token, slot);
  }
  if (token.kind === CATCH_ALL) {
    return node.catchAllKid ??= new Node<H>(CATCH_ALL, `{${token.name}:*}`, token, slot);
  }
  let kid = node.regexKids.find((kid) => kid.regex === token.regex);
  if (kid === undefined) {
    kid = new Node<H>(REGEX, `{${token.name}:${token.regex}}`, token, slot);
    node.regexKids = node.regexKids.concat(kid);
  }
  return kid;
}

function allKids<H extends AnyHandler>(node: Node<H>): Node<H>[] {
  const kids = [...node.kids, ...node.regexKids];
  if (node.plainKid !== undefined) kids.push(node.plainKid);
  if (node.catchAllKid !== undefined) kids.push(node.catchAllKid);
  return kids;
}

function endpointsBelow<H extends AnyHandler>(
  node: Node<H>,
  out: Endpoint<H>[] = [],
): Endpoint<H>[] {
  if (node.endpoint !== undefined) out.push(node.endpoint);
  for (const kid of allKids(node)) endpointsBelow(kid, out);
  return out;
}

function listBranch<H extends AnyHandler>(variable: Node<H>, endpoints: Endpoint<H>[]): Branch<H> {
  const ordered = priorityOrder(endpoints);
  const matchers = ordered.map((endpoint) => {
    const suffix = endpoint.tokens.slice(tokenIndexOfSlot(endpoint.tokens, variable.slot));
    return suffix.some((token) => token.kind === REGEX)
      ? new RegexMatcher(suffix, variable.slot)
      : new GreedyMatcher(suffix, variable.slot);
  });
  return { kind: LIST, endpoints: ordered, matchers };
}

function finalizeVariable<H extends AnyHandler>(node: Node<H>): void {
  const slashIndex = node.codes.indexOf(SLASH);
  node.slashKid = slashIndex === -1 ? undefined : node.kids[slashIndex];
  if (node.kind === REGEX && node.canMatchSlash) {
    const below = endpointsBelow(node);
    node.branches = below.length === 0 ? [] : [listBranch(node, below)];
    return;
  }
  if (node.kids.length === (node.slashKid === undefined ? 0 : 1)) {
    node.branches = undefined;
    return;
  }
  const ranked: { branch: Branch<H>; weight: number; first: number }[] = [];
  const none: readonly never[] = [];
  if (node.slashKid !== undefined) {
    ranked.push({
      branch: { kind: AT_SLASH, endpoints: none, matchers: none },
      weight: node.slashKid.weight,
      first: node.slashKid.first,
    });
  }
  if (node.endpoint !== undefined) {
    ranked.push({
      branch: { kind: AT_END, endpoints: none, matchers: none },
      weight: 0,
      first: node.endpoint.order,
    });
  }
  for (const kid of node.kids) {
    if (kid === node.slashKid) continue;
    ranked.push({
      branch: listBranch(node, endpointsBelow(kid)),
      weight: kid.weight,
      first: kid.first,
    });
  }
  ranked.sort((a, b) => b.weight - a.weight || a.first - b.first);
  node.branches = ranked.map((item) => item.branch);
}

function marker<H extends AnyHandler>(node: Node<H>): string {
  let text = node.branches !== undefined ? " ↺" : "";
  if (node.endpoint !== undefined) text += ` ● ${node.endpoint.allowed.join(", ")}`;
  return text;
}

function drawKids<H extends AnyHandler>(node: Node<H>, indent: string, lines: string[]): void {
  const kids = allKids(node);
  kids.forEach((kid, i) => {
    const last = i === kids.length - 1;
    lines.push(`${indent}${last ? "└── " : "├── "}${kid.label}${marker(kid)}`);
    drawKids(kid, indent + (last ? "    " : "│   "), lines);
  });
}
