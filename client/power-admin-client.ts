/**
 * The power admin client: read the tree of power domains (budgets, draws, alerts, caps in force), set one domain's
 * budget, or replace the configured tree. `harvest power domains|set-budget|set-domains` wraps it.
 */
import { RmAdminClient } from "./rm-admin-client.js";
import { call, loadHarvestProto } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { PowerAdminClient as GrpcPowerAdminClient } from "../proto/generated/harvest/v1/PowerAdmin.js";
import type { ListDomainsResponseOutput } from "../proto/generated/harvest/v1/ListDomainsResponse.js";
import type { PowerDomainInfoOutput } from "../proto/generated/harvest/v1/PowerDomainInfo.js";
import type { PowerNodeInfoOutput } from "../proto/generated/harvest/v1/PowerNodeInfo.js";

/** The tree as the resource manager reports it. */
export type PowerDomainTree = ListDomainsResponseOutput;
/** One domain with its budget, draw, alert state and caps in force. */
export type PowerDomainInfo = PowerDomainInfoOutput;
/** One node's draw, meter and capping state. */
export type PowerNodeInfo = PowerNodeInfoOutput;

/** The configured tree, as `setDomains` takes it (the shape of the resource manager's options too). */
export interface PowerDomainsSpec {
  domains: { path: string; budgetWatts: number }[];
  /** nodeId -> the path of the node's own domain. */
  nodes?: Record<string, string>;
}

/** Client of a resource manager's PowerAdmin service. */
export class PowerAdminClient extends RmAdminClient<GrpcPowerAdminClient> {
  /** `security`: TLS and an admin's certificate (a secure cluster); undefined: plaintext. */
  constructor(rmAddress: string, security?: ClientSecurity) {
    super(loadHarvestProto().PowerAdmin, rmAddress, security);
  }

  /** The whole tree, or the subtree under `domain`. */
  list(domain = ""): Promise<PowerDomainTree> {
    return call(this.rm, this.rm.listDomains, { domain });
  }

  /** Sets a domain's budget in watts (0 removes it); resolves once it is durable, to the domain. */
  setBudget(domain: string, budgetWatts: number): Promise<PowerDomainInfo> {
    return call(this.rm, this.rm.setBudget, { domain, budgetWatts });
  }

  /** Replaces the configured tree (validated whole); resolves once it is durable, to the new tree. */
  setDomains(spec: PowerDomainsSpec): Promise<PowerDomainTree> {
    return call(this.rm, this.rm.setDomains, {
      domains: spec.domains,
      nodes: Object.entries(spec.nodes ?? {}).map(([nodeId, domain]) => ({ nodeId, domain })),
    });
  }
}
