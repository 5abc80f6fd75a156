/**
 * The Node options a daemon's process starts with, as Hadoop's `HDFS_DATANODE_OPTS` and `YARN_NODEMANAGER_OPTS` give a
 * daemon's JVM its flags. `HARVEST_<KIND>_OPTS` (`HARVEST_DATANODE_OPTS`, ...) replaces a kind's defaults; set it empty
 * for none. Every launcher passes them: `harvest cluster up`, `harvest daemon start`, the multi-host lab and the
 * systemd unit of deploy/systemd. A daemon run in the foreground some other way says which it lacks.
 *
 * The datanode's default, `--initial-old-space-size=128`: every 64 KiB a socket delivers is a new buffer outside V8's
 * heap, and V8 counts such buffers not yet collected against the old generation's room. With the 38 MB limit V8 gives
 * a small daemon heap, a datanode moving 200 MB/s started a full mark about every 100 ms (112 full collections in a
 * 512 MiB replication-3 put here; none with the option), about a third of its CPU. The buffers still go at the next
 * young collection, so the heap grows only by what survives: over six 1 GiB replication-3 puts and gets the largest
 * datanode peaked at 150 MiB resident, against 144 MiB without the option. On TLS connections the difference was
 * within the noise: decryption, not the collector, leads a TLS datanode's profile.
 *
 * A client that reads or writes file data makes the same buffers, and the same option helps it: `harvest fs put`,
 * `get` and `cat`, and the dfs bench, start again with it (`DATA_CLIENT_NODE_OPTIONS`). Without it the bench's client
 * ran 40-60 full collections in about half of its 1 GiB gets (0.4-1.7 s of user CPU per get, varying with when the
 * collections fell); with it, none after the first get, and 0.3-0.75 s (issue 17's note).
 */
import { HarvestError } from "../common/errors.js";
import type { DaemonKind } from "./daemon-kinds.js";

/** V8's old generation sized for the buffers a process moving file data makes (see above). */
const BUFFER_HEAP_OPTION = "--initial-old-space-size=128";

/** Each kind's Node options when its `HARVEST_<KIND>_OPTS` is not set. */
export const DEFAULT_NODE_OPTIONS: Readonly<Record<DaemonKind, readonly string[]>> = {
  resourcemanager: [],
  namenode: [],
  nodemanager: [],
  datanode: [BUFFER_HEAP_OPTION],
};

/** The Node options of a process that moves file data as a client (`harvest fs put`, `get`, `cat`; the dfs bench). */
export const DATA_CLIENT_NODE_OPTIONS: readonly string[] = [BUFFER_HEAP_OPTION];

/**
 * The data client's options this process lacks: those whose name is neither among the options it started with nor in
 * NODE_OPTIONS (an operator's `--initial-old-space-size=64` there is kept).
 */
export function missingClientNodeOptions(
  execArgv: readonly string[] = process.execArgv,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  const given = [...execArgv, ...(env["NODE_OPTIONS"] ?? "").split(/\s+/)].map((w) => w.split("=")[0]);
  return DATA_CLIENT_NODE_OPTIONS.filter((o) => !given.includes(o.split("=")[0]));
}

/** The variable that replaces `kind`'s defaults: HARVEST_DATANODE_OPTS, ... */
export function nodeOptionsVariable(kind: DaemonKind): string {
  return `HARVEST_${kind.toUpperCase()}_OPTS`;
}

/**
 * A Node or V8 option: `--name` or `--name=value`. Nothing Node would read as a script or an argument, and no character a
 * shell would act on (the systemd unit hands the variable to `sh` unquoted, to be split into words).
 */
const OPTION = /^--[a-z0-9][a-z0-9_-]*(=[a-z0-9_.,:/+-]+)?$/i;

/**
 * The Node options `kind` starts with: its `HARVEST_<KIND>_OPTS` split at white space when set, else its defaults.
 * CONFIG_INVALID names a word that is not an option (a script path, a stray argument).
 */
export function daemonNodeOptions(kind: DaemonKind, env: NodeJS.ProcessEnv = process.env): string[] {
  const variable = nodeOptionsVariable(kind);
  const raw = env[variable];
  if (raw === undefined) return [...DEFAULT_NODE_OPTIONS[kind]];
  const options = raw.split(/\s+/).filter((w) => w !== "");
  const bad = options.find((w) => !OPTION.test(w));
  if (bad !== undefined)
    throw new HarvestError(
      "CONFIG_INVALID",
      `${variable}: ${JSON.stringify(bad)} is not a Node option (--name or --name=value, separated by spaces)`,
      { details: { field: variable } },
    );
  return options;
}

/** The options `kind` should run with that this process did not start with (empty: none missing). */
export function missingNodeOptions(
  kind: DaemonKind,
  execArgv: readonly string[] = process.execArgv,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  return daemonNodeOptions(kind, env).filter((o) => !execArgv.includes(o));
}
