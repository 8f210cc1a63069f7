// Copyright the stellarator authors. MIT license.
/**
 * A radix-tree path router for ASGI-style applications: no dependencies, no Deno APIs (it runs
 * unchanged in Node, Bun and browsers), all conflicts found when a route is added, and lookups
 * that allocate little more than the result and throw only for a path that is not a string.
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
 * the route is added to a router (see `allowUnsafeRegex`). A regex is always a regex here, so
 * Starlette's convertor names are refused rather than read as text (`{id:int}` would match only
 * "int"; the error names `{id:[0-9]+}`, and `{id:(?:int)}` matches the word), as is a regex that
 * starts or ends with a space (`{id: \d+}`; write `\x20` for a space the path must hold).
 * Names match `[A-Za-z_][A-Za-z0-9_]*` and are unique within a route.
 * Several variables may share a segment when literal text separates them (`/{name}.{ext}`,
 * `/compare/{base}...{head}`); `{a}{b}` is refused. `{` and `}` cannot be literal text.
 * A pattern holds at most 1024 UTF-16 code units of literal text plus variables (a variable
 * counts one, however long its regex; `😀` counts two), since building and laying out the tree
 * recurse once a level and each code unit or variable can be one.
 * A variable's regex nests groups and lookarounds at most 64 deep (`(?:(?:a))` is two), so
 * that the passes that analyse it stay within the stack.
 *
 * ## Matching rules
 *
 * This list is the one full statement of the rules: the README summarises it, and
 * `tests/router_test.ts` tests each rule under its number and name (`[rule 2, priority]`).
 *
 * 1. **Reference semantics.** A route matches a path exactly when its whole pattern, read as
 *    one anchored regex (`^…$`, flag `u`, literal text escaped, `{x}` as `([^/]+)`, `{x:re}` as
 *    `(re)`, `{x:*}` as `([^]+)`), matches the whole path; the context holds what that regex's
 *    groups capture, with the engine's usual greedy, left-to-right backtracking. So
 *    `/{name}.{ext}` gives `{name: "a.b", ext: "c"}` for `/a.b.c`. The tree is only an
 *    optimisation of this rule and never disagrees with it.
 * 2. **Priority.** When several routes match, the first in this order wins. Compare two
 *    patterns token by token (a token is one literal character, one variable, or the end of
 *    the pattern; a character is a code point, as in rule 1: `😀` is one); at the first token
 *    where they differ:
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
 * 4. **Failed regex.** A variable whose regex fails makes its route an unknown endpoint:
 *    `/other_handler/{name:[a-z1-9]+}` does not match `/other_handler/Bob`.
 * 5. **Empty variables.** A variable never matches the empty string unless its regex does:
 *    `/u//posts` does not match `/u/{id}/posts`, and `/` does not match `/{id}`.
 * 6. **Trailing slash.** `"relaxed"` (default) drops one trailing slash from every pattern and
 *    every path before matching, except from the root `/`: `/claw/` and `/claw` are one route
 *    and both paths reach it. `"strict"` keeps them apart.
 * 7. **No decoding.** The router matches the string it is given, code unit by code unit; any
 *    Unicode works. Percent-decoding is the caller's job (the ASGI bridge passes the decoded
 *    `path`, where `%2F` is a `/`). Nor does it resolve dot segments: `/files/{p:*}` gives
 *    `{p: "../secret"}` for `/files/../secret`, and `{x}` can be `..`, so a handler that
 *    turns a variable into a file name must check it.
 * 8. **Length cap.** Paths longer than `maxPathLength` (default 8192 UTF-16 code units) match
 *    nothing, so no hostile path can keep a regex busy for long.
 * 9. **Context objects.** A match's context is a plain object, fresh for every match, with one own
 *    key per variable. Any name works as a plain key: `__proto__` becomes an own property (it never
 *    changes the prototype), and `constructor` or `toString` shadow the inherited members for
 *    that route. Test keys with `Object.hasOwn`, since a route without a `constructor`
 *    variable still inherits `ctx.constructor`. Routes of one shape share an endpoint whose
 *    context is made before the method picks a route: when they name the variables differently
 *    (`/x/{a}` for GET, `/x/{b}` for POST), the context holds each value under every name. A
 *    name must keep its place across the shape's routes: `/x/{b}/{a}` next to `/x/{a}/{b}`
 *    would give one of them the other's values, so it is refused with a `RouteConflict`.
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
 * The walk (`_router/walk.ts`) reads a flat copy of the tree, made when routes change
 * (`_router/layout.ts`): one `Int32Array` of node records laid out depth-first, each static node
 * followed by its label, its child table and its children, so that a lookup in a large router reads
 * a few neighbouring cache lines instead of some ten objects spread over the heap. Every node has a
 * record there, variables included; only a variable's regex and the matchers below a variable with
 * several ends live outside it. There is one lookup, this walk, entered through one shortcut: a
 * path that is a static route's whole text (`/users/new`, after the trailing-slash rule) is found
 * in a table of static paths, keyed by its length, its last character and where needed a few more,
 * with one string comparison. It gives the walk's answer by rule 2 (any other route matching that
 * path has a variable where the static one has literal text or its end); static paths the table
 * cannot tell apart are left to the walk.
 *
 * Context objects are built by small generated functions (`new Function`), one per set of
 * variable names; where a Content-Security-Policy forbids generated code, a slower loop builds
 * the same objects.
 *
 * ## Errors
 *
 * Everything is checked when a route is added, never while serving: {@linkcode RouteConflict}
 * for the same shape with overlapping methods or a variable name in another place (rule 9),
 * {@linkcode InvalidRoutePattern} for malformed patterns (lone surrogates included), patterns
 * past the size limits above (by `new Route()`) and ReDoS-prone regexes (once added to a router),
 * `TypeError` for missing handlers and unknown methods. While serving,
 * `match()` and `getRoute()` throw only a `TypeError` for a path that is not a string (a
 * programming error, never the request's: a request path is always a string).
 *
 * @module
 */

