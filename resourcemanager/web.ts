/**
 * The resource manager's REST API (read-only JSON in the shape of YARN's `/ws/v1/cluster/...` where it fits) and the
 * view model its web pages share (web-pages.ts).
 *
 * One source of truth: every resource is the answer of the gRPC method that serves the same data, computed by the
 * same function (`RmWebSource`, implemented by the daemon with the functions its gRPC handlers call) and passed
 * through that method's protobuf encoding, so that a script reading `/ws/v1/cluster/apps` sees exactly what
 * `ListApplications` answers (defaults filled, 64-bit integers as numbers, enums as names). What only the web shows
 * (a node's drain state, class and power, a job's DAG, why it waits) is added beside those fields, never instead.
 * Access follows the matching gRPC method (`API_ROUTES` lists each route's roles).
 */
import type { MethodDefinition } from "@grpc/proto-loader";
import { ANY_CERTIFICATE } from "../common/auth.js";
import type { Access, Principal } from "../common/auth.js";
import type { ContainerLogStream } from "../common/container-logs.js";
import { vertexLayers } from "../common/dag-spec.js";
import type { DagSpec, EdgeType } from "../common/dag-spec.js";
import { HarvestError } from "../common/errors.js";
import { loadHarvestProto } from "../common/grpc.js";
import { liveVertexProgress } from "../common/live-progress.js";
import type { LiveVertexProgress } from "../common/live-progress.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { harvestVersion, processFacts } from "../common/web-page.js";
import type { WebServer } from "../common/web-server.js";
import type { ClusterHistory, NodeKills } from "./cluster-history.js";
import type { LogStreamPart } from "../common/log-view.js";
import type { NodeSample } from "./node-tracker.js";
import { APP_STATES, NODE_STATES } from "./rm-metrics.js";
import type { ApplicationReport, ApplicationReportOutput } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { ClusterNodesResponse } from "../proto/generated/harvest/v1/ClusterNodesResponse.js";
import type { DrainReport, DrainReportOutput } from "../proto/generated/harvest/v1/DrainReport.js";
import type { GetJobHistoryResponse } from "../proto/generated/harvest/v1/GetJobHistoryResponse.js";
import type { ListApplicationsResponse } from "../proto/generated/harvest/v1/ListApplicationsResponse.js";
import type { ListClassesResponse } from "../proto/generated/harvest/v1/ListClassesResponse.js";
import type {
  ListDomainsResponse,
  ListDomainsResponseOutput,
} from "../proto/generated/harvest/v1/ListDomainsResponse.js";
import type { ListTenantsResponse } from "../proto/generated/harvest/v1/ListTenantsResponse.js";
import type { NodeReportOutput } from "../proto/generated/harvest/v1/NodeReport.js";

