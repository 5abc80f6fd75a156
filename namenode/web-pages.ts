/**
 * The namenode's web pages, rendered on the server from the same functions as the REST API and the gRPC services
 * (web.ts): an overview, a namespace explorer (held to the viewer's DFS permissions), the datanodes, block health (the
 * fsck report, run as the viewer: refused in `#blocks-error` unless they may list every directory under `?path=`)
 * and the replica placement grid. Stable ids for scripts and browser tests: `#entries`
 * (`tr[data-path]`), `#datanodes` (`tr[data-datanode]`, cell `.dn-state`), `#health-summary` (starting with HEALTHY
 * when no block is missing, under-replicated or corrupt, else UNHEALTHY), `#under-replicated` (`tr[data-path]`),
 * `#placement-grid`. Live pages reload every 5 s (common/web-assets/harvest.js).
 */
import { ANY_CERTIFICATE } from "../common/auth.js";
import { baseName, normalizeDfsPath, pathComponents } from "../common/dfs-path.js";
import { isHarvestError } from "../common/errors.js";
import { formatMode } from "../common/fs-permission.js";
import {
  formatBytes,
  formatDuration,
  formatTime,
  renderPage,
  renderProcessFacts,
  renderTable,
  renderTiles,
} from "../common/web-page.js";
import type { Column, NavLink, TableOptions } from "../common/web-page.js";
import { escapeHtml, httpStatusOf } from "../common/web-server.js";
import type { WebRequest, WebResponse, WebServer } from "../common/web-server.js";
import { ReplicationPriority, replicationPriority } from "./policy/replication-monitor.js";
import { fsckPriorities } from "./web-api.js";
import { TIER_NAMES } from "./web.js";
import type { NameNodeWebSource, PlacementCellReport, PlacementReport } from "./web.js";
import type { NameNodeSummary } from "./nn-metrics.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckBlockOutput } from "../proto/generated/harvest/v1/FsckBlock.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";

/** The pages' tables: headings carry their column's class too (the pages' scripts and tests find them by it). */
const NN_TABLE: TableOptions = { classOnHeadings: true };

const NAV: readonly NavLink[] = [
  { href: "/", label: "Overview" },
  { href: "/explorer", label: "Explorer" },
  { href: "/datanodes", label: "Datanodes" },
  { href: "/blocks", label: "Blocks" },
  { href: "/placement", label: "Placement" },
];

/** Live pages reload this often. */
const REFRESH_SECONDS = 5;
/** Rows shown per block table at most (a sick namespace may list millions); the counts above them are complete. */
const MAX_ROWS = 500;

/** Serves the pages on `server`; any certificate role (or its web token) may read them. */
export function registerNameNodePages(server: WebServer, source: NameNodeWebSource): void {
  server
    .get("/", ANY_CERTIFICATE, (req) => overview(req, source))
    .get("/explorer", ANY_CERTIFICATE, (req) => explorer(req, source))
    .get("/datanodes", ANY_CERTIFICATE, (req) => datanodes(req, source))
    .get("/blocks", ANY_CERTIFICATE, (req) => blocks(req, source))
    .get("/placement", ANY_CERTIFICATE, (req) => placement(req, source));
}

// ------------------------------------------------------------------------------------------------ pages

/** Bytes in a table cell, exact in `data-sort` (the tables sort by it) and in the title. */
function bytesCell(n: number): string {
  return `<span data-sort="${escapeHtml(n)}" title="${escapeHtml(n)} bytes">${escapeHtml(formatBytes(n))}</span>`;
}

/** Capacity as a bar: DFS used, non-DFS used, then remaining (SVG presentation attributes: the CSP refuses styles). */
function spaceBar(capacity: number, dfsUsed: number, nonDfsUsed: number, widthPx = 120): string {
  const pct = (v: number): number => (capacity > 0 ? Math.min(100, Math.max(0, (100 * v) / capacity)) : 0);
  const a = pct(dfsUsed);
  const b = Math.min(100 - a, pct(nonDfsUsed));
  const label = `DFS used ${a.toFixed(1)} %, non-DFS used ${b.toFixed(1)} %, remaining ${(100 - a - b).toFixed(1)} %`;
  return (
    `<svg class="usage" width="${widthPx}" height="10" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label="${escapeHtml(label)}">` +
    `<title>${escapeHtml(label)}</title><rect width="100" height="10" fill="#eaecf0"/>` +
    `<rect width="${a.toFixed(2)}" height="10" fill="#2f6f3e"/>` +
    `<rect x="${a.toFixed(2)}" width="${b.toFixed(2)}" height="10" fill="#98a2b3"/></svg>`
  );
}

