/**
 * The frame every Harvest web page shares: a header naming the daemon, a navigation bar, who is logged in, the
 * stylesheet and the page's scripts (files under /assets/: no inline script runs under the pages' CSP). Data a page's
 * script needs travels in a `<script type="application/json" id="page-data">` block, which the CSP allows because it
 * is not executed. Every value put into HTML goes through `escapeHtml`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Principal } from "./auth.js";
import { packageRoot } from "./paths.js";
import { escapeHtml } from "./web-server.js";

/** One entry of the navigation bar. */
export interface NavLink {
  href: string;
  label: string;
}

/** What a page is made of. */
export interface PageParts {
  /** Shown in the tab and as the heading. */
  title: string;
  /** e.g. "Resource manager". */
  daemon: string;
  nav: readonly NavLink[];
  /** The path of the current page (its nav entry is marked). */
  current: string;
  /** The page's body, already HTML (escape every value!). */
  body: string;
  /** Scripts under /assets/ the page loads, in order (e.g. ["echarts.min.js", "rm.js"]). */
  scripts?: readonly string[];
  /** JSON data for the page's scripts (read with `JSON.parse(document.getElementById("page-data").textContent)`). */
  data?: unknown;
  principal?: Principal | undefined;
  /** Reload the page every this many seconds (0: never). @default 0 */
  refreshSeconds?: number;
}

/** A complete HTML page. */
export function renderPage(p: PageParts): string {
  const nav = p.nav
    .map((l) => {
      const here = l.href === p.current || (l.href !== "/" && p.current.startsWith(l.href + "/"));
      return `<a href="${escapeHtml(l.href)}"${here ? ' class="current" aria-current="page"' : ""}>${escapeHtml(l.label)}</a>`;
    })
    .join("");
  const who = p.principal
    ? `<span class="who">${escapeHtml(p.principal.name)} (${escapeHtml(p.principal.role)})</span>`
    : `<span class="who insecure">insecure cluster: nobody is authenticated</span>`;
  // "</" inside JSON would end the script element early; \u003c keeps it JSON and inert.
  const data =
    p.data === undefined
      ? ""
      : `<script type="application/json" id="page-data">${JSON.stringify(p.data).replaceAll("<", "\\u003c")}</script>`;
  const scripts = (p.scripts ?? []).map((s) => `<script src="/assets/${escapeHtml(s)}" defer></script>`).join("");
  const refresh = p.refreshSeconds ? `<meta name="harvest-refresh" content="${p.refreshSeconds}">` : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(p.title)} · Harvest ${escapeHtml(p.daemon)}</title>${refresh}
<link rel="stylesheet" href="/assets/harvest.css">${scripts}</head>
<body><header><span class="brand">Harvest</span><span class="daemon">${escapeHtml(p.daemon)}</span><nav>${nav}</nav>${who}</header>
<main><h1>${escapeHtml(p.title)}</h1>
${p.body}
</main>${data}<script src="/assets/harvest.js" defer></script></body></html>`;
}

/** A table column: its heading and how a row shows in it (already HTML). */
export interface Column<Row> {
  label: string;
  cell: (row: Row) => string;
  /** Right-aligned (numbers). */
  numeric?: boolean;
  /** A class on every cell of the column (for scripts and tests, e.g. "node-state"). */
  className?: string;
}

/** How `renderTable` draws a table beyond its columns and rows. */
export interface TableOptions {
  /** Headings carry their column's `className` too (not only "num"). @default false */
  classOnHeadings?: boolean;
}

/**
 * An HTML table of `rows` (a paragraph with the same id saying `empty` when there are none). `id` names it for
 * scripts and tests; `rowAttrs` gives each row's attributes (e.g. `{ "data-node": id }`), escaped here.
 */
export function renderTable<Row>(
  id: string,
  columns: readonly Column<Row>[],
  rows: readonly Row[],
  empty: string,
  rowAttrs?: (row: Row) => Readonly<Record<string, string>>,
  options: TableOptions = {},
): string {
  if (rows.length === 0) return `<p class="empty" id="${escapeHtml(id)}">${escapeHtml(empty)}</p>`;
  const classOf = (c: Column<Row>): string => {
    const names = [c.numeric ? "num" : "", c.className ?? ""].filter(Boolean).join(" ");
    return names ? ` class="${escapeHtml(names)}"` : "";
  };
  const headClass = (c: Column<Row>): string =>
    options.classOnHeadings ? classOf(c) : c.numeric ? ' class="num"' : "";
  const head = columns.map((c) => `<th${headClass(c)}>${escapeHtml(c.label)}</th>`).join("");
  const attrs = (r: Row): string =>
    Object.entries(rowAttrs?.(r) ?? {})
      .map(([k, v]) => ` ${escapeHtml(k)}="${escapeHtml(v)}"`)
      .join("");
  const body = rows
    .map((r) => `<tr${attrs(r)}>${columns.map((c) => `<td${classOf(c)}>${c.cell(r)}</td>`).join("")}</tr>`)
    .join("\n");
  return `<table id="${escapeHtml(id)}"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

