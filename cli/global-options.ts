/**
 * What `harvest` accepts before its subcommand: `--config <client.json>` and `--dir <cluster dir>` (as `hdfs --config
 * DIR dfs -ls` and `yarn --config DIR application -list` take theirs), `--version`, and suggestions for a mistyped
 * command. A global option reaches the subcommand as if it had been given after it; one given after the subcommand
 * wins. A subcommand whose own `--config` or `--dir` means something else (`cluster up --config` names daemon options,
 * `security init --dir` a CA) refuses the global one rather than take it in the wrong sense.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { HarvestError } from "../common/errors.js";
import { packageRoot } from "../common/paths.js";

/** The global options and what each means for the commands that take it. */
const GLOBAL_OPTIONS = ["config", "dir"] as const;
type GlobalOption = (typeof GLOBAL_OPTIONS)[number];

/** The commands whose `--config` is a client configuration, or whose `--dir` is a local cluster's directory. */
const ACCEPTS: Record<GlobalOption, WeakSet<Command>> = { config: new WeakSet(), dir: new WeakSet() };

/** Says that `cmd`'s own `--config` (a client configuration) or `--dir` (a cluster directory) is the global one. */
export function acceptsGlobal(cmd: Command, option: GlobalOption): Command {
  ACCEPTS[option].add(cmd);
  return cmd;
}

/** The version in package.json. */
export function harvestVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;
}

/** The full name of a command, as typed: "harvest job list". */
function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * Adds `--config`, `--dir` and `--version` to the program, hands the global options to the subcommand that runs, and
 * suggests full command paths for an unknown top-level command (`harvest ls` -> `harvest fs ls`). Call it before any
 * subcommand is added (they inherit positional options from the program).
 */
export function addGlobalOptions(program: Command): void {
  program
    // Program options only before the subcommand: after it, `--config` and `--dir` are the subcommand's own.
    .enablePositionalOptions()
    .version(harvestVersion(), "-V, --version", "print the version of harvest")
    .option(
      "--config <file>",
      "client configuration for every subcommand (as each subcommand's own --config; default: $HARVEST_CONF, then ~/.harvest/client.json)",
    )
    .option(
      "--dir <dir>",
      "a local cluster's directory for every subcommand (as each subcommand's own --dir; default: $HARVEST_CLUSTER_DIR, then ~/.harvest/cluster)",
    )
    .hook("preAction", (root, actionCommand) => {
      const globals = root.opts<Partial<Record<GlobalOption, string>>>();
      for (const name of GLOBAL_OPTIONS) {
        const value = globals[name];
        if (value === undefined || actionCommand === root) continue;
        if (!ACCEPTS[name].has(actionCommand))
          throw new HarvestError(
            "INVALID_ARGUMENT",
            `--${name} before the subcommand names ${name === "config" ? "a client configuration" : "a local cluster's directory"}, ` +
              `which '${fullName(actionCommand)}' does not take` +
              (actionCommand.options.some((o) => o.attributeName() === name)
                ? `; its own --${name} goes after it: ${fullName(actionCommand)} --${name} ${value}`
                : ""),
            { details: { flag: `--${name}` } },
          );
        // The subcommand's own flag, given after it, wins.
        if (actionCommand.getOptionValue(name) === undefined) actionCommand.setOptionValue(name, value);
      }
    });
  program.on("command:*", (operands: string[]) => {
    const unknown = operands[0] ?? "";
    const suggestions = suggestCommands(program, unknown);
    program.error(
      `error: unknown command '${unknown}'` +
        (suggestions.length > 0 ? `\n(Did you mean ${suggestions.map((s) => `'${s}'`).join(" or ")}?)` : ""),
      { code: "commander.unknownCommand" },
    );
  });
}

/** Edit distance of two words (Damerau: a swap of neighbours costs one), as commander measures its suggestions. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The commands a mistyped top-level word may have meant, as full paths: the closest of the top-level commands and of
 * every nested one (at most a third of its letters off, as commander suggests), so `jbo` -> `harvest job`, `ls` ->
 * `harvest fs ls`, `status` -> `harvest cluster status`, `harvest job status`, ... (at most five).
 */
export function suggestCommands(program: Command, word: string): string[] {
  // Breadth first: top-level commands come first, so a tie lists them before nested ones.
  const all: Command[] = [...program.commands];
  for (let i = 0; i < all.length; i++) all.push(...all[i]!.commands);
  let best = Infinity;
  let found: string[] = [];
  for (const c of all) {
    for (const name of [c.name(), ...c.aliases()]) {
      const distance = editDistance(word, name);
      if (distance > Math.max(1, Math.floor(word.length / 3)) || distance > best) continue;
      if (distance < best) found = [];
      best = distance;
      if (!found.includes(fullName(c))) found.push(fullName(c));
    }
  }
  return found.slice(0, 5);
}