/** What the web server reads of the resource manager: the functions its gRPC services answer with, and a few facts. */
export interface RmWebSource {
  /** ListApplications' answer. */
  listApplications(states: string[]): ListApplicationsResponse;
  /** GetApplication's answer; APP_NOT_FOUND for an unknown application. */
  getApplication(appId: string): ApplicationReport;
  /** The DAG of a known application (undefined when its file cannot be read as a DAG). */
  dagOf(appId: string): DagSpec | undefined;
  /** GetClusterNodes' answer. */
  getClusterNodes(): ClusterNodesResponse;
  /** GetJobHistory's answer. */
  getJobHistory(name: string, limit: number): Promise<GetJobHistoryResponse>;
  /** TenantAdmin.ListTenants' answer (every tenant). */
  listTenants(): ListTenantsResponse;
  /** TenantAdmin.ListClasses' answer. */
  listClasses(): ListClassesResponse;
  /** PowerAdmin.ListDomains' answer (the whole tree). */
  listDomains(): ListDomainsResponse;
  /** NodeAdmin.GetDrainStatus' answer. */
  getDrainStatus(): DrainReport;
  /** A node's primary tenant's utilization class at the last classification ("" when none). */
  nodeClass(nodeId: string): string;
  /** A node's last heartbeats, oldest first (empty for an unknown node). */
  nodeSamples(nodeId: string): readonly NodeSample[];
  /** The cluster's last day (cores sampled, kills per hour and per server, job counters since the start). */
  clusterHistory(): Pick<ClusterHistory, "snapshot" | "killsOn">;
  /** A server's primary utilization as stored between `fromMs` and `toMs` (empty for a server without history). */
  serverUtilization(nodeId: string, fromMs: number, toMs: number): Promise<UtilizationSeries>;
  /** A tenant's average server over the last `days` days (TENANT_NOT_FOUND for an unknown tenant). */
  tenantUtilization(tenant: string, days: number): Promise<UtilizationSeries>;
  /** The daemon and its policies. */
  info(): RmInfo;
  /** A node manager's web server (its container log pages), "" when it serves none or is unknown. */
  nodeWebUrl(nodeId: string): string;
  /** A node web token for the viewer (common/node-web-token.ts), undefined when none can be given (insecure). */
  nodeWebToken(viewer: Principal | undefined): string | undefined;
  /** Part of a container's log kept in the DFS (log-copies.ts `LogCopyReader.read`, as the job's submitter). */
  readLogCopy(appId: string, containerId: string, stream: ContainerLogStream, start: number): Promise<LogCopyPart>;
  /** The same, whatever its size, streamed from the DFS (`LogCopyReader.open`: a script's whole log). */
  openLogCopy(appId: string, containerId: string, stream: ContainerLogStream, start: number): Promise<LogStreamPart>;
}

/** Part of a container's log kept in the DFS: its bytes from `offset`, and the log's whole length. */
export interface LogCopyPart {
  data: Buffer;
  totalBytes: number;
  offset: number;
}

/** The resource manager and its policies, as `/ws/v1/cluster/info` shows them. */
export interface RmInfo {
  /** The daemon's lifecycle state ("running"). */
  state: string;
  /** When this incarnation started (ms since the epoch). */
  startedMs: number;
  /** The gRPC address clients use. */
  rmAddress: string;
  /** Whether callers are authenticated (mutual TLS). */
  secure: boolean;
  schedulerPolicy: string;
  nodeChoice: string;
  admission: string;
  powerPlacement: string;
  /** Fraction of each node's cores kept for its primary tenant. */
  reserveFraction: number;
  heartbeatIntervalMs: number;
  /** Jobs waiting for admission now. */
  admissionQueueLength: number;
  /** Its role among highly available resource managers ("active"; "none": not HA) and its term (0: none). */
  ha: { role: string; epoch: number };
}

// ------------------------------------------------------------------------------------------------ one source of truth

/** `value` as the gRPC method's caller receives it: encoded and decoded with the method's own response type. */
function answer<Req, Res, ReqOut, ResOut>(method: MethodDefinition<Req, Res, ReqOut, ResOut>, value: Res): ResOut {
  return method.responseDeserialize(method.responseSerialize(value));
}

/** The gRPC answers as their callers see them. */
export const wire = {
  apps: (s: RmWebSource, states: string[]) => answer(clientService().ListApplications, s.listApplications(states)).apps,
  app: (s: RmWebSource, appId: string) => answer(clientService().GetApplication, s.getApplication(appId)),
  nodes: (s: RmWebSource) => answer(clientService().GetClusterNodes, s.getClusterNodes()).nodes,
  history: async (s: RmWebSource, name: string, limit: number) =>
    answer(clientService().GetJobHistory, await s.getJobHistory(name, limit)),
  tenants: (s: RmWebSource) => answer(loadHarvestProto().TenantAdmin.service.ListTenants, s.listTenants()),
  classes: (s: RmWebSource) => answer(loadHarvestProto().TenantAdmin.service.ListClasses, s.listClasses()),
  power: (s: RmWebSource): ListDomainsResponseOutput =>
    answer(loadHarvestProto().PowerAdmin.service.ListDomains, s.listDomains()),
  drains: (s: RmWebSource): DrainReportOutput =>
    answer(loadHarvestProto().NodeAdmin.service.GetDrainStatus, s.getDrainStatus()),
};

function clientService() {
  return loadHarvestProto().ApplicationClientService.service;
}

