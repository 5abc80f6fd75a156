// Checks that every relative link and image in README.md, DEVELOPERS.md and docs/*.md resolves to a file that exists,
// and that a `#anchor` names a heading of the page it points to (GitHub's heading anchors). Links inside code blocks
// and code spans, and links to other sites, are not checked as links; but a code span that names a path in one of the
// repository's source folders (`resourcemanager/policy/classifier.ts`, `deploy/conf/`) must exist too, so that a moved file
// shows up in the docs that name it. Exits 1 listing every broken link or path (part of `npm run lint`).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The pages checked: the entry points and every page directly in docs/. */
function pages() {
  const docs = join(root, "docs");
  const inDocs = existsSync(docs)
    ? readdirSync(docs)
        .filter((f) => f.endsWith(".md"))
        .map((f) => join(docs, f))
    : [];
  return [join(root, "README.md"), join(root, "DEVELOPERS.md"), ...inDocs].filter((f) => existsSync(f));
}

/** A page's text without fenced code blocks and code spans, where a link is only an example. */
function prose(text) {
  const lines = [];
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      lines.push("");
      continue;
    }
    lines.push(fenced ? "" : line.replace(/`[^`]*`/g, ""));
  }
  return lines;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, ... */
function anchorsOf(file) {
  const seen = new Map();
  const anchors = new Set();
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Folders whose contents are built or written by runs, not kept in git: a path in them may not exist yet. */
const GENERATED = new Set(["dist", "build", "node_modules", "test-artifacts", "sim-results", "coverage"]);

/** The repository's top-level folders, whose paths a code span may name. */
const FOLDERS = new Set(
  readdirSync(root).filter((d) => !d.startsWith(".") && !GENERATED.has(d) && statSync(join(root, d)).isDirectory()),
);

/** Code spans that name a path under one of the repository's folders and that do not exist. */
function missingPaths(text, page) {
  const out = [];
  let fenced = false;
  text.split("\n").forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return;
    for (const m of line.matchAll(/`([\w.-]+(?:\/[\w.-]+)+\/?)`/g)) {
      const path = m[1];
      const top = path.split("/")[0];
      if (!FOLDERS.has(top) || path.startsWith("proto/generated")) continue;
      if (!existsSync(join(root, path)))
        out.push(`${relative(root, page)}:${i + 1}: \`${path}\` (no such file in the repository)`);
    }
  });
  return out;
}

const broken = [];
const anchorCache = new Map();
for (const page of pages()) {
  broken.push(...missingPaths(readFileSync(page, "utf8"), page));
  prose(readFileSync(page, "utf8")).forEach((line, i) => {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: ...
      const [path, hash] = target.split("#");
      const file = path ? resolve(dirname(page), decodeURIComponent(path)) : page;
      const where = `${relative(root, page)}:${i + 1}`;
      if (!existsSync(file)) {
        broken.push(`${where}: ${target} (no such file)`);
        continue;
      }
      if (hash && file.endsWith(".md") && statSync(file).isFile()) {
        if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(file));
        if (!anchorCache.get(file).has(hash)) broken.push(`${where}: ${target} (no heading #${hash})`);
      }
    }
  });
}
if (broken.length > 0) {
  console.error(`broken links in the docs:\n  ${broken.join("\n  ")}`);
  process.exit(1);
}
