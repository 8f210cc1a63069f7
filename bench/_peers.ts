/**
 * The routers the benchmark compares, behind one small adapter interface.
 *
 * Peer versions are pinned; update them together and re-run the benchmark.
 * Each adapter stores the route's index as the route's data/handler, so an
 * answer can be compared with the workload's expected one.
 *
 * @module
 */
import FindMyWay from "npm:find-my-way@9.10.1";
import { addRoute, createRouter, findRoute } from "npm:rou3@1.0.0";
import { compileRouter } from "npm:rou3@1.0.0/compiler";
import { Memoirist } from "npm:memoirist@1.2.2";
import { RegExpRouter } from "npm:hono@4.13.19/router/reg-exp-router";
import { TrieRouter } from "npm:hono@4.13.19/router/trie-router";
import {
  comparePriority,
  type PeerSyntax,
  priorityKey,
  translatePattern,
  type Translation,
} from "./_pattern.ts";
import type { Adapter, Built } from "./_adapter.ts";

export type { Adapter, Built };

/** The pinned peer versions, for the results' header. */
export const PEER_VERSIONS: Readonly<Record<string, string>> = {
  "find-my-way": "9.10.1",
  "rou3": "1.0.0",
  "memoirist": "1.2.2",
  "hono": "4.13.19",
};

/** Translates every pattern, or returns the first reason a peer can't express one. */
function translateAll(
  patterns: readonly string[],
  syntax: PeerSyntax,
): { ok: true; list: Extract<Translation, { ok: true }>[] } | { ok: false; reason: string } {
  const list: Extract<Translation, { ok: true }>[] = [];
  for (const pattern of patterns) {
    const t = translatePattern(pattern, syntax);
    if (!t.ok) return t;
    list.push(t);
  }
  return { ok: true, list };
}

/** Copies a peer's params into a plain object under our names. */
function renamed(
  params: Record<string, string | undefined> | undefined,
  rename: Readonly<Record<string, string>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (params === undefined) return out;
  for (const key in params) {
    const value = params[key];
    if (value !== undefined) out[rename[key] ?? key] = value;
  }
  return out;
}

const findMyWay: Adapter = {
  name: "find-my-way",
  ours: false,
  note: 'router.find("GET", path): handler, params, store',
  build(patterns) {
    const t = translateAll(patterns, "find-my-way");
    if (!t.ok) return t;
    return {
      construct: () => {
        const router = FindMyWay();
        const handler = () => {};
        t.list.forEach((tr, index) => router.on("GET", tr.pattern, handler, { index }));
        return {
          call: 'a.find("GET", p)',
          a: router,
          resolve(path) {
            const found = router.find("GET", path);
            if (found === null) return undefined;
            const index = (found.store as { index: number }).index;
            return { index, params: renamed(found.params, t.list[index]!.rename) };
          },
        };
      },
    };
  },
};

function rou3Adapter(compiled: boolean): Adapter {
  return {
    name: compiled ? "rou3 compiled" : "rou3",
    ours: false,
    note: compiled
      ? 'compileRouter(router)("GET", path): data, params'
      : 'findRoute(router, "GET", path): data, params',
    build(patterns) {
      const t = translateAll(patterns, "rou3");
      if (!t.ok) return t;
      return {
        construct: () => {
          const router = createRouter<number>();
          t.list.forEach((tr, index) => addRoute(router, "GET", tr.pattern, index));
          const find = compiled
            ? compileRouter(router)
            : (method: string, path: string) => findRoute(router, method, path);
          return {
            call: compiled ? 'a("GET", p)' : 'a(b, "GET", p)',
            a: compiled ? find : findRoute,
            b: router,
            resolve(path) {
              const found = find("GET", path);
              if (found === undefined) return undefined;
              return {
                index: found.data,
                params: renamed(found.params, t.list[found.data]!.rename),
              };
            },
          };
        },
      };
    },
  };
}

const memoirist: Adapter = {
  name: "memoirist",
  ours: false,
  note: 'router.find("GET", path): store, params',
  build(patterns) {
    const t = translateAll(patterns, "memoirist");
    if (!t.ok) return t;
    return {
      construct: () => {
        const router = new Memoirist<number>();
        t.list.forEach((tr, index) => router.add("GET", tr.pattern, index));
        return {
          call: 'a.find("GET", p)',
          a: router,
          resolve(path) {
            const found = router.find("GET", path);
            if (found === null) return undefined;
            return {
              index: found.store,
              params: renamed(found.params as Record<string, string>, t.list[found.store]!.rename),
            };
          },
        };
      },
    };
  },
};

/**
 * Hono's routers return every matching route in registration order (Hono runs
 * them as a middleware chain, first response wins), so they are given the routes
 * most specific first, as a Hono user would write them; the other routers get
 * the set's own order.
 */
function honoAdapter(kind: "RegExpRouter" | "TrieRouter"): Adapter {
  return {
    name: `hono ${kind}`,
    ours: false,
    note: kind === "RegExpRouter"
      ? 'router.match("GET", path): all matches, params as indexes into one stash'
      : 'router.match("GET", path): all matches with their params',
    build(patterns) {
      const t = translateAll(patterns, "hono");
      if (!t.ok) return t;
      return {
        construct: () => {
          const router = kind === "RegExpRouter"
            ? new RegExpRouter<number>()
            : new TrieRouter<number>();
          const order = patterns.map((pattern, index) => ({ index, key: priorityKey(pattern) }))
            .sort((x, y) => comparePriority(x.key, y.key) || x.index - y.index);
          for (const { index } of order) router.add("GET", t.list[index]!.pattern, index);
          return {
            call: 'a.match("GET", p)',
            a: router,
            resolve(path) {
              const [matches, stash] = router.match("GET", path) as unknown as [
                [number, Record<string, string | number>][],
                string[] | undefined,
              ];
              const first = matches[0];
              if (first === undefined) return undefined;
              const [index, raw] = first;
              const params: Record<string, string> = {};
              for (const key in raw) {
                const v = raw[key];
                const value = stash === undefined ? v as string : stash[v as number];
                if (value !== undefined) params[key] = value;
              }
              return { index, params: renamed(params, t.list[index]!.rename) };
            },
          };
        },
      };
    },
  };
}

/** The peers, in table order. */
export const PEERS: readonly Adapter[] = [
  findMyWay,
  rou3Adapter(false),
  rou3Adapter(true),
  memoirist,
  honoAdapter("RegExpRouter"),
  honoAdapter("TrieRouter"),
];