import {
  engineMessage,
  LITERAL,
  MAX_PATTERN_LEVELS,
  parsePattern,
  PatternError,
  REGEX,
  type Token,
} from "./_router/pattern.ts";
import { suffixSource } from "./_router/suffix.ts";
import { redosRisk } from "./_router/safety.ts";
import { Endpoint } from "./_router/endpoint.ts";
import { type FlatTree, layoutTree } from "./_router/layout.ts";
import { Node, stickySource } from "./_router/node.ts";
import { drawTree } from "./_router/print.ts";
import { insertText, prepare, variableKid } from "./_router/build.ts";
import { lookup } from "./_router/walk.ts";
import { describe, shorten, visible } from "./_common/describe.ts";
import { logQuoted } from "./_common/log_text.ts";
import { checkMethods, GET_ONLY, sharedList } from "./_router/methods.ts";
import { rejectUnknownKeys } from "./_common/keys.ts";

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
   * HTTP methods the route serves, case-insensitive in ASCII (`"poſt"` is refused, not read as
   * `POST`), stored upper-case: any of `GET`, `HEAD`, `POST`, `PUT`, `DELETE`, `CONNECT`,
   * `OPTIONS`, `TRACE`, `PATCH`, and `WEBSOCKET`, which stands for ASGI `websocket` scopes: a
   * path can have an HTTP route and a WebSocket route.
   *
   * @default {["GET"]}
   */
  methods?: readonly string[];
}

/**
 * The options object an {@linkcode EndpointHandler} takes as its last argument: the request
 * method, which the router does not guess.
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
  /** The request method, compared exactly with the routes' (upper-case) methods. */
  method: string;
}

/**
 * The function {@linkcode AsgiRouter.getRoute} returns for a path: it picks the route of the
 * path that serves the request method and calls that route's handler with the same arguments.
 *
 * The method is the `method` of the last argument, a {@linkcode DispatchOptions} object (a
 * plain object: its prototype is `Object.prototype` or `null`). The router knows nothing of the
 * protocol, so it never guesses: an ASGI application passes `{ method: scope.method }`.
 *
 * The returned promise rejects with {@linkcode MethodNotAllowed} when no route of the path
 * serves the method, with `TypeError` when the last argument is not such an object, and
 * otherwise settles like the route handler's result.
 *
 * @typeParam H The route handler type; the endpoint handler takes its arguments followed by
 * {@linkcode DispatchOptions}.
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
 * const scope = { method: "POST" };
 * assertEquals(await handler(context, scope, { method: scope.method }), "ada");
 * ```
 */
