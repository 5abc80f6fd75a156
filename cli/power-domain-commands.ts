/**
 * `harvest power domains`, `harvest power set-budget` and `harvest power set-domains`: the power domains of a running
 * cluster (budgets, draws, alerts and the caps in force), over the resource manager's PowerAdmin service.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { PowerAdminClient } from "../client/power-admin-client.js";
import type { PowerDomainInfo, PowerDomainsSpec, PowerDomainTree } from "../client/power-admin-client.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { action, common, print, rmTarget } from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";
import { table } from "./format.js";

/** Runs `fn` with a power admin client of the cluster in --dir. */
function withPower<T>(opts: GlobalOpts, fn: (c: PowerAdminClient) => Promise<T>): Promise<T> {
  const { rmAddress, security } = rmTarget(opts);
  const client = new PowerAdminClient(rmAddress, security);
  return fn(client).finally(() => client.close());
}

/** "850 W", "12.4 kW". */
function watts(w: number): string {
  return w >= 10_000 ? `${(w / 1000).toFixed(1)} kW` : `${Math.round(w)} W`;
}

function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

/** The budget argument of set-budget: watts >= 0 (an optional "W"), or "none" (0) to remove the budget. */
export function parseBudgetWatts(v: string): number {
  const t = v.trim().toLowerCase();
  if (t === "none") return 0;
  const n = Number(t.replace(/\s*w$/, ""));
  if (t === "" || !Number.isFinite(n) || n < 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `the budget must be watts >= 0 (e.g. 1200 or 1200W), or 0 / none to remove it (got ${JSON.stringify(v)})`,
      { details: { field: "budgetWatts" } },
    );
  return n;
}

