// Writes docs/configuration.md, the configuration reference, from the options interfaces' doc comments and `@default`
// tags, read with the TypeScript compiler API: one table per daemon (and the client), with a sub-table for each nested
// option group whose interface carries `@default`s. `--check` writes nothing and exits 1 naming the drift when the file
// on disk differs from what it would write (part of `npm run lint`); `--missing` lists the fields that lack a doc
// comment or a `@default`. Run it with `npm run gen:docs` after changing an options file.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as prettier from "prettier";
import ts from "typescript";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(root, "docs", "configuration.md");

/** The top-level option interfaces, in the order the page lists them. */
const SECTIONS = [
  {
    title: "Resource manager",
    file: "resourcemanager/options.ts",
    name: "ResourceManagerOptions",
    how: "`harvest daemon resourcemanager --config F` reads them from a JSON file; `harvest cluster up --config F` takes them under `rm`.",
  },
  {
    title: "Node manager",
    file: "nodemanager/options.ts",
    name: "NodeManagerOptions",
    how: "`harvest daemon nodemanager --config F`; `harvest cluster up --config F` takes them under `nm` (for every server).",
  },
  {
    title: "Namenode",
    file: "namenode/options.ts",
    name: "NameNodeOptions",
    how: "`harvest daemon namenode --config F`; `harvest cluster up --config F` takes them under `nn`.",
  },
  {
    title: "Datanode",
    file: "datanode/options.ts",
    name: "DataNodeOptions",
    how: "`harvest daemon datanode --config F`; `harvest cluster up --config F` takes them under `dn` (for every server).",
  },
  {
    title: "Client configuration file",
    file: "client/client-config.ts",
    name: "ClientConfig",
    // Where the configuration was read from: set by the loader, not an option of the file.
    skip: ["source"],
    how: "`~/.harvest/client.json`, `$HARVEST_CONF` or `--config F`: how the `harvest` command, `JobClient.fromConfig()` and `DfsClient.fromConfig()` find a cluster. Relative paths are relative to the file.",
  },
  {
    title: "DfsClient",
    file: "client/dfs-options.ts",
    name: "DfsClientOptions",
    how: "The second argument of `new DfsClient(address, options)` (TypeScript).",
  },
  {
    title: "JobClient",
    file: "client/job-client.ts",
    name: "JobClientOptions",
    how: "The second argument of `new JobClient(address, options)` (TypeScript).",
  },
  {
    title: "Job manager",
    file: "jobmanager/job-manager.ts",
    name: "JobManagerOptions",
    how: "Not a file: the resource manager and the node manager set them in each job-manager container's environment.",
  },
];

/** Wrappers whose first type argument is the option group's interface. */
const WRAPPERS = new Set(["Partial", "Omit", "Readonly", "Required"]);

function createProgram() {
  const configPath = join(root, "tsconfig.json");
  const { config } = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
  // A file that moved is looked for behind its folder's index.ts (see findInterface).
  const rootNames = SECTIONS.map((s) => join(root, s.file)).map((f) =>
    existsSync(f) ? f : join(dirname(f), "index.ts"),
  );
  return ts.createProgram({
    rootNames: rootNames.filter((f) => existsSync(f)),
    options: { ...parsed.options, noEmit: true },
  });
}

/**
 * The interface `name` declared in `file`; when it is not there (moved by a refactoring), the one interface of that
 * name anywhere in the program, with a warning to update SECTIONS; else an error naming both.
 */
function findInterface(program, file, name) {
  const isIt = (s) => ts.isInterfaceDeclaration(s) && s.name.text === name;
  const decl = program.getSourceFile(join(root, file))?.statements.find(isIt);
  if (decl) return decl;
  const found = program
    .getSourceFiles()
    .filter((sf) => !sf.fileName.includes("node_modules"))
    .flatMap((sf) => sf.statements.filter(isIt));
  if (found.length !== 1)
    throw new Error(`gen-config-docs: interface ${name} not found in ${file} (moved? update SECTIONS in this script)`);
  const where = relative(root, found[0].getSourceFile().fileName);
  console.error(`gen-config-docs: ${name} is in ${where}, not ${file}: update SECTIONS in scripts/gen-config-docs.mjs`);
  return found[0];
}

/** A member's doc comment (one line) and its `@default` text, both undefined when absent. */
function docOf(member) {
  let comment;
  let dflt;
  for (const doc of ts.getJSDocCommentsAndTags(member)) {
    if (!ts.isJSDoc(doc)) continue;
    const text = ts.getTextOfJSDocComment(doc.comment);
    if (text) comment = comment ? `${comment} ${text}` : text;
    for (const tag of doc.tags ?? []) {
      if (tag.tagName.text === "default") dflt = ts.getTextOfJSDocComment(tag.comment) ?? "";
    }
  }
  const oneLine = (s) => s?.replace(/\s+/g, " ").trim();
  return { comment: oneLine(comment), dflt: oneLine(dflt) };
}

