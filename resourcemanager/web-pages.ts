/**
 * The resource manager's web pages: Cluster (`/`), Jobs (`/jobs`, `/jobs/:appId`), Tenants, Classes and Power.
 * Server-rendered HTML over the same view model as the REST API (web.ts); charts are drawn in the browser by
 * `/assets/rm.js` (echarts) from each page's `#page-data`. Every value put into HTML goes through `escapeHtml`; no
 * element carries an inline style or script (the pages' CSP forbids both): bars are SVG with presentation attributes.
 * Elements scripts and browser tests look for have stable ids and `data-*` keys (listed on each page function).
 */
import type { Access } from "../common/auth.js";
import {
  formatBytes,
  formatDuration,
  formatTime,
  processFacts,
  renderProcessFacts,
  renderTable,
  renderTiles,
} from "../common/web-page.js";
import type { Column } from "../common/web-page.js";
import { escapeHtml } from "../common/web-server.js";
import type { WebRequest, WebServer } from "../common/web-server.js";
import { APP_STATES } from "./rm-metrics.js";
import {
  ALERT_COLOUR,
  HARVEST_COLOUR,
  PRIMARY_COLOUR,
  ago,
  appLink,
  badge,
  bar,
  classLinks,
  cores,
  facts,
  nodeLink,
  page,
  pct,
  round1,
  tiles,
  watts,
} from "./web-html.js";
import { logCopyPage } from "./log-copies.js";
import { registerNodePage } from "./web-node-page.js";
import {
  ACCESS,
  appDetail,
  clusterTotals,
  isFinished,
  containerLogHref,
  logCopyHref,
  logsCommand,
  nodeInfos,
  parseStates,
  tenantUtilization,
  waitingOf,
  wire,
} from "./web.js";
import type { ClusterTotals, DagVertexView, DagView, RmAppDetail, RmNodeInfo, RmWebSource } from "./web.js";
import type { ApplicationReportOutput } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { ContainerCountsOutput } from "../proto/generated/harvest/v1/ContainerCounts.js";

/** Containers listed on a job page (newest first); the REST API has them all. */
const MAX_CONTAINER_ROWS = 200;

// ------------------------------------------------------------------------------------------------ cluster

/** The cluster's totals as tiles. */
function totalsTiles(t: ClusterTotals): string {
  const n = t.nodesByState;
  const a = t.appsByState;
  const waiting = (a["QUEUED"] ?? 0) + (a["ACCEPTED"] ?? 0);
  const finished = (a["FINISHED"] ?? 0) + (a["FAILED"] ?? 0) + (a["KILLED"] ?? 0);
  return tiles([
    ["servers running", String(n["RUNNING"] ?? 0)],
    ["lost", String(n["LOST"] ?? 0)],
    ["draining / drained", `${n["DRAINING"] ?? 0} / ${n["DRAINED"] ?? 0}`],
    ["jobs running", String(a["RUNNING"] ?? 0)],
    ["jobs waiting", String(waiting)],
    ["jobs ended", String(finished)],
    ["cores", cores(t.vcoresMilli.capacity)],
    ["primary cores", cores(t.vcoresMilli.primary)],
    ["harvested cores", cores(t.vcoresMilli.allocated)],
    ["free cores", cores(t.vcoresMilli.free)],
    ["memory", formatBytes(t.memoryMb.capacity * 1024 * 1024)],
    ["containers", String(t.containers)],
    ["power draw", watts(t.powerDrawWatts)],
  ]);
}

/** A server's live chart data: its last heartbeats in percent of its cores. */
interface Spark {
  id: string;
  node: string;
  timesMs: number[];
  primaryPct: number[];
  harvestPct: number[];
}

/**
 * `/`: totals, then `#servers` with one `tr[data-node]` per server, its state in `td.node-state`, a usage bar and a
 * live chart (`div.spark[data-node]`, drawn by rm.js from `sparks` in the page data).
 */
