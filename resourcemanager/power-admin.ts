/**
 * The `PowerAdmin` gRPC service of the resource manager (proto/power_admin.proto): a thin layer over `PowerDomains`
 * that validates requests, makes every change durable before answering, and turns the tree into wire messages.
 */
import type * as grpc from "@grpc/grpc-js";
import { HarvestError } from "../common/errors.js";
import { unary } from "../common/grpc.js";
import { normalizeDomainPath, validatePowerDomainConfig } from "./policy/power-domains.js";
import type { PowerDomainConfig, PowerDomains, PowerDomainsSnapshot } from "./policy/power-domains.js";
import type { ListDomainsResponse } from "../proto/generated/harvest/v1/ListDomainsResponse.js";
import type { PowerDomainInfo } from "../proto/generated/harvest/v1/PowerDomainInfo.js";
import type { SetDomainsRequestOutput } from "../proto/generated/harvest/v1/SetDomainsRequest.js";

/** Most node assignments one SetDomains may carry. */
const MAX_ASSIGNMENTS = 100_000;

/** What the service needs from the resource manager besides the domains. */
export interface PowerAdminDeps {
  domains: PowerDomains;
  nowMs(): number;
  /** Makes a new configured tree durable; resolves once it is. */
  persist(config: PowerDomainConfig, updatedMs: number): Promise<void>;
  /** Called after the tree changed (the daemon logs it). */
  onChanged(what: string): void;
}

/** The handlers of the PowerAdmin service. */
export function powerAdminHandlers(deps: PowerAdminDeps): grpc.UntypedServiceImplementation {
  const { domains } = deps;
  // Changes run one at a time: each is computed from the tree the previous one left, stored, then applied.
  let chain: Promise<unknown> = Promise.resolve();
  const serialized = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => undefined);
    return run;
  };
  const apply = async (config: PowerDomainConfig): Promise<void> => {
    const updatedMs = deps.nowMs();
    // Validated whole (a bad entry throws before anything is stored), durable, then in force.
    const canonical = validatePowerDomainConfig(config);
    await deps.persist(canonical, updatedMs);
    domains.setConfig(canonical, updatedMs);
  };
  return {
    ListDomains: unary((req: { domain: string }) => listMessage(domains.snapshot(req.domain))),
    SetBudget: unary((req: { domain: string; budgetWatts: number }) =>
      serialized(async () => {
        const next = domains.withBudget(req.domain, req.budgetWatts);
        await apply(next);
        const path = normalizeDomainPath(req.domain);
        deps.onChanged(`budget of ${path} set to ${req.budgetWatts} W`);
        const info = domainMessages(domains.snapshot(path)).find((d) => d.path === path);
        if (!info) throw new HarvestError("INTERNAL", `domain ${path} vanished after its budget was set`);
        return info;
      }),
    ),
    SetDomains: unary((req: SetDomainsRequestOutput) =>
      serialized(async () => {
        if (req.nodes.length > MAX_ASSIGNMENTS)
          throw new HarvestError("INVALID_ARGUMENT", `nodes: at most ${MAX_ASSIGNMENTS} assignments per request`, {
            details: { field: "nodes" },
          });
        const nodes = new Map<string, string>();
        for (const [i, a] of req.nodes.entries()) {
          if (nodes.has(a.nodeId))
            throw new HarvestError("INVALID_ARGUMENT", `nodes[${i}] assigns ${a.nodeId} a second time`, {
              details: { field: `nodes[${i}].nodeId` },
            });
          nodes.set(a.nodeId, a.domain);
        }
        await apply({
          domains: req.domains.map((d) => ({ path: d.path, budgetWatts: d.budgetWatts })),
          nodes: Object.fromEntries(nodes),
        });
        deps.onChanged(`tree replaced: ${req.domains.length} domain(s), ${req.nodes.length} assignment(s)`);
        return listMessage(domains.snapshot());
      }),
    ),
  };
}

function domainMessages(s: PowerDomainsSnapshot): PowerDomainInfo[] {
  return s.domains.map((d) => ({ ...d }));
}

/** The snapshot as the wire shows it. */
export function listMessage(s: PowerDomainsSnapshot): ListDomainsResponse {
  return {
    domains: domainMessages(s),
    nodes: s.nodes.map((n) => ({ ...n })),
    alertFraction: s.alertFraction,
    uncapFraction: s.uncapFraction,
    configured: s.config.domains,
    assignments: Object.entries(s.config.nodes)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([nodeId, domain]) => ({ nodeId, domain })),
    updatedMs: s.updatedMs,
  };
}
