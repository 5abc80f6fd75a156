/**
 * `harvest admin drain` and `harvest admin undrain`: take servers out of service before a planned reimage or
 * maintenance, as YARN's graceful decommission and HDFS's decommissioning do together. The resource manager stops
 * placing containers on them and preempts, longest predicted first, what would outlast the deadline; the namenode
 * copies their blocks elsewhere. `--status` shows both sides.
 */
import type { Command } from "commander";
import { NamenodeAdminClient } from "../client/namenode-admin-client.js";
import type { DatanodeAdminStatus } from "../client/namenode-admin-client.js";
import { HarvestError, isHarvestError } from "../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { NodeAdminClient } from "../proto/generated/harvest/v1/NodeAdmin.js";
import type { NodeDrainOutput as NodeDrain } from "../proto/generated/harvest/v1/NodeDrain.js";
import { action, clusterTarget, common, print, rmTarget } from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";
import { table } from "./format.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A deadline flag: an ISO 8601 time ("2026-11-24T18:00:00Z") or a duration from now ("30m", "90s", "1h30m", "2d").
 * Returns Unix ms.
 */
export function parseDeadline(v: string, nowMs: number): number {
  const s = v.trim();
  if (/^(\d+(\.\d+)?(ms|s|m|h|d))+$/.test(s)) {
    let ms = 0;
    for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
    if (ms > 0) return Math.round(nowMs + ms);
  }
  const at = /^\d{4}-\d{2}-\d{2}/.test(s) ? Date.parse(s) : Number.NaN;
  if (Number.isFinite(at) && at > 0) return at;
  throw new HarvestError(
    "INVALID_ARGUMENT",
    `--deadline must be an ISO 8601 time (2026-11-24T18:00:00Z) or a duration such as 30m, 90s or 1h30m (got ${JSON.stringify(v)})`,
  );
}

function iso(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

/** Runs `fn` with a NodeAdmin client of the cluster's resource manager. */
async function withNodeAdmin<T>(o: GlobalOpts, fn: (c: NodeAdminClient) => Promise<T>): Promise<T> {
  const t = rmTarget(o);
  const client = makeClient(loadHarvestProto().NodeAdmin, t.rmAddress, t.security);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/**
 * Runs `fn` for the servers that run a datanode, with a namenode admin client; undefined when the cluster has no
 * namenode. Servers without a datanode are left out (a compute-only server has no blocks to copy).
 */
async function withDatanodes<T>(
  o: GlobalOpts,
  servers: readonly string[],
  fn: (c: NamenodeAdminClient, datanodes: string[]) => Promise<T>,
): Promise<T | undefined> {
  const t = clusterTarget(o);
  if (!t.nnAddress) return undefined;
  const client = new NamenodeAdminClient(t.nnAddress, t.security);
  try {
    const known = new Set((await client.status()).map((d) => d.datanodeId));
    const datanodes = servers.length ? servers.filter((s) => known.has(s)) : [...known];
    return await fn(client, datanodes);
  } catch (err) {
    if (isHarvestError(err) && err.code === "UNAVAILABLE") return undefined;
    throw err;
  } finally {
    client.close();
  }
}

function blocksTable(datanodes: readonly DatanodeAdminStatus[], nowMs: number): string {
  const rows = datanodes
    .filter((d) => d.state !== "NORMAL")
    .map((d) => [
      d.datanodeId,
      d.state,
      d.liveness,
      d.blocks,
      d.blocksNeedingCopies,
      d.deadlineMs > 0 ? `${iso(d.deadlineMs)}${d.deadlinePassed || d.deadlineMs <= nowMs ? " (passed)" : ""}` : "none",
      d.message,
    ]);
  if (rows.length === 0) return "no datanode is decommissioning";
  return table(["DATANODE", "STATE", "LIVENESS", "BLOCKS", "NEED COPIES", "DEADLINE", "NOTE"], rows);
}

function drainTable(drains: readonly NodeDrain[], nowMs: number): string {
  if (drains.length === 0) return "no server is draining";
  const rows = drains.map((d) => [
    d.nodeId,
    d.registered ? d.state : `${d.state} (not registered)`,
    d.deadlineMs > 0
      ? `${iso(d.deadlineMs)}${d.deadlineMs <= nowMs && d.state === "DRAINING" ? " (passed)" : ""}`
      : "none",
    d.containersLeft,
    d.predictedToFinish,
    d.finishedOnTheirOwn,
    d.preempted,
    d.killedAtDeadline,
    iso(d.finishedMs),
  ]);
  return table(
    ["SERVER", "STATE", "DEADLINE", "LEFT", "WILL FINISH", "FINISHED", "PREEMPTED", "KILLED AT DEADLINE", "DRAINED AT"],
    rows,
  );
}

/** Adds `harvest admin drain` and `harvest admin undrain` to `admin`. */
export function registerDrainCommands(admin: Command): void {
  common(admin.command("drain [servers...]"))
    .description(
      "drain servers before a reimage or maintenance: no new containers; what would outlast --deadline is preempted (re-run elsewhere, longest predicted first)",
    )
    .option("--deadline <time>", "ISO 8601 time or a duration from now (30m, 2h); without it nothing is preempted")
    .option("--status", "show the drains in progress and finished")
    .action(
      action(async (servers: string[], o: GlobalOpts & { deadline?: string; status?: boolean }) => {
        const now = Date.now();
        if (o.status || servers.length === 0) {
          if (servers.length === 0 && !o.status)
            throw new HarvestError("INVALID_ARGUMENT", "name the servers to drain, or use --status");
          const r = await withNodeAdmin(o, (c) => call(c, c.getDrainStatus, {}));
          const drains = servers.length ? r.drains.filter((d) => servers.includes(d.nodeId)) : r.drains;
          const datanodes = (await withDatanodes(o, servers, (c, ids) => c.status(ids))) ?? [];
          print(o, { drains, datanodes }, () =>
            ["containers:", drainTable(drains, now), "blocks:", blocksTable(datanodes, now)].join("\n"),
          );
          return;
        }
        const deadlineMs = o.deadline !== undefined ? parseDeadline(o.deadline, now) : 0;
        const r = await withNodeAdmin(o, (c) => call(c, c.drain, { nodeIds: servers, deadlineMs }));
        // The datanodes of the same servers copy their blocks elsewhere (HDFS decommissioning).
        const datanodes =
          (await withDatanodes(o, servers, async (c, ids) =>
            ids.length ? c.decommission(ids, { deadlineMs }) : [],
          )) ?? [];
        print(o, { drains: r.drains, datanodes }, () =>
          [
            `draining ${servers.join(", ")}${deadlineMs ? ` until ${iso(deadlineMs)}` : " (no deadline: no container will be preempted)"}`,
            "containers:",
            drainTable(r.drains, now),
            "blocks:",
            blocksTable(datanodes, now),
            "'harvest admin drain --status' shows progress; 'harvest admin undrain' returns a server to service",
          ].join("\n"),
        );
      }),
    );

  common(admin.command("undrain <servers...>"))
    .description("return drained (or draining) servers to service")
    .action(
      action(async (servers: string[], o: GlobalOpts) => {
        const r = await withNodeAdmin(o, (c) => call(c, c.undrain, { nodeIds: servers }));
        const datanodes =
          (await withDatanodes(o, servers, async (c, ids) => (ids.length ? c.recommission(ids) : []))) ?? [];
        print(o, { drains: r.drains, datanodes }, () => `back in service: ${servers.join(", ")}`);
      }),
    );
}