function clusterPage(source: RmWebSource, req: WebRequest): { html: string } {
  const now = Date.now();
  const nodes = nodeInfos(source);
  const totals = clusterTotals(nodes, wire.apps(source, []));
  const sparks: Spark[] = [];
  const sparkOf = new Map<string, string>();
  nodes.forEach((n, i) => {
    const cap = n.capacity?.vcoresMilli ?? 0;
    const recent = source.nodeSamples(n.nodeId);
    const id = `spark-${i}`;
    sparkOf.set(n.nodeId, id);
    sparks.push({
      id,
      node: n.nodeId,
      timesMs: recent.map((s) => s.timeMs),
      primaryPct: recent.map((s) => (cap > 0 ? round1((100 * s.primaryMilli) / cap) : 0)),
      harvestPct: recent.map((s) => (cap > 0 ? round1((100 * s.allocatedMilli) / cap) : 0)),
    });
  });
  const cols: Column<RmNodeInfo>[] = [
    {
      label: "Server",
      cell: (n) =>
        `${nodeLink(n.nodeId)}<br><span class="muted">${escapeHtml(n.nmAddress)} ${escapeHtml(n.rack)}</span>`,
    },
    { label: "State", className: "node-state", cell: (n) => badge(n.serviceState) },
    {
      label: "Class",
      cell: (n) => (n.classId ? escapeHtml(n.classId) : '<span class="muted">-</span>'),
    },
    {
      label: "Capacity",
      numeric: true,
      cell: (n) =>
        `${cores(n.capacity?.vcoresMilli ?? 0)} cores<br><span class="muted">${escapeHtml(formatBytes((n.capacity?.memoryMb ?? 0) * 1024 * 1024))}</span>`,
    },
    { label: "Primary", numeric: true, cell: (n) => `${cores(n.primaryUsage?.vcoresMilli ?? 0)} cores` },
    {
      label: "Harvested",
      numeric: true,
      cell: (n) =>
        `${cores(n.allocated?.vcoresMilli ?? 0)} cores<br><span class="muted">${n.containers} container${n.containers === 1 ? "" : "s"}</span>`,
    },
    {
      label: "Usage",
      cell: (n) => {
        const cap = n.capacity?.vcoresMilli ?? 0;
        const p = cap > 0 ? (100 * (n.primaryUsage?.vcoresMilli ?? 0)) / cap : 0;
        const h = cap > 0 ? (100 * (n.allocated?.vcoresMilli ?? 0)) / cap : 0;
        return bar(
          [
            [p, PRIMARY_COLOUR],
            [h, HARVEST_COLOUR],
          ],
          `primary ${pct(p)}, harvested ${pct(h)} of ${cores(cap)} cores`,
        );
      },
    },
    {
      label: "Last 2 min",
      cell: (n) =>
        `<div class="spark" id="${escapeHtml(sparkOf.get(n.nodeId) ?? "")}" data-node="${escapeHtml(n.nodeId)}"></div>`,
    },
    {
      label: "Power",
      numeric: true,
      cell: (n) => {
        if (!n.power) return '<span class="muted">-</span>';
        const cap = n.power.capWatts > 0 ? `cap ${watts(n.power.capWatts)}` : "no cap";
        return `${watts(n.power.drawWatts)}<br><span class="muted">${escapeHtml(cap)}</span>`;
      },
    },
    { label: "Heartbeat", cell: (n) => escapeHtml(ago(now, n.lastHeartbeatMs)) },
  ];
  const { ha } = source.info();
  const haLine =
    ha.role === "none"
      ? ""
      : `<p class="muted">This resource manager is ${escapeHtml(ha.role)} in term ${ha.epoch}.</p>\n`;
  const history = source.clusterHistory().snapshot();
  const c = history.counters;
  const body = `${haLine}${totalsTiles(totals)}
${renderTiles("counters", [
  ["jobs submitted", String(c.submitted)],
  ["finished", String(c.finished)],
  ["failed", String(c.failed)],
  ["killed", String(c.killed)],
])}
<p class="muted" id="counters-since">Jobs counted since ${escapeHtml(formatTime(c.sinceMs))} UTC (the cluster's history began).</p>
<h2>Last day</h2>
<p class="muted">Cores of the servers not lost, sampled every ${escapeHtml(formatDuration(history.sampleMs))}: harvested (green), the primaries' (orange) and the total; and containers killed per hour (for a primary, power or a drain).</p>
<div class="chart" id="history-cores" role="img" aria-label="harvested and primary cores over the last day"></div>
<div class="chart short" id="history-kills" role="img" aria-label="containers killed per hour over the last day"></div>
<h2>Servers</h2>
<p class="muted">Usage bars and live charts: the primary tenant's share of each server's cores (orange) and Harvest's (green); the charts cover the last heartbeats.</p>
${renderTable("servers", cols, nodes, "No node manager has registered yet.", (n) => ({ "data-node": n.nodeId }))}
<h2>Resource manager</h2>
${renderProcessFacts(processFacts(source.info().startedMs))}`;
  return page(req, {
    title: "Cluster",
    current: "/",
    body,
    data: { kind: "cluster", sparks, history },
    charts: true,
    refresh: true,
  });
}

