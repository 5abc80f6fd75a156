/** Pieces every `harvest` subcommand uses: common options, output, error handling, flag parsing. */
import { Command } from "commander";
import { JobClient } from "../client/job-client.js";
import { DfsClient } from "../client/dfs-client.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import {
  clientSecurityOf,
  defaultClientConfigFile,
  findClientConfig,
  loadClientConfig,
} from "../client/client-config.js";
import type { ClientSecurity } from "../common/grpc.js";
import { nnAddressesOf, readCluster, resolveClusterDir, rmAddressesOf } from "../localcluster/cluster.js";
import type { ClusterDescriptor } from "../localcluster/cluster.js";
import { acceptsGlobal } from "./global-options.js";

/** Options every cluster-facing command takes. */
export interface GlobalOpts {
  dir?: string;
  config?: string;
  json?: boolean;
}

/**
 * Adds the options every cluster-facing command takes: --config (a client configuration file), --dir (a local
 * cluster's directory) and --json. `clientConfig: false` leaves --config to the command (`cluster up`).
 */
export function common(cmd: Command, { clientConfig = true }: { clientConfig?: boolean } = {}): Command {
  if (clientConfig)
    acceptsGlobal(cmd, "config").option(
      "--config <file>",
      "client configuration: RM and NN addresses (default: $HARVEST_CONF, then ~/.harvest/client.json)",
    );
  return acceptsGlobal(cmd, "dir")
    .option(
      "--dir <dir>",
      "a local cluster's directory (default: $HARVEST_CLUSTER_DIR, then ~/.harvest/cluster; for root /var/lib/harvest/cluster)",
    )
    .option("--json", "machine-readable output");
}

/** Where a command finds the cluster: the daemons' addresses, and the local cluster's descriptor when there is one. */
export interface ClusterTarget {
  rmAddress: string;
  nnAddress: string;
  /** Set when the cluster was found through a `cluster up` directory. */
  local?: ClusterDescriptor;
  /** Where the addresses came from (a file), for messages. */
  source: string;
  /** TLS trusting the cluster's CA with the user's certificate; undefined: plaintext (an insecure cluster). */
  security?: ClientSecurity;
}

/**
 * Finds the cluster a command talks to: --config, then --dir, then $HARVEST_CONF, then $HARVEST_CLUSTER_DIR, then
 * ~/.harvest/client.json, then ~/.harvest/cluster. Fails with CLUSTER_NOT_FOUND saying what to do.
 */
export function clusterTarget(opts: GlobalOpts): ClusterTarget {
  const fromConfig = (file: string): ClusterTarget => {
    const c = loadClientConfig(file);
    return withSecurity({ rmAddress: c.rmAddress, nnAddress: c.nnAddress, source: c.source }, clientSecurityOf(c));
  };
  const fromDir = (dir: string): ClusterTarget => {
    const d = readCluster(resolveClusterDir(dir));
    return withSecurity(
      { rmAddress: rmAddressesOf(d), nnAddress: nnAddressesOf(d), local: d, source: `${d.dir}/cluster.json` },
      d.security,
    );
  };
  if (opts.config) return fromConfig(opts.config);
  if (opts.dir) return fromDir(opts.dir);
  const env = process.env;
  if (env["HARVEST_CONF"]) return fromConfig(env["HARVEST_CONF"]);
  if (env["HARVEST_CLUSTER_DIR"]) return fromDir(env["HARVEST_CLUSTER_DIR"]);
  const home = findClientConfig(undefined, {});
  if (home)
    return withSecurity(
      { rmAddress: home.rmAddress, nnAddress: home.nnAddress, source: home.source },
      clientSecurityOf(home),
    );
  try {
    return fromDir(resolveClusterDir());
  } catch (err) {
    if (!(err instanceof HarvestError) || err.code !== "CLUSTER_NOT_FOUND") throw err;
    throw new HarvestError(
      "CLUSTER_NOT_FOUND",
      `no cluster configured: pass --config <client.json> (or set $HARVEST_CONF, or write ${defaultClientConfigFile()}) for a deployed cluster, or --dir for one started with 'harvest cluster up'`,
    );
  }
}

function withSecurity(t: ClusterTarget, security: ClientSecurity | undefined): ClusterTarget {
  return security ? { ...t, security } : t;
}