/** The interface a property's type names through Partial<>/Omit<> (declared in this repository), and omitted keys. */
function nestedInterface(checker, typeNode) {
  const omitted = new Set();
  let node = typeNode;
  while (node && ts.isTypeReferenceNode(node) && WRAPPERS.has(node.typeName.getText()) && node.typeArguments?.length) {
    if (node.typeName.getText() === "Omit" && node.typeArguments[1]) {
      const keys = node.typeArguments[1];
      const lits = ts.isUnionTypeNode(keys) ? keys.types : [keys];
      for (const k of lits) if (ts.isLiteralTypeNode(k) && ts.isStringLiteral(k.literal)) omitted.add(k.literal.text);
    }
    node = node.typeArguments[0];
  }
  if (!node || !ts.isTypeReferenceNode(node)) return undefined;
  let symbol = checker.getSymbolAtLocation(node.typeName);
  if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  const decl = symbol?.declarations?.find(ts.isInterfaceDeclaration);
  if (!decl || decl.getSourceFile().fileName.includes("node_modules")) return undefined;
  // Only option groups: an interface none of whose fields has a default (Resources, TlsOption) is a value shape.
  if (!decl.members.some((m) => docOf(m).dflt !== undefined)) return undefined;
  return { decl, omitted };
}

/** A default that names a constant (`DEFAULT_POWER_PROFILE_ID`) shows the constant's literal value beside it. */
function resolveConstant(checker, member, text) {
  if (!/^[A-Z][A-Z0-9_]+$/.test(text)) return undefined;
  const symbol = checker
    .getSymbolsInScope(member, ts.SymbolFlags.Variable | ts.SymbolFlags.Alias)
    .find((s) => s.name === text);
  const target = symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const decl = target?.declarations?.find(ts.isVariableDeclaration);
  const init = decl?.initializer;
  if (init && (ts.isStringLiteral(init) || ts.isNumericLiteral(init))) return init.getText();
  return undefined;
}