// ------------------------------------------------------------------------------------------------ jobs

function taskTotals(r: ApplicationReportOutput): { total: number; succeeded: number } {
  let total = 0;
  let succeeded = 0;
  for (const v of r.progress?.vertices ?? []) {
    total += v.total;
    succeeded += v.succeeded;
  }
  return { total, succeeded };
}

function progressCell(r: ApplicationReportOutput): string {
  const { total, succeeded } = taskTotals(r);
  if (total === 0) return '<span class="muted">-</span>';
  const p = (100 * succeeded) / total;
  return `${bar([[p, HARVEST_COLOUR]], `${succeeded} of ${total} tasks`)} ${succeeded}/${total}`;
}

/** A vertex's node-local share of task starts ("7 of 8 (88 %)", with the rack-local and off-switch in its title). */
function localityCell(v: DagVertexView): string {
  const starts = v.nodeLocal + v.rackLocal + v.offSwitch;
  if (starts === 0) return '<span class="muted">-</span>';
  const title = `${v.nodeLocal} node-local, ${v.rackLocal} rack-local, ${v.offSwitch} off-switch task starts`;
  return `<span title="${escapeHtml(title)}">${v.nodeLocal} of ${starts} (${Math.round((100 * v.nodeLocal) / starts)} %)</span>`;
}

function outcomeText(outcome: string): string {
  return outcome === "JOB_OUTCOME_UNSPECIFIED" ? "" : outcome.replace(/^JOB_/, "");
}

/**
 * `/jobs` (`?state=RUNNING,FINISHED` filters): `#jobs-running`, `#jobs-waiting` (with why) and `#jobs-finished`, one
 * `tr[data-app]` per job.
 */
function jobsPage(source: RmWebSource, req: WebRequest): { html: string } {
  const now = Date.now();
  const states = parseStates(req.query.get("state"), APP_STATES, "state");
  const apps = wire.apps(source, states).sort((a, b) => b.submitMs - a.submitMs);
  const running = apps.filter((a) => !isFinished(a.state) && !waitingOf(a));
  const waiting = apps.filter((a) => waitingOf(a));
  const finished = apps.filter((a) => isFinished(a.state));
  const key = (a: ApplicationReportOutput): Record<string, string> => ({ "data-app": a.appId });
  const id: Column<ApplicationReportOutput> = { label: "Application", cell: (a) => appLink(a.appId) };
  const name: Column<ApplicationReportOutput> = { label: "Name", cell: (a) => escapeHtml(a.name) };
  const user: Column<ApplicationReportOutput> = { label: "User", cell: (a) => escapeHtml(a.user) };
  const state: Column<ApplicationReportOutput> = {
    label: "State",
    className: "app-state",
    cell: (a) => badge(a.state),
  };
  const counts = (c: ContainerCountsOutput | null): string =>
    c ? `${c.preempted} / ${c.lost} / ${c.failed}` : '<span class="muted">-</span>';
  const runningTable = renderTable(
    "jobs-running",
    [
      id,
      name,
      user,
      state,
      { label: "Progress", cell: progressCell },
      { label: "Started", cell: (a) => escapeHtml(formatTime(a.startMs)) },
      { label: "Elapsed", numeric: true, cell: (a) => escapeHtml(formatDuration(now - (a.startMs || a.submitMs))) },
      { label: "Job-manager attempts", numeric: true, cell: (a) => String(a.attempts) },
      { label: "Tasks preempted / lost / failed", numeric: true, cell: (a) => counts(a.taskContainers) },
      { label: "Classes", cell: (a) => classLinks(a.classes) },
    ],
    running,
    "No job is running.",
    key,
  );
  const waitingTable = renderTable(
    "jobs-waiting",
    [
      id,
      name,
      user,
      state,
      { label: "Waiting for", cell: (a) => escapeHtml(waitingOf(a)?.kind ?? "") },
      { label: "Reason", cell: (a) => escapeHtml(waitingOf(a)?.reason ?? "") },
      { label: "Submitted", cell: (a) => escapeHtml(formatTime(a.submitMs)) },
      { label: "Waited", numeric: true, cell: (a) => escapeHtml(formatDuration(now - a.submitMs)) },
    ],
    waiting,
    "No job is waiting.",
    key,
  );
  const finishedTable = renderTable(
    "jobs-finished",
    [
      id,
      name,
      user,
      state,
      { label: "Outcome", cell: (a) => escapeHtml(outcomeText(a.outcome)) },
      { label: "Duration", numeric: true, cell: (a) => escapeHtml(formatDuration(a.finishMs - a.submitMs)) },
      { label: "Finished", cell: (a) => escapeHtml(formatTime(a.finishMs)) },
      { label: "Tasks preempted / lost / failed", numeric: true, cell: (a) => counts(a.taskContainers) },
      { label: "Diagnostics", cell: (a) => escapeHtml(a.diagnostics) },
    ],
    finished,
    "No job has ended (or the filter hides them).",
    key,
  );
  const options = ["", ...APP_STATES]
    .map(
      (s) =>
        `<option value="${escapeHtml(s)}"${states.length === 1 && states[0] === s ? " selected" : ""}>${escapeHtml(s || "all states")}</option>`,
    )
    .join("");
  const body = `<form class="filter" method="get" action="/jobs" id="jobs-filter"><label for="state">State</label>
<select name="state" id="state">${options}</select><button type="submit">Filter</button></form>
<h2>Running (${running.length})</h2>
${runningTable}
<h2>Waiting (${waiting.length})</h2>
${waitingTable}
<h2>Ended (${finished.length})</h2>
${finishedTable}`;
  return page(req, { title: "Jobs", current: "/jobs", body, refresh: true });
}

