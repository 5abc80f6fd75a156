/**
 * The resource manager's page per server (`/node/:nodeId`, YARN's node page): what it is and holds now
 * (`#node-facts`: state in `#node-state`, class, capacity, primary and harvested cores, power, kills since the
 * cluster's history began), its primary's utilization over the last day beside its class's peak
 * (`#node-utilization`, drawn by rm.js from the page data), its last heartbeats (`#node-recent`), and its containers:
 * running (`#node-running`) and recently ended (`#node-ended`), one `tr[data-container]` each.
 */
import { HarvestError } from "../common/errors.js";
import { formatBytes, formatDuration, formatTime, renderTable } from "../common/web-page.js";
import type { Column } from "../common/web-page.js";
import { escapeHtml } from "../common/web-server.js";
import type { WebRequest, WebServer } from "../common/web-server.js";
import {
  HARVEST_COLOUR,
  PRIMARY_COLOUR,
  ago,
  appLink,
  badge,
  bar,
  cores,
  facts,
  page,
  pct,
  round1,
  watts,
} from "./web-html.js";
import { ACCESS, nodeInfos, nodeUtilization, wire } from "./web.js";
import type { RmNodeInfo, RmWebSource } from "./web.js";
import type { ContainerRefOutput } from "../proto/generated/harvest/v1/ContainerRef.js";

/** Ended containers listed at most (newest first). */
const MAX_ENDED_ROWS = 50;

/** A container on the server, with its job. */
interface NodeContainer {
  appId: string;
  appName: string;
  c: ContainerRefOutput;
}

/** Serves `/node/:nodeId` (any certificate, as `/ws/v1/cluster/nodes/:nodeId`). */
export function registerNodePage(web: WebServer, source: RmWebSource): void {
  web.get("/node/:nodeId", ACCESS.cluster, (req) => nodePage(source, req));
}

/** The containers the known jobs placed on `nodeId`: running first, then the last ended, newest first. */
function containersOn(source: RmWebSource, nodeId: string): { running: NodeContainer[]; ended: NodeContainer[] } {
  const running: NodeContainer[] = [];
  const ended: NodeContainer[] = [];
  // Listing leaves containers out: each job's own report has them.
  for (const { appId } of wire.apps(source, [])) {
    let a;
    try {
      a = wire.app(source, appId);
    } catch {
      continue; // Evicted between the list and now.
    }
    for (const c of a.containers)
      if (c.nodeId === nodeId) (c.state === "COMPLETE" ? ended : running).push({ appId, appName: a.name, c });
  }
  running.sort((x, y) => Number(y.c.startedMs) - Number(x.c.startedMs));
  ended.sort((x, y) => Number(y.c.finishedMs) - Number(x.c.finishedMs));
  return { running, ended: ended.slice(0, MAX_ENDED_ROWS) };
}

function causeText(cause: string): string {
  return cause === "EXIT_CAUSE_UNSPECIFIED" ? "" : cause;
}

function containerTable(id: string, rows: readonly NodeContainer[], empty: string, ended: boolean): string {
  const now = Date.now();
  const cols: Column<NodeContainer>[] = [
    { label: "Container", cell: (r) => `<code>${escapeHtml(r.c.containerId)}</code>` },
    { label: "Job", cell: (r) => `${appLink(r.appId)} <span class="muted">${escapeHtml(r.appName)}</span>` },
    {
      label: "Task",
      cell: (r) => (r.c.isAm ? "job manager" : r.c.vertex ? escapeHtml(`${r.c.vertex}[${r.c.taskIndex}]`) : "-"),
    },
    { label: "State", cell: (r) => badge(r.c.state) },
    ...(ended
      ? [
          {
            label: "Cause",
            className: "container-cause",
            cell: (r: NodeContainer) => escapeHtml(causeText(r.c.cause)),
          },
          {
            label: "Ended",
            cell: (r: NodeContainer) =>
              `<span data-sort="${escapeHtml(Number(r.c.finishedMs))}">${escapeHtml(ago(now, Number(r.c.finishedMs)))}</span>`,
          },
        ]
      : []),
    {
      label: "Ran",
      numeric: true,
      cell: (r) => {
        const start = Number(r.c.startedMs);
        if (!(start > 0)) return '<span class="muted">-</span>';
        const ms = (ended ? Number(r.c.finishedMs) : now) - start;
        return `<span data-sort="${escapeHtml(ms)}">${escapeHtml(formatDuration(ms))}</span>`;
      },
    },
  ];
  return renderTable(id, cols, rows, empty, (r) => ({ "data-container": r.c.containerId }));
}

