/**
 * Our router behind the benchmark's adapter interface.
 *
 * @module
 */
import { AsgiRouter, type AsgiRouterOptions, Route } from "../router.ts";
import type { Adapter } from "./_adapter.ts";

/**
 * Extra router options for experiments, as JSON in `BENCH_ROUTER_OPTIONS`
 * (e.g. `{"maxPathLength": 100000}`); `Infinity` is not JSON, so the string
 * `"Infinity"` stands for it. Empty by default: the benchmark times the defaults.
 */
export const OUR_OPTIONS: Readonly<Record<string, unknown>> = (() => {
  const raw = Deno.env.get("BENCH_ROUTER_OPTIONS");
  if (raw === undefined || raw === "") return {};
  const parsed = JSON.parse(raw) as Record<string, unknown>;
  for (const [key, value] of Object.entries(parsed)) {
    if (value === "Infinity") parsed[key] = Infinity;
  }
  return parsed;
})();

/**
 * Our router, the baseline of every comparison. The timed call resolves the
 * method too, as the peers' `find("GET", path)` do: `match()` then `routeFor()`.
 */
export const OURS: Adapter = {
  name: "stellarator",
  ours: true,
  note: 'router.match(path)?.routeFor("GET"): the route, with match.context',
  build(patterns) {
    return {
      construct() {
        const handler = () => {};
        const router = new AsgiRouter({
          ...OUR_OPTIONS as AsgiRouterOptions,
          routes: patterns.map((p) => new Route(p, { handler })),
        });
        const index = new Map(router.routes.map((r, i) => [r, i]));
        return {
          call: 'a.match(p)?.routeFor("GET")',
          a: router,
          resolve(path) {
            const match = router.match(path);
            const route = match?.routeFor("GET");
            if (match === undefined || route === undefined) return undefined;
            return { index: index.get(route)!, params: { ...match.context } };
          },
        };
      },
    };
  },
};