/** `<span class="pct">37%</span>` (100% only when all is done). */
function percentOf(fraction: number): string {
  return `<span class="pct">${fraction < 1 ? Math.min(99, Math.floor(fraction * 100)) : 100}%</span>`;
}

/** A vertex's counters, "name n" each; those its running tasks added so far are said apart in a title. */
function countersText(counters: Record<string, number>, running: Record<string, number>): string {
  const entries = Object.entries(counters);
  if (entries.length === 0) return '<span class="muted">-</span>';
  const soFar = Object.entries(running);
  const title = soFar.length
    ? ` title="${escapeHtml(`running tasks so far: ${soFar.map(([k, n]) => `${k} ${n}`).join(", ")}`)}"`
    : "";
  return `<span${title}>${entries.map(([k, n]) => `${escapeHtml(k)} ${n}`).join(", ")}</span>`;
}

function countsRow(label: string, c: ContainerCountsOutput | null): { label: string; c: ContainerCountsOutput } {
  return { label, c: c ?? { allocated: 0, succeeded: 0, failed: 0, preempted: 0, lost: 0, killed: 0 } };
}

/** A job's survival quote made at submission, with its band as clock times, and its tasks preempted so far. */
function quoteLine(a: RmAppDetail): string {
  const q = a.quote;
  if (!q) return "-";
  const at = (ms: number): string => formatTime(a.submitMs + ms);
  return (
    `${(q.pNoKill * 100).toFixed(1)} % chance that no task is killed; ${q.expectedReruns.toFixed(1)} re-runs ` +
    `expected; done ${at(q.etaP10Ms)} to ${at(q.etaP90Ms)} (median ${at(q.etaP50Ms)}; ${q.basis}); so far ` +
    `${a.taskContainers?.preempted ?? 0} task(s) preempted`
  );
}

/**
 * `/jobs/:appId`: `#app-state` (the report's state) and `#app-outcome`, the facts, `#attempts` (containers by how they
 * ended, tasks and job managers), `#dag` (the graph, drawn by rm.js from `dag` in the page data), `#vertices` with one
 * `tr[data-vertex]` per vertex, and `#containers` with each container's `harvest job logs` command.
 */