function powerText(n: RmNodeInfo): string {
  if (!n.power) return '<span class="muted">not in a power domain</span>';
  const p = n.power;
  const cap = p.capWatts > 0 ? `capped at ${watts(p.capWatts)} by ${p.capDomain}` : "no cap";
  return escapeHtml(`${watts(p.drawWatts)} (${p.drawSource}) in ${p.domain}; ${cap}; capping ${p.cappingState}`);
}

async function nodePage(source: RmWebSource, req: WebRequest): Promise<{ html: string }> {
  const nodeId = req.params["nodeId"] ?? "";
  const node = nodeInfos(source).find((n) => n.nodeId === nodeId);
  if (!node)
    throw new HarvestError("NODE_NOT_FOUND", `no server ${JSON.stringify(nodeId)}; the cluster page lists them`, {
      details: { nodeId },
    });
  const now = Date.now();
  const u = await nodeUtilization(source, nodeId);
  const { running, ended } = containersOn(source, nodeId);
  const cap = node.capacity?.vcoresMilli ?? 0;
  const primary = node.primaryUsage?.vcoresMilli ?? 0;
  const harvested = node.allocated?.vcoresMilli ?? 0;
  const share = (m: number): number => (cap > 0 ? (100 * m) / cap : 0);
  // The tenant's name is the operators' business (as /tenants): shown to roles that may list tenants.
  const role = req.principal?.role;
  const tenant =
    role === undefined || (ACCESS.tenants as readonly string[]).includes(role)
      ? wire.tenants(source).tenants.find((t) => t.servers.includes(nodeId))?.name
      : undefined;
  const k = u.kills;
  const kills = k.primary + k.power + k.drain;
  const factsTable = facts(
    [
      ["State", badge(node.serviceState, "node-state")],
      ["Address", `<code>${escapeHtml(node.nmAddress)}</code> in ${escapeHtml(node.rack)}`],
      ...(tenant !== undefined ? ([["Primary tenant", escapeHtml(tenant)]] as [string, string][]) : []),
      [
        "Class",
        u.classId
          ? `<a href="/classes">${escapeHtml(u.classId)}</a> (peak ${escapeHtml(pct(u.classPeakPct ?? 0))})`
          : '<span class="muted">none yet</span>',
      ],
      ["Capacity", `${cores(cap)} cores, ${escapeHtml(formatBytes((node.capacity?.memoryMb ?? 0) * 1024 * 1024))}`],
      [
        "Cores now",
        `${bar(
          [
            [share(primary), PRIMARY_COLOUR],
            [share(harvested), HARVEST_COLOUR],
          ],
          `primary ${pct(share(primary))}, harvested ${pct(share(harvested))}`,
        )} primary ${cores(primary)}, harvested ${cores(harvested)} in ${node.containers} container${node.containers === 1 ? "" : "s"}`,
      ],
      ["Power", powerText(node)],
      [
        "Kills",
        `<span id="node-kills">${kills}</span> since ${escapeHtml(formatTime(source.clusterHistory().snapshot().counters.sinceMs))} UTC: ` +
          `${k.primary} for its primary, ${k.power} for power, ${k.drain} for a drain` +
          (k.lastMs > 0 ? `; last ${escapeHtml(ago(now, k.lastMs))}` : ""),
      ],
      ["Last heartbeat", escapeHtml(ago(now, Number(node.lastHeartbeatMs)))],
    ],
    "node-facts",
  );
  const recent = source.nodeSamples(nodeId);
  const data = {
    kind: "node",
    node: nodeId,
    utilization: { timesMs: u.timesMs, cpuPct: u.cpuPct.map(round1) },
    classId: u.classId,
    classPeakPct: u.classPeakPct,
    recent: {
      timesMs: recent.map((s) => s.timeMs),
      primaryPct: recent.map((s) => round1(share(s.primaryMilli))),
      harvestPct: recent.map((s) => round1(share(s.allocatedMilli))),
    },
  };
  const body = `${factsTable}
<h2>Its primary, last day</h2>
<p class="muted">The primary tenant's CPU utilization on this server as the resource manager stored it (${u.timesMs.length} samples)${u.classPeakPct !== null ? `, with the peak of its class ${escapeHtml(u.classId)} (${escapeHtml(pct(u.classPeakPct))})` : ""}.</p>
<div class="chart" id="node-utilization" role="img" aria-label="${escapeHtml(`${nodeId}: primary utilization over the last day`)}"></div>
<h2>Last heartbeats</h2>
<div class="chart short" id="node-recent" role="img" aria-label="${escapeHtml(`${nodeId}: primary and harvested cores at the last heartbeats`)}"></div>
<h2>Running containers</h2>
${containerTable("node-running", running, "No container runs here.", false)}
<h2>Recently ended containers</h2>
${containerTable("node-ended", ended, "No container of a known job has ended here.", true)}`;
  return page(req, { title: `Server ${nodeId}`, current: "/", body, data, charts: true, refresh: true });
}