// ------------------------------------------------------------------------------------------------ view model

/** A node's state in service: LOST wins, then its drain, else RUNNING. */
export type ServiceState = (typeof NODE_STATES)[number];

/** A server's power as the web shows it (from PowerAdmin.ListDomains' node entry). */
export interface NodePower {
  domain: string;
  drawWatts: number;
  /** measured, estimated, stale-peak or lost. */
  drawSource: string;
  /** The node budget in force (the cap its capping agent holds it under); 0: none. */
  capWatts: number;
  /** The alerting domain that imposed the cap. */
  capDomain: string;
  capped: boolean;
  cappingState: string;
  throttledContainers: number;
}

/** A server as `/ws/v1/cluster/nodes` shows it: GetClusterNodes' report and what only the web adds. */
export interface RmNodeInfo extends NodeReportOutput {
  /** DRAINING or DRAINED while `harvest admin drain` holds it; "" otherwise. */
  drainState: string;
  /** What the pages show: LOST, DRAINING, DRAINED or RUNNING. */
  serviceState: ServiceState;
  /** Its primary tenant's utilization class at the last classification ("" when none). */
  classId: string;
  power: NodePower | null;
}

/** The servers with drain state, class and power (sorted by id). */
export function nodeInfos(source: RmWebSource): RmNodeInfo[] {
  const drains = new Map(wire.drains(source).drains.map((d) => [d.nodeId, d.state]));
  const power = new Map(wire.power(source).nodes.map((n) => [n.nodeId, n]));
  return wire
    .nodes(source)
    .map((n): RmNodeInfo => {
      const drainState = drains.get(n.nodeId) ?? "";
      const p = power.get(n.nodeId);
      return {
        ...n,
        drainState,
        serviceState: serviceStateOf(n.state, drainState),
        classId: source.nodeClass(n.nodeId),
        power: p
          ? {
              domain: p.domain,
              drawWatts: p.drawWatts,
              drawSource: p.drawSource,
              capWatts: p.nodeBudgetWatts,
              capDomain: p.budgetDomain,
              capped: p.powerCapped,
              cappingState: p.cappingState,
              throttledContainers: p.throttledContainers,
            }
          : null,
      };
    })
    .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
}

/** LOST wins over a drain; a drain over RUNNING. */
export function serviceStateOf(state: string, drainState: string): ServiceState {
  if (state === "LOST") return "LOST";
  if (drainState === "DRAINING" || drainState === "DRAINED") return drainState;
  return "RUNNING";
}

/** The cluster's totals, as the cluster page's tiles and `/ws/v1/cluster/metrics` show them. */
export interface ClusterTotals {
  nodesByState: Record<string, number>;
  appsByState: Record<string, number>;
  /** Known applications (finished ones until evicted). */
  apps: number;
  /** Over the nodes not LOST. */
  vcoresMilli: { capacity: number; primary: number; allocated: number; free: number };
  memoryMb: { capacity: number; primary: number; allocated: number; free: number };
  containers: number;
  /** Counted draw of the nodes not lost. */
  powerDrawWatts: number;
}

