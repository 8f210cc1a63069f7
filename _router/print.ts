// Copyright the stellarator authors. MIT license.
/**
 * The drawing `AsgiRouter.toString()` returns: one node a line, `●` and the methods where routes
 * end, `↺` on variables that can end at several places; control characters escaped as in error
 * messages (`\n`). Where the tree cuts a label inside a UTF-16 pair (`😀` and `😁` share their
 * first half), the first half is drawn with the labels of the children instead, so that every
 * line holds whole characters.
 *
 * @module
 */

import type { RouteLike } from "./endpoint.ts";
import { allKids, endsInsidePair, type Node } from "./node.ts";
import { visible } from "../_common/describe.ts";

/** The tree below `root`, drawn with box-drawing characters. */
export function drawTree<R extends RouteLike>(root: Node<R>): string {
  const lines = [root.label + marker(root)];
  drawKids(root, "", lines);
  return lines.join("\n");
}

function marker<R extends RouteLike>(node: Node<R>): string {
  let text = node.branches !== undefined ? " ↺" : "";
  if (node.endpoint !== undefined) text += ` ● ${node.endpoint.allowed.join(", ")}`;
  return text;
}

/**
 * The children of `node` as drawn: each with its label, `high` (the first half of a pair cut
 * above) in front, and the first half its own children take. A child whose label is that first
 * half alone is not drawn: its children are, in its place.
 */
function drawnKids<R extends RouteLike>(
  node: Node<R>,
  high: string,
): [label: string, kid: Node<R>, high: string][] {
  const out: [string, Node<R>, string][] = [];
  for (const kid of allKids(node)) {
    const label = high + kid.label;
    if (!endsInsidePair(label)) out.push([label, kid, ""]);
    else if (label.length === 1) out.push(...drawnKids(kid, label));
    else out.push([label.slice(0, -1), kid, label.slice(-1)]);
  }
  return out;
}

function drawKids<R extends RouteLike>(
  node: Node<R>,
  indent: string,
  lines: string[],
  high = "",
): void {
  const kids = drawnKids(node, high);
  kids.forEach(([label, kid, kidHigh], i) => {
    const last = i === kids.length - 1;
    // Escaped: a pattern may hold a newline, which would split the node's line in two.
    lines.push(`${indent}${last ? "└── " : "├── "}${visible(label)}${marker(kid)}`);
    drawKids(kid, indent + (last ? "    " : "│   "), lines, kidHigh);
  });
}
