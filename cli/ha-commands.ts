/**
 * `harvest admin ha status` and `harvest admin ha failover`: the highly available masters of each service (resource
 * managers "rm", namenodes "nn"), as each master answers HaAdmin (proto/ha_admin.proto), and a graceful hand-over
 * for maintenance: the active gives its term up (the election's resign) and a standby takes over. A service's address
 * in the client configuration lists its masters, comma-separated.
 */
import type { Command } from "commander";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { loadHaAdminProto } from "../common/ha-admin.js";
import { call, makeClient } from "../common/grpc.js";
import type { HaStatusOutput } from "../proto/generated/harvest/v1/HaStatus.js";
import { action, clusterTarget, common, print } from "./command-kit.js";
import type { ClusterTarget, GlobalOpts } from "./command-kit.js";
import { table } from "./format.js";
import { readFileSync } from "node:fs";
import type { NameNodeOptions } from "../namenode/index.js";

/** The services with highly available masters, by the name `--service` takes. */
const SERVICES = { rm: "resource manager", nn: "namenode" } as const;
type Service = keyof typeof SERVICES;

/** One master as `ha status` shows it: what it answered, or why it did not. */
export interface MasterRow {
  service: Service;
  address: string;
  role: string;
  epoch: number;
  active: string;
  error?: string;
}

function addressesOf(t: ClusterTarget, service: Service): string[] {
  const spec = service === "rm" ? t.rmAddress : t.nnAddress;
  return (spec ?? "")
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
}

async function haCall(
  t: ClusterTarget,
  address: string,
  method: "getHaStatus" | "failover",
  timeoutMs = 5_000,
): Promise<HaStatusOutput> {
  const client = makeClient(loadHaAdminProto().HaAdmin, address, t.security);
  try {
    return await call(client, client[method], {}, timeoutMs);
  } finally {
    client.close();
  }
}

/** Every master of `service` as it answers now (an unreachable one with its error). */
export async function masterRows(t: ClusterTarget, service: Service): Promise<MasterRow[]> {
  return Promise.all(
    addressesOf(t, service).map(async (address): Promise<MasterRow> => {
      try {
        const s = await haCall(t, address, "getHaStatus", 3_000);
        return { service, address, role: s.role, epoch: Number(s.epoch), active: s.activeAddress };
      } catch (err) {
        const code = isHarvestError(err) ? err.code : "INTERNAL";
        return { service, address, role: "unreachable", epoch: 0, active: "", error: `${code}: ${errorMessage(err)}` };
      }
    }),
  );
}

/** The active master of the rows (undefined when none says so). */
function activeOf(rows: readonly MasterRow[]): MasterRow | undefined {
  return rows.find((r) => r.role === "active");
}

/**
 * Hands the active term of `service` over: asks the active to resign, then waits (up to `timeoutMs`) until another
 * master reports itself active under a higher term. Resolves to the old and new active rows.
 */
export async function failover(
  t: ClusterTarget,
  service: Service,
  timeoutMs = 30_000,
): Promise<{ from: MasterRow; to: MasterRow }> {
  const rows = await masterRows(t, service);
  if (rows.length < 2)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `the ${SERVICES[service]} is not highly available here: the configuration lists ${rows.length} address(es); list every master, comma-separated`,
    );
  const from = activeOf(rows);
  if (!from)
    throw new HarvestError("NOT_ACTIVE", `no ${SERVICES[service]} is active now; 'harvest admin ha status' shows each`);
  await haCall(t, from.address, "failover");
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const to = activeOf(await masterRows(t, service));
    if (to && to.address !== from.address && to.epoch > from.epoch) return { from, to };
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new HarvestError(
    "DEADLINE_EXCEEDED",
    `${from.address} gave its term up, but no other ${SERVICES[service]} became active within ${timeoutMs} ms`,
  );
}

/**
 * `harvest admin ha bootstrap-standby`: on a new (or too far behind) namenode host, before its namenode starts, copies
 * the active's checkpoint into the data directory its config names (namenode/bootstrap-standby.ts).
 */
