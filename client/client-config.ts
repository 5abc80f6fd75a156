/**
 * The client configuration: how a user's tools find a cluster (the resource manager's and namenode's advertised
 * addresses) and, on a secure cluster, the CA and the user's certificate and key. A small JSON file:
 *
 *   { "rmAddress": "master.example:8030", "nnAddress": "master.example:8020",
 *     "ca": "ca.pem", "cert": "alice.pem", "key": "alice-key.pem" }
 *
 * With highly available masters, an address names every master: a comma-separated string
 * ("nn1.example:8020,nn2.example:8020") or a JSON array of host:port, which becomes that string; clients follow the
 * active one (common/failover.ts).
 *
 * Relative paths are relative to the file. It is found by an explicit path (`--config`), then `$HARVEST_CONF`, then
 * `~/.harvest/client.json`.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { errorMessage, HarvestError } from "../common/errors.js";
import type { ClientSecurity } from "../common/grpc.js";

/** Where a client finds a cluster. */
export interface ClientConfig {
  /** host:port of the resource manager (jobs, admin, power); with HA, every one's (comma-separated, or a JSON array). */
  rmAddress: string;
  /**
   * host:port of the namenode (the file system), with HA every one's (comma-separated, or a JSON array); empty when
   * the cluster has no storage layer. @default ""
   */
  nnAddress: string;
  /** PEM file of the cluster's CA (absolute once loaded). @default "" */
  ca: string;
  /** PEM file of the user's certificate. @default "" */
  cert: string;
  /** PEM file of the user's private key. @default "" */
  key: string;
  /** The file it was read from, or a description of where it came from. */
  source: string;
}

const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;

/** The default client configuration file, `~/.harvest/client.json`. */
export function defaultClientConfigFile(): string {
  return join(homedir(), ".harvest", "client.json");
}

/** Validates a client configuration object (from a file or built in code); paths resolve against `baseDir`. */
export function parseClientConfig(raw: unknown, source: string, baseDir = process.cwd()): ClientConfig {
  const bad = (field: string, why: string): never => {
    throw new HarvestError("CONFIG_INVALID", `client config ${source}: ${field} ${why}`, { details: { field } });
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    bad("(top level)", 'must be an object like { "rmAddress": "host:port", "nnAddress": "host:port" }');
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!["rmAddress", "nnAddress", "ca", "cert", "key"].includes(k)) bad(k, "is not a client option");
  const address = (field: string, required: boolean): string => {
    const raw = o[field] ?? "";
    const isList = Array.isArray(raw) && raw.every((a) => typeof a === "string");
    if (typeof raw !== "string" && !isList)
      return bad(field, 'must be host:port, "host:port,host:port" or an array of host:port');
    const list = isList ? (raw as string[]) : raw ? (raw as string).split(",").map((a) => a.trim()) : [];
    if (list.length === 0) return required ? bad(field, "is required (host:port)") : "";
    for (const v of list) {
      const port = Number(v.slice(v.lastIndexOf(":") + 1));
      if (!ADDRESS.test(v) || port < 1 || port > 65_535)
        bad(field, `must be host:port${list.length > 1 ? " for every master" : ""} (got ${JSON.stringify(v)})`);
    }
    if (new Set(list).size !== list.length) bad(field, "names a master twice");
    return list.join(",");
  };
  const file = (field: string): string => {
    const v = o[field] ?? "";
    if (typeof v !== "string") return bad(field, "must be a path");
    return v ? resolve(baseDir, v) : "";
  };
  const config: ClientConfig = {
    rmAddress: address("rmAddress", false),
    nnAddress: address("nnAddress", false),
    ca: file("ca"),
    cert: file("cert"),
    key: file("key"),
    source,
  };
  if (!config.rmAddress && !config.nnAddress) bad("rmAddress", "or nnAddress is required");
  if (Boolean(config.cert) !== Boolean(config.key)) bad(config.cert ? "key" : "cert", "must be given with the other");
  return config;
}

/** Reads a client configuration file, or fails with CONFIG_INVALID naming the file and the field. */
export function loadClientConfig(file: string): ClientConfig {
  const path = resolve(file);
  if (!existsSync(path)) throw new HarvestError("CONFIG_INVALID", `no such client config file: ${path}`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `client config ${path} is not valid JSON: ${errorMessage(err)}`);
  }
  return parseClientConfig(raw, path, dirname(path));
}

/**
 * The client configuration from `file`, else `$HARVEST_CONF`, else `~/.harvest/client.json`; undefined when none of
 * them names a file (an explicit path or `$HARVEST_CONF` that does not exist is an error).
 */
export function findClientConfig(file?: string, env: NodeJS.ProcessEnv = process.env): ClientConfig | undefined {
  if (file) return loadClientConfig(file);
  const fromEnv = env["HARVEST_CONF"];
  if (fromEnv) return loadClientConfig(fromEnv);
  const home = defaultClientConfigFile();
  return existsSync(home) ? loadClientConfig(home) : undefined;
}

/** The configuration given, or the one {@link findClientConfig} finds; CLUSTER_NOT_FOUND when there is none. */
export function clientConfigOf(config?: ClientConfig | string): ClientConfig {
  const c = typeof config === "object" ? config : findClientConfig(config);
  if (!c)
    throw new HarvestError(
      "CLUSTER_NOT_FOUND",
      `no client configuration: pass a file, set $HARVEST_CONF, or write ${defaultClientConfigFile()}`,
    );
  return c;
}

/** The resource manager's address from a client configuration (see {@link clientConfigOf}). */
export function rmAddressFromConfig(config?: ClientConfig | string): string {
  const c = clientConfigOf(config);
  if (!c.rmAddress) throw new HarvestError("CLUSTER_NOT_FOUND", `client config ${c.source} names no rmAddress`);
  return c.rmAddress;
}

/** The namenode's address from a client configuration (see {@link clientConfigOf}). */
export function nnAddressFromConfig(config?: ClientConfig | string): string {
  const c = clientConfigOf(config);
  if (!c.nnAddress) throw new HarvestError("CLUSTER_NOT_FOUND", `client config ${c.source} names no nnAddress`);
  return c.nnAddress;
}

/**
 * How a client reaches the cluster a configuration names: TLS trusting its `ca` and presenting `cert`/`key`;
 * undefined (plaintext) when it names no CA. See {@link clientConfigOf} for how the configuration is found.
 */
export function clientSecurityOf(config?: ClientConfig | string): ClientSecurity | undefined {
  const c = clientConfigOf(config);
  if (!c.ca) return undefined;
  return { ca: c.ca, ...(c.cert ? { cert: c.cert, key: c.key } : {}) };
}