function jobPage(source: RmWebSource, req: WebRequest): { html: string } {
  const now = Date.now();
  const appId = req.params["appId"] ?? "";
  const a = appDetail(source, appId);
  const outcome = outcomeText(a.outcome);
  const ended = isFinished(a.state);
  const token = source.nodeWebToken(req.principal);
  // A lost or unknown server's node manager answers no more: its containers' logs are read from their DFS copies.
  const nodeUp = new Set(wire.nodes(source).flatMap((n) => (n.state === "LOST" ? [] : [n.nodeId])));
  const logLinks = (c: { containerId: string; nodeId: string; state: string }): string => {
    const url = nodeUp.has(c.nodeId) ? source.nodeWebUrl(c.nodeId) : "";
    const command = `<code>${escapeHtml(logsCommand(a.appId, c.containerId))}</code>`;
    const link = (s: string): string =>
      `<a class="log-link" href="${escapeHtml(containerLogHref(url, c.containerId, s, token))}">${s}</a>`;
    const copy = (s: string): string =>
      `<a class="log-copy" href="${escapeHtml(logCopyHref(a.appId, c.containerId, s))}">${s}</a>`;
    const live = url ? `${link("stderr")} ${link("stdout")} ` : "";
    // The node manager copies a container's logs into the DFS when it exits.
    const kept =
      c.state === "COMPLETE" ? `<span class="log-copies">kept copy: ${copy("stderr")} ${copy("stdout")}</span> ` : "";
    return live || kept ? `${live}${kept}<span class="muted">${command}</span>` : command;
  };
  const am = a.containers.filter((c) => c.isAm).at(-1);
  const info = facts(
    [
      ["Name", escapeHtml(a.name)],
      ["User", escapeHtml(a.user)],
      ["State", badge(a.state, "app-state")],
      ["Outcome", outcome ? badge(outcome, "app-outcome") : '<span id="app-outcome" class="muted"></span>'],
      ["Submitted", escapeHtml(formatTime(a.submitMs))],
      ["Started", escapeHtml(formatTime(a.startMs))],
      ["Finished", escapeHtml(formatTime(a.finishMs))],
      ["Duration", escapeHtml(formatDuration((ended ? a.finishMs : now) - a.submitMs))],
      ["Job-manager attempts", `<span id="am-attempts">${a.attempts}</span>`],
      ["Job type", escapeHtml(a.jobType || "-")],
      ["Classes", `<span id="app-classes">${classLinks(a.classes)}</span>`],
      ["Placement", `<span id="placement-note">${escapeHtml(a.placementNote || "-")}</span>`],
      [
        "Waiting for",
        `<span id="app-waiting">${a.waiting ? `${escapeHtml(a.waiting.kind)}: ${escapeHtml(a.waiting.reason)}` : "-"}</span>`,
      ],
      ["Survival quote", `<span id="app-quote">${escapeHtml(quoteLine(a))}</span>`],
      ["Diagnostics", `<span id="app-diagnostics">${escapeHtml(a.diagnostics || "-")}</span>`],
      ["Job manager's log", am ? logLinks(am) : `<code>${escapeHtml(logsCommand(a.appId))}</code>`],
    ],
    "app-facts",
  );
  const attempts = renderTable(
    "attempts",
    [
      { label: "Containers", cell: (r) => escapeHtml(r.label) },
      { label: "Allocated", numeric: true, cell: (r) => String(r.c.allocated) },
      { label: "Succeeded", numeric: true, cell: (r) => String(r.c.succeeded) },
      { label: "Preempted", numeric: true, cell: (r) => String(r.c.preempted) },
      { label: "Lost", numeric: true, cell: (r) => String(r.c.lost) },
      { label: "Failed", numeric: true, cell: (r) => String(r.c.failed) },
      { label: "Killed or released", numeric: true, cell: (r) => String(r.c.killed) },
    ],
    [countsRow("tasks", a.taskContainers), countsRow("job managers", a.amContainers)],
    "",
    (r) => ({ "data-kind": r.label }),
  );
  const vertices = renderTable(
    "vertices",
    [
      { label: "Vertex", cell: (v) => escapeHtml(v.name) },
      { label: "State", className: "vertex-state", cell: (v) => (v.state ? badge(v.state) : "") },
      { label: "Tasks", numeric: true, cell: (v) => String(v.total) },
      { label: "Succeeded", numeric: true, cell: (v) => String(v.succeeded) },
      { label: "Running", numeric: true, cell: (v) => String(v.running) },
      { label: "Preempted", numeric: true, cell: (v) => String(v.preempted) },
      { label: "Lost", numeric: true, cell: (v) => String(v.lost) },
      { label: "Failed attempts", numeric: true, cell: (v) => String(v.failedAttempts) },
      { label: "Node-local", numeric: true, className: "vertex-locality", cell: localityCell },
      {
        label: "Progress",
        className: "vertex-progress",
        cell: (v) =>
          `${bar([[100 * v.progress, HARVEST_COLOUR]], `${v.succeeded} of ${v.total} done, running tasks' progress included`)} ${percentOf(v.progress)}`,
      },
      { label: "Counters", className: "vertex-counters", cell: (v) => countersText(v.counters, v.runningCounters) },
      {
        label: "Per task",
        numeric: true,
        cell: (v) => (v.vcoresMilli > 0 ? `${cores(v.vcoresMilli)} cores, ${v.memoryMb} MB` : "-"),
      },
    ],
    a.dag.vertices,
    "The job manager has not reported its vertices yet.",
    (v) => ({ "data-vertex": v.name }),
  );
  const refs = [...a.containers].reverse().slice(0, MAX_CONTAINER_ROWS);
  const containers = renderTable(
    "containers",
    [
      { label: "Container", cell: (c) => `<code>${escapeHtml(c.containerId)}</code>` },
      { label: "Kind", cell: (c) => (c.isAm ? "job manager" : "task") },
      { label: "Server", className: "server", cell: (c) => nodeLink(c.nodeId) },
      { label: "State", cell: (c) => badge(c.state) },
      { label: "Task", cell: (c) => (c.vertex ? escapeHtml(`${c.vertex}[${c.taskIndex}]`) : "") },
      {
        label: "Progress",
        className: "container-progress",
        cell: (c) => (c.taskReport && c.state === "RUNNING" ? percentOf(c.taskReport.progress) : ""),
      },
      { label: "Ended by", cell: (c) => escapeHtml(c.cause === "EXIT_CAUSE_UNSPECIFIED" ? "" : c.cause) },
      { label: "Started", cell: (c) => escapeHtml(formatTime(c.startedMs)) },
      { label: "Finished", cell: (c) => escapeHtml(formatTime(c.finishedMs)) },
      { label: "Log", className: "container-log", cell: logLinks },
    ],
    refs,
    "No container was granted yet.",
    (c) => ({ "data-container": c.containerId }),
  );
  const more =
    a.containers.length > refs.length
      ? `<p class="muted">The newest ${refs.length} of ${a.containers.length} containers; <a href="/ws/v1/cluster/apps/${encodeURIComponent(a.appId)}">the REST API</a> lists them all.</p>`
      : "";
  const body = `${info}
<h2>DAG</h2>
<div id="dag" class="dag" role="img" aria-label="${escapeHtml(`DAG of ${a.name}: ${a.dag.vertices.length} vertices`)}"></div>
${vertices}
<h2>Containers by how they ended</h2>
${attempts}
<h2>Containers</h2>
<p class="muted">Each log opens on its server's node manager; once the container has ended it is also kept in the DFS, where <code>harvest job logs</code> reads it after the server is gone.</p>
${containers}${more}`;
  const data: { kind: string; dag: DagView } = { kind: "job", dag: a.dag };
  return page(req, { title: a.appId, current: "/jobs", body, data, charts: true, refresh: !ended });
}

