/**
 * Which daemon a config file is for, told from its fields, so that `harvest daemon start nodemanager --config
 * namenode.json` fails at once with CONFIG_INVALID naming the file's kind, before a pid file or a log is written into
 * the other daemon's data directory.
 */
import { HarvestError } from "../common/errors.js";
import { DAEMON_KINDS, SHORT_NAMES, daemonKind } from "../localcluster/daemon-kinds.js";
import type { DaemonKind } from "../localcluster/daemon-kinds.js";
import { editDistance } from "./global-options.js";

/**
 * Option fields that only one kind of daemon has (its `XxxOptions`; test/unit/daemon-config-kind.test.ts checks them
 * against the four options files). A config naming one of them is that kind's.
 */
export const DISTINCTIVE_FIELDS: Readonly<Record<DaemonKind, readonly string[]>> = {
  resourcemanager: [
    "schedulerPolicy",
    "stagingDir",
    "nodeExpiryMs",
    "amResource",
    "maxAmAttempts",
    "classWeights",
    "tenants",
    "powerDomains",
    "localityPolicy",
    "admission",
    "drain",
    "haRmAddresses",
  ],
  namenode: [
    "placementPolicy",
    "blockTokens",
    "defaultReplication",
    "defaultBlockSizeBytes",
    "datanodeExpiryMs",
    "safeModeThreshold",
    "replicationIntervalMs",
    "leaseTimeoutMs",
    "permissions",
    "superuser",
    "userGroups",
  ],
  nodemanager: [
    "nodeId",
    "capacity",
    "victimOrder",
    "preemptionNotice",
    "killGraceMs",
    "cgroups",
    "containerRunAs",
    "powerMeter",
    "powerBudgetWatts",
    "capping",
    "throttle",
  ],
  datanode: [
    "datanodeId",
    "namenodeAddress",
    "transferPort",
    "capacityBytes",
    "busyThreshold",
    "secondaryCgroup",
    "blockReportIntervalMs",
    "pipelineVerify",
  ],
};

/** The field each kind requires that names the server (the others need only what every daemon has). */
const ID_FIELD: Partial<Record<DaemonKind, string>> = { nodemanager: "nodeId", datanode: "datanodeId" };

/** The kinds a config's fields point to, most fields first, with the fields that told. */
export function configKinds(config: Record<string, unknown>): { kind: DaemonKind; fields: string[] }[] {
  return DAEMON_KINDS.map((kind) => ({ kind, fields: DISTINCTIVE_FIELDS[kind].filter((f) => f in config) }))
    .filter((k) => k.fields.length > 0)
    .sort((a, b) => b.fields.length - a.fields.length);
}

/**
 * Checks that `config` (the parsed file `file`) is a `kind`'s: CONFIG_INVALID when its fields are another kind's and
 * none is this kind's, naming the kind it is for and the command that runs it; or when it lacks the field naming
 * the server that this kind requires.
 */
export function checkConfigKind(kind: DaemonKind, file: string, config: Record<string, unknown>): void {
  const kinds = configKinds(config);
  const other = kinds[0];
  if (other && !kinds.some((k) => k.kind === kind)) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `${file} is a ${other.kind}'s config (it sets ${other.fields.slice(0, 3).join(", ")}), not a ${kind}'s: ` +
        `run it with 'harvest daemon start ${other.kind} --config ${file}', or give the ${kind} its own config ` +
        `(examples in deploy/conf/)`,
      { details: { field: other.fields[0] ?? "", file, reason: `a ${other.kind}'s config` } },
    );
  }
  const id = ID_FIELD[kind];
  if (id && !(id in config))
    throw new HarvestError(
      "CONFIG_INVALID",
      `${file} names no ${id}: a ${kind}'s config needs "${id}", the server's name (examples in deploy/conf/server/)`,
      { details: { field: id, file } },
    );
}

/** A daemon kind from its name or short name, or INVALID_ARGUMENT listing the choices and the closest one. */
export function daemonKindOrSuggest(name: string): DaemonKind {
  try {
    return daemonKind(name);
  } catch (err) {
    const close = DAEMON_KINDS.filter((k) => editDistance(name, k) <= Math.max(1, Math.floor(name.length / 3)));
    if (close.length === 0 || !(err instanceof HarvestError)) throw err;
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${err.message} (did you mean ${close.map((k) => `${k} (${SHORT_NAMES[k]})`).join(" or ")}?)`,
      {
        cause: err,
      },
    );
  }
}