/** `#capacity`: the four numbers that add up, for the live datanodes, each file system counted once. */
function capacityHtml(d: NameNodeSummary["datanodes"]): string {
  const pct = (v: number): string => `${(d.capacityBytes > 0 ? (100 * v) / d.capacityBytes : 0).toFixed(1)} %`;
  const row = (id: string, label: string, v: number, share: boolean): string =>
    `<tr id="${id}"><th>${escapeHtml(label)}</th><td class="num" data-bytes="${escapeHtml(v)}">${escapeHtml(formatBytes(v))}</td><td class="num">${share ? escapeHtml(pct(v)) : ""}</td></tr>`;
  const busy =
    d.primaryBusy > 0 ? `, ${num(d.primaryBusy)} of them refusing I/O while their primary tenant is busy` : "";
  return `<div id="capacity">${spaceBar(d.capacityBytes, d.usedBytes, d.nonDfsUsedBytes, 480)}
<table class="facts" id="capacity-table"><tbody>
${row("capacity-configured", "Configured capacity", d.capacityBytes, false)}
${row("capacity-dfs-used", "DFS used", d.usedBytes, true)}
${row("capacity-non-dfs-used", "Non-DFS used", d.nonDfsUsedBytes, true)}
${row("capacity-remaining", "Remaining", d.remainingBytes, true)}
</tbody></table>
<p class="muted">On ${num(d.live + d.stale)} live datanodes and ${num(d.fileSystems)} file system${d.fileSystems === 1 ? "" : "s"} (datanodes sharing one count it once)${busy}. Non-DFS used: what other files take of the capacity.</p></div>`;
}

function overview(req: WebRequest, source: NameNodeWebSource): WebResponse {
  const s = source.summary();
  const h = s.blockHealth;
  const d = s.datanodes;
  const healthy = h.missing + h.underReplicated + h.corrupt === 0;
  const body = `${renderTiles("summary", [
    ["safe mode", s.safeMode.on ? state("ON", "DRAINING") : state("OFF", "NORMAL")],
    ["health", healthy ? state("HEALTHY", "HEALTHY") : state("UNHEALTHY", "MISSING")],
    ["files", num(s.files)],
    ["directories", num(s.directories)],
    ["blocks", num(s.blocks)],
    ["live datanodes", num(d.live)],
    ["stale datanodes", num(d.stale)],
    ["dead datanodes", num(d.dead)],
    ["under-replicated", num(h.underReplicated)],
    ["missing", num(h.missing)],
    ["corrupt", num(h.corrupt)],
    ["placement", escapeHtml(s.placementPolicy)],
    ...(s.ha.epoch > 0 ? ([["HA role", `${escapeHtml(s.ha.role)} (epoch ${num(s.ha.epoch)})`]] as const) : []),
  ])}
<h2>Capacity</h2>
${capacityHtml(d)}
${s.safeMode.on ? `<p class="muted" id="safe-mode">Safe mode: ${escapeHtml(s.safeMode.reason)} (threshold ${escapeHtml(s.safeMode.threshold)}); mutations are refused until enough blocks are reported.</p>` : ""}
<h2>Namenode</h2>
<table id="namenode"><tbody>
<tr><th>gRPC address</th><td><code>${escapeHtml(s.address)}</code></td></tr>
<tr><th>Web</th><td><code>${escapeHtml(s.httpUrl)}</code></td></tr>
<tr><th>State</th><td>${escapeHtml(s.state)}</td></tr>
<tr><th>Replica placement</th><td>${escapeHtml(s.placementPolicy)}</td></tr>
<tr><th>Replication in flight</th><td>${num(h.pendingReplication)} blocks</td></tr>
</tbody></table>
${renderProcessFacts(s.process)}
<h2>REST API</h2>
<ul id="api">${[
    "/ws/v1/nn/info",
    "/ws/v1/nn/datanodes",
    "/ws/v1/nn/fsck?path=/",
    "/ws/v1/nn/placement",
    "/webhdfs/v1/?op=LISTSTATUS",
    "/metrics",
  ]
    .map((href) => `<li><a href="${escapeHtml(href)}"><code>${escapeHtml(href)}</code></a></li>`)
    .join("")}</ul>`;
  return page(req, "/", "Overview", body, { refresh: true });
}