/** Sums the servers and counts the applications. */
export function clusterTotals(nodes: readonly RmNodeInfo[], apps: readonly { state: string }[]): ClusterTotals {
  const nodesByState: Record<string, number> = Object.fromEntries(NODE_STATES.map((s) => [s, 0]));
  const appsByState: Record<string, number> = Object.fromEntries(APP_STATES.map((s) => [s, 0]));
  const vcoresMilli = { capacity: 0, primary: 0, allocated: 0, free: 0 };
  const memoryMb = { capacity: 0, primary: 0, allocated: 0, free: 0 };
  let containers = 0;
  let powerDrawWatts = 0;
  for (const n of nodes) {
    nodesByState[n.serviceState] = (nodesByState[n.serviceState] ?? 0) + 1;
    if (n.serviceState === "LOST") continue;
    const cap = n.capacity ?? { vcoresMilli: 0, memoryMb: 0 };
    const pri = n.primaryUsage ?? { vcoresMilli: 0, memoryMb: 0 };
    const all = n.allocated ?? { vcoresMilli: 0, memoryMb: 0 };
    vcoresMilli.capacity += cap.vcoresMilli;
    vcoresMilli.primary += pri.vcoresMilli;
    vcoresMilli.allocated += all.vcoresMilli;
    vcoresMilli.free += Math.max(0, cap.vcoresMilli - pri.vcoresMilli - all.vcoresMilli);
    memoryMb.capacity += cap.memoryMb;
    memoryMb.primary += pri.memoryMb;
    memoryMb.allocated += all.memoryMb;
    memoryMb.free += Math.max(0, cap.memoryMb - pri.memoryMb - all.memoryMb);
    containers += n.containers;
    powerDrawWatts += n.power?.drawWatts ?? 0;
  }
  for (const a of apps) appsByState[a.state] = (appsByState[a.state] ?? 0) + 1;
  return { nodesByState, appsByState, apps: apps.length, vcoresMilli, memoryMb, containers, powerDrawWatts };
}

/** YARN's `clusterMetrics` from the totals (cores as decimals, memory in MB). */
export function clusterMetrics(t: ClusterTotals): Record<string, number> {
  const s = t.appsByState;
  const n = t.nodesByState;
  return {
    appsKnown: t.apps,
    appsPending: (s["QUEUED"] ?? 0) + (s["ACCEPTED"] ?? 0),
    appsQueuedForAdmission: s["QUEUED"] ?? 0,
    appsRunning: s["RUNNING"] ?? 0,
    appsCompleted: s["FINISHED"] ?? 0,
    appsFailed: s["FAILED"] ?? 0,
    appsKilled: s["KILLED"] ?? 0,
    totalNodes: Object.values(n).reduce((a, b) => a + b, 0),
    activeNodes: n["RUNNING"] ?? 0,
    lostNodes: n["LOST"] ?? 0,
    drainingNodes: n["DRAINING"] ?? 0,
    drainedNodes: n["DRAINED"] ?? 0,
    totalVcores: t.vcoresMilli.capacity / 1000,
    primaryVcores: t.vcoresMilli.primary / 1000,
    allocatedVcores: t.vcoresMilli.allocated / 1000,
    availableVcores: t.vcoresMilli.free / 1000,
    totalMemoryMb: t.memoryMb.capacity,
    primaryMemoryMb: t.memoryMb.primary,
    allocatedMemoryMb: t.memoryMb.allocated,
    availableMemoryMb: t.memoryMb.free,
    containersAllocated: t.containers,
    powerDrawWatts: t.powerDrawWatts,
  };
}

/** Why a job that has not ended is not running its tasks, if it waits. */
export interface WaitingReason {
  /** admission: the admission queue; class: Algorithm 1's class wait; job-manager: a container for its manager. */
  kind: "admission" | "class" | "job-manager";
  reason: string;
}

const TERMINAL = new Set(["FINISHED", "FAILED", "KILLED"]);

/** Whether a job's state is final. */
export function isFinished(state: string): boolean {
  return TERMINAL.has(state);
}

/** Why a job waits (undefined when it runs or ended), from its report. */
export function waitingOf(r: { state: string; diagnostics: string; placementNote: string }): WaitingReason | undefined {
  if (r.state === "QUEUED") return { kind: "admission", reason: r.diagnostics || "waiting for admission" };
  if (TERMINAL.has(r.state)) return undefined;
  // history-placement.ts writes "waiting: <why>" while no chosen class has room.
  if (r.placementNote.startsWith("waiting: ")) return { kind: "class", reason: r.placementNote };
  if (r.state === "ACCEPTED" || r.state === "NEW_SAVING")
    return { kind: "job-manager", reason: r.diagnostics || "waiting for a container for the job manager" };
  return undefined;
}

/**
 * One vertex of a job's DAG with its progress and its place in the drawing: `progress`, `counters` and
 * `runningCounters` are its live ones (common/live-progress.ts: running tasks' reports included).
 */
