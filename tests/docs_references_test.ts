// Copyright the stellarator authors. MIT license.
/**
 * The cross-references of the Markdown documents, which no type check sees: a link's file and
 * anchor exist, a reference of the form `[Limits](#limits), "HTTP details"` names a bold point
 * (`**HTTP details.**`) of that section, and docs/architecture.md names every private file.
 * Newcomer's docs pass of 2026-11-29: docs/asgi.md sent readers to "HTTP details" under Limits
 * for the refusal of a Host that is no host, which is told in another point.
 */
import { assertEquals } from "@std/assert";

const ROOT = new URL("../", import.meta.url);
const DOCUMENTS = ["README.md", ...listMarkdown("docs/")];

function listMarkdown(folder: string): string[] {
  const names: string[] = [];
  for (const entry of Deno.readDirSync(new URL(folder, ROOT))) {
    if (entry.isFile && entry.name.endsWith(".md")) names.push(folder + entry.name);
  }
  return names.sort();
}

function read(path: string): string {
  return Deno.readTextFileSync(new URL(path, ROOT));
}

/** The text outside fenced code blocks. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[`*_]/g, "").replace(/[^\p{L}\p{N}\- ]/gu, "")
    .replaceAll(" ", "-");
}

/** Where a link leads: the document's path (from the root) and the anchor, if any. */
function target(from: string, link: string): [string, string] {
  const [file = "", anchor = ""] = link.split("#");
  if (file === "") return [from, anchor];
  const url = new URL(file, new URL(from, ROOT));
  return [decodeURIComponent(url.pathname.slice(ROOT.pathname.length)), anchor];
}

/** The sections of a document, by anchor: each heading's text up to the next heading. */
function sections(text: string): Map<string, string> {
  const found = new Map<string, string>();
  const headings = [...text.matchAll(/^#+\s+(.*)$/gm)];
  headings.forEach((heading, i) => {
    const end = headings[i + 1]?.index ?? text.length;
    found.set(slug(heading[1]!), text.slice(heading.index, end));
  });
  for (const anchor of text.matchAll(/<a id="([^"]+)"><\/a>/g)) {
    found.set(anchor[1]!, text.slice(anchor.index, text.indexOf("\n- ", anchor.index + 1)));
  }
  return found;
}

Deno.test("docs: every relative link leads to a file and an anchor that exist", () => {
  const broken: string[] = [];
  for (const from of DOCUMENTS) {
    for (const [, link] of prose(read(from)).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(link!)) continue;
      const [file, anchor] = target(from, link!);
      let text: string;
      try {
        text = read(file);
      } catch {
        broken.push(`${from}: ${link} (no file)`);
        continue;
      }
      if (anchor !== "" && file.endsWith(".md") && !sections(text).has(anchor)) {
        broken.push(`${from}: ${link} (no anchor)`);
      }
    }
  }
  assertEquals(broken, []);
});

Deno.test('docs: a reference to a point, [Section](#section), "Point", names a bold point of that section', () => {
  const broken: string[] = [];
  for (const from of DOCUMENTS) {
    const text = prose(read(from));
    for (const [, link, point] of text.matchAll(/\]\(([^)\s]*#[^)\s]+)\),\s+"([^"]+)"/g)) {
      const [file, anchor] = target(from, link!);
      const section = sections(read(file)).get(anchor) ?? "";
      const name = point!.replace(/\s+/g, " ");
      if (!section.replace(/\s+/g, " ").includes(`**${name}.**`)) {
        broken.push(`${from}: [..](${link}), "${name}"`);
      }
    }
  }
  assertEquals(broken, []);
});

Deno.test("docs/architecture.md names every file of the private folders", () => {
  const architecture = read("docs/architecture.md");
  const missing: string[] = [];
  for (const folder of ["_asgi/", "_web/", "_router/", "_common/"]) {
    for (const entry of Deno.readDirSync(new URL(folder, ROOT))) {
      if (entry.isFile && !architecture.includes(folder + entry.name)) {
        missing.push(folder + entry.name);
      }
    }
  }
  assertEquals(missing.sort(), []);
});

/** The modules a file imports, as written (`./bytes.ts` as `_asgi/bytes.ts`, `node:fs` as is). */
function importsOf(path: string): string[] {
  const folder = path.slice(0, path.lastIndexOf("/") + 1);
  const found = new Set<string>();
  for (const [, from] of read(path).matchAll(/^(?:import|export)[^;]*?from "([^"]+)"/gms)) {
    found.add(
      from!.startsWith("./")
        ? folder + from!.slice(2)
        : from!.startsWith("../")
        ? from!.slice(3)
        : from!,
    );
  }
  return [...found].sort();
}

Deno.test("docs/architecture.md: what it says proxy_headers.ts and unix_socket.ts import only, they do", () => {
  const text = read("docs/architecture.md").replace(/\s+/g, " ");
  for (const file of ["_asgi/proxy_headers.ts", "_asgi/unix_socket.ts"]) {
    const after = text.slice(text.indexOf(`\`${file}\``));
    const claim = /imports only (.*?)(?:\.\s|\)|;)/.exec(after)?.[1] ?? "";
    const named = [...claim.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    const outside = importsOf(file).filter((module) =>
      !named.some((name) =>
        name.endsWith("/") ? module.startsWith(name) : module === name ||
          (name.endsWith(":") && module.startsWith(name))
      )
    );
    assertEquals(outside, [], `${file} imports what docs/architecture.md does not name: ${claim}`);
  }
});
