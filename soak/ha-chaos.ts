/**
 * The soak's highly available part (`--ha`, soak.ts): which master of a pair is active, asked with HaAdmin
 * GetHaStatus as `harvest admin ha status` asks; how long a service goes without an active after its active is
 * killed; which etcd member may be killed (never a second one while one is down); and the report's lines for it.
 */
import { loadHaAdminProto } from "../common/ha-admin.js";
import type { HaAdminProto } from "../common/ha-admin.js";
import { call, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { readCluster } from "../localcluster/cluster.js";
import type { ClusterDescriptor } from "../localcluster/cluster.js";
import { isMemberRunning, readEnsemble } from "../localcluster/etcd-ensemble.js";
import type { EtcdMemberRecord } from "../localcluster/etcd-ensemble.js";
import type { HaStatusOutput } from "../proto/generated/harvest/v1/HaStatus.js";

/** The services whose masters are pairs. */
export type HaService = "rm" | "nn";

/** What an HA soak adds to its report. */
export interface SoakHaReport {
  /** Kills of an etcd member (at most one down at a time). */
  etcdKills: number;
  /** Kills of an active master after which another master became active under a higher term. */
  failovers: Record<HaService, number>;
  /** For each such kill, ms from the kill to a master answering "active" with a higher epoch than before. */
  newActiveMs: Record<HaService, number[]>;
}

/** An HA report with nothing counted yet. */
export function emptyHaReport(): SoakHaReport {
  return { etcdKills: 0, failovers: { rm: 0, nn: 0 }, newActiveMs: { rm: [], nn: [] } };
}

/** One master of a pair: its name in the cluster ("rm", "rm2", "nn", "nn2"), process and address. */
export interface Master {
  name: string;
  pid: number;
  address: string;
}

/** The two masters of `service` (or one, on a cluster without --ha). */
export function mastersOf(c: ClusterDescriptor, service: HaService): Master[] {
  const pair = service === "rm" ? [c.rm, c.rm2] : [c.nn, c.nn2];
  const names = service === "rm" ? ["rm", "rm2"] : ["nn", "nn2"];
  return pair.flatMap((d, i) => (d ? [{ name: names[i]!, pid: d.pid, address: d.address }] : []));
}

/** HaAdmin clients of a pair's masters, kept open while a failover is timed (a fresh TLS handshake per poll is slow). */
class HaAdminClients {
  private readonly clients: InstanceType<HaAdminProto["HaAdmin"]>[];

  constructor(addresses: string[], security: ClientSecurity | undefined) {
    this.clients = addresses.map((a) => makeClient(loadHaAdminProto().HaAdmin, a, security));
  }

  /** Each master's status, or undefined for one that did not answer within `timeoutMs`. */
  statuses(timeoutMs: number): Promise<(HaStatusOutput | undefined)[]> {
    return Promise.all(this.clients.map((c) => call(c, c.getHaStatus, {}, timeoutMs).catch(() => undefined)));
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}

/** The active master of `service` and its epoch, as the masters answer now (undefined: none says it is active). */
export async function activeMaster(
  dir: string,
  service: HaService,
): Promise<{ master: Master; epoch: number } | undefined> {
  const c = readCluster(dir);
  const masters = mastersOf(c, service);
  const clients = new HaAdminClients(
    masters.map((m) => m.address),
    c.security,
  );
  try {
    const statuses = await clients.statuses(3_000);
    const i = statuses.findIndex((s) => s?.role === "active");
    return i < 0 ? undefined : { master: masters[i]!, epoch: Number(statuses[i]!.epoch) };
  } finally {
    clients.close();
  }
}

/**
 * Polls both masters of `service` every 100 ms from `killedAtMs` until one answers "active" with an epoch above
 * `epochBefore`; resolves to the ms since the kill, or undefined after `timeoutMs`.
 */
export async function timeToNewActive(
  dir: string,
  service: HaService,
  epochBefore: number,
  killedAtMs: number,
  timeoutMs: number,
): Promise<number | undefined> {
  const c = readCluster(dir);
  const clients = new HaAdminClients(
    mastersOf(c, service).map((m) => m.address),
    c.security,
  );
  try {
    while (Date.now() - killedAtMs < timeoutMs) {
      const tick = Date.now();
      const statuses = await clients.statuses(1_000);
      if (statuses.some((s) => s?.role === "active" && Number(s.epoch) > epochBefore)) return Date.now() - killedAtMs;
      await sleep(Math.max(0, 100 - (Date.now() - tick)));
    }
    return undefined;
  } finally {
    clients.close();
  }
}

/**
 * An etcd member to kill, drawn with `draw` (in [0, 1)), or undefined while any member is down: two of three must
 * stay up for the ensemble to keep its quorum.
 */
export function etcdMemberToKill(dir: string, draw: number): EtcdMemberRecord | undefined {
  const c = readCluster(dir);
  const e = c.etcd ? (readEnsemble(c.etcd.dir) ?? c.etcd) : undefined;
  if (!e || !e.members.every(isMemberRunning)) return undefined;
  return e.members[Math.floor(draw * e.members.length)];
}

/** The median and the maximum of `ms` ("-" when empty). */
export function medianAndMax(ms: readonly number[]): string {
  if (ms.length === 0) return "-";
  const sorted = [...ms].sort((a, b) => a - b);
  const p50 = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return `p50 ${p50} ms, max ${sorted[sorted.length - 1]} ms`;
}

/** The HA report as lines for a terminal. */
export function haSummary(h: SoakHaReport): string[] {
  return [
    `failovers (rm and nn kills are of the active master): rm ${h.failovers.rm}, nn ${h.failovers.nn}; etcd members killed: ${h.etcdKills}`,
    `time to a new active after the kill: rm ${medianAndMax(h.newActiveMs.rm)}; nn ${medianAndMax(h.newActiveMs.nn)}`,
  ];
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