function explorer(req: WebRequest, source: NameNodeWebSource): WebResponse {
  const path = normalizeDfsPath(req.query.get("path") || "/");
  const caller = source.callerOf(req.principal);
  const crumbs = breadcrumb(path);
  let body: string;
  try {
    const status = source.stat(path, caller);
    body = status.isDir ? directoryBody(source.list(path, caller)) : fileBody(status, path, source, req);
  } catch (err) {
    // What the viewer may not see or what is not there is said in the frame, with the breadcrumb to go back up.
    return refusal(req, "/explorer", "Explorer", crumbs, "explorer-error", err);
  }
  return page(req, "/explorer", "Explorer", crumbs + body, {});
}

const PAGE_REFUSALS: ReadonlySet<string> = new Set([
  "DFS_PERMISSION_DENIED",
  "NAMENODE_FILE_NOT_FOUND",
  "NAMENODE_NOT_A_DIRECTORY",
]);

/** A page saying in its frame (`#<id>`) what the viewer may not see or what is not there; other errors go up. */
function refusal(
  req: WebRequest,
  current: string,
  title: string,
  before: string,
  id: string,
  err: unknown,
): WebResponse {
  if (!isHarvestError(err) || !PAGE_REFUSALS.has(err.code)) throw err;
  const html = `${before}<p class="empty" id="${id}">${escapeHtml(err.code)}: ${escapeHtml(err.message)}</p>`;
  return page(req, current, title, html, { status: httpStatusOf(err) });
}

function directoryBody(entries: readonly FileStatusOutput[]): string {
  const columns: Column<FileStatusOutput>[] = [
    {
      label: "Name",
      cell: (e) => `<a href="${explorerHref(e.path)}">${escapeHtml(baseName(e.path))}${e.isDir ? "/" : ""}</a>`,
    },
    { label: "Mode", cell: (e) => `<code>${escapeHtml(formatMode(e.mode, e.isDir))}</code>` },
    { label: "Owner", cell: (e) => escapeHtml(e.owner) },
    { label: "Group", cell: (e) => escapeHtml(e.group) },
    { label: "Size", numeric: true, cell: (e) => (e.isDir ? "" : escapeHtml(formatBytes(e.length))) },
    { label: "Replication", numeric: true, cell: (e) => (e.isDir ? "" : num(e.replication)) },
    { label: "Block size", numeric: true, cell: (e) => (e.isDir ? "" : escapeHtml(formatBytes(e.blockSize))) },
    { label: "Blocks", numeric: true, cell: (e) => (e.isDir ? "" : num(e.blocks)) },
    { label: "Modified (UTC)", cell: (e) => escapeHtml(formatTime(e.mtimeMs)) },
    { label: "", cell: fileFlags },
  ];
  return renderTable(
    "entries",
    columns,
    entries,
    "This directory is empty.",
    (e) => ({ "data-path": e.path }),
    NN_TABLE,
  );
}

