/**
 * A person's client bundle, as `harvest security issue --role user|admin` writes it: one directory holding the CA's
 * certificate, the person's certificate and key (0600), and a client configuration (`client.json`) naming the
 * cluster's addresses and those files by relative path. Handed over and copied to `~/.harvest/` (or named by
 * `$HARVEST_CONF` or `--config`), it is all `harvest` needs. The addresses come from flags, or from a cluster this CA
 * serves that the issuing operator's own `harvest` finds (a `cluster up` directory, a client configuration).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { writeFileAtomic } from "../common/atomic-file.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { parseClientConfig } from "../client/client-config.js";
import { clusterTarget } from "./command-kit.js";
import type { ClusterTarget } from "./command-kit.js";

/** The cluster a bundle names. */
export interface BundleCluster {
  rmAddress: string;
  nnAddress: string;
  /** Where the addresses came from, for the message. */
  source: string;
}

/** What the operator said about the cluster: addresses, or a cluster (a `cluster up` directory or client.json). */
export interface BundleClusterFlags {
  rmAddress?: string;
  nnAddress?: string;
  cluster?: string;
}

/** The file names a bundle holds. */
export interface ClientBundle {
  dir: string;
  ca: string;
  cert: string;
  key: string;
  /** The client configuration, or undefined when no cluster was known to name in it. */
  config?: string;
  cluster?: BundleCluster;
}

/** Whether the cluster `t` trusts the CA whose certificate is `caCert` (the same PEM). */
function trustsCa(t: ClusterTarget, caCert: string): boolean {
  if (!t.security?.ca) return false;
  try {
    return readFileSync(t.security.ca, "utf8").trim() === readFileSync(caCert, "utf8").trim();
  } catch {
    return false;
  }
}

/** The cluster `--cluster` names: a `cluster up` directory, a directory holding a client.json, or a client.json. */
function targetOf(spec: string): ClusterTarget {
  if (existsSync(join(spec, "cluster.json"))) return clusterTarget({ dir: spec });
  return clusterTarget({ config: existsSync(join(spec, "client.json")) ? join(spec, "client.json") : spec });
}

/**
 * The cluster a person's bundle names: `--rm-address`/`--nn-address` as given; else `--cluster` (which must trust
 * this CA); else the first of these that trusts it: the local cluster whose `security/` directory the CA is in, and
 * the cluster this operator's `harvest` finds by itself. Undefined when there is none.
 */
export function bundleCluster(flags: BundleClusterFlags, caDir: string, caCert: string): BundleCluster | undefined {
  if (flags.rmAddress || flags.nnAddress) {
    const checked = parseClientConfig(
      { rmAddress: flags.rmAddress ?? "", nnAddress: flags.nnAddress ?? "" },
      "--rm-address/--nn-address",
    );
    return { rmAddress: checked.rmAddress, nnAddress: checked.nnAddress, source: checked.source };
  }
  if (flags.cluster) {
    const t = targetOf(flags.cluster);
    if (!trustsCa(t, caCert))
      throw new HarvestError(
        "CONFIG_INVALID",
        `--cluster ${flags.cluster} does not trust the CA in ${caDir}: a certificate from it would be refused there`,
        { details: { field: "cluster" } },
      );
    return { rmAddress: t.rmAddress, nnAddress: t.nnAddress, source: t.source };
  }
  const candidates: (() => ClusterTarget)[] = [() => clusterTarget({})];
  const parent = dirname(resolve(caDir));
  if (existsSync(join(parent, "cluster.json"))) candidates.unshift(() => clusterTarget({ dir: parent }));
  for (const candidate of candidates) {
    let t: ClusterTarget;
    try {
      t = candidate();
    } catch {
      continue; // no cluster there, or one this operator cannot read: the flags remain
    }
    if (trustsCa(t, caCert)) return { rmAddress: t.rmAddress, nnAddress: t.nnAddress, source: t.source };
  }
  return undefined;
}

/**
 * Completes a bundle around an issued certificate and key in `dir`: a copy of the CA's certificate and, when the
 * cluster is known, `client.json` naming the three files by relative path (so the directory can move).
 */
export function writeClientBundle(
  dir: string,
  issued: { cert: string; key: string },
  caCert: string,
  cluster: BundleCluster | undefined,
): ClientBundle {
  const ca = join(dir, "ca.pem");
  try {
    if (resolve(caCert) !== ca) writeFileAtomic(ca, readFileSync(caCert, "utf8"), 0o644);
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot copy the CA certificate into ${dir}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  const bundle: ClientBundle = { dir, ca, ...issued };
  if (!cluster) return bundle;
  const config = join(dir, "client.json");
  const relative = (file: string): string => (dirname(file) === dir ? file.slice(dir.length + 1) : file);
  const body = {
    ...(cluster.rmAddress ? { rmAddress: cluster.rmAddress } : {}),
    ...(cluster.nnAddress ? { nnAddress: cluster.nnAddress } : {}),
    ca: relative(ca),
    cert: relative(issued.cert),
    key: relative(issued.key),
  };
  writeFileAtomic(config, JSON.stringify(body, null, 2) + "\n", 0o644);
  return { ...bundle, config, cluster };
}

/** What the operator reads after issuing a person's bundle: what was written and how its holder uses it. */
export function bundleText(name: string, b: ClientBundle): string[] {
  if (!b.config || !b.cluster)
    return [
      `no client configuration written: no cluster that trusts this CA was found; pass --rm-address and --nn-address`,
      `  (or --cluster <dir or client.json>) to write ${join(b.dir, "client.json")} as well`,
    ];
  const at = [
    b.cluster.rmAddress ? `resource manager ${b.cluster.rmAddress}` : "",
    b.cluster.nnAddress ? `namenode ${b.cluster.nnAddress}` : "",
  ].filter(Boolean);
  return [
    `  client config ${b.config} (${at.join(", ")}; from ${b.cluster.source})`,
    `hand ${name} the directory ${b.dir} over a private channel (it holds the key); ${name} then either`,
    `  copies it to ~/.harvest, where harvest finds it by itself: mkdir -p -m 700 ~/.harvest && cp -p ${b.dir}/* ~/.harvest/`,
    `  or keeps it anywhere and sets HARVEST_CONF=<there>/client.json (or passes --config <there>/client.json)`,
    `and runs 'harvest fs ls' and 'harvest job submit <dag.json>'; an admin first makes ${name}'s home: harvest admin user add ${name}`,
  ];
}
