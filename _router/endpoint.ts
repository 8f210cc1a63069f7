// Copyright the stellarator authors. MIT license.
/**
 * Endpoints: everything registered for one shape (one pattern, variable names aside). The tree
 * has one node per shape, and a node where routes end holds its endpoint: the routes, their
 * methods, and how to build the context of a match.
 *
 * @module
 */

import { compileContext, type Context, type ContextBuilder, emptyContext } from "./context.ts";
import { sharedList } from "./methods.ts";
import { LITERAL, type Token } from "./pattern.ts";

/** What an endpoint needs of a route (the router's `Route` class). */
export interface RouteLike {
  /** The pattern as written. */
  readonly path: string;
  /** The methods served, upper-case. */
  readonly methods: readonly string[];
}

/** The routes of one shape, their methods, and the builder of their contexts. */
export class Endpoint<R extends RouteLike> {
  /** The routes of this shape, registration order; replaced (never mutated) on change. */
  routes: readonly R[] = [];
  /** Union of their methods, sorted; replaced on change. */
  allowed: readonly string[] = [];
  /** Method of each route method pair, parallel to {@linkcode byMethod}; replaced on change. */
  methods: readonly string[] = NO_STRINGS;
  byMethod: readonly R[] = [];
  /** `methods[0]` and `byMethod[0]`, for the common one-method endpoint. */
  firstMethod = "";
  firstRoute: R | undefined;
  /** Context keys and the capture slot each reads: first route's names first. */
  keys: readonly string[] = NO_STRINGS;
  slots: readonly number[] = [];
  /** The normalized tokens of the shape (names from the first route). */
  readonly tokens: readonly Token[];
  /** Registration index of the first route: the tie-breaker "registered first". */
  readonly order: number;
  /**
   * What `AsgiRouter.getRoute()` hands out for this shape, made by the router on first
   * use and kept here so that later lookups reuse it.
   */
  handler: unknown;

  constructor(tokens: readonly Token[], order: number) {
    this.tokens = tokens;
    this.order = order;
  }

  // Arrays are built at their final size and replaced, never grown: a pushed-to array reserves
  // room for 17 elements, and a build of 10 000 routes spent half its time collecting garbage.
  add(route: R, tokens: readonly Token[]): void {
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

  /**
   * A variable of `tokens` that a route already here names in another place, if any: the
   * context is built for all the routes at once, so that name could hold only one value.
   */
  misplacedName(tokens: readonly Token[]): string | undefined {
    let slot = 0;
    for (const token of tokens) {
      if (token.kind === LITERAL) continue;
      const k = this.keys.indexOf(token.name);
      if (k !== -1 && this.slots[k] !== slot) return token.name;
      slot++;
    }
    return undefined;
  }

  routeFor(method: string): R | undefined {
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
  context: ContextBuilder = emptyContext;
}

const NO_STRINGS: readonly string[] = Object.freeze([]);

/** An endpoint's first `context` (a method, so shared and no closure per endpoint). */
function compileContextOnFirstUse<R extends RouteLike>(
  this: Endpoint<R>,
  path: string,
  caps: Int32Array,
): Context {
  this.context = compileContext(this.keys, this.slots);
  return this.context(path, caps);
}