function fileBody(status: FileStatusOutput, path: string, source: NameNodeWebSource, req: WebRequest): string {
  const head = renderTiles("file", [
    ["size", escapeHtml(formatBytes(status.length))],
    ["replication", num(status.replication)],
    ["block size", escapeHtml(formatBytes(status.blockSize))],
    ["blocks", num(status.blocks)],
    ["owner", escapeHtml(status.owner)],
    ["group", escapeHtml(status.group)],
    ["mode", `<code>${escapeHtml(formatMode(status.mode, false))}</code>`],
    ["modified (UTC)", escapeHtml(formatTime(status.mtimeMs))],
  ]);
  const flags = fileFlags(status);
  let blocksHtml: string;
  try {
    const located = source.blockLocations(path, 0, 0, source.callerOf(req.principal));
    blocksHtml = renderTable(
      "blocks",
      [
        { label: "Block", cell: (b) => escapeHtml(b.block.blockId) },
        { label: "Gen stamp", numeric: true, cell: (b) => escapeHtml(b.block.genStamp) },
        { label: "Offset", numeric: true, cell: (b) => escapeHtml(formatBytes(b.offset)) },
        { label: "Length", numeric: true, cell: (b) => escapeHtml(formatBytes(b.block.numBytes)) },
        {
          label: "Replicas (read order)",
          cell: (b) =>
            b.locations.length > 0
              ? b.locations.map((l) => escapeHtml(l.datanodeId)).join(", ")
              : state("none", "MISSING"),
        },
      ],
      located.blocks,
      "The file has no blocks.",
      (b) => ({ "data-block": String(b.block.blockId) }),
      NN_TABLE,
    );
  } catch (err) {
    if (!isHarvestError(err) || err.code !== "DFS_PERMISSION_DENIED") throw err;
    blocksHtml = `<p class="empty" id="blocks">${escapeHtml(err.message)}</p>`;
  }
  return `${head}${flags ? `<p>${flags}</p>` : ""}<h2>Blocks</h2>${blocksHtml}`;
}

function datanodes(req: WebRequest, source: NameNodeWebSource): WebResponse {
  const s = source.summary().datanodes;
  const now = Date.now();
  const reports = source.datanodes();
  // Live datanodes per file system: a shared one is counted once in the totals above the table.
  const sharing = new Map<string, number>();
  for (const d of reports)
    if (d.state === "LIVE" && d.fsId)
      sharing.set(`${d.machineId}\u0000${d.fsId}`, (sharing.get(`${d.machineId}\u0000${d.fsId}`) ?? 0) + 1);
  const columns: Column<DatanodeReportOutput>[] = [
    { label: "Datanode", cell: (d) => escapeHtml(d.datanodeId) },
    { label: "Address", cell: (d) => `<code>${escapeHtml(d.address)}</code>` },
    { label: "Rack", cell: (d) => escapeHtml(d.rack) },
    {
      label: "State",
      className: "dn-state",
      cell: (d) => {
        const liveness = d.state === "LIVE" && d.stale ? "STALE" : d.state;
        return state(liveness, liveness.toLowerCase());
      },
    },
    {
      label: "Admin state",
      className: "dn-admin",
      cell: (d) => state(d.adminState, d.adminState === "NORMAL" ? "NORMAL" : "DECOMMISSIONING"),
    },
    { label: "Primary", cell: (d) => (d.primaryBusy ? state("busy", "busy") : '<span class="muted">idle</span>') },
    { label: "Capacity", numeric: true, className: "dn-capacity", cell: (d) => bytesCell(d.capacityBytes) },
    { label: "DFS used", numeric: true, className: "dn-dfs-used", cell: (d) => bytesCell(d.usedBytes) },
    { label: "Non-DFS used", numeric: true, className: "dn-non-dfs-used", cell: (d) => bytesCell(d.nonDfsUsedBytes) },
    {
      label: "Remaining",
      numeric: true,
      className: "dn-remaining",
      cell: (d) => `${bytesCell(d.remainingBytes)} ${spaceBar(d.capacityBytes, d.usedBytes, d.nonDfsUsedBytes)}`,
    },
    {
      label: "File system",
      className: "dn-fs",
      cell: (d) => {
        const shared = sharing.get(`${d.machineId}\u0000${d.fsId}`) ?? 1;
        const fs = d.fsId ? `<span title="${escapeHtml(`machine ${d.machineId}`)}">${escapeHtml(d.fsId)}</span>` : "-";
        return d.fsId && shared > 1 ? `${fs} <span class="muted">(shared by ${num(shared)})</span>` : fs;
      },
    },
    { label: "Blocks", numeric: true, cell: (d) => num(d.blocks) },
    {
      label: "Last heartbeat",
      numeric: true,
      cell: (d) => `${escapeHtml(formatDuration(now - d.lastHeartbeatMs))} ago`,
    },
    { label: "Reimages", numeric: true, cell: (d) => num(d.reimages) },
  ];
  const body = `${renderTiles("datanode-totals", [
    ["live", num(s.live)],
    ["stale", num(s.stale)],
    ["dead", num(s.dead)],
    ["decommissioning", num(s.decommissioning)],
    ["decommissioned", num(s.decommissioned)],
    ["primary busy", num(s.primaryBusy)],
    ["capacity", escapeHtml(formatBytes(s.capacityBytes))],
    ["DFS used", escapeHtml(formatBytes(s.usedBytes))],
    ["non-DFS used", escapeHtml(formatBytes(s.nonDfsUsedBytes))],
    ["remaining", escapeHtml(formatBytes(s.remainingBytes))],
    ["file systems", num(s.fileSystems)],
  ])}
<p class="muted">Capacity = DFS used + non-DFS used + remaining, per datanode and in total; datanodes sharing a file system count it once in the totals.</p>
${renderTable("datanodes", columns, reports, "No datanode has registered yet.", (d) => ({ "data-datanode": d.datanodeId }), NN_TABLE)}`;
  return page(req, "/datanodes", "Datanodes", body, { refresh: true });
}