// ------------------------------------------------------------------------------------------------ tenants, classes

/**
 * `/tenants`: `#tenants` with one `tr[data-tenant]` per tenant; per tenant a 30-day chart (`#tenant-history-<i>`) and
 * a daily profile (`#tenant-profile-<i>`), drawn by rm.js from `tenants` in the page data.
 */
async function tenantsPage(source: RmWebSource, req: WebRequest): Promise<{ html: string }> {
  const list = wire.tenants(source);
  const usage = await Promise.all(list.tenants.map((t) => tenantUtilization(source, t.name)));
  const rows = list.tenants.map((t, i) => ({ t, i }));
  const tenantsTable = renderTable(
    "tenants",
    [
      { label: "Tenant", cell: (r) => escapeHtml(r.t.name) },
      { label: "Environment", cell: (r) => escapeHtml(r.t.environment) },
      { label: "Function", cell: (r) => escapeHtml(r.t.machineFunction) },
      { label: "Criticality", cell: (r) => escapeHtml(r.t.effectiveCriticality || "-") },
      {
        label: "Servers",
        cell: (r) =>
          `${r.t.servers.length}<br><span class="muted">${r.t.servers.slice(0, 8).map(nodeLink).join(", ")}${r.t.servers.length > 8 ? ", ..." : ""}</span>`,
      },
      { label: "Pattern", cell: (r) => escapeHtml(r.t.pattern || "-") },
      { label: "Class", cell: (r) => escapeHtml(r.t.classId || "-") },
      { label: "Average", numeric: true, cell: (r) => pct(r.t.averagePct) },
      { label: "Peak", numeric: true, cell: (r) => pct(r.t.peakPct) },
      { label: "Now", numeric: true, cell: (r) => pct(r.t.currentPct) },
      { label: "Reimages / server-month", numeric: true, cell: (r) => r.t.reimagesPerServerMonth.toFixed(2) },
    ],
    rows,
    "No tenant is registered ('harvest admin tenant register').",
    (r) => ({ "data-tenant": r.t.name }),
  );
  const charts = rows
    .map(
      (r) => `<h2>${escapeHtml(r.t.name)}</h2>
<div class="chart" id="tenant-history-${r.i}" data-tenant="${escapeHtml(r.t.name)}" role="img" aria-label="${escapeHtml(`${r.t.name}: hourly utilization, last 30 days`)}"></div>
<div class="chart" id="tenant-profile-${r.i}" data-tenant="${escapeHtml(r.t.name)}" role="img" aria-label="${escapeHtml(`${r.t.name}: mean utilization by hour of day (UTC)`)}"></div>`,
    )
    .join("\n");
  const clustered =
    list.clusteredMs > 0 ? `classified ${escapeHtml(formatTime(list.clusteredMs))} UTC` : "not classified yet";
  const body = `<p class="muted">Primary tenants and what the last classification found (${clustered}). Charts: each tenant's average server, hourly means over the last 30 days, and its daily profile (UTC).</p>
${tenantsTable}
${charts}`;
  const data = {
    kind: "tenants",
    tenants: usage.map((u, i) => ({ id: i, name: u.tenant, history: u.history, profile: u.profile })),
  };
  return page(req, { title: "Tenants", current: "/tenants", body, data, charts: true });
}

