// Copyright the stellarator authors. MIT license.
/**
 * Builders of the context objects a match returns: one plain object per match, one own key per
 * variable, values sliced from the path at the capture slots the walk filled in.
 *
 * @module
 */

/** A match's context: variable name to matched text. */
export type Context = Record<string, string>;

/** Builds a context from the matched string and the capture slots (start, end per variable). */
export type ContextBuilder = (path: string, caps: Int32Array) => Context;

/** The builder for routes without variables. */
export function emptyContext(): Context {
  return {};
}

/**
 * The function building the context object for the given keys and capture slots: the one way
 * contexts are built.
 *
 * It is generated code, an object literal with constant keys, built in a few ns. Storing keys
 * from an array (`context[keys[i]] = …`) makes V8's store sites megamorphic once a router has
 * many key sets; measured on whole lookups (GitHub set, 10 000 routes) that was 14-25 % slower,
 * and copying a per-key-set template with spread before storing the values 30-46 % slower. The
 * keys are variable names (identifiers, quoted anyway), so no outside text reaches the
 * generated code. `__proto__` is written as a computed key, which defines an own property
 * instead of setting the prototype. The loop in {@linkcode makeContext} exists only for
 * environments whose Content-Security-Policy forbids `new Function`.
 */
export function compileContext(
  keys: readonly string[],
  slots: readonly number[],
): ContextBuilder {
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
const sharedContexts = new Map<string, ContextBuilder>();

/** A new builder: generated code, or a loop where generated code is forbidden. */
function makeContext(
  keys: readonly string[],
  slots: readonly number[],
): ContextBuilder {
  const entries = keys.map((key, i) => {
    const slot = slots[i]! << 1;
    const name = key === "__proto__" ? `["__proto__"]` : JSON.stringify(key);
    return `${name}: p.slice(c[${slot}], c[${slot + 1}])`;
  });
  try {
    return new Function("p", "c", `return { ${entries.join(", ")} };`) as ContextBuilder;
  } catch {
    return (path, caps) => {
      const context: Context = {};
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
