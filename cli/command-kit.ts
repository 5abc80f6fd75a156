/** Pieces every `harvest` subcommand uses: common options, output, error handling, flag parsing. */
import { Command } from "commander";
import { JobClient } from "../client/job-client.js";
import { DfsClient } from "../client/dfs-client.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { readCluster, resolveClusterDir } from "./cluster.js";

/** Options every cluster-facing command takes. */
export interface GlobalOpts {
  dir?: string;
  json?: boolean;
}

/** Adds the options every cluster-facing command takes: --dir and --json. */
export function common(cmd: Command): Command {
  return cmd
    .option("--dir <dir>", "cluster directory (default: $HARVEST_CLUSTER_DIR, then ~/.harvest/cluster)")
    .option("--json", "machine-readable output");
}

/** Prints `json` with --json, else the human text. */
export function print(opts: GlobalOpts, json: unknown, human: () => string): void {
  process.stdout.write((opts.json ? JSON.stringify(json, null, 2) : human()) + "\n");
}

/** Runs `fn` with a job client of the cluster in --dir. */
export function withClient<T>(opts: GlobalOpts, fn: (c: JobClient) => Promise<T>): Promise<T> {
  const cluster = readCluster(resolveClusterDir(opts.dir));
  const client = new JobClient(cluster.rm.address);
  return fn(client).finally(() => client.close());
}

/** Runs an action, turning errors into a message, a hint and exit code 1. */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<number | void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const opts = (args.find((a) => a instanceof Command) as Command | undefined)?.opts<GlobalOpts>() ?? {};
    try {
      const code = await fn(...args);
      process.exitCode = code ?? 0;
    } catch (err) {
      const code = err instanceof HarvestError ? err.code : "INTERNAL";
      let message = errorMessage(err);
      if (code === "UNAVAILABLE")
        message += "\n(is the cluster running? 'harvest cluster status' checks, 'harvest cluster up' starts one)";
      if (opts.json)
        process.stdout.write(
          JSON.stringify({ error: { code, message, details: err instanceof HarvestError ? err.details : {} } }) + "\n",
        );
      else process.stderr.write(`harvest: ${message} [${code}]\n`);
      process.exitCode = 1;
    }
  };
}

/** A positive integer flag value, or INVALID_ARGUMENT naming the flag. */
export function positiveInt(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new HarvestError("INVALID_ARGUMENT", `${flag} must be a positive integer (got ${JSON.stringify(v)})`);
  return n;
}

/** A positive number flag value, or INVALID_ARGUMENT naming the flag. */
export function positiveNumber(v: string, flag: string): number {
  const n = Number(v);
  if (!(n > 0) || !Number.isFinite(n))
    throw new HarvestError("INVALID_ARGUMENT", `${flag} must be a positive number (got ${JSON.stringify(v)})`);
  return n;
}

/** Runs `fn` with a file-system client of the cluster in --dir. */
export function withDfs<T>(opts: GlobalOpts, fn: (c: DfsClient) => Promise<T>): Promise<T> {
  const cluster = readCluster(resolveClusterDir(opts.dir));
  if (!cluster.nn) {
    throw new HarvestError(
      "CLUSTER_NOT_FOUND",
      `the cluster in ${cluster.dir} runs no namenode; restart it with 'harvest cluster up'`,
    );
  }
  const client = new DfsClient(cluster.nn.address);
  return fn(client).finally(() => client.close());
}