async function bootstrapCommand(
  o: GlobalOpts & { nnConfig: string; from?: string; force?: boolean; replaces?: string },
): Promise<{ dataDir: string; haId: string; from: string; txid: number; keys: number }> {
  let config: Partial<NameNodeOptions> & { dataDir: string };
  try {
    config = JSON.parse(readFileSync(o.nnConfig, "utf8")) as typeof config;
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot read the namenode config ${o.nnConfig}: ${errorMessage(err)}`, {
      details: { file: o.nnConfig },
    });
  }
  // The namenode's code (LevelDB, etcd) loads only here: every `harvest` command loads this file.
  const { bootstrapStandby, resolveNameNodeOptions } = await import("../namenode/index.js");
  const nn = resolveNameNodeOptions(config);
  if (!nn.haCoordination)
    throw new HarvestError("CONFIG_INVALID", `${o.nnConfig} sets no haCoordination: its namenode is not an HA one`, {
      details: { file: o.nnConfig },
    });
  const haId = nn.haId || (nn.port ? `${nn.advertiseHost}:${nn.port}` : "");
  if (!haId)
    throw new HarvestError("CONFIG_INVALID", `${o.nnConfig} needs haId (or a fixed port): the active records it`, {
      details: { file: o.nnConfig },
    });
  const t = clusterTarget(o);
  const from = o.from ?? activeOf(await masterRows(t, "nn"))?.address;
  if (!from)
    throw new HarvestError("NOT_ACTIVE", "no namenode is active now; name the one to copy with --from host:port");
  const done = await bootstrapStandby({
    dataDir: nn.dataDir,
    haId,
    from,
    force: o.force === true,
    ...(t.security ? { security: t.security } : {}),
    ...(o.replaces ? { replaces: { haId: o.replaces, coordination: nn.haCoordination } } : {}),
  });
  return { dataDir: nn.dataDir, haId, from, ...done };
}

/** Adds `harvest admin ha status|failover|bootstrap-standby` under `admin`. */
export function registerHaCommands(admin: Command): void {
  const ha = admin.command("ha").description("highly available masters: roles and terms, graceful hand-over");
  common(ha.command("status"))
    .description("each master of each service: its role, term (epoch) and the active it knows of")
    .action(
      action(async (o: GlobalOpts) => {
        const t = clusterTarget(o);
        const rows = [...(await masterRows(t, "rm")), ...(await masterRows(t, "nn"))];
        print(o, { masters: rows }, () =>
          table(
            ["SERVICE", "ADDRESS", "ROLE", "EPOCH", "ACTIVE"],
            rows.map((r) => [r.service, r.address, r.error ? `${r.role} (${r.error})` : r.role, r.epoch, r.active]),
          ),
        );
        // Exit 1 when a service that has masters here has no active one.
        const headless = (["rm", "nn"] as const).filter((s) => {
          const mine = rows.filter((r) => r.service === s);
          return mine.length > 0 && !activeOf(mine);
        });
        return headless.length === 0 ? 0 : 1;
      }),
    );
  common(ha.command("failover"))
    .description("hand the active term over to a standby (for maintenance of the active's host)")
    .requiredOption("--service <service>", "rm or nn")
    .option("--timeout <ms>", "how long to wait for the new active", "30000")
    .action(
      action(async (o: GlobalOpts & { service: string; timeout: string }) => {
        if (o.service !== "rm" && o.service !== "nn")
          throw new HarvestError("INVALID_ARGUMENT", `--service must be rm or nn (got ${JSON.stringify(o.service)})`, {
            details: { flag: "--service" },
          });
        const timeoutMs = Number(o.timeout);
        if (!(Number.isInteger(timeoutMs) && timeoutMs > 0))
          throw new HarvestError("INVALID_ARGUMENT", "--timeout must be a positive number of milliseconds", {
            details: { flag: "--timeout" },
          });
        const { from, to } = await failover(clusterTarget(o), o.service, timeoutMs);
        print(
          o,
          { service: o.service, from, to },
          () =>
            `${o.service}: the active moved from ${from.address} (epoch ${from.epoch}) to ${to.address} (epoch ${to.epoch})`,
        );
      }),
    );
  common(ha.command("bootstrap-standby"))
    .description("make a new standby namenode's store from the active's checkpoint (run before it first starts)")
    .requiredOption("--nn-config <file>", "the new namenode's config (its dataDir, haId and haCoordination)")
    .option("--from <address>", "the namenode to copy (default: the active one)")
    .option("--force", "replace a store already there (a standby too far behind the shared log)")
    .option(
      "--replaces <haId>",
      "the lost namenode's haId, when the new one has another: its mark on the shared log is forgotten",
    )
    .action(
      action(async (o: GlobalOpts & { nnConfig: string; from?: string; force?: boolean; replaces?: string }) => {
        const r = await bootstrapCommand(o);
        print(
          o,
          r,
          () =>
            `${r.dataDir}: checkpoint of ${r.from} copied (${r.keys} keys, shared log entry ${r.txid}); start the namenode: it follows the log from there`,
        );
      }),
    );
}