export interface DagVertexView extends Pick<LiveVertexProgress, "progress" | "counters" | "runningCounters"> {
  name: string;
  parallelism: number;
  vcoresMilli: number;
  memoryMb: number;
  /** As the job manager reported it ("" before its first report). */
  state: string;
  total: number;
  succeeded: number;
  running: number;
  preempted: number;
  lost: number;
  failedAttempts: number;
  /** Task starts over an input split on a server holding a replica of it, in one of its racks, elsewhere. */
  nodeLocal: number;
  rackLocal: number;
  offSwitch: number;
  /** Its layer: the longest path from a source. */
  level: number;
  /** Its position within its layer. */
  row: number;
}

/** A job's DAG as the job page draws it. */
export interface DagView {
  vertices: DagVertexView[];
  edges: { from: string; to: string; type: EdgeType | string }[];
}

/**
 * The DAG (vertex names, sizes and edges: never commands or environments) with the job manager's per-vertex progress.
 * Without a readable DAG, the vertices the progress names, unconnected.
 */
export function dagView(
  dag: DagSpec | undefined,
  progress: ApplicationReportOutput["progress"],
  live: readonly LiveVertexProgress[] = [],
): DagView {
  const byName = new Map((progress?.vertices ?? []).map((v) => [v.name, v]));
  const liveByName = new Map(live.map((l) => [l.name, l]));
  const layers = dag ? vertexLayers(dag) : [[...byName.keys()]];
  const place = new Map<string, { level: number; row: number }>();
  layers.forEach((layer, level) => layer.forEach((name, row) => place.set(name, { level, row })));
  const specs = new Map((dag?.vertices ?? []).map((v) => [v.name, v]));
  const names = dag ? dag.vertices.map((v) => v.name) : [...byName.keys()];
  const vertices = names.map((name): DagVertexView => {
    const p = byName.get(name);
    const l = liveByName.get(name);
    const spec = specs.get(name);
    return {
      name,
      // 0 in the DAG for a vertex whose input's splits set it.
      parallelism: spec?.parallelism || p?.total || 0,
      vcoresMilli: spec?.resources.vcoresMilli ?? 0,
      memoryMb: spec?.resources.memoryMb ?? 0,
      state: p?.state ?? "",
      total: p?.total || spec?.parallelism || 0,
      succeeded: p?.succeeded ?? 0,
      running: p?.running ?? 0,
      preempted: p?.preempted ?? 0,
      lost: p?.lost ?? 0,
      failedAttempts: p?.failedAttempts ?? 0,
      nodeLocal: p?.nodeLocal ?? 0,
      rackLocal: p?.rackLocal ?? 0,
      offSwitch: p?.offSwitch ?? 0,
      progress: l?.progress ?? (p && p.total > 0 ? p.succeeded / p.total : 0),
      counters: l?.counters ?? { ...p?.counters },
      runningCounters: l?.runningCounters ?? {},
      ...(place.get(name) ?? { level: 0, row: 0 }),
    };
  });
  return { vertices, edges: (dag?.edges ?? []).map((e) => ({ from: e.from, to: e.to, type: e.type })) };
}

/**
 * The link to a container's log page on its node manager (`webUrl`): through the node manager's `/login` with the
 * viewer's node web token when there is one (it sets the node manager's cookie, then shows the page), else direct.
 */
export function containerLogHref(webUrl: string, containerId: string, stream: string, token?: string): string {
  const path = `/node/containerlogs/${encodeURIComponent(containerId)}/${stream}`;
  return token ? `${webUrl}/login?token=${encodeURIComponent(token)}&next=${encodeURIComponent(path)}` : webUrl + path;
}

/** `/jobs/<appId>/logs/<containerId>/<stream>`: the resource manager's page of a log kept in the DFS (log-copies.ts). */
export function logCopyHref(appId: string, containerId: string, stream: string, query = ""): string {
  return `/jobs/${encodeURIComponent(appId)}/logs/${encodeURIComponent(containerId)}/${stream}${query}`;
}

/** The `harvest job logs` command that prints a container's log (from its node manager, else the DFS copy). */
export function logsCommand(appId: string, containerId?: string, stream: "stdout" | "stderr" = "stderr"): string {
  return `harvest job logs ${appId}${containerId ? ` --container ${containerId}` : ""}${stream === "stdout" ? " --stream stdout" : ""}`;
}

