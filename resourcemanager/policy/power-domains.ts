/**
 * Power domains (seeds/000, sections III-A and III-D; DESIGN.md "Power"): a tree of domains (row > rack > chassis >
 * server by convention, any depth up to 8) each with an optional budget in watts. Node managers report their draw on
 * every heartbeat; this module sums the draws per domain and, when a domain nears its budget, gives each of its nodes
 * an even share of the budget as a node budget (the seed's chassis manager alerting the per-server controllers "with
 * the server's (even) share of the chassis budget"). Pure: no I/O, no timers; the clock is passed in.
 *
 * Paths are '/'-separated names ("row1/rack2/chassis3"): 1 to 8 segments of letters, digits, '_', '.', ':' and '-'
 * (at most 64 characters, never only dots, so "." and ".." are rejected); a leading or trailing '/' is dropped.
 *
 * Where a node sits (its own domain, usually its chassis), first match wins:
 * 1. "assigned": the resource manager's assignment (its `powerNodeDomains` option, or PowerAdmin.SetDomains);
 * 2. "registered": the domain the node names in its registration (RegisterNode.chassis);
 * 3. "rack": its rack path as Hadoop topology writes it, leading '/' dropped: "/default-rack" is the top-level domain
 *    "default-rack" and "/row1/rack2" is "row1/rack2" (a rack name says nothing of rows, so no row is invented;
 *    characters a path does not allow become '_').
 * A node counts in its own domain and in every ancestor of it. A server is itself a leaf domain "<domain>/<nodeId>",
 * which can carry a budget of its own (a per-server cap).
 *
 * Alerts have hysteresis: a domain with a budget alerts when its draw reaches budget x alertFraction (default 0.97) and
 * stays alerting until its draw falls below budget x uncapFraction (default 0.9). While a domain alerts, each of its
 * nodes gets budget / (its nodes) as its node budget; a node under several alerting domains gets the smallest share
 * (and the domain that gave it). The band between the two fractions is what keeps a capped domain from flapping: the
 * node's capping agent settles its draw just under its share (at its target fraction, 0.95 by default), which keeps the
 * domain above the uncap threshold for as long as the demand that tripped the alert lasts.
 *
 * What a node's draw counts as:
 * - "measured": the node's last reading (NodeHeartbeat.power_watts > 0);
 * - "estimated": no reading (0): its power profile at its utilization (primary + allocated secondary over capacity),
 *   so a node without a meter or a capping agent still counts, at a modelled value, rather than as 0 W;
 * - "stale-peak": silent for longer than `staleAfterMs` (3 heartbeat intervals by default in the resource manager): the
 *   larger of its last draw and its profile's peak (100 % load). A budget protects a breaker, and a silent server is
 *   still powered (its primary tenant runs on) and may be at its peak, so the conservative value is counted, and
 *   counting it may trip an alert that caps the nodes that can still be told;
 * - "lost": once the resource manager declares the node lost (no heartbeat for its node expiry), it leaves the sums
 *   and the share counts, as it leaves the scheduler: no budget can reach it, and a server that is gone draws nothing.
 */
import { HarvestError } from "../../common/errors.js";
import { optionResolution } from "../../common/options.js";
import type { Clock } from "../../common/clock.js";
import { profileWatts } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";

/** Most segments in a domain path. */
export const MAX_DOMAIN_DEPTH = 8;
const SEGMENT_RE = /^[A-Za-z0-9_.:-]{1,64}$/;
const NODE_ID_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
const MAX_DOMAINS = 100_000;

/** A configured domain and its budget (0: none). */
export interface PowerDomainSpec {
  path: string;
  budgetWatts: number;
}

/** The configured tree: domains with budgets, and node -> domain assignments. */
export interface PowerDomainConfig {
  domains: PowerDomainSpec[];
  /** nodeId -> the path of the node's own domain. */
  nodes: Record<string, string>;
}

