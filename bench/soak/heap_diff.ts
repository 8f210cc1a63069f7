/**
 * Compares two V8 heap snapshots (`.heapsnapshot`, as `leak_probe.ts --snapshots=` writes them)
 * by what their objects are: for each node type and constructor name, the count and self size in
 * each, largest change in count first. What grows between two points of a long run is what leaks.
 *
 * ```sh
 * deno run -A bench/soak/heap_diff.ts /tmp/probe/minute3.heapsnapshot \
 *   /tmp/probe/minute14.heapsnapshot 30
 * ```
 *
 * Strings, numbers and compiled code are counted as one kind each, whatever their text.
 *
 * @module
 */

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Count and self size, by `type name`. */
type Tally = Map<string, { count: number; size: number }>;

const ONE_KIND: Record<string, string> = {
  string: "<string>",
  "concatenated string": "<string>",
  "sliced string": "<string>",
  number: "<number>",
  code: "<code>",
};

/**
 * Counts the nodes of a heap snapshot by type and name.
 *
 * @param path The `.heapsnapshot` file.
 * @returns Count and self size by `type name`.
 */
export function tally(path: string): Tally {
  const snapshot = JSON.parse(Deno.readTextFileSync(path)) as Snapshot;
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const type = fields.indexOf("type");
  const name = fields.indexOf("name");
  const size = fields.indexOf("self_size");
  const { nodes, strings } = snapshot;
  const out: Tally = new Map();
  for (let i = 0; i < nodes.length; i += width) {
    const kind = types[nodes[i + type]!]!;
    const key = `${kind} ${ONE_KIND[kind] ?? strings[nodes[i + name]!]!.slice(0, 80)}`;
    const entry = out.get(key) ?? { count: 0, size: 0 };
    entry.count++;
    entry.size += nodes[i + size]!;
    out.set(key, entry);
  }
  return out;
}

if (import.meta.main) {
  const [before, after, rows = "30"] = Deno.args;
  if (before === undefined || after === undefined) {
    throw new TypeError("Usage: heap_diff.ts <before.heapsnapshot> <after.heapsnapshot> [rows]");
  }
  const a = tally(before);
  const b = tally(after);
  const none = { count: 0, size: 0 };
  const changes = [...new Set([...a.keys(), ...b.keys()])].map((key) => {
    const x = a.get(key) ?? none;
    const y = b.get(key) ?? none;
    return { key, from: x.count, to: y.count, count: y.count - x.count, size: y.size - x.size };
  }).sort((p, q) => Math.abs(q.count) - Math.abs(p.count));
  const total = (t: Tally) => [...t.values()].reduce((s, e) => s + e.size, 0);
  console.log(`self size: ${total(a)} -> ${total(b)} bytes`);
  console.log("  count change  size change   before ->    after  type and name");
  for (const c of changes.slice(0, Number(rows))) {
    console.log(
      `${String(c.count).padStart(14)} ${String(c.size).padStart(12)} ${
        String(c.from).padStart(9)
      } -> ${String(c.to).padStart(8)}  ${c.key}`,
    );
  }
}
