// House rule (STYLE.md): daemons never import each other; they meet only through proto/ and common/.
// Also: common/ and client/ import no daemon; sim/, bench/ and soak/ reach a daemon's code only through the daemon's
// index.ts, which names the pure policies the daemon runs (its policy/ folder) and its daemon class, so that the
// simulator and the harnesses call the daemons' own rules and never a private copy or a module the daemon does not
// stand behind (issues 13 and 40); common/, client/ and proto/ import neither the local-cluster launcher
// (localcluster/), the labs (labs/) nor the CLI, the launcher neither of the last two, and the labs not the CLI; and
// nothing has an import cycle. Exits 1 listing every violation.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const DAEMONS = ["resourcemanager", "nodemanager", "jobmanager", "namenode", "datanode"];
const LIBRARIES = ["common", "client", "proto", "task"];
const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE_DIRS = [...DAEMONS, ...LIBRARIES, "cli", "localcluster", "labs", "sim", "bench", "soak", "examples"];
/** The folders that may use a daemon only through its index.ts, and what each is called in a message. */
const THROUGH_INDEX = new Map([
  ["sim", "the simulator uses"],
  ["bench", "a benchmark uses"],
  ["soak", "the soak uses"],
]);

function walk(dir) {
  let out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e);
    if (e === "generated" || e === "node_modules") continue;
    if (statSync(p).isDirectory()) out = out.concat(walk(p));
    else if (p.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** Relative imports of a TypeScript file, resolved to repository paths (".js" mapped back to ".ts"). */
export function importsOf(file, text) {
  const specs = [
    ...text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1] ?? m[2]);
  return specs
    .filter((s) => s.startsWith("."))
    .map((s) => relative(root, resolve(dirname(file), s)).replace(/\.js$/, ".ts"));
}

/** The rule violations among `files` (repository-relative path -> text). */
export function violations(files) {
  const problems = [];
  const graph = new Map();
  for (const [path, text] of files) {
    const top = path.split("/")[0];
    const deps = importsOf(join(root, path), text);
    graph.set(
      path,
      deps.filter((d) => files.has(d)),
    );
    for (const dep of deps) {
      const depTop = dep.split("/")[0];
      if (DAEMONS.includes(top) && DAEMONS.includes(depTop) && depTop !== top)
        problems.push(`${path} imports ${dep}: daemons meet only through proto/ and common/`);
      if ((top === "common" || top === "client" || top === "task") && DAEMONS.includes(depTop))
        problems.push(`${path} imports ${dep}: ${top}/ must not depend on a daemon`);
      if (THROUGH_INDEX.has(top) && DAEMONS.includes(depTop) && dep !== `${depTop}/index.ts`)
        problems.push(
          `${path} imports ${dep}: ${THROUGH_INDEX.get(top)} a daemon's policies only through ${depTop}/index.ts`,
        );
      if (LIBRARIES.includes(top) && ["cli", "localcluster", "labs"].includes(depTop))
        problems.push(`${path} imports ${dep}: ${top}/ is below the launcher, the labs and the CLI`);
      if (top === "localcluster" && ["cli", "labs"].includes(depTop))
        problems.push(`${path} imports ${dep}: the local-cluster launcher is below the labs and the CLI`);
      if (top === "labs" && depTop === "cli")
        problems.push(`${path} imports ${dep}: the labs are below the CLI, which calls into them`);
    }
  }
  // Cycle detection (iterative DFS with colours).
  const colour = new Map();
  for (const start of graph.keys()) {
    if (colour.get(start)) continue;
    const stack = [[start, 0]];
    const path = [];
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [node, i] = top;
      if (i === 0) {
        colour.set(node, 1);
        path.push(node);
      }
      const deps = graph.get(node) ?? [];
      if (i < deps.length) {
        top[1] = i + 1;
        const next = deps[i];
        if (colour.get(next) === 1)
          problems.push(`import cycle: ${[...path.slice(path.indexOf(next)), next].join(" -> ")}`);
        else if (!colour.get(next)) stack.push([next, 0]);
      } else {
        colour.set(node, 2);
        path.pop();
        stack.pop();
      }
    }
  }
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const files = new Map();
  for (const d of SOURCE_DIRS)
    for (const f of walk(join(root, d))) files.set(relative(root, f), readFileSync(f, "utf8"));
  const problems = violations(files);
  if (problems.length) {
    console.error(problems.join("\n"));
    process.exit(1);
  }
  console.log(`import rules hold over ${files.size} files`);
}
