/** The daemons `harvest daemon` runs, by name and short name. */
import { HarvestError } from "../common/errors.js";

/** The daemons one host can run. */
export const DAEMON_KINDS = ["resourcemanager", "namenode", "nodemanager", "datanode"] as const;
/** One of {@link DAEMON_KINDS}. */
export type DaemonKind = (typeof DAEMON_KINDS)[number];

/** Short names: rm, nn, nm, dn. */
export const SHORT_NAMES: Record<DaemonKind, string> = {
  resourcemanager: "rm",
  namenode: "nn",
  nodemanager: "nm",
  datanode: "dn",
};

/** A daemon kind from its name or short name (rm, nn, nm, dn), or INVALID_ARGUMENT listing the choices. */
export function daemonKind(name: string): DaemonKind {
  const kind = DAEMON_KINDS.find((k) => k === name || SHORT_NAMES[k] === name);
  if (!kind)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `unknown daemon ${JSON.stringify(name)}: one of ${DAEMON_KINDS.map((k) => `${k} (${SHORT_NAMES[k]})`).join(", ")}`,
    );
  return kind;
}
