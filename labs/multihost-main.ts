#!/usr/bin/env node
/**
 * The multi-host scenario as a standalone program: `node dist/labs/multihost-main.js [--ha] [--dir D] [--cut-ms N]
 * [--keep] [--json]` (as root); `--ha` runs the HA scenario (multihost-ha.ts) instead. Builds a Harvest cluster across network namespaces, runs a job and a file copy, partitions a
 * server and heals it, prints every check and the rejoin times, and removes everything. Exits 0 only when every check
 * passed; 2 when this machine cannot run it (not root, no network namespaces).
 */
import { parseArgs } from "node:util";
import { errorMessage } from "../common/errors.js";
import { runMultihostScenario } from "./multihost.js";
import { runHaScenario } from "./multihost-ha.js";
import type { MultihostCluster } from "./multihost.js";
import { netnsAvailable } from "./netns-lab.js";

const USAGE = `usage: multihost-main [--ha [--etcd-election-ms N] [--session-ttl S]] [--dir D] [--cut-ms N] [--keep] [--json]
  --ha         the HA scenario instead (labs/multihost-ha.ts): two master hosts, an etcd member on each and on
               server-1; the active masters' host is cut off while a job runs and files are written, then healed
  --etcd-election-ms N   with --ha: the ensemble's raft election timeout, heartbeat a tenth (default 500)
  --session-ttl S        with --ha: the masters' coordination session, seconds (default 5, the daemons' default)
  --dir D      run directory (configs, logs, data; kept afterwards). Default: a new temporary directory
  --cut-ms N   keep server-3's link cut at least N ms (default 12000)
  --keep       after the scenario, leave the cluster running until Ctrl-C (prints how to reach it)
  --json       print the result as JSON at the end`;

async function main(): Promise<number> {
  let values: {
    dir?: string;
    "cut-ms"?: string;
    "etcd-election-ms"?: string;
    "session-ttl"?: string;
    keep?: boolean;
    json?: boolean;
    help?: boolean;
    ha?: boolean;
  };
  try {
    values = parseArgs({
      options: {
        dir: { type: "string" },
        "cut-ms": { type: "string" },
        "etcd-election-ms": { type: "string" },
        "session-ttl": { type: "string" },
        keep: { type: "boolean" },
        ha: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (err) {
    process.stderr.write(`multihost: ${errorMessage(err)}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE + "\n");
    return 0;
  }
  const cutMs = values["cut-ms"] !== undefined ? Number(values["cut-ms"]) : undefined;
  if (cutMs !== undefined && !(Number.isInteger(cutMs) && cutMs > 0)) {
    process.stderr.write(`multihost: --cut-ms must be a positive integer (got ${values["cut-ms"]})\n`);
    return 2;
  }
  const wholeOption = (name: "etcd-election-ms" | "session-ttl", min: number): number | undefined => {
    const raw = values[name];
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw new RangeError(`--${name} must be an integer of at least ${min} (got ${raw})`);
    return n;
  };
  let etcdElectionTimeoutMs: number | undefined;
  let sessionTtlS: number | undefined;
  try {
    etcdElectionTimeoutMs = wholeOption("etcd-election-ms", 100);
    sessionTtlS = wholeOption("session-ttl", 2);
  } catch (err) {
    process.stderr.write(`multihost: ${errorMessage(err)}\n`);
    return 2;
  }
  const avail = netnsAvailable();
  if (!avail.ok) {
    process.stderr.write(`multihost: cannot run here: ${avail.why}\n`);
    return 2;
  }
  // Ctrl-C stops the scenario (exit 130), or ends a --keep wait (exit 0 if every check passed); the lab removes its
  // namespaces and processes as this process exits.
  let interrupted = false;
  const onSignal = (sig: string): void => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\nmultihost: ${sig}: removing the lab\n`);
    process.exit(keptAfter === undefined ? 130 : keptAfter.passed ? 0 : 1);
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  if (values.ha) {
    const ha = await runHaScenario({
      ...(values.dir ? { dir: values.dir } : {}),
      ...(etcdElectionTimeoutMs !== undefined ? { etcdElectionTimeoutMs } : {}),
      ...(sessionTtlS !== undefined ? { sessionTtlS } : {}),
    });
    if (values.json) process.stdout.write(JSON.stringify(ha, null, 2) + "\n");
    return ha.ok ? 0 : 1;
  }
  const result = await runMultihostScenario({
    ...(values.dir ? { dir: values.dir } : {}),
    ...(cutMs !== undefined ? { cutMs } : {}),
    ...(values.keep ? { beforeDestroy: waitForCtrlC } : {}),
  });
  if (values.json) process.stdout.write(JSON.stringify(result, null, 2) + "\n");
  return result.ok ? 0 : 1;
}

/** The cluster `--keep` is holding, once the scenario is over. */
let keptAfter: MultihostCluster | undefined;

/** `--keep`: says how to reach the cluster, then waits for Ctrl-C (the signal handler then removes the lab). */
async function waitForCtrlC(c: MultihostCluster): Promise<void> {
  keptAfter = c;
  const cli = c.cliPrefix.join(" ");
  process.stdout.write(
    [
      "",
      `scenario ${c.passed ? "passed" : "FAILED"}; the cluster keeps running (namespaces ${c.prefix}*); resource manager ${c.rmAddress}, namenode ${c.nnAddress}`,
      `  ${cli} cluster status --config ${c.clientConfig}`,
      `  ${cli} fs ls /multihost --config ${c.clientConfig}`,
      `  daemon logs: ${c.runDir}/logs/`,
      "press Ctrl-C to stop it and remove the namespaces",
      "",
    ].join("\n"),
  );
  // Until the SIGINT handler ends the process (the timer keeps it alive).
  await new Promise<never>(() => setInterval(() => undefined, 60_000));
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`multihost: ${errorMessage(err)}\n`);
    process.exit(1);
  },
);