/** `/classes`: the classes side by side (`#classes`, one column `th[data-class]` each) and a chart (`#classes-chart`). */
function classesPage(source: RmWebSource, req: WebRequest): { html: string } {
  const list = wire.classes(source);
  const cls = list.classes;
  let body: string;
  if (cls.length === 0) {
    body = `<p class="empty" id="classes">No utilization classes yet: they are built from the tenants' history at the next recluster ('harvest admin recluster').</p>`;
  } else {
    const row = (label: string, cell: (c: (typeof cls)[number]) => string): string =>
      `<tr><th>${escapeHtml(label)}</th>${cls.map((c) => `<td>${cell(c)}</td>`).join("")}</tr>`;
    body = `<table id="classes"><thead><tr><th></th>${cls
      .map((c) => `<th data-class="${escapeHtml(c.id)}">${escapeHtml(c.id)}</th>`)
      .join("")}</tr></thead><tbody>
${row("Pattern", (c) => escapeHtml(c.pattern))}
${row("Average", (c) => pct(c.averagePct))}
${row("Peak", (c) => pct(c.peakPct))}
${row("Now", (c) => pct(c.currentPct))}
${row("Usage", (c) =>
  bar(
    [
      [c.averagePct, PRIMARY_COLOUR],
      [Math.max(0, c.peakPct - c.averagePct), "#fec84b"],
    ],
    `average ${pct(c.averagePct)}, peak ${pct(c.peakPct)}`,
  ),
)}
${row("Tenants", (c) => escapeHtml(c.tenants.join(", ") || "-"))}
${row("Servers", (c) => `${c.servers.length}`)}
</tbody></table>
<div class="chart" id="classes-chart" role="img" aria-label="average, peak and current utilization per class"></div>`;
  }
  const unclassified =
    list.unclassified.length > 0
      ? `<h2>Not classified</h2><ul id="unclassified">${list.unclassified.map((u) => `<li>${escapeHtml(u)}</li>`).join("")}</ul>`
      : "";
  const clustered = list.clusteredMs > 0 ? `Classified ${escapeHtml(formatTime(list.clusteredMs))} UTC.` : "";
  const data = {
    kind: "classes",
    classes: cls.map((c) => ({ id: c.id, average: c.averagePct, peak: c.peakPct, current: c.currentPct })),
  };
  return page(req, {
    title: "Utilization classes",
    current: "/classes",
    body: `<p class="muted">${clustered} Algorithm 1 (seeds/004) picks among these for each job.</p>\n${body}\n${unclassified}`,
    data,
    charts: true,
  });
}

// ------------------------------------------------------------------------------------------------ power