/** A job as `/ws/v1/cluster/apps/:appId` shows it: GetApplication's report, its DAG, why it waits, its log commands. */
export interface RmAppDetail extends ApplicationReportOutput {
  dag: DagView;
  waiting: WaitingReason | null;
  logs: { containerId: string; nodeId: string; isAm: boolean; command: string; url: string; copyUrl: string }[];
}

/** GetApplication's report with what only the web adds. */
export function appDetail(source: RmWebSource, appId: string): RmAppDetail {
  const report = wire.app(source, appId);
  return {
    ...report,
    dag: dagView(source.dagOf(appId), report.progress, liveVertexProgress(report)),
    waiting: waitingOf(report) ?? null,
    logs: report.containers.map((c) => ({
      containerId: c.containerId,
      nodeId: c.nodeId,
      isAm: c.isAm,
      command: logsCommand(appId, c.containerId),
      url: source.nodeWebUrl(c.nodeId) ? containerLogHref(source.nodeWebUrl(c.nodeId), c.containerId, "stderr") : "",
      // This server's page of the copy kept in the DFS, once the container ended (log-copies.ts).
      copyUrl: c.state === "COMPLETE" ? logCopyHref(appId, c.containerId, "stderr") : "",
    })),
  };
}

/** Hourly means of a series: one point per clock hour that has samples, at the hour's start. */
export function hourlyMeans(series: { timesMs: readonly number[]; cpuPct: readonly number[] }): {
  timesMs: number[];
  cpuPct: number[];
} {
  const sums = new Map<number, [number, number]>();
  series.timesMs.forEach((t, i) => {
    const v = series.cpuPct[i];
    if (v === undefined || !Number.isFinite(v)) return;
    const hour = Math.floor(t / 3_600_000) * 3_600_000;
    const acc = sums.get(hour) ?? [0, 0];
    acc[0] += v;
    acc[1] += 1;
    sums.set(hour, acc);
  });
  const hours = [...sums.keys()].sort((a, b) => a - b);
  return { timesMs: hours, cpuPct: hours.map((h) => sums.get(h)![0] / sums.get(h)![1]) };
}

/**
 * A daily profile: for each hour of the day (UTC, 0..23), the mean of the samples in that hour over every day of the
 * series; null for an hour with none.
 */
export function dailyProfile(series: { timesMs: readonly number[]; cpuPct: readonly number[] }): (number | null)[] {
  const sums = new Array<number>(24).fill(0);
  const counts = new Array<number>(24).fill(0);
  series.timesMs.forEach((t, i) => {
    const v = series.cpuPct[i];
    if (v === undefined || !Number.isFinite(v)) return;
    const hour = new Date(t).getUTCHours();
    sums[hour]! += v;
    counts[hour]! += 1;
  });
  return sums.map((s, h) => (counts[h]! > 0 ? s / counts[h]! : null));
}

/** A tenant's utilization as the tenants page plots it. */
export interface TenantUtilization {
  tenant: string;
  /** Hourly means of its average server over the window. */
  history: { timesMs: number[]; cpuPct: number[] };
  /** 24 hourly means (UTC), null where no sample fell. */
  profile: (number | null)[];
}

/** Days of history the tenants page and `/ws/v1/cluster/tenants/:tenant/utilization` plot. */
export const TENANT_HISTORY_DAYS = 30;

/** A tenant's last 30 days as hourly means and a daily profile. */
export async function tenantUtilization(source: RmWebSource, tenant: string): Promise<TenantUtilization> {
  const series = await source.tenantUtilization(tenant, TENANT_HISTORY_DAYS);
  return { tenant, history: hourlyMeans(series), profile: dailyProfile(series) };
}