/** Settings of the power domains. */
export interface PowerDomainOptions {
  /** A domain alerts when its draw reaches budget x alertFraction. @default 0.97 */
  alertFraction: number;
  /** An alerting domain is lifted when its draw falls below budget x uncapFraction. @default 0.9 */
  uncapFraction: number;
  /** A node silent for longer than this is counted at its profile's peak. @default 3000 */
  staleAfterMs: number;
}

/** The defaults of every `PowerDomainOptions` field. */
export const DEFAULT_POWER_DOMAIN_OPTIONS: Readonly<PowerDomainOptions> = Object.freeze({
  alertFraction: 0.97,
  uncapFraction: 0.9,
  staleAfterMs: 3_000,
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolvePowerDomainOptions(partial: Partial<PowerDomainOptions> = {}): PowerDomainOptions {
  const { o, check } = optionResolution("power domain", DEFAULT_POWER_DOMAIN_OPTIONS, partial);
  check("alertFraction", (v) => v > 0 && v <= 1, "in (0, 1]");
  check("uncapFraction", (v) => v > 0 && v < o.alertFraction, "in (0, alertFraction)");
  check("staleAfterMs", (v) => v > 0, "a positive number of milliseconds");
  return o;
}

/**
 * The canonical form of a domain path (leading and trailing '/' dropped), or POWER_DOMAIN_BAD_PATH saying what is
 * wrong; `field` names the request field in the error's details.
 */
export function normalizeDomainPath(path: string, field = "domain"): string {
  const fail = (why: string): never => {
    throw new HarvestError("POWER_DOMAIN_BAD_PATH", `${field} ${JSON.stringify(path)} ${why}`, {
      details: { field },
    });
  };
  if (typeof path !== "string") return fail("is not a string");
  const trimmed = path.replace(/^\/+/, "").replace(/\/+$/, "");
  if (trimmed === "") return fail("is empty: name a domain such as row1/rack2/chassis3");
  const segments = trimmed.split("/");
  if (segments.length > MAX_DOMAIN_DEPTH) fail(`has ${segments.length} levels; at most ${MAX_DOMAIN_DEPTH}`);
  for (const s of segments) {
    if (s === "") fail("has an empty level ('//')");
    if (/^\.+$/.test(s)) fail(`has the level ${JSON.stringify(s)}; '.' and '..' are not domain names`);
    if (!SEGMENT_RE.test(s))
      fail(`has the level ${JSON.stringify(s)}: use 1-64 letters, digits, '_', '.', ':' or '-' per level`);
  }
  return segments.join("/");
}

/** The domain named by a rack path ("/row1/rack2" -> "row1/rack2"; "/default-rack" -> "default-rack"). */
export function rackDomain(rack: string): string {
  const segments = rack
    .split("/")
    .map((s) => s.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 64))
    .filter((s) => s !== "" && !/^\.+$/.test(s))
    .slice(0, MAX_DOMAIN_DEPTH);
  return segments.length > 0 ? segments.join("/") : "default-rack";
}

/**
 * Validates a whole configuration and returns its canonical form: valid paths (POWER_DOMAIN_BAD_PATH), budgets finite
 * and >= 0 and no path listed twice (INVALID_ARGUMENT), node ids in the node-id alphabet. `details.field` names the
 * offending entry (`domains[2].path`, `nodes.n7`).
 */
export function validatePowerDomainConfig(config: PowerDomainConfig): PowerDomainConfig {
  const invalid = (field: string, why: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `${field} ${why}`, { details: { field } });
  };
  if (typeof config !== "object" || config === null) invalid("config", "must be { domains, nodes }");
  if (!Array.isArray(config.domains)) invalid("domains", "must be a list of { path, budgetWatts }");
  if (typeof config.nodes !== "object" || config.nodes === null || Array.isArray(config.nodes))
    invalid("nodes", "must map node ids to domain paths");
  if (config.domains.length > MAX_DOMAINS) invalid("domains", `lists more than ${MAX_DOMAINS} domains`);
  const seen = new Set<string>();
  const domains: PowerDomainSpec[] = config.domains.map((d: PowerDomainSpec | null | undefined, i) => {
    if (typeof d !== "object" || d === null) return invalid(`domains[${i}]`, "must be { path, budgetWatts }");
    const path = normalizeDomainPath(d.path, `domains[${i}].path`);
    checkBudget(d.budgetWatts, `domains[${i}].budgetWatts`);
    if (seen.has(path)) invalid(`domains[${i}].path`, `lists ${path} a second time`);
    seen.add(path);
    return { path, budgetWatts: d.budgetWatts };
  });
  // Built with fromEntries (own data properties): a node id such as "__proto__" or "constructor" is just a key.
  const nodes: Record<string, string> = Object.fromEntries(
    Object.entries(config.nodes).map(([nodeId, path]) => {
      if (!NODE_ID_RE.test(nodeId)) invalid(`nodes.${nodeId}`, "is not a node id");
      return [nodeId, normalizeDomainPath(path, `nodes.${nodeId}`)];
    }),
  );
  return { domains, nodes };
}