export type EndpointHandler<H extends AnyHandler = AnyHandler> = (
  ...args: [...Parameters<H>, DispatchOptions]
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
 * No route matches the path (404). The message quotes the path as a log line would
 * (`logQuoted()`: controls escaped, cut past 256 characters), since the path is the client's;
 * `path` holds it as given.
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
   * @param reason Why nothing matched; `"no-route"` when left out.
   * @param maxPathLength The router's limit, quoted when the path exceeds it; 8192 when left out.
   */
  constructor(
    path: string,
    reason?: "no-route" | "path-too-long",
    maxPathLength?: number,
  ) {
    super(
      reason !== "path-too-long"
        ? `No route matches ${logQuoted(path)}`
        : `Path of ${path.length} characters is longer than maxPathLength ` +
          `(${maxPathLength ?? DEFAULT_MAX_PATH_LENGTH}), so no route matches it; raise ` +
          `maxPathLength if such paths are legitimate`,
    );
    this.path = path;
    this.reason = reason ?? "no-route";
  }
}

/**
 * A route matches the path but none serves the method (405). The message quotes the method as a
 * log line would (`logQuoted()`), since it is the client's; `method` holds it as given.
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
   * @param pattern The matched pattern, quoted in the message; left out, the message names none.
   */
  constructor(method: string, allowed: readonly string[], pattern?: string) {
    super(
      `Method ${logQuoted(method)} is not allowed${
        pattern ? ` on route ${quotePattern(pattern)}` : ""
      }; ` +
        `use one of ${allowed.join(", ")}`,
    );
    this.method = method;
    this.allowed = allowed;
  }
}

/**
 * A route has the same shape as one already added (variable names aside) and shares a method
 * with it, or puts one of that route's variable names in another place (the routes of a shape
 * share one context, which cannot hold two values under one name).
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
  /** The methods both serve, upper-case and sorted; empty for a clash of {@linkcode variable}. */
  readonly methods: readonly string[];
  /** The variable both routes name, in different places; undefined for shared methods. */
  readonly variable: string | undefined;
  /**
   * Creates the error.
   *
   * @param route The route being added.
   * @param conflictsWith The route already registered.
   * @param methods The shared methods (none for a clash of variable names).
   * @param variable The variable the two routes name in different places, if that is the clash.
   */
  constructor(
    route: Route,
    conflictsWith: Route,
    methods: readonly string[],
    variable?: string,
  ) {
    super(
      variable === undefined
        ? `Cannot add route ${quotePattern(route.path)} for ${methods.join(", ")}: it ` +
          `conflicts with ${quotePattern(conflictsWith.path)}, which already serves ${
            methods.length > 1 ? "them" : "it"
          }; ` +
          `give one of them other methods or another path`
        : `Cannot add route ${quotePattern(route.path)}: it has the shape of ` +
          `${quotePattern(conflictsWith.path)}, ` +
          `whose routes share one context, but puts the variable "${variable}" in another ` +
          `place, so one of them would read the other's value; use the same names in the same ` +
          `places, or names the other route does not use`,
    );
    this.route = route;
    this.conflictsWith = conflictsWith;
    this.methods = methods;
    this.variable = variable;
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
    super(`Invalid route pattern ${quotePattern(pattern)} at position ${position}: ${reason}`);
    this.pattern = pattern;
    this.position = position;
    this.reason = reason;
  }
}

/**
 * A pattern as an error message quotes it: whole up to the 1024 code units a pattern of literal
 * text alone may hold; past that (a pattern refused for its length, or one with long regexes) by
 * its head, which is enough to recognise it: a whole quote made messages of hundreds of KB.
 */
function quotePattern(pattern: string): string {
  // Control characters escaped (`visible`), as every quoted value: a newline in a pattern split
  // the message in two.
  if (pattern.length <= MAX_PATTERN_LEVELS) return `"${visible(pattern)}"`;
  return `"${visible(shorten(pattern, QUOTED_HEAD))}" (${pattern.length} UTF-16 code units)`;
}
const QUOTED_HEAD = 80;

// ---------------------------------------------------------------------------------------------
// Routes

const DEFAULT_MAX_PATH_LENGTH = 8192;
/** The keys of {@linkcode RouteOptions}: any other is refused, a typo would go unnoticed. */
const ROUTE_OPTIONS: readonly string[] = ["handler", "methods"];
/** The keys of {@linkcode AsgiRouterOptions}. */
const ROUTER_OPTIONS: readonly string[] = [
  "routes",
  "trailingSlash",
  "maxPathLength",
  "allowUnsafeRegex",
];
const SLASH = 0x2f;