/** A server's primary over the last day beside its class's peak, and its kills, as its page plots them. */
export interface NodeUtilization {
  nodeId: string;
  /** Its primary tenant's class ("" when none) and that class's peak utilization in percent (null: no class). */
  classId: string;
  classPeakPct: number | null;
  /** Its primary's CPU utilization (percent of the server) as stored over the last day. */
  timesMs: number[];
  cpuPct: number[];
  /** Containers killed on it since the cluster's history began (cluster-history.ts), by cause. */
  kills: NodeKills;
}

/** A server's last day (NODE_NOT_FOUND for a server the resource manager does not know). */
export async function nodeUtilization(source: RmWebSource, nodeId: string): Promise<NodeUtilization> {
  if (!wire.nodes(source).some((n) => n.nodeId === nodeId))
    throw new HarvestError("NODE_NOT_FOUND", `no server ${JSON.stringify(nodeId)}; /ws/v1/cluster/nodes lists them`, {
      details: { nodeId },
    });
  const classId = source.nodeClass(nodeId);
  const cls = classId ? wire.classes(source).classes.find((c) => c.id === classId) : undefined;
  const now = Date.now();
  const series = await source.serverUtilization(nodeId, now - 86_400_000, now + 1);
  return {
    nodeId,
    classId,
    classPeakPct: cls ? cls.peakPct : null,
    timesMs: series.timesMs,
    cpuPct: series.cpuPct,
    kills: source.clusterHistory().killsOn(nodeId),
  };
}

// ------------------------------------------------------------------------------------------------ routes

/** Who may read what: the roles of the matching gRPC method. */
export const ACCESS = {
  /** ApplicationClientService's reads (GetApplication, ListApplications, GetClusterNodes, GetJobHistory). */
  cluster: ANY_CERTIFICATE,
  /** TenantAdmin.ListTenants: tenants, their servers and histories are the operators' business. */
  tenants: ["admin", "daemon"] as readonly Access[],
  /**
   * TenantAdmin.ListClasses is admin and daemon over gRPC; its read-only web form is also open to users, whose job
   * pages name the classes their jobs were given (aggregates only: no tenant history).
   */
  classes: ["admin", "daemon", "user"] as readonly Access[],
  /** PowerAdmin.ListDomains and NodeAdmin.GetDrainStatus. */
  admin: ["admin"] as readonly Access[],
} as const;

/** Parses `?states=A,B` against the known application states (empty: all). */
export function parseStates(raw: string | null, known: readonly string[], field = "states"): string[] {
  const states = (raw ?? "")
    .split(",")
    .map((s) => s.trim().toUpperCase())
    .filter((s) => s.length > 0);
  for (const s of states)
    if (!known.includes(s))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `${field}: unknown state ${JSON.stringify(s)}; known: ${known.join(", ")}`,
        {
          details: { field },
        },
      );
  return states;
}

function intParam(query: URLSearchParams, name: string, dflt: number, max: number): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return dflt;
  const n = Number(raw);
  if (!(Number.isInteger(n) && n >= 1 && n <= max))
    throw new HarvestError("INVALID_ARGUMENT", `${name} must be an integer in 1..${max}, got ${JSON.stringify(raw)}`, {
      details: { field: name },
    });
  return n;
}

/** The REST API's routes (all GET), for the README. */
export const API_ROUTES: readonly { path: string; access: readonly Access[]; what: string }[] = [
  { path: "/ws/v1/cluster/info", access: ACCESS.cluster, what: "state, start, version, policies, totals" },
  { path: "/ws/v1/cluster/metrics", access: ACCESS.cluster, what: "YARN-like totals (nodes, apps, cores, memory)" },
  { path: "/ws/v1/cluster/nodes", access: ACCESS.cluster, what: "servers (?states=RUNNING,LOST,DRAINING,DRAINED)" },
  { path: "/ws/v1/cluster/nodes/:nodeId", access: ACCESS.cluster, what: "one server with its last heartbeats" },
  {
    path: "/ws/v1/cluster/nodes/:nodeId/utilization",
    access: ACCESS.cluster,
    what: "its primary's last day, its class's peak, its kills",
  },
  {
    path: "/ws/v1/cluster/usage-history",
    access: ACCESS.cluster,
    what: "last day: cores sampled, kills per hour, job counters",
  },
  { path: "/ws/v1/cluster/apps", access: ACCESS.cluster, what: "ListApplications (?states=RUNNING,FINISHED)" },
  { path: "/ws/v1/cluster/apps/:appId", access: ACCESS.cluster, what: "GetApplication + DAG, waiting, log commands" },
  { path: "/ws/v1/cluster/history", access: ACCESS.cluster, what: "GetJobHistory (?name=, ?limit=)" },
  { path: "/ws/v1/cluster/tenants", access: ACCESS.tenants, what: "ListTenants" },
  { path: "/ws/v1/cluster/tenants/:tenant/utilization", access: ACCESS.tenants, what: "30 days hourly + profile" },
  { path: "/ws/v1/cluster/classes", access: ACCESS.classes, what: "ListClasses" },
  { path: "/ws/v1/cluster/power", access: ACCESS.admin, what: "ListDomains: the domain tree, draws, caps" },
  { path: "/ws/v1/cluster/drains", access: ACCESS.admin, what: "GetDrainStatus" },
];

