import { assert, assertEquals, assertThrows } from "@std/assert";
import { parsePattern, referenceMatcher } from "../bench/_pattern.ts";
import { compileLoop, median, storedPaths } from "../bench/_runner.ts";
import { writeSection } from "../bench/_results.ts";
import {
  buildWorkloads,
  fillPattern,
  prng,
  readRoutes,
  routeSets,
  sameAnswer,
  scalingRoutes,
  WORKLOAD_LENGTH,
} from "../bench/_sets.ts";

const sets = routeSets({
  only: ["github", "hono", "priority", "constraints", "scaling-10", "scaling-1000"],
});

Deno.test("routeSets() gives every workload path the answer of the reference semantics", () => {
  for (const set of sets) {
    const strict = referenceMatcher(set.patterns);
    const relaxed = referenceMatcher(set.patterns, { trailingSlash: "relaxed" });
    for (const workload of set.workloads) {
      assertEquals(workload.paths.length, WORKLOAD_LENGTH);
      workload.paths.forEach((path, i) => {
        const want = workload.expected[i];
        assert(sameAnswer(strict(path), want), `${set.name} ${workload.kind} ${path} (strict)`);
        assert(sameAnswer(relaxed(path), want), `${set.name} ${workload.kind} ${path} (relaxed)`);
      });
    }
  }
});

Deno.test("routeSets() puts each path in the workload of its kind", () => {
  const varCount = (pattern: string) =>
    parsePattern(pattern).filter((t) => t.kind !== "literal").length;
  for (const set of sets) {
    for (const workload of set.workloads) {
      const hits = workload.expected.filter((e) => e !== undefined);
      const misses = workload.expected.length - hits.length;
      const counts = hits.map((e) => varCount(set.patterns[e!.index]!));
      if (workload.kind === "static") assert(counts.every((n) => n === 0) && misses === 0);
      if (workload.kind === "one-var") assert(counts.every((n) => n === 1) && misses === 0);
      if (workload.kind === "many-var") assert(counts.every((n) => n >= 2) && misses === 0);
      if (workload.kind === "miss") assertEquals(hits.length, 0);
      if (workload.kind === "mix") {
        assert(
          misses > 0 && misses < workload.paths.length / 4,
          `${set.name} mix misses ${misses}`,
        );
      }
    }
  }
});

Deno.test("routeSets() is deterministic", () => {
  const again = routeSets({ only: ["github", "priority"] });
  for (const set of again) {
    const first = sets.find((s) => s.name === set.name)!;
    assertEquals(set.workloads, first.workloads);
  }
});

Deno.test("routeSets() reads the 143 GitHub routes and Hono's 12", () => {
  assertEquals(sets.find((s) => s.name === "github")!.patterns.length, 143);
  assertEquals(sets.find((s) => s.name === "hono")!.patterns.length, 12);
  assertEquals(readRoutes("hard-routes.txt").length, 4);
});

Deno.test("scalingRoutes() makes each size a prefix of the next, with one path shape", () => {
  const large = scalingRoutes(10_000);
  assertEquals(large.length, 10_000);
  assertEquals(new Set(large).size, 10_000);
  for (const size of [10, 100, 1_000]) assertEquals(scalingRoutes(size), large.slice(0, size));
  const shape = (pattern: string) =>
    pattern.split("/").map((s) => s.startsWith("{") ? s : s.length);
  const shapes = new Set(large.map((p) => JSON.stringify(shape(p))));
  assertEquals(shapes.size, 4);
});

Deno.test("scaling sets time paths of the same shape at 10 and 1 000 routes", () => {
  const shapes = (name: string, kind: string) => {
    const set = sets.find((s) => s.name === name)!;
    const workload = set.workloads.find((w) => w.kind === kind)!;
    return new Set(workload.paths.map((p) => p.split("/").slice(0, 3).map((s) => s.length).join()));
  };
  for (const kind of ["static", "one-var", "many-var"]) {
    assertEquals(shapes("scaling-10", kind), shapes("scaling-1000", kind));
  }
});

Deno.test("buildWorkloads() rejects a hand-written case the reference disagrees with", () => {
  assertThrows(
    () =>
      buildWorkloads("t", ["/users/{id}", "/users/new"], {
        cases: [{ path: "/users/new", pattern: "/users/{id}", params: { id: "new" } }],
      }),
    Error,
    'Case "/users/new" expects "/users/{id}" {"id":"new"} but the reference gives "/users/new" {}',
  );
});

Deno.test("fillPattern() fills variables with values their regex accepts", () => {
  const random = prng(1);
  for (let i = 0; i < 50; i++) {
    const { path, params } = fillPattern("/p/{y:[0-9]{4}}/{m:[0-9]{2}}/{slug}/{rest:*}", random);
    assert(/^\/p\/\d{4}\/\d{2}\/[a-z0-9]+\/.+$/.test(path), path);
    assertEquals(path, `/p/${params.y}/${params.m}/${params.slug}/${params.rest}`);
    assert(/\d/.test(params.slug!), "plain values hold a digit so they never spell a literal");
  }
  assertThrows(
    () => fillPattern("/{x:[q]+}", random),
    RangeError,
    'No value generator for the regex "[q]+"',
  );
});

Deno.test("sameAnswer() compares route and context key for key", () => {
  assert(sameAnswer(undefined, undefined));
  assert(sameAnswer({ index: 1, params: { a: "x" } }, { index: 1, params: { a: "x" } }));
  assert(!sameAnswer({ index: 1, params: {} }, undefined));
  assert(!sameAnswer({ index: 1, params: { a: "x" } }, { index: 2, params: { a: "x" } }));
  assert(!sameAnswer({ index: 1, params: { a: "x" } }, { index: 1, params: { b: "x" } }));
  assert(!sameAnswer({ index: 1, params: { a: "x" } }, { index: 1, params: { a: "x", b: "y" } }));
});

Deno.test("compileLoop() counts every lookup that answers, reps times, on fresh path strings", () => {
  const loop = compileLoop("a.get(p) ?? b");
  const map = new Map([["/a", 1]]);
  const stored = storedPaths(["/a", "/b", "/a"]);
  assertEquals(loop(map, undefined, stored, 3), 6);
  const seen: string[] = [];
  compileLoop("a.push(p)")(seen, undefined, stored, 1);
  assertEquals(seen, ["/a", "/b", "/a"]);
});

Deno.test("median() takes the middle value", () => {
  assertEquals(median([3, 1, 2]), 2);
  assertEquals(median([4, 1, 3, 2]), 2.5);
});

Deno.test("writeSection() replaces its own section and keeps the others", () => {
  const dir = Deno.makeTempDirSync();
  const file = new URL(`file://${dir}/RESULTS.md`);
  try {
    writeSection("router", "## Router\n\nold", file);
    writeSection("http", "## HTTP\n\nfirst", file);
    writeSection("router", "## Router\n\nnew", file);
    const text = Deno.readTextFileSync(file);
    assert(text.includes("new") && !text.includes("old"));
    assert(text.indexOf("## Router") < text.indexOf("## HTTP"));
    assertEquals(text.match(/<!-- router:start -->/g)?.length, 1);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