/** Prints `json` with --json, else the human text. */
export function print(opts: GlobalOpts, json: unknown, human: () => string): void {
  process.stdout.write((opts.json ? JSON.stringify(json, null, 2) : human()) + "\n");
}

/** The target, which must name a resource manager (CLUSTER_NOT_FOUND otherwise), with how to reach it. */
export function rmTarget(opts: GlobalOpts): ClusterTarget {
  const t = clusterTarget(opts);
  if (!t.rmAddress) throw new HarvestError("CLUSTER_NOT_FOUND", `${t.source} names no rmAddress`);
  return t;
}

/** Runs `fn` with a job client of the cluster the options name. */
export function withClient<T>(opts: GlobalOpts, fn: (c: JobClient) => Promise<T>): Promise<T> {
  const t = rmTarget(opts);
  const client = new JobClient(t.rmAddress, {
    ...(t.security ? { security: t.security } : {}),
    nnAddress: t.nnAddress,
  });
  return fn(client).finally(() => client.close());
}

/**
 * Runs an action, turning errors into a message, a hint and exit code 1. `clusterHint: false` leaves out the hint
 * that an UNAVAILABLE cluster may not be running (for commands that start a daemon, not reach one).
 */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<number | void>,
  { clusterHint = true }: { clusterHint?: boolean } = {},
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const opts = (args.find((a) => a instanceof Command) as Command | undefined)?.opts<GlobalOpts>() ?? {};
    try {
      const code = await fn(...args);
      process.exitCode = code ?? 0;
    } catch (err) {
      const code = err instanceof HarvestError ? err.code : "INTERNAL";
      let message = errorMessage(err);
      if (code === "UNAVAILABLE" && clusterHint)
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

/** INVALID_ARGUMENT naming `flag` (in its details too). */
export function badFlag(flag: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `${flag} ${why}`, { details: { flag } });
}

/**
 * Rethrows an experiment's rejection of one of its options as INVALID_ARGUMENT naming the flag that set it
 * (`flagOf`: option field -> flag); any other error as it is.
 */
export function rethrowAsFlagError(err: unknown, flagOf: Readonly<Record<string, string>>): never {
  const field = isHarvestError(err, "INVALID_ARGUMENT") ? err.details.field : undefined;
  const flag = field !== undefined ? flagOf[field] : undefined;
  if (flag === undefined) throw err;
  throw new HarvestError("INVALID_ARGUMENT", `${flag}: ${errorMessage(err)}`, { details: { flag }, cause: err });
}

/** One of `allowed`, or INVALID_ARGUMENT naming the flag. */
export function oneOf<T extends string>(v: string, allowed: readonly T[], flag: string): T {
  if (!(allowed as readonly string[]).includes(v))
    badFlag(flag, `must be one of ${allowed.join(", ")} (got ${JSON.stringify(v)})`);
  return v as T;
}

/** What a `sim` experiment prints: its title, summary, every run's table and the files it wrote. */
export function experimentText(
  title: string,
  o: { report: { summary: string; runsTable: string }; files: readonly string[] },
): string {
  return [
    title,
    "",
    o.report.summary,
    "",
    "Every run:",
    "",
    o.report.runsTable,
    ...(o.files.length > 0 ? ["", `wrote ${o.files.join(", ")}`] : []),
  ].join("\n");
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
  const target = clusterTarget(opts);
  if (!target.nnAddress) {
    throw new HarvestError(
      "CLUSTER_NOT_FOUND",
      `${target.source} names no namenode: add "nnAddress" to the client config, or restart a local cluster with 'harvest cluster up'`,
    );
  }
  const client = new DfsClient(target.nnAddress, target.security ? { security: target.security } : {});
  return fn(client).finally(() => client.close());
}

/** A duration flag's milliseconds: "90s", "2m", "1500ms", "1h"; a bare number is seconds. */
export function durationFlagMs(value: string, flag: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
  if (!m) return badFlag(flag, `must be a duration such as 120s, 2m or 500ms (got ${JSON.stringify(value)})`);
  const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? "s") as "ms" | "s" | "m" | "h"];
  return Number(m[1]) * unitMs;
}

/** The command line as a user would type it again (shown in reports). */
export function commandLine(): string {
  const quote = (a: string): string => (/^[\w./:,=@%+-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`);
  return ["harvest", ...process.argv.slice(2).map(quote)].join(" ");
}