function checkBudget(watts: unknown, field: string): void {
  if (typeof watts !== "number" || !Number.isFinite(watts) || watts < 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${field} must be a number of watts >= 0 (0 removes the budget), got ${String(watts)}`,
      { details: { field } },
    );
}

/** What a node reports of its power on a heartbeat. */
export interface PowerReport {
  /** Draw now in watts; 0 = no reading. */
  watts: number;
  /** What measured it ("model: ...", "rapl: ...", "trace: ..."). */
  meter: string;
  capped: boolean;
  /** "uncapped" | "capped" | "stale", or "" without a capping agent. */
  cappingState: string;
  throttledContainers: number;
  /** Cumulative kills by the capping agent. */
  powerKills: number;
  /** Primary + allocated secondary over capacity (0..1), for the estimate when there is no reading. */
  utilization: number;
}

/** How a node's own domain was chosen. */
export type DomainSource = "assigned" | "registered" | "rack";

/** Where a node's counted draw comes from. */
export type DrawSource = "measured" | "estimated" | "stale-peak" | "lost";

/** One domain as listings show it. */
export interface PowerDomainView {
  path: string;
  kind: "domain" | "server";
  parent: string;
  depth: number;
  budgetWatts: number;
  drawWatts: number;
  alert: boolean;
  alertSinceMs: number;
  /** budget / nodes while alerting, else 0. */
  shareWatts: number;
  nodes: number;
  staleNodes: number;
  budgetedNodes: number;
  cappedNodes: number;
  throttledContainers: number;
  /** Nodes whose own domain this is (for a server leaf: the node). */
  nodeIds: string[];
  configured: boolean;
}

/** One node as listings show it. */
export interface PowerNodeView {
  nodeId: string;
  domain: string;
  domainSource: DomainSource;
  state: "running" | "stale" | "lost";
  drawWatts: number;
  drawSource: DrawSource;
  reportedWatts: number;
  powerMeter: string;
  powerProfile: string;
  powerCapped: boolean;
  cappingState: string;
  throttledContainers: number;
  powerKills: number;
  nodeBudgetWatts: number;
  budgetDomain: string;
  lastReportMs: number;
}

/** The whole tree (or a subtree) as listings show it. */
export interface PowerDomainsSnapshot {
  domains: PowerDomainView[];
  nodes: PowerNodeView[];
  alertFraction: number;
  uncapFraction: number;
  config: PowerDomainConfig;
  updatedMs: number;
}

/** A node budget in force. */
export interface NodeBudget {
  budgetWatts: number;
  /** The domain that imposed it. */
  domain: string;
}

/** An alert starting or ending, for the daemon's log. */
export interface PowerAlertEvent {
  domain: string;
  alert: boolean;
  drawWatts: number;
  budgetWatts: number;
  nodes: number;
  atMs: number;
}

interface DomainState {
  path: string;
  parent: string;
  depth: number;
  kind: "domain" | "server";
  configured: boolean;
  budgetWatts: number;
  /** Sum of the counted draws of its nodes, integer milliwatts (exact sums, so thresholds never drift). */
  drawMw: number;
  /** Counted (not lost) nodes in the subtree. */
  nodes: number;
  direct: string[];
}

interface NodeState {
  nodeId: string;
  rack: string;
  registeredDomain: string;
  profile: PowerProfile;
  domain: string;
  domainSource: DomainSource;
  lost: boolean;
  report: PowerReport;
  lastReportMs: number;
  /** The draw counted for the node, integer milliwatts. */
  countedMw: number;
  drawSource: DrawSource;
  /** The node's server leaf, its own domain, then each ancestor up to the top. */
  chain: DomainState[];
}

const NO_REPORT: PowerReport = Object.freeze({
  watts: 0,
  meter: "",
  capped: false,
  cappingState: "",
  throttledContainers: 0,
  powerKills: 0,
  utilization: 0,
});

/** The power domains of a cluster: configuration, per-domain draws, alerts and node budgets. */
export class PowerDomains {
  readonly options: PowerDomainOptions;
  private configValue: PowerDomainConfig;
  private updatedMsValue: number;
  private readonly nodes = new Map<string, NodeState>();
  private domains = new Map<string, DomainState>();
  /** Alerting domains and since when; kept across rebuilds of the tree. */
  private readonly alerts = new Map<string, number>();
  private events: PowerAlertEvent[] = [];

  constructor(
    config: PowerDomainConfig,
    options: Partial<PowerDomainOptions>,
    private readonly clock: Clock,
    updatedMs = 0,
  ) {
    this.options = resolvePowerDomainOptions(options);
    this.configValue = validatePowerDomainConfig(config);
    this.updatedMsValue = updatedMs;
    this.rebuild();
  }

  /** The configured tree (canonical form). */
  get config(): PowerDomainConfig {
    return {
      domains: this.configValue.domains.map((d) => ({ ...d })),
      nodes: Object.fromEntries(Object.entries(this.configValue.nodes)),
    };
  }

  /** When the configured tree last changed through the admin API (0: from the configuration file). */
  get updatedMs(): number {
    return this.updatedMsValue;
  }

  /** Replaces the configured tree (validated whole: a bad entry changes nothing). */
  setConfig(config: PowerDomainConfig, updatedMs = this.clock.nowMs()): void {
    this.configValue = validatePowerDomainConfig(config);
    this.updatedMsValue = updatedMs;
    this.rebuild();
  }

  /**
   * The configuration with `domain`'s budget set to `budgetWatts` (0 removes it), without applying it: the caller
   * persists it and then applies it with `setConfig`. POWER_DOMAIN_NOT_FOUND when the tree has no such domain.
   */
  withBudget(domain: string, budgetWatts: number): PowerDomainConfig {
    const path = normalizeDomainPath(domain, "domain");
    checkBudget(budgetWatts, "budgetWatts");
    if (!this.domains.has(path))
      throw new HarvestError(
        "POWER_DOMAIN_NOT_FOUND",
        `no power domain ${path}; 'harvest power domains' lists them, SetDomains (or the resource manager's powerDomains option) adds them`,
        { details: { domain: path } },
      );
    const next = this.config;
    const entry = next.domains.find((d) => d.path === path);
    if (entry) entry.budgetWatts = budgetWatts;
    else next.domains.push({ path, budgetWatts });
    return next;
  }

  /** Adds a node, or re-adds it after a re-registration (its last report is kept; it counts again if it was lost). */
  addNode(node: { nodeId: string; rack: string; domain?: string; profile: PowerProfile }): void {
    const registeredDomain = node.domain ? normalizeDomainPath(node.domain, "chassis") : "";
    const prev = this.nodes.get(node.nodeId);
    this.nodes.set(node.nodeId, {
      nodeId: node.nodeId,
      rack: node.rack,
      registeredDomain,
      profile: node.profile,
      domain: "",
      domainSource: "rack",
      lost: false,
      report: prev?.report ?? NO_REPORT,
      lastReportMs: this.clock.nowMs(),
      countedMw: 0,
      drawSource: "estimated",
      chain: [],
    });
    this.rebuild();
  }

  /** The node was declared lost: it leaves the sums and the share counts until it registers again. */
  markLost(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (!node || node.lost) return;
    node.lost = true;
    this.rebuild();
  }

  /** A heartbeat's power report: updates the node's draw and the sums and alerts of its domains. */
  report(nodeId: string, report: PowerReport): void {
    const node = this.nodes.get(nodeId);
    if (!node || node.lost) return;
    const nowMs = this.clock.nowMs();
    node.report = { ...report };
    node.lastReportMs = nowMs;
    const before = node.countedMw;
    this.count(node, nowMs);
    const delta = node.countedMw - before;
    for (const d of node.chain) {
      d.drawMw += delta;
      this.updateAlert(d, nowMs);
    }
  }

  /**
   * Recomputes every sum from scratch (the incremental sums of `report` drift by rounding only) and counts silent
   * nodes at their peak. Call it periodically.
   */
  tick(): void {
    this.recount(this.clock.nowMs());
  }

  /** Alerts that started or ended since the last call. */
  drainEvents(): PowerAlertEvent[] {
    const out = this.events;
    this.events = [];
    return out;
  }

  /** The node budget in force for `nodeId`: the smallest share among its alerting domains; undefined when none. */
  nodeBudget(nodeId: string): NodeBudget | undefined {
    const node = this.nodes.get(nodeId);
    if (!node || node.lost) return undefined;
    let best: NodeBudget | undefined;
    for (const d of node.chain) {
      if (!this.alerts.has(d.path) || d.nodes === 0) continue;
      const share = d.budgetWatts / d.nodes;
      if (!best || share < best.budgetWatts) best = { budgetWatts: share, domain: d.path };
    }
    return best;
  }

  /**
   * The power facts placement needs of a node: its profile, its counted draw, its domains from its own up (the server
   * leaf left out) with their budgets, and the tightest limit on its draw (its node budget in force, or its server
   * leaf's own budget, whichever is smaller; 0 when none). Undefined for an unknown or lost node.
   */
  placementFacts(nodeId: string):
    | {
        profile: PowerProfile;
        drawWatts: number;
        domains: { path: string; budgetWatts: number }[];
        limitWatts: number;
      }
    | undefined {
    const node = this.nodes.get(nodeId);
    if (!node || node.lost) return undefined;
    const [leaf, ...rest] = node.chain;
    const limits = [this.nodeBudget(nodeId)?.budgetWatts ?? 0, leaf?.budgetWatts ?? 0].filter((w) => w > 0);
    return {
      profile: node.profile,
      drawWatts: node.countedMw / 1000,
      domains: rest.map((d) => ({ path: d.path, budgetWatts: d.budgetWatts })),
      limitWatts: limits.length > 0 ? Math.min(...limits) : 0,
    };
  }

  /** The tree (or the subtree under `domain`) and its nodes now. */
  snapshot(domain = ""): PowerDomainsSnapshot {
    const nowMs = this.clock.nowMs();
    let root = "";
    if (domain !== "") {
      root = normalizeDomainPath(domain, "domain");
      if (!this.domains.has(root))
        throw new HarvestError(
          "POWER_DOMAIN_NOT_FOUND",
          `no power domain ${root}; 'harvest power domains' lists them`,
          {
            details: { domain: root },
          },
        );
    }
    const inTree = (path: string): boolean => root === "" || path === root || path.startsWith(`${root}/`);
    const nodeViews = new Map<string, PowerNodeView>();
    for (const n of this.nodes.values()) nodeViews.set(n.nodeId, this.nodeView(n, nowMs));
    const domains: PowerDomainView[] = [];
    for (const d of sortedByPath([...this.domains.values()])) {
      if (!inTree(d.path)) continue;
      const alertSince = this.alerts.get(d.path);
      const view: PowerDomainView = {
        path: d.path,
        kind: d.kind,
        parent: d.parent,
        depth: d.depth,
        budgetWatts: d.budgetWatts,
        drawWatts: d.drawMw / 1000,
        alert: alertSince !== undefined,
        alertSinceMs: alertSince ?? 0,
        shareWatts: alertSince !== undefined && d.nodes > 0 ? d.budgetWatts / d.nodes : 0,
        nodes: d.nodes,
        staleNodes: 0,
        budgetedNodes: 0,
        cappedNodes: 0,
        throttledContainers: 0,
        nodeIds: [...d.direct].sort(),
        configured: d.configured,
      };
      domains.push(view);
    }
    const byPath = new Map(domains.map((d) => [d.path, d]));
    const nodes: PowerNodeView[] = [];
    for (const n of [...this.nodes.values()].sort((a, b) => cmp(a.nodeId, b.nodeId))) {
      const v = nodeViews.get(n.nodeId)!;
      if (!n.chain.some((d) => inTree(d.path))) continue;
      nodes.push(v);
      if (n.lost) continue;
      for (const d of n.chain) {
        const dv = byPath.get(d.path);
        if (!dv) continue;
        if (v.state === "stale") dv.staleNodes++;
        if (v.nodeBudgetWatts > 0) dv.budgetedNodes++;
        if (v.powerCapped) dv.cappedNodes++;
        dv.throttledContainers += v.throttledContainers;
      }
    }
    return {
      domains,
      nodes,
      alertFraction: this.options.alertFraction,
      uncapFraction: this.options.uncapFraction,
      config: this.config,
      updatedMs: this.updatedMsValue,
    };
  }

  // ------------------------------------------------------------------------------------------------ internals

  private nodeView(n: NodeState, nowMs: number): PowerNodeView {
    const budget = this.nodeBudget(n.nodeId);
    return {
      nodeId: n.nodeId,
      domain: n.domain,
      domainSource: n.domainSource,
      state: n.lost ? "lost" : this.isStale(n, nowMs) ? "stale" : "running",
      drawWatts: n.lost ? 0 : n.countedMw / 1000,
      drawSource: n.lost ? "lost" : n.drawSource,
      reportedWatts: n.report.watts,
      powerMeter: n.report.meter,
      powerProfile: n.profile.id,
      powerCapped: n.report.capped,
      cappingState: n.report.cappingState,
      throttledContainers: n.report.throttledContainers,
      powerKills: n.report.powerKills,
      nodeBudgetWatts: budget?.budgetWatts ?? 0,
      budgetDomain: budget?.domain ?? "",
      lastReportMs: n.lastReportMs,
    };
  }

  private isStale(n: NodeState, nowMs: number): boolean {
    return nowMs - n.lastReportMs > this.options.staleAfterMs;
  }

  /** Sets the node's counted draw from its last report and its silence. */
  private count(n: NodeState, nowMs: number): void {
    if (n.lost) {
      n.countedMw = 0;
      n.drawSource = "lost";
    } else if (this.isStale(n, nowMs)) {
      n.countedMw = Math.max(n.countedMw, milliwatts(profileWatts(n.profile, 1)));
      n.drawSource = "stale-peak";
    } else if (n.report.watts > 0) {
      n.countedMw = milliwatts(n.report.watts);
      n.drawSource = "measured";
    } else {
      n.countedMw = milliwatts(profileWatts(n.profile, n.report.utilization));
      n.drawSource = "estimated";
    }
  }

  /** Rebuilds the tree from the configuration and the nodes, then recounts. */
  private rebuild(): void {
    const domains = new Map<string, DomainState>();
    const ensure = (path: string): DomainState => {
      let d = domains.get(path);
      if (d) return d;
      const cut = path.lastIndexOf("/");
      const parent = cut < 0 ? "" : path.slice(0, cut);
      if (parent !== "") ensure(parent);
      d = {
        path,
        parent,
        depth: path.split("/").length,
        kind: "domain",
        configured: false,
        budgetWatts: 0,
        drawMw: 0,
        nodes: 0,
        direct: [],
      };
      domains.set(path, d);
      return d;
    };
    for (const spec of this.configValue.domains) {
      const d = ensure(spec.path);
      d.configured = true;
      d.budgetWatts = spec.budgetWatts;
    }
    for (const path of Object.values(this.configValue.nodes)) ensure(path);
    for (const n of this.nodes.values()) {
      const assigned = Object.hasOwn(this.configValue.nodes, n.nodeId) ? this.configValue.nodes[n.nodeId] : undefined;
      if (assigned !== undefined) {
        n.domain = assigned;
        n.domainSource = "assigned";
      } else if (n.registeredDomain !== "") {
        n.domain = n.registeredDomain;
        n.domainSource = "registered";
      } else {
        n.domain = rackDomain(n.rack);
        n.domainSource = "rack";
      }
      const own = ensure(n.domain);
      own.direct.push(n.nodeId);
      // A node's own leaf; past the depth limit the node's domain is its leaf.
      const leafPath = own.depth < MAX_DOMAIN_DEPTH ? `${n.domain}/${n.nodeId}` : n.domain;
      const leaf = ensure(leafPath);
      if (leaf !== own) {
        leaf.kind = "server";
        leaf.direct.push(n.nodeId);
      }
      const chain: DomainState[] = [];
      for (let d: DomainState | undefined = leaf; d; d = d.parent === "" ? undefined : domains.get(d.parent))
        chain.push(d);
      n.chain = chain;
      if (!n.lost) for (const d of chain) d.nodes++;
    }
    this.domains = domains;
    // Alerts of domains that no longer exist end silently (their nodes' budgets go with them).
    for (const path of [...this.alerts.keys()]) if (!domains.has(path)) this.alerts.delete(path);
    this.recount(this.clock.nowMs());
  }

  private recount(nowMs: number): void {
    for (const d of this.domains.values()) d.drawMw = 0;
    for (const n of this.nodes.values()) {
      this.count(n, nowMs);
      if (n.lost) continue;
      for (const d of n.chain) d.drawMw += n.countedMw;
    }
    for (const d of this.domains.values()) this.updateAlert(d, nowMs);
  }

  /** Hysteresis: alert at budget x alertFraction, lift below budget x uncapFraction (or when the budget goes). */
  private updateAlert(d: DomainState, nowMs: number): void {
    const alerting = this.alerts.has(d.path);
    let next = alerting;
    if (d.budgetWatts <= 0 || d.nodes === 0) next = false;
    else if (!alerting && d.drawMw / 1000 >= d.budgetWatts * this.options.alertFraction) next = true;
    else if (alerting && d.drawMw / 1000 < d.budgetWatts * this.options.uncapFraction) next = false;
    if (next === alerting) return;
    if (next) this.alerts.set(d.path, nowMs);
    else this.alerts.delete(d.path);
    this.events.push({
      domain: d.path,
      alert: next,
      drawWatts: d.drawMw / 1000,
      budgetWatts: d.budgetWatts,
      nodes: d.nodes,
      atMs: nowMs,
    });
  }
}

function milliwatts(watts: number): number {
  return Number.isFinite(watts) ? Math.round(watts * 1000) : 0;
}

function sortedByPath<T extends { path: string }>(items: T[]): T[] {
  return items.sort((a, b) => {
    const x = a.path.split("/");
    const y = b.path.split("/");
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const c = cmp(x[i]!, y[i]!);
      if (c !== 0) return c;
    }
    return x.length - y.length;
  });
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