/** Reads a route's parsed pattern; set by {@linkcode Route}'s static block. */
let tokensOf: (route: Route) => Token[] | undefined;

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
   * @throws {TypeError} If `path` is not a string, `options` has a key other than `handler`
   * and `methods`, the handler is not a function, or `methods` is empty or names an unknown
   * method.
   * @throws {InvalidRoutePattern} If the pattern is malformed, a regex does not compile or
   * looks outside its variable, or the pattern passes a limit: more than 1024 UTF-16 code
   * units of literal text plus variables, or a regex nesting groups and lookarounds more than
   * 64 deep.
   */
  constructor(path: string, options: RouteOptions<H>) {
    if (typeof path !== "string") {
      throw new TypeError(
        `Invalid route pattern ${describe(path)}: use a string like "/users/{id}"`,
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new TypeError(
        `Invalid options ${describe(options)} for route ${describe(path)}: ` +
          `pass { handler: (...args) => ... }`,
      );
    }
    rejectUnknownKeys(options, ROUTE_OPTIONS, `route ${describe(path)}`);
    const { handler, methods } = options;
    if (typeof handler !== "function") {
      throw new TypeError(
        `Invalid handler ${describe(handler)} for route ${describe(path)}: ` +
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
// What a lookup returns: the endpoint handler and the match

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function makeEndpointHandler<H extends AnyHandler>(
  endpoint: Endpoint<Route<H>>,
): EndpointHandler<H> {
  async function endpointHandler(...args: unknown[]): Promise<unknown> {
    const options = args[args.length - 1];
    if (!isPlainObject(options) || typeof options.method !== "string") {
      throw new TypeError(
        `Invalid last argument ${describe(options)} for the handler of route ` +
          `${
            quotePattern(endpoint.routes[0]?.path ?? "")
          }: pass the request method as { method }, ` +
          `e.g. ` +
          `handler(context, scope, receive, send, { method: scope.method })`,
      );
    }
    const method = options.method;
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
  readonly #endpoint: Endpoint<Route<H>>;
  constructor(endpoint: Endpoint<Route<H>>, context: PathContext) {
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

/** The TypeError for a lookup of something that is not a string, kept out of the lookups. */
function invalidPath(path: unknown): TypeError {
  return new TypeError(`Invalid path ${describe(path)}: pass a string such as "/users/42"`);
}

// ---------------------------------------------------------------------------------------------
// The router

/**
 * A radix-tree router: add {@linkcode Route}s, then look paths up with
 * {@linkcode AsgiRouter.match} (returns `undefined` for a miss) or
 * {@linkcode AsgiRouter.getRoute} (throws {@linkcode UnknownEndpoint}); both throw only a
 * `TypeError`, for a path that is not a string. The matching rules are in the module documentation.
 *
 * @typeParam H The handler type shared by the routes.
 *
 * @example Two routes, one with a constrained variable and one method
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
  readonly #root: Node<Route<H>> = new Node(LITERAL, "/");
  #routes: Route<H>[] = [];
  /** A frozen copy of {@linkcode #routes}, made when asked for, dropped when a route is added. */
  #routesView: readonly Route<H>[] | undefined;
  /** Capture slots of the current lookup: start and end index of each variable. */
  #caps = new Int32Array(16);
  /** What lookups walk, made when the tree is finalized. */
  #tree: FlatTree<Route<H>> = layoutTree(this.#root);
  /** Whether routes were added since the variable nodes' branches were computed. */
  #dirty = false;

  /**
   * Creates a router.
   *
   * @param options Routes and matching options; all optional.
   * @throws {TypeError} If `allowUnsafeRegex` is not a boolean, `trailingSlash` or
   * `maxPathLength` has the wrong type, `routes` is not an iterable of {@linkcode Route}s, or
   * `options` has a key that is not an option (a misspelt one would be ignored).
   * @throws {RangeError} If `trailingSlash` or `maxPathLength` has an invalid value.
   * @throws {RouteConflict} If two of `routes` conflict.
   * @throws {InvalidRoutePattern} If the ReDoS guard refuses one of `routes`, or V8 cannot
   * compile the regex the router builds from it.
   */
  constructor(options?: AsgiRouterOptions<H>) {
    if (
      options !== undefined &&
      (typeof options !== "object" || options === null || Array.isArray(options))
    ) {
      throw new TypeError(
        `Invalid options ${describe(options)}: pass an object such as { routes: [...] }`,
      );
    }
    if (options !== undefined) rejectUnknownKeys(options, ROUTER_OPTIONS, "AsgiRouter");
    const {
      routes = [],
      trailingSlash = "relaxed",
      maxPathLength = DEFAULT_MAX_PATH_LENGTH,
      allowUnsafeRegex = false,
    } = options ?? {};
    if (trailingSlash !== "relaxed" && trailingSlash !== "strict") {
      throw new (typeof trailingSlash === "string" ? RangeError : TypeError)(
        `Invalid trailingSlash ${describe(trailingSlash)}: use "relaxed" or "strict"`,
      );
    }
    if (!Number.isSafeInteger(maxPathLength) || maxPathLength < 1) {
      throw new (typeof maxPathLength === "number" ? RangeError : TypeError)(
        `Invalid maxPathLength ${describe(maxPathLength)}: use a positive integer such as 8192`,
      );
    }
    // A safety switch: "no" or 0 must not turn the ReDoS guard off by being truthy.
    if (typeof allowUnsafeRegex !== "boolean") {
      throw new TypeError(
        `Invalid allowUnsafeRegex ${describe(allowUnsafeRegex)}: pass true or false`,
      );
    }
    this.#relaxed = trailingSlash === "relaxed";
    this.#maxPathLength = maxPathLength;
    this.#allowUnsafeRegex = allowUnsafeRegex;
    // A string is iterable too, one character at a time: refuse it with the rest.
    if (
      typeof routes !== "object" || routes === null ||
      typeof (routes as Partial<Iterable<unknown>>)[Symbol.iterator] !== "function"
    ) {
      throw new TypeError(
        `Invalid routes ${describe(routes)}: pass an array of Route objects, ` +
          `e.g. { routes: [new Route(path, { handler })] }`,
      );
    }
    let index = 0;
    for (const route of routes) {
      if (typeof route !== "object" || route === null || tokensOf(route) === undefined) {
        throw new TypeError(
          `Invalid routes[${index}] ${describe(route)}: pass new Route(path, { handler })`,
        );
      }
      this.addRoute(route);
      index++;
    }
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
   * endpoint and must serve disjoint methods. Add routes before serving where you can: the first
   * lookup after a change lays the whole tree out again, so adding routes one lookup apart costs
   * time quadratic in their number (3,000 GitHub-like routes: 2 s that way, 12 ms at once).
   *
   * @param route The route.
   * @throws {TypeError} If `route` is not a {@linkcode Route}.
   * @throws {RouteConflict} If a route of the same shape serves one of its methods, or names
   * one of its variables in another place.
   * @throws {InvalidRoutePattern} If the ReDoS guard refuses it (see `allowUnsafeRegex`), or if
   * V8 cannot compile the regex the router builds from it (a regex of thousands of atoms).
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
        `Invalid route ${describe(route)}: pass new Route(path, { handler })`,
      );
    }
    const tokens = this.#relaxed ? relaxTokens(parsed) : parsed;
    this.#checkSafety(route, tokens);
    checkCompiles(route.path, tokens);
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
      // The endpoint builds one context for all its routes, before a method picks one.
      const name = endpoint.misplacedName(tokens);
      if (name !== undefined) {
        const other = endpoint.routes.find((other) =>
          tokensOf(other)!.some((token) => token.kind !== LITERAL && token.name === name)
        )!;
        throw new RouteConflict(route, other, [], name);
      }
    } else {
      endpoint = node.endpoint = new Endpoint<Route<H>>(tokens, this.#routes.length);
    }
    endpoint.add(route, tokens);
    this.#routes.push(route);
    this.#routesView = undefined;
    this.#dirty = true;
  }

  /**
   * Looks a path up. Throws only for a path that is not a string (a programming error, not a
   * request's fault). Allocates the result and its context, and nothing else
   * except a path without its trailing slash (relaxed mode) and the regex engine's match for
   * routes whose constrained variable is followed by more text in its segment.
   *
   * @param path The (percent-decoded) request path.
   * @returns The match, or `undefined` when no route matches or the path is longer than
   * `maxPathLength`.
   * @throws {TypeError} If `path` is not a string.
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
    // The one check on the hot path: a single typeof, its message built out of line.
    if (typeof path !== "string") throw invalidPath(path);
    const endpoint = this.#find(path);
    if (endpoint === undefined) return undefined;
    return new Match(endpoint, endpoint.context(path, this.#caps));
  }

  /**
   * Looks a path up, as the Python original's `get_route`.
   *
   * @param path The (percent-decoded) request path.
   * @returns The endpoint handler (see {@linkcode EndpointHandler}) and the path's context.
   * @throws {UnknownEndpoint} If no route matches; `reason` tells a miss from a path longer
   * than `maxPathLength`.
   * @throws {TypeError} If `path` is not a string.
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
    if (typeof path !== "string") throw invalidPath(path);
    const endpoint = this.#find(path);
    if (endpoint === undefined) {
      throw path.length > this.#maxPathLength
        ? new UnknownEndpoint(path, "path-too-long", this.#maxPathLength)
        : new UnknownEndpoint(path);
    }
    const handler = (endpoint.handler ??= makeEndpointHandler(endpoint)) as EndpointHandler<H>;
    return [handler, endpoint.context(path, this.#caps)];
  }

  /**
   * Draws the tree, one node a line: static text, `{name}`, `{name:regex}` or `{name:*}`;
   * `● METHODS` where routes end; `↺` on variables that can end at several places; control
   * characters escaped (`\n`), so that a newline in a pattern cannot split a line. A node the
   * tree cut inside a UTF-16 pair (`😀` and `😁` share their first half) is drawn with its
   * children, so that every line holds whole characters.
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
    return drawTree(this.#root);
  }

  /**
   * The endpoint for `path`, leaving the spans of its variables in `#caps`. The spans index
   * `path` itself, since the string matched is `path` or, relaxed, `path` without its trailing
   * slash; nothing about the lookup is stored in the router, where keeping each request's fresh
   * string would cost the slow path of V8's write barrier on every lookup.
   */
  #find(path: string): Endpoint<Route<H>> | undefined {
    if (this.#dirty) this.#finalize();
    const n = path.length;
    if (n > this.#maxPathLength || path.charCodeAt(0) !== SLASH) return undefined;
    let last = -1;
    if (this.#relaxed && n > 1) {
      last = path.charCodeAt(n - 1);
      if (last === SLASH) {
        path = path.slice(0, -1);
        last = -1;
      }
    }
    return lookup(this.#tree, path, last, this.#caps);
  }

  #checkSafety(route: Route<H>, tokens: readonly Token[]): void {
    if (this.#allowUnsafeRegex) return;
    const risk = redosRisk(route.path, tokens);
    if (risk !== undefined) throw new InvalidRoutePattern(route.path, risk.position, risk.reason);
  }

  /** The node of the shape of `tokens`, created with the nodes above it where missing. */
  #insert(tokens: readonly Token[]): Node<Route<H>> {
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
    this.#dirty = false;
  }
}

/**
 * Sources up to this long are not compiled by {@linkcode checkCompiles}: the shortest found to
 * overflow V8's regex compiler held 14,372 characters (`a+` 7,186 times; `(a)` 5,880 times,
 * 17,640), so a check of every route's regexes would only slow down adding them.
 */
const SURELY_COMPILES = 4096;

/**
 * Refuses a route whose regexes, as the tree runs them, V8 cannot compile. A variable's own
 * regex was compiled by `new Route()`, but the tree runs it inside a sticky regex, and a
 * suffix from a variable whose end is not fixed as one regex with the rest of the route
 * (`RegexMatcher`); both are compiled on their first lookup, so a route just under the
 * compiler's limit made every lookup throw a `SyntaxError` ("Stack overflow").
 */
function checkCompiles(path: string, tokens: readonly Token[]): void {
  const sources: [string, string, number][] = [];
  for (const token of tokens) {
    if (token.kind === REGEX) sources.push([stickySource(token.regex), "uy", token.position]);
  }
  // The suffix from the first variable stands for the shorter ones inside it.
  const first = tokens.findIndex((token) => token.kind !== LITERAL);
  if (sources.length > 0) {
    sources.push([suffixSource(tokens.slice(first)).source, "dyu", tokens[first]!.position]);
  }
  for (const [source, flags, position] of sources) {
    if (source.length <= SURELY_COMPILES) continue;
    try {
      new RegExp(source, flags).exec("");
    } catch (error) {
      throw new InvalidRoutePattern(
        path,
        position,
        `the regex the router builds from here on does not compile: ${engineMessage(error)}; ` +
          `shorten the regex`,
      );
    }
  }
}