/** Escapes text for a table cell outside code spans: `|` always, `<` and `*` only outside backticks. */
function cell(text) {
  return text
    .split(/(`[^`]*`)/)
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, "&lt;").replace(/\*/g, "\\*")))
    .join("")
    .replace(/\|/g, "\\|");
}

/** A default as the table shows it: literals in backticks, prose as written. */
function formatDefault(text, constant) {
  if (constant) return `\`${text}\` (\`${constant}\`)`;
  const literal = /^(-?[\d_.]+|"[^"]*"|true|false|\{.*\}|\[.*\]|undefined|none)(\s+\(.*\))?$/.exec(text);
  if (literal && !text.includes("`")) return `\`${literal[1]}\`${literal[2] ?? ""}`;
  return text;
}

/**
 * A property's type as the table shows it: a name that stands for string literals (`type NodeChoiceKind = "stock" |
 * ...`) shows the literals, which are what a config file holds; any other type shows as written.
 */
function shownType(checker, typeNode) {
  let text = typeNode.getText();
  if (ts.isTypeReferenceNode(typeNode) && !typeNode.typeArguments) {
    let symbol = checker.getSymbolAtLocation(typeNode.typeName);
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    const decl = symbol?.declarations?.[0];
    if (decl && ts.isTypeAliasDeclaration(decl) && isStringLiterals(decl.type)) text = decl.type.getText();
  }
  return text.replace(/\s+/g, " ");
}

/** True when `node` is a string literal type or a union of them. */
function isStringLiterals(node) {
  const parts = ts.isUnionTypeNode(node) ? node.types : [node];
  return parts.every((p) => ts.isLiteralTypeNode(p) && ts.isStringLiteral(p.literal));
}

/** The rows of one interface, and the nested groups to list after it. */
function tableOf(checker, decl, prefix, omitted, missing, where) {
  const rows = [];
  const nested = [];
  for (const member of decl.members) {
    if (!ts.isPropertySignature(member) || !member.name) continue;
    const name = member.name.getText();
    if (omitted.has(name)) continue;
    const { comment, dflt } = docOf(member);
    const type = member.type ? shownType(checker, member.type) : "unknown";
    const required = !member.questionToken && dflt === undefined && /\bRequired\b/.test(comment ?? "");
    const optional = Boolean(member.questionToken);
    if (comment === undefined) missing.push(`${where}: ${prefix}${name} has no doc comment`);
    if (dflt === undefined && !required && !optional) missing.push(`${where}: ${prefix}${name} has no @default`);
    const inner = member.type ? nestedInterface(checker, member.type) : undefined;
    if (inner) nested.push({ field: `${prefix}${name}`, ...inner });
    const constant = dflt ? resolveConstant(checker, member, dflt) : undefined;
    const shownDefault = dflt !== undefined ? formatDefault(dflt, constant) : required ? "(required)" : "";
    let doc = comment ?? "";
    if (inner) doc += `${doc ? " " : ""}Fields: [below](#${anchor(`${prefix}${name}`)}).`;
    rows.push(`| \`${prefix}${name}\` | ${cell(`\`${type}\``)} | ${cell(shownDefault)} | ${cell(doc)} |`);
  }
  return { rows, nested };
}

/** GitHub's heading anchor for a heading made of `text` in backticks. */
function anchor(text) {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, "")
    .replace(/ /g, "-");
}

function render(program) {
  const checker = program.getTypeChecker();
  const missing = [];
  const out = [
    "# Configuration reference",
    "",
    "What every daemon, the client configuration file and the client library accept, option by option. Generated by",
    "`scripts/gen-config-docs.mjs` from the options files' doc comments and `@default` tags: do not edit it by hand; edit",
    "the options file and run `npm run gen:docs` (`npm run lint` fails when this page is out of date).",
    "",
    "Every option has a default unless it says (required), and each daemon validates its options at start: a bad value",
    'stops the daemon with `CONFIG_INVALID` naming the field. Nested groups take a partial object (`{ "drain": {',
    '"order": "arbitrary" } }`); their fields are listed after their daemon\'s table. Example files are in `deploy/conf/`',
    "([deploying](deploying.md)).",
    "",
  ];
  for (const s of SECTIONS) out.push(`- [${s.title}](#${anchor(s.title)}) (\`${s.name}\`)`);
  out.push("");
  const header = ["| option | type | default | meaning |", "| --- | --- | --- | --- |"];
  for (const s of SECTIONS) {
    const decl = findInterface(program, s.file, s.name);
    const file = relative(root, decl.getSourceFile().fileName);
    out.push(`## ${s.title}`, "", `\`${s.name}\` in \`${file}\`. ${s.how}`, "");
    const { rows, nested } = tableOf(checker, decl, "", new Set(s.skip ?? []), missing, file);
    out.push(...header, ...rows, "");
    const queue = [...nested];
    while (queue.length > 0) {
      const group = queue.shift();
      const file = relative(root, group.decl.getSourceFile().fileName);
      out.push(`### \`${group.field}\``, "", `\`${group.decl.name.text}\` in \`${file}\`.`, "");
      const inner = tableOf(checker, group.decl, `${group.field}.`, group.omitted, missing, file);
      out.push(...header, ...inner.rows, "");
      queue.unshift(...inner.nested);
    }
  }
  return { text: out.join("\n"), missing };
}

/** The first differing lines between what is on disk and what would be written, as a drift report. */
function drift(onDisk, wanted) {
  const a = onDisk.split("\n");
  const b = wanted.split("\n");
  const lines = [];
  for (let i = 0; i < Math.max(a.length, b.length) && lines.length < 20; i++) {
    if (a[i] === b[i]) continue;
    const heading = b
      .slice(0, i + 1)
      .reverse()
      .find((l) => l.startsWith("#"));
    lines.push(`  line ${i + 1}${heading ? ` (under "${heading.replace(/^#+\s*/, "")}")` : ""}:`);
    if (a[i] !== undefined) lines.push(`    on disk: ${a[i]}`);
    if (b[i] !== undefined) lines.push(`    expected: ${b[i]}`);
  }
  return lines.join("\n");
}

async function main() {
  const args = process.argv.slice(2);
  const program = createProgram();
  const { text, missing } = render(program);
  const prettierOptions = (await prettier.resolveConfig(OUT)) ?? {};
  const wanted = await prettier.format(text, { ...prettierOptions, parser: "markdown" });
  if (args.includes("--missing")) {
    for (const m of missing) console.log(m);
    return;
  }
  if (args.includes("--check")) {
    let onDisk = "";
    try {
      onDisk = readFileSync(OUT, "utf8");
    } catch {
      console.error(`${relative(root, OUT)} is missing: run npm run gen:docs`);
      process.exit(1);
    }
    if (onDisk !== wanted) {
      console.error(`${relative(root, OUT)} differs from the options files (run npm run gen:docs):`);
      console.error(drift(onDisk, wanted));
      process.exit(1);
    }
    return;
  }
  writeFileSync(OUT, wanted);
  console.log(`wrote ${relative(root, OUT)}`);
}

await main();