/** A row of tiles, each a big value (already HTML) over its label, in a block that `id` names. */
export function renderTiles(id: string, items: readonly (readonly [label: string, html: string])[]): string {
  const inner = items
    .map(([k, v]) => `<div class="tile"><div class="v">${v}</div><div class="k">${escapeHtml(k)}</div></div>`)
    .join("");
  return `<div class="totals" id="${escapeHtml(id)}">${inner}</div>`;
}

/** Bytes as B, KiB, MiB, GiB, TiB. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

/** A time in ms since the epoch as an ISO-like UTC string; "-" for 0. */
export function formatTime(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "-";
}

/** A duration in ms as "1h 2m", "3m 4s", "5.6s". */
export function formatDuration(ms: number): string {
  if (!(ms >= 0)) return "-";
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

let versionValue: string | undefined;

/** Harvest's version (package.json's). */
export function harvestVersion(): string {
  if (versionValue === undefined) {
    try {
      const pkg = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version?: unknown };
      versionValue = typeof pkg.version === "string" ? pkg.version : "unknown";
    } catch {
      versionValue = "unknown";
    }
  }
  return versionValue;
}

/** A daemon process at a glance, as every overview page and `/ws/v1/.../info` show it. */
export interface ProcessFacts {
  /** When the daemon began to serve (ms since the epoch). */
  startedMs: number;
  uptimeMs: number;
  version: string;
  /** V8's heap: used and reserved; rss: the process's resident memory. */
  heapUsedBytes: number;
  heapTotalBytes: number;
  rssBytes: number;
}

/** The facts of this process for a daemon that began to serve at `startedMs`. */
export function processFacts(startedMs: number, nowMs = Date.now()): ProcessFacts {
  const m = process.memoryUsage();
  return {
    startedMs,
    uptimeMs: startedMs > 0 ? Math.max(0, nowMs - startedMs) : 0,
    version: harvestVersion(),
    heapUsedBytes: m.heapUsed,
    heapTotalBytes: m.heapTotal,
    rssBytes: m.rss,
  };
}

/** `#process`: uptime (since when), version and heap, as a small facts table. */
export function renderProcessFacts(p: ProcessFacts): string {
  const rows: [string, string][] = [
    ["Uptime", `${formatDuration(p.uptimeMs)} (since ${formatTime(p.startedMs)} UTC)`],
    ["Version", p.version],
    [
      "Heap",
      `${formatBytes(p.heapUsedBytes)} used of ${formatBytes(p.heapTotalBytes)}; resident ${formatBytes(p.rssBytes)}`,
    ],
  ];
  const body = rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join("");
  return `<table id="process" class="facts"><tbody>${body}</tbody></table>`;
}