function blocks(req: WebRequest, source: NameNodeWebSource): WebResponse {
  // fsck of `?path=` (the whole namespace by default) as the viewer: READ_EXECUTE on every directory it walks.
  const path = normalizeDfsPath(req.query.get("path") || "/");
  const scope =
    path === "/" ? "" : `<p class="muted" id="blocks-path">Files under <code>${escapeHtml(path)}</code>.</p>\n`;
  let r: FsckReportOutput;
  try {
    r = source.fsck(path, source.callerOf(req.principal));
  } catch (err) {
    return refusal(req, "/blocks", "Blocks", scope, "blocks-error", err);
  }
  const byPriority = fsckPriorities(r);
  const pending = source.summary().blockHealth.pendingReplication;
  // Stricter than fsck's `healthy` (no block missing): the page is HEALTHY only when every block has all its replicas.
  const healthy = r.missing.length + r.underReplicated.length + r.corrupt.length === 0;
  const verdict = healthy ? state("HEALTHY", "HEALTHY") : state("UNHEALTHY", r.healthy ? "DRAINING" : "MISSING");
  const summary = `<p id="health-summary">${verdict} ${num(r.files)} files, ${num(r.directories)} directories, ${num(r.blocks)} blocks
(${escapeHtml(formatBytes(r.totalBytes))}): ${num(r.missing.length)} missing, ${num(r.underReplicated.length)} under-replicated,
${num(r.corrupt.length)} with a corrupt replica, ${num(r.suspect.length)} with a replica on a stale datanode.
${num(r.liveDatanodes)} live and ${num(r.deadDatanodes)} dead datanodes${r.safeMode ? "; in safe mode" : ""}.
fsck: ${r.healthy ? "healthy (no block missing)" : "blocks missing"}.</p>`;
  const fileCell = (b: FsckBlockOutput): string => `<a href="${explorerHref(b.path)}">${escapeHtml(b.path)}</a>`;
  const blockCell = (b: FsckBlockOutput): string => escapeHtml(b.block?.blockId ?? "");
  const holders = (ids: readonly string[]): string => (ids.length > 0 ? escapeHtml(ids.join(", ")) : "");
  const replicasCol: Column<FsckBlockOutput> = {
    label: "Live / expected",
    numeric: true,
    cell: (b) => `${num(b.liveReplicas)} / ${num(b.expectedReplicas)}`,
  };
  const blockTable = (
    id: string,
    rows: readonly FsckBlockOutput[],
    empty: string,
    extra: Column<FsckBlockOutput>[],
  ): string =>
    renderTable(
      id,
      [{ label: "File", cell: fileCell }, { label: "Block", cell: blockCell }, ...extra],
      rows.slice(0, MAX_ROWS),
      empty,
      (b) => ({ "data-path": b.path, "data-block": String(b.block?.blockId ?? "") }),
      NN_TABLE,
    ) + (rows.length > MAX_ROWS ? `<p class="muted">The first ${MAX_ROWS} of ${num(rows.length)}.</p>` : "");
  const body = `${scope}${summary}
${renderTiles("block-totals", [
  ["under-replicated: highest", num(byPriority.highest)],
  ["very under-replicated", num(byPriority.veryUnderReplicated)],
  ["under-replicated", num(byPriority.underReplicated)],
  ["missing", num(r.missing.length)],
  ["corrupt", num(r.corrupt.length)],
  ["suspect replicas", num(r.suspectReplicas)],
  ["copies in flight", num(pending)],
])}
<h2>Under-replicated blocks</h2>
${blockTable("under-replicated", r.underReplicated, "No block is under-replicated.", [
  { label: "Priority", cell: (b) => escapeHtml(priorityName(b)) },
  replicasCol,
  { label: "Good replicas on", cell: (b) => holders(b.datanodes) },
  { label: "Leaving datanodes", cell: (b) => holders(b.outOfServiceDatanodes) },
])}
<h2>Missing blocks</h2>
${blockTable("missing", r.missing, "No block is missing.", [
  replicasCol,
  { label: "Replicas on leaving datanodes", cell: (b) => holders(b.outOfServiceDatanodes) },
])}
<h2>Blocks with corrupt replicas</h2>
${blockTable("corrupt", r.corrupt, "No replica is known to be corrupt.", [
  replicasCol,
  { label: "Corrupt replicas on", cell: (b) => holders(b.datanodes) },
])}
<h2>Replicas on stale datanodes</h2>
${blockTable("suspect", r.suspect, "No replica sits on a stale datanode.", [
  replicasCol,
  { label: "Stale holders", cell: (b) => holders(b.datanodes) },
])}
<h2>Files closed by lease recovery</h2>
${renderTable(
  "recovered",
  [
    { label: "File", cell: (f) => `<a href="${explorerHref(f.path)}">${escapeHtml(f.path)}</a>` },
    { label: "Recovered (UTC)", cell: (f) => escapeHtml(formatTime(f.recoveredMs)) },
    { label: "Length", numeric: true, cell: (f) => escapeHtml(formatBytes(f.length)) },
    { label: "Why", cell: (f) => escapeHtml(f.reason) },
  ],
  r.recovered.slice(0, MAX_ROWS),
  "No file was closed by lease recovery.",
  (f) => ({ "data-path": f.path }),
  NN_TABLE,
)}`;
  return page(req, "/blocks", "Block health", body, { refresh: true });
}

