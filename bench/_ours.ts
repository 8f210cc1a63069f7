/**
 * Our router behind the benchmark's adapter interface.
 *
 * @module
 */
import { AsgiRouter, Route } from "../router.ts";
import type { Adapter } from "./_adapter.ts";

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