/** `/power`: the domain tree (`#domains`, `tr[data-domain]`) and the servers' draws and caps (`#power-nodes`). */
function powerPage(source: RmWebSource, req: WebRequest): { html: string } {
  const p = wire.power(source);
  const domains = renderTable(
    "domains",
    [
      {
        label: "Domain",
        cell: (d) => `${"&nbsp;".repeat(d.depth * 4)}${escapeHtml(d.path.slice(d.path.lastIndexOf("/") + 1))}`,
      },
      { label: "Kind", cell: (d) => escapeHtml(d.kind) },
      { label: "Budget", numeric: true, cell: (d) => (d.budgetWatts > 0 ? watts(d.budgetWatts) : "-") },
      { label: "Draw", numeric: true, cell: (d) => watts(d.drawWatts) },
      {
        label: "Of budget",
        cell: (d) =>
          d.budgetWatts > 0
            ? bar(
                [[(100 * d.drawWatts) / d.budgetWatts, d.alert ? ALERT_COLOUR : HARVEST_COLOUR]],
                `${pct((100 * d.drawWatts) / d.budgetWatts)} of the budget`,
              )
            : "",
      },
      {
        label: "Alert",
        className: "domain-alert",
        cell: (d) => (d.alert ? `${badge("CAPPING")} since ${escapeHtml(formatTime(d.alertSinceMs))}` : ""),
      },
      { label: "Node share", numeric: true, cell: (d) => (d.shareWatts > 0 ? watts(d.shareWatts) : "-") },
      { label: "Nodes", numeric: true, cell: (d) => String(d.nodes) },
      { label: "Stale", numeric: true, cell: (d) => String(d.staleNodes) },
      { label: "Capped nodes", numeric: true, cell: (d) => String(d.cappedNodes) },
      { label: "Throttled containers", numeric: true, cell: (d) => String(d.throttledContainers) },
    ],
    p.domains,
    "No power domain (option powerDomains, or 'harvest power set-budget').",
    (d) => ({ "data-domain": d.path }),
  );
  const nodes = renderTable(
    "power-nodes",
    [
      { label: "Server", cell: (n) => nodeLink(n.nodeId) },
      {
        label: "Domain",
        cell: (n) => `${escapeHtml(n.domain)} <span class="muted">(${escapeHtml(n.domainSource)})</span>`,
      },
      { label: "State", cell: (n) => badge(n.state) },
      {
        label: "Draw",
        numeric: true,
        cell: (n) => `${watts(n.drawWatts)} <span class="muted">${escapeHtml(n.drawSource)}</span>`,
      },
      {
        label: "Cap in force",
        numeric: true,
        cell: (n) =>
          n.nodeBudgetWatts > 0
            ? `${watts(n.nodeBudgetWatts)} <span class="muted">from ${escapeHtml(n.budgetDomain)}</span>`
            : "-",
      },
      { label: "Capping agent", cell: (n) => escapeHtml(n.cappingState || "-") },
      { label: "Throttled", numeric: true, cell: (n) => String(n.throttledContainers) },
      { label: "Power kills", numeric: true, cell: (n) => String(n.powerKills) },
      { label: "Meter", cell: (n) => escapeHtml(n.powerMeter || "-") },
      { label: "Profile", cell: (n) => escapeHtml(n.powerProfile) },
    ],
    p.nodes,
    "No node manager has registered yet.",
    (n) => ({ "data-node": n.nodeId }),
  );
  const body = `<p class="muted">A domain alerts at ${pct(100 * p.alertFraction)} of its budget (its nodes then get an even share as their cap) and lifts the caps below ${pct(100 * p.uncapFraction)}.</p>
<h2>Domains</h2>
${domains}
<h2>Servers</h2>
${nodes}`;
  return page(req, { title: "Power", current: "/power", body, refresh: true });
}

// ------------------------------------------------------------------------------------------------ routes

/** The pages' paths and who may read each (the REST API's roles for the same data). */
export const PAGE_ROUTES: readonly { path: string; access: readonly Access[] }[] = [
  { path: "/", access: ACCESS.cluster },
  { path: "/jobs", access: ACCESS.cluster },
  { path: "/jobs/:appId", access: ACCESS.cluster },
  { path: "/jobs/:appId/logs/:containerId/:stream", access: ACCESS.cluster },
  { path: "/tenants", access: ACCESS.tenants },
  { path: "/classes", access: ACCESS.classes },
  { path: "/power", access: ACCESS.admin },
  { path: "/node/:nodeId", access: ACCESS.cluster },
];

/** Adds the pages to the web server. */
export function registerRmPages(web: WebServer, source: RmWebSource): void {
  web
    .get("/", ACCESS.cluster, (req) => clusterPage(source, req))
    .get("/jobs", ACCESS.cluster, (req) => jobsPage(source, req))
    .get("/jobs/:appId", ACCESS.cluster, (req) => jobPage(source, req))
    // The job's submitter, admins and daemons only (log-copies.ts checks who).
    .get("/jobs/:appId/logs/:containerId/:stream", ACCESS.cluster, (req) => logCopyPage(source, req))
    .get("/tenants", ACCESS.tenants, (req) => tenantsPage(source, req))
    .get("/classes", ACCESS.classes, (req) => classesPage(source, req))
    .get("/power", ACCESS.admin, (req) => powerPage(source, req));
  registerNodePage(web, source);
}
