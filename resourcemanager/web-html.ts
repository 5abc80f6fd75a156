/**
 * What the resource manager's pages share (web-pages.ts, web-node-page.ts): the frame and navigation, state badges,
 * SVG usage bars (presentation attributes: the pages' CSP refuses inline styles), tiles, facts tables and links.
 * Every value put into HTML goes through `escapeHtml`.
 */
import type { Access } from "../common/auth.js";
import { formatDuration, renderPage, renderTiles } from "../common/web-page.js";
import type { NavLink } from "../common/web-page.js";
import { escapeHtml } from "../common/web-server.js";
import type { WebRequest } from "../common/web-server.js";
import { ACCESS } from "./web.js";

/** The daemon the pages' header names. */
export const DAEMON = "resource manager";
/** Live pages reload this often. */
export const REFRESH_SECONDS = 5;
/** The scripts of a page with charts. */
export const CHART_SCRIPTS = ["echarts.min.js", "rm.js"] as const;

/** The navigation bar, each entry with the roles that may follow it. */
export const NAV: readonly (NavLink & { access: readonly Access[] })[] = [
  { href: "/", label: "Cluster", access: ACCESS.cluster },
  { href: "/jobs", label: "Jobs", access: ACCESS.cluster },
  { href: "/tenants", label: "Tenants", access: ACCESS.tenants },
  { href: "/classes", label: "Classes", access: ACCESS.classes },
  { href: "/power", label: "Power", access: ACCESS.admin },
  { href: "/ws/v1/cluster/info", label: "REST API", access: ACCESS.cluster },
  { href: "/metrics", label: "Metrics", access: ACCESS.cluster },
];

/** The navigation a caller may follow (all of it on an insecure cluster). */
export function navFor(req: WebRequest): NavLink[] {
  const role = req.principal?.role;
  return NAV.filter((l) => role === undefined || l.access.includes(role as Access)).map(({ href, label }) => ({
    href,
    label,
  }));
}

/** A resource manager page in the shared frame, with the navigation the caller may follow. */
export function page(
  req: WebRequest,
  parts: { title: string; current: string; body: string; data?: unknown; charts?: boolean; refresh?: boolean },
): { html: string } {
  return {
    html: renderPage({
      title: parts.title,
      daemon: DAEMON,
      nav: navFor(req),
      current: parts.current,
      body: parts.body,
      ...(parts.charts ? { scripts: CHART_SCRIPTS } : {}),
      ...(parts.data !== undefined ? { data: parts.data } : {}),
      principal: req.principal,
      refreshSeconds: parts.refresh ? REFRESH_SECONDS : 0,
    }),
  };
}

// ------------------------------------------------------------------------------------------------ HTML helpers

/** A state badge: the text is the state itself (tests read it), the class colours it. */
export function badge(state: string, id?: string): string {
  const cls = state.replace(/[^A-Za-z_-]/g, "");
  return `<span class="state ${cls}"${id ? ` id="${escapeHtml(id)}"` : ""}>${escapeHtml(state)}</span>`;
}

/** Millicores as cores with one decimal. */
export function cores(milli: number): string {
  return (milli / 1000).toFixed(1);
}

/** A percentage without decimals. */
export function pct(v: number): string {
  return `${v.toFixed(0)}%`;
}

/** Watts, one decimal under 100 W. */
export function watts(w: number): string {
  return `${w >= 100 ? w.toFixed(0) : w.toFixed(1)} W`;
}

/** A percentage held in [0, 100] (0 for NaN). */
export function clampPct(v: number): number {
  return Number.isFinite(v) ? Math.min(100, Math.max(0, v)) : 0;
}

/**
 * A horizontal bar as inline SVG (presentation attributes, which the CSP allows where a style attribute is refused):
 * `parts` are [percent, colour] from the left.
 */
export function bar(parts: readonly [number, string][], label: string): string {
  let x = 0;
  const rects = parts
    .map(([p, colour]) => {
      const w = clampPct(Math.min(p, 100 - x));
      const r = `<rect x="${x.toFixed(2)}" width="${w.toFixed(2)}" height="10" fill="${colour}"/>`;
      x += w;
      return r;
    })
    .join("");
  return (
    `<svg class="usage" width="120" height="10" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" ` +
    `aria-label="${escapeHtml(label)}"><title>${escapeHtml(label)}</title>` +
    `<rect width="100" height="10" fill="#eaecf0"/>${rects}</svg>`
  );
}

/** The primary tenant's colour (orange), Harvest's (green) and an alert's (red), on bars and charts. */
export const PRIMARY_COLOUR = "#f79009";
export const HARVEST_COLOUR = "#2f6f3e";
export const ALERT_COLOUR = "#b42318";

/** The page's totals (`#totals`): text values, escaped here. */
export function tiles(items: readonly [string, string][]): string {
  return renderTiles(
    "totals",
    items.map(([k, v]) => [k, escapeHtml(v)] as const),
  );
}

/** A two-column facts table (values already HTML). */
export function facts(items: readonly [string, string][], id: string): string {
  const rows = items.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${v}</td></tr>`).join("");
  return `<table id="${escapeHtml(id)}" class="facts"><tbody>${rows}</tbody></table>`;
}

/** A link to a job's page. */
export function appLink(appId: string): string {
  return `<a href="/jobs/${encodeURIComponent(appId)}">${escapeHtml(appId)}</a>`;
}

/** A link to a server's page (`a.node-link`, never wrapped). */
export function nodeLink(nodeId: string): string {
  return `<a class="node-link" href="/node/${encodeURIComponent(nodeId)}">${escapeHtml(nodeId)}</a>`;
}

/** Class ids, or "any" when none. */
export function classLinks(ids: readonly string[]): string {
  return ids.length === 0 ? '<span class="muted">any</span>' : ids.map((c) => escapeHtml(c)).join(", ");
}

/** "3m 4s ago", or "-" for 0. */
export function ago(nowMs: number, thenMs: number): string {
  return thenMs > 0 ? `${formatDuration(Math.max(0, nowMs - thenMs))} ago` : "-";
}

/** One decimal. */
export function round1(v: number): number {
  return Math.round(v * 10) / 10;
}