/** Adds the REST API to the web server. */
export function registerRmApi(web: WebServer, source: RmWebSource): void {
  const base = "/ws/v1/cluster";
  const info = (): object => {
    const nodes = nodeInfos(source);
    return {
      clusterInfo: {
        ...source.info(),
        version: harvestVersion(),
        process: processFacts(source.info().startedMs),
        totals: clusterTotals(nodes, wire.apps(source, [])),
      },
    };
  };
  web
    .get(base, ACCESS.cluster, () => ({ json: info() }))
    .get(`${base}/info`, ACCESS.cluster, () => ({ json: info() }))
    .get(`${base}/metrics`, ACCESS.cluster, () => ({
      json: { clusterMetrics: clusterMetrics(clusterTotals(nodeInfos(source), wire.apps(source, []))) },
    }))
    .get(`${base}/nodes`, ACCESS.cluster, (req) => {
      const states = parseStates(req.query.get("states"), NODE_STATES);
      const nodes = nodeInfos(source).filter((n) => states.length === 0 || states.includes(n.serviceState));
      return { json: { nodes: { node: nodes } } };
    })
    .get(`${base}/nodes/:nodeId`, ACCESS.cluster, (req) => {
      const id = req.params["nodeId"] ?? "";
      const node = nodeInfos(source).find((n) => n.nodeId === id);
      if (!node)
        throw new HarvestError("NODE_NOT_FOUND", `no server ${JSON.stringify(id)}; /ws/v1/cluster/nodes lists them`, {
          details: { nodeId: id },
        });
      return { json: { node: { ...node, recent: source.nodeSamples(id) } } };
    })
    .get(`${base}/nodes/:nodeId/utilization`, ACCESS.cluster, async (req) => ({
      json: await nodeUtilization(source, req.params["nodeId"] ?? ""),
    }))
    .get(`${base}/usage-history`, ACCESS.cluster, () => ({ json: source.clusterHistory().snapshot() }))
    .get(`${base}/apps`, ACCESS.cluster, (req) => ({
      json: { apps: { app: wire.apps(source, parseStates(req.query.get("states"), APP_STATES)) } },
    }))
    .get(`${base}/apps/:appId`, ACCESS.cluster, (req) => ({
      json: { app: appDetail(source, req.params["appId"] ?? "") },
    }))
    .get(`${base}/history`, ACCESS.cluster, async (req) => ({
      json: await wire.history(source, req.query.get("name") ?? "", intParam(req.query, "limit", 100, 10_000)),
    }))
    .get(`${base}/tenants`, ACCESS.tenants, () => ({ json: wire.tenants(source) }))
    .get(`${base}/tenants/:tenant/utilization`, ACCESS.tenants, async (req) => ({
      json: await tenantUtilization(source, req.params["tenant"] ?? ""),
    }))
    .get(`${base}/classes`, ACCESS.classes, () => ({ json: wire.classes(source) }))
    .get(`${base}/power`, ACCESS.admin, () => ({ json: wire.power(source) }))
    .get(`${base}/drains`, ACCESS.admin, () => ({ json: wire.drains(source) }));
}