function placement(req: WebRequest, source: NameNodeWebSource): WebResponse {
  const p = source.placement();
  const note =
    p.policy === "diversity"
      ? p.tenants === 0
        ? '<p class="muted" id="placement-note">No tenants yet (the resource manager has not been read): placement falls back to the stock policy.</p>'
        : ""
      : `<p class="muted" id="placement-note">This namenode places replicas with the ${escapeHtml(p.policy)} policy, which reads no tenant history: the grid is empty and every replica counts as outside it. Start the namenode with <code>placementPolicy: "diversity"</code> (seeds/004, Algorithm 2) to fill it.</p>`;
  const body = `${renderTiles("placement-totals", [
    ["policy", escapeHtml(p.policy)],
    ["tenants", num(p.tenants)],
    ["replicas", num(p.replicas)],
    ["outside the grid", num(p.replicasOutsideGrid)],
    ["blocks", num(p.blocks)],
    ["sharing a row or column", num(p.blocksSharingRowOrColumn)],
  ])}
${note}
<p class="muted">Good replicas of committed blocks on live datanodes, by the cell of their server's primary tenant: rows are
reimage-frequency tiers, columns peak-CPU tiers (equal-space tertiles). Algorithm 2 puts a block's replicas in distinct rows
and columns, so that no reimaging wave or load spike takes every replica at once.</p>
${placementGrid(p)}
<div class="chart" id="placement-chart"></div>`;
  return page(req, "/placement", "Replica placement", body, {
    refresh: true,
    scripts: ["echarts.min.js", "nn.js"],
    data: { placement: p },
  });
}

// ------------------------------------------------------------------------------------------------ pieces