function capsText(d: PowerDomainInfo): string {
  const parts = [
    d.budgetedNodes > 0 ? `${d.budgetedNodes} node(s) budgeted` : "",
    d.alert && d.shareWatts > 0 ? `${watts(d.shareWatts)} each from here` : "",
    d.cappedNodes > 0 ? `${d.cappedNodes} capped` : "",
    d.throttledContainers > 0 ? `${d.throttledContainers} container(s) throttled` : "",
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(", ") : "-";
}

/** What measured a node: the meter's kind ("rapl", "model", "trace"), or how its draw was counted without one. */
function meterKind(meter: string, drawSource: string): string {
  if (drawSource === "stale-peak") return "silent: profile peak";
  if (drawSource === "lost") return "lost";
  if (drawSource === "estimated" || meter === "") return "none: estimated";
  const kind = /^([a-z]+)\s*:/i.exec(meter)?.[1];
  return kind ?? meter;
}

/** The tree and its nodes as tables. */
export function domainsText(t: PowerDomainTree): string {
  if (t.domains.length === 0)
    return "no power domains and no nodes yet; give budgets with 'harvest power set-budget <domain> <watts>' once nodes have registered, or 'harvest power set-domains <file>'";
  const alertPct = Math.round(t.alertFraction * 100);
  const uncapPct = Math.round(t.uncapFraction * 100);
  // A server leaf is shown only when it matters on its own (a budget); the node table covers the rest.
  const shown = t.domains.filter((d) => d.kind !== "server" || d.budgetWatts > 0 || d.alert);
  const rows = shown.map((d) => [
    `${"  ".repeat(d.depth - 1)}${d.path.slice(d.parent ? d.parent.length + 1 : 0)}${d.kind === "server" ? " (server)" : ""}`,
    d.budgetWatts > 0 ? watts(d.budgetWatts) : "-",
    watts(d.drawWatts),
    d.budgetWatts > 0 ? `${((100 * d.drawWatts) / d.budgetWatts).toFixed(1)}%` : "-",
    d.alert ? `ALERT since ${clock(d.alertSinceMs)}` : d.budgetWatts > 0 ? "ok" : "-",
    d.nodes - d.staleNodes === d.nodes ? String(d.nodes) : `${d.nodes} (${d.staleNodes} silent)`,
    capsText(d),
  ]);
  const nodeRows = t.nodes.map((n) => [
    n.nodeId,
    n.domain,
    n.state === "lost" ? "-" : watts(n.drawWatts),
    meterKind(n.powerMeter, n.drawSource),
    n.powerProfile,
    n.nodeBudgetWatts > 0 ? `${watts(n.nodeBudgetWatts)} (${n.budgetDomain})` : "-",
    n.cappingState || (n.powerCapped ? "capped" : "-"),
    n.throttledContainers,
    n.powerKills,
  ]);
  return [
    `power domains: a domain alerts at ${alertPct}% of its budget and its nodes get an even share until it is under ${uncapPct}%`,
    table(["DOMAIN", "BUDGET", "DRAW", "OF BUDGET", "STATE", "NODES", "CAPS IN FORCE"], rows),
    "",
    table(
      ["NODE", "DOMAIN", "DRAW", "METER", "PROFILE", "NODE BUDGET", "CAPPING", "THROTTLED", "POWER KILLS"],
      nodeRows,
    ),
  ].join("\n");
}

/** Reads a set-domains file: `{ "domains": [{ "path", "budgetWatts" }], "nodes": { "<node>": "<domain>" } }`. */
function readDomainsFile(path: string): PowerDomainsSpec {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HarvestError("INVALID_ARGUMENT", `cannot read ${path} as JSON: ${errorMessage(err)}`, {
      details: { file: path },
    });
  }
  const o = parsed as { domains?: unknown; nodes?: unknown; powerDomains?: unknown; powerNodeDomains?: unknown };
  // Also the resource manager's own option names, so a --config "rm" section can be reused.
  const domains = o?.domains ?? o?.powerDomains;
  const nodes = o?.nodes ?? o?.powerNodeDomains ?? {};
  if (!Array.isArray(domains))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${path} must hold { "domains": [{ "path": "row1/rack1", "budgetWatts": 2000 }], "nodes": { "n1": "row1/rack1" } }`,
      { details: { file: path } },
    );
  return { domains: domains as PowerDomainsSpec["domains"], nodes: nodes as Record<string, string> };
}

/** Adds `domains`, `set-budget` and `set-domains` to the `power` command. */
export function registerPowerDomainCommands(power: Command): void {
  common(power.command("domains [domain]"))
    .description(
      "show the power domains (or the subtree under one): budget, draw, % of budget, alert state and the caps in force, then every node's draw, meter and capping state",
    )
    .action(
      action(async (domain: string | undefined, o: GlobalOpts) =>
        withPower(o, async (c) => {
          const t = await c.list(domain ?? "");
          print(o, t, () => domainsText(t));
        }),
      ),
    );

  common(power.command("set-budget <domain> <watts>"))
    .description("set a power domain's budget in watts (0 or none removes it); durable once answered")
    .action(
      action(async (domain: string, w: string, o: GlobalOpts) => {
        const budgetWatts = parseBudgetWatts(w);
        return withPower(o, async (c) => {
          const d = await c.setBudget(domain, budgetWatts);
          print(o, d, () =>
            d.budgetWatts > 0
              ? `budget of ${d.path} set to ${watts(d.budgetWatts)}: draw now ${watts(d.drawWatts)} (${((100 * d.drawWatts) / d.budgetWatts).toFixed(1)}%)${d.alert ? `, ALERT: its ${d.nodes} node(s) get ${watts(d.shareWatts)} each` : ""}`
              : `budget of ${d.path} removed (draw now ${watts(d.drawWatts)})`,
          );
        });
      }),
    );

  common(power.command("set-domains <file>"))
    .description(
      'replace the configured power domains from a JSON file: { "domains": [{ "path": "row1/rack1", "budgetWatts": 2000 }], "nodes": { "n1": "row1/rack1/chassis1" } }',
    )
    .action(
      action(async (file: string, o: GlobalOpts) => {
        const spec = readDomainsFile(file);
        return withPower(o, async (c) => {
          const t = await c.setDomains(spec);
          print(o, t, () => domainsText(t));
        });
      }),
    );
}
