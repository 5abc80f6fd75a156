/**
 * The benchmark dispatcher: `node dist/bench/run.js <name> [--flags] [--json]` (also `npm run bench -- <name>` and
 * `harvest bench <name>`). Prints a human table, or the figures as JSON with `--json`; progress goes to stderr.
 * An unknown name lists the benchmarks and exits 2. Benchmarks measure memory after full collections, so the
 * dispatcher re-runs itself with --expose-gc when started without it, and then with the malloc setting of the data
 * commands (localcluster/malloc-tunables.ts) unless GLIBC_TUNABLES is set.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BenchDefinition } from "./definition.js";
import { BenchUsageError, describeFlags } from "./flags.js";
import { cappingBench } from "./capping.js";
import { checksumsBench } from "./checksums.js";
import { classifyBench } from "./classify.js";
import { deletesBench } from "./deletes.js";
import { launchBench } from "./launch.js";
import { dfsBench } from "./dfs.js";
import { namenodeBench } from "./namenode.js";
import { powerModelBench } from "./powermodel.js";
import { schedulerBench } from "./scheduler.js";
import { sortBench } from "./sort.js";
import { webhdfsBench } from "./webhdfs.js";
import { yieldBench } from "./yield.js";
import { withMallocTunables } from "../localcluster/malloc-tunables.js";
import { missingClientNodeOptions } from "../localcluster/node-options.js";

const BENCHES: readonly BenchDefinition[] = [
  yieldBench,
  schedulerBench,
  namenodeBench,
  dfsBench,
  sortBench,
  checksumsBench,
  deletesBench,
  classifyBench,
  powerModelBench,
  cappingBench,
  launchBench,
  webhdfsBench,
];

function usage(): string {
  const lines = ["usage: run.js <name> [--flags] [--json]", "", "benchmarks:"];
  for (const b of BENCHES) {
    lines.push(`  ${b.name.padEnd(12)}${b.summary}`);
    lines.push(...describeFlags(b.flags).map((l) => `  ${l}`));
    lines.push(`    --json                          print the figures as JSON instead of tables`);
  }
  return lines.join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const bench = BENCHES.find((b) => b.name === name);
  if (!bench) {
    process.stderr.write(
      `${name === undefined ? "no benchmark named" : `unknown benchmark ${JSON.stringify(name)}`}\n\n${usage()}\n`,
    );
    return 2;
  }
  if (typeof globalThis.gc !== "function" && process.env["HARVEST_BENCH_NO_RESPAWN"] !== "1") {
    // Memory figures need full collections; re-run with the flag rather than report numbers full of garbage.
    const r = spawnSync(
      process.execPath,
      ["--expose-gc", ...missingClientNodeOptions(), ...process.execArgv, fileURLToPath(import.meta.url), ...argv],
      {
        stdio: "inherit",
        // The clients of the dfs bench run in this process: with the malloc setting and the Node options that
        // `harvest fs put|get` starts with.
        env: { ...withMallocTunables(), HARVEST_BENCH_NO_RESPAWN: "1" },
      },
    );
    return r.status ?? 1;
  }
  const json = rest.includes("--json");
  const flags = rest.filter((a) => a !== "--json");
  try {
    const report = await bench.run(flags, (line) => process.stderr.write(`[${bench.name}] ${line}\n`));
    process.stdout.write(
      json ? JSON.stringify({ bench: bench.name, ...report.result }, null, 2) + "\n" : report.lines.join("\n") + "\n",
    );
    return 0;
  } catch (err) {
    if (err instanceof BenchUsageError) {
      process.stderr.write(`${bench.name}: ${err.message}\n\n${usage()}\n`);
      return 2;
    }
    process.stderr.write(`${bench.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Everything a benchmark starts is stopped by then; should a handle linger anyway, do not hang the caller.
    setTimeout(() => process.exit(code), 5_000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${String(err)}\n`);
    process.exitCode = 1;
  },
);
