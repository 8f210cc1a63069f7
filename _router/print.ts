// Copyright the stellarator authors. MIT license.
/**
 * The drawing `AsgiRouter.toString()` returns: one node a line, `●` and the methods where routes
 * end, `↺` on variables that can end at several places.
 *
 * @module
 */

import type { RouteLike } from "./endpoint.ts";
import { allKids, type Node } from "./node.ts";

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

function drawKids<R extends RouteLike>(node: Node<R>, indent: string, lines: string[]): void {
  const kids = allKids(node);
  kids.forEach((kid, i) => {
    const last = i === kids.length - 1;
    lines.push(`${indent}${last ? "└── " : "├── "}${kid.label}${marker(kid)}`);
    drawKids(kid, indent + (last ? "    " : "│   "), lines);
  });
}
