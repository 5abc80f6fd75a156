/**
 * The Grafana dashboard (deploy/grafana/harvest.json) and the Prometheus alert rules (deploy/prometheus/harvest-alerts.yml)
 * query only metrics that the daemons export: every metric name in every query is found in the /metrics of a running
 * cluster's resource manager, namenode, node manager and datanode, and every label a query matches on is one of its
 * series' labels.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../common/paths.js";
import { allDaemons } from "../../localcluster/cluster.js";
import { suiteCluster } from "./harness.js";
import { httpsGet, httpUrlOf } from "./metrics-scrape.js";

/** Metrics that are Prometheus's own, not a daemon's. */
const PROMETHEUS_OWN = new Set(["up"]);

/** Every query of the dashboard: each panel's targets, rows' panels included. */
function dashboardExprs(dashboard: unknown): { where: string; expr: string }[] {
  const out: { where: string; expr: string }[] = [];
  const visit = (panels: unknown): void => {
    if (!Array.isArray(panels)) return;
    for (const p of panels as { title?: string; targets?: { expr?: string }[]; panels?: unknown }[]) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ where: `panel "${p.title ?? "?"}"`, expr: t.expr });
      visit(p.panels);
    }
  };
  visit((dashboard as { panels?: unknown }).panels);
  return out;
}

/**
 * Every rule's `expr` in a Prometheus rules file, as one line or a block scalar (`expr: |` and the lines indented
 * below it), the shapes deploy/prometheus/harvest-alerts.yml uses; with the alert it belongs to.
 */
function alertExprs(yaml: string): { where: string; expr: string }[] {
  const lines = yaml.split("\n");
  const out: { where: string; expr: string }[] = [];
  let alert = "?";
  lines.forEach((line, i) => {
    const named = /^\s*- alert:\s*(\S+)/.exec(line);
    if (named) alert = named[1]!;
    const m = /^(\s*)expr:\s*(.*)$/.exec(line);
    if (!m) return;
    let expr = m[2]!;
    if (expr === "|" || expr === ">") {
      const indent = m[1]!.length;
      const body: string[] = [];
      for (let j = i + 1; j < lines.length; j++) {
        const next = lines[j]!;
        if (next.trim() !== "" && next.length - next.trimStart().length <= indent) break;
        body.push(next.trim());
      }
      expr = body.join(" ");
    }
    out.push({ where: `alert ${alert}`, expr });
  });
  return out;
}

/** The metric names an expression reads, and the labels it matches on for each (`name{label="v"}`). */
function metricsOf(expr: string): { name: string; labels: string[] }[] {
  // Label names after by/without/on/ignoring/group_left/group_right are no metrics; neither are strings.
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "");
  const out: { name: string; labels: string[] }[] = [];
  for (const m of bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?/g)) {
    const name = m[1]!;
    if (!/^(harvest|nodejs|process)_/.test(name) && !PROMETHEUS_OWN.has(name)) continue;
    const labels = [...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1]!);
    out.push({ name, labels });
  }
  return out;
}

/** Every metric name one scrape shows (histograms' and summaries' series included), with the labels seen on each. */
function exported(text: string, into: Map<string, Set<string>>): void {
  const add = (name: string, labels: Iterable<string> = []): void => {
    const set = into.get(name) ?? new Set<string>();
    for (const l of labels) set.add(l);
    into.set(name, set);
  };
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, name, kind] = type;
      add(name!);
      if (kind === "histogram") for (const s of ["_bucket", "_sum", "_count"]) add(name! + s);
      if (kind === "summary") for (const s of ["_sum", "_count"]) add(name! + s);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s/.exec(line);
    if (sample)
      add(
        sample[1]!,
        [...(sample[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)].map((l) => l[1]!),
      );
  }
}

const dashboard = JSON.parse(readFileSync(join(packageRoot(), "deploy", "grafana", "harvest.json"), "utf8")) as unknown;
const rules = readFileSync(join(packageRoot(), "deploy", "prometheus", "harvest-alerts.yml"), "utf8");

describe("the dashboards' queries", () => {
  it("are found in both files: panels with queries, and one expression per alert", () => {
    const panels = dashboardExprs(dashboard);
    expect(panels.length).toBeGreaterThan(20);
    const alerts = alertExprs(rules);
    expect(alerts.length).toBe([...rules.matchAll(/^\s*- alert:/gm)].length);
    expect(alerts.length).toBeGreaterThan(10);
    for (const { where, expr } of [...panels, ...alerts])
      expect(metricsOf(expr).length, `${where}: ${expr}`).toBeGreaterThan(0);
    // The parsers see what a query names, and not its label names or strings.
    expect(
      metricsOf('sum by (daemon, harvest_code) (rate(harvest_grpc_server_handled_total{code!="OK"}[5m]))'),
    ).toEqual([{ name: "harvest_grpc_server_handled_total", labels: ["code"] }]);
  });

  describe("on a running cluster", () => {
    const cluster = suiteCluster({ idleServers: 1 });

    it("name only metrics and labels that the daemons export", async () => {
      const c = cluster();
      const names = new Map<string, Set<string>>();
      const daemons = allDaemons(c.desc);
      expect(daemons.map((d) => d.kind).sort()).toEqual(["datanode", "namenode", "nodemanager", "resourcemanager"]);
      for (const d of daemons) {
        const res = await httpsGet(c, `${httpUrlOf(c, d)}/metrics`);
        expect(res.status, `${d.name ?? "?"}: ${res.body}`).toBe(200);
        exported(res.body, names);
      }
      const unknown: string[] = [];
      for (const { where, expr } of [...dashboardExprs(dashboard), ...alertExprs(rules)]) {
        for (const m of metricsOf(expr)) {
          if (PROMETHEUS_OWN.has(m.name)) continue;
          const labels = names.get(m.name);
          if (!labels) unknown.push(`${where}: ${m.name} is not exported`);
          // A metric without samples yet (a labelled counter nobody incremented) shows no labels to check.
          else if (labels.size > 0)
            for (const l of m.labels) if (!labels.has(l)) unknown.push(`${where}: ${m.name} has no label ${l}`);
        }
      }
      expect(unknown).toEqual([]);
    });
  });
});