/** The 3x3 grid as a table: a row per reimage tier, a column per peak-CPU tier, the replicas in each cell. */
function placementGrid(p: PlacementReport): string {
  const head = TIER_NAMES.map((t) => `<th>${escapeHtml(t)} peak CPU</th>`).join("");
  const rows = p.rows
    .map((row) => {
      const label = `${TIER_NAMES[row.row] ?? row.row} reimage rate`;
      const range = row.reimagesPerServerMonth
        ? `<br><span class="muted">${escapeHtml(fixed(row.reimagesPerServerMonth.min))}-${escapeHtml(
            fixed(row.reimagesPerServerMonth.max),
          )} per server-month</span>`
        : "";
      return `<tr data-row="${row.row}"><th>${escapeHtml(label)}${range}</th>${row.cells.map(gridCell).join("")}</tr>`;
    })
    .join("\n");
  return `<table id="placement-grid" class="grid3"><thead><tr><th>reimage rate \\ peak CPU</th>${head}</tr></thead><tbody>
${rows}
</tbody></table>`;
}

function gridCell(c: PlacementCellReport): string {
  const cpu = c.peakCpuPct ? `, peak CPU ${fixed(c.peakCpuPct.min)}-${fixed(c.peakCpuPct.max)} %` : "";
  const detail = `${c.tenants.length} tenants, ${c.servers} servers, ${formatBytes(c.freeBytes)} free${cpu}`;
  return `<td data-row="${c.row}" data-col="${c.col}" class="cell"><span class="replicas">${num(c.replicas)}</span> replicas<br><span class="muted">${escapeHtml(detail)}</span></td>`;
}

/** The path as links, each leading to the explorer at that directory. */
function breadcrumb(path: string): string {
  const parts = pathComponents(path);
  const links = [`<a href="${explorerHref("/")}">/</a>`];
  let at = "";
  for (const part of parts) {
    at += `/${part}`;
    links.push(`<a href="${explorerHref(at)}">${escapeHtml(part)}</a>`);
  }
  return `<p id="breadcrumb" data-path="${escapeHtml(path)}">${links.join(" / ")}</p>`;
}

function explorerHref(path: string): string {
  return escapeHtml(`/explorer?path=${encodeURIComponent(path)}`);
}

function fileFlags(s: FileStatusOutput): string {
  const flags: string[] = [];
  if (!s.isDir && !s.complete) flags.push(state("open", "WAITING"));
  if (s.recoveredMs > 0)
    flags.push(
      `<span class="state DRAINING" title="${escapeHtml(s.recoveredReason)}">recovered ${escapeHtml(formatTime(s.recoveredMs))}</span>`,
    );
  return flags.join(" ");
}

/** The replication monitor's priority level of an under-replicated block, by name. */
function priorityName(b: FsckBlockOutput): string {
  const level = replicationPriority(
    b.liveReplicas,
    b.expectedReplicas,
    b.decommissioningReplicas + b.decommissionedReplicas,
  );
  if (level === ReplicationPriority.Highest)
    return b.liveReplicas === 0 ? "highest (held only by leaving datanodes)" : "highest";
  return level === ReplicationPriority.VeryUnderReplicated ? "very under-replicated" : "under-replicated";
}

function state(text: string, cls: string): string {
  return `<span class="state ${escapeHtml(cls)}">${escapeHtml(text)}</span>`;
}

function num(n: number): string {
  return escapeHtml(n.toLocaleString("en-US"));
}

function fixed(n: number): string {
  return Number.isFinite(n) ? String(Math.round(n * 10) / 10) : "?";
}

function page(
  req: WebRequest,
  current: string,
  title: string,
  body: string,
  opts: { refresh?: boolean; status?: number; scripts?: readonly string[]; data?: unknown },
): WebResponse {
  return {
    ...(opts.status !== undefined ? { status: opts.status } : {}),
    html: renderPage({
      title,
      daemon: "Namenode",
      nav: NAV,
      current,
      body,
      principal: req.principal,
      refreshSeconds: opts.refresh ? REFRESH_SECONDS : 0,
      ...(opts.scripts ? { scripts: opts.scripts } : {}),
      ...(opts.data !== undefined ? { data: opts.data } : {}),
    }),
  };
}
