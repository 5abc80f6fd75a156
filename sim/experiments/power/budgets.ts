/**
 * The power experiment's layout and budgets: the cluster cut into power domains (chassis or racks) with a hardware
 * profile per rack, the planner's input built from a recorded history, and the oversubscription figures of a plan.
 */
import type { PowerProfile } from "../../../common/power-profiles.js";
import type { DrawSample, DrawsHistory } from "../../../resourcemanager/index.js";
import type { SimCluster } from "../../model.js";
import type { OversubscriptionFigures, PowerBudgets, ResolvedPowerOptions } from "./options.js";

/** A power domain of the simulated cluster. */
export interface SimPowerDomain {
  /** "r003/c1" (a chassis) or "r003" (a rack). */
  id: string;
  rack: string;
  servers: readonly number[];
  profile: PowerProfile;
}

/** The cluster's power domains and each server's profile, from `options` (racks in order, chassis within racks). */
export function powerLayout(
  cluster: SimCluster,
  o: Pick<ResolvedPowerOptions, "serversPerChassis" | "domainLevel" | "profiles">,
): { domains: SimPowerDomain[]; domainOf: Int32Array; profileOf: PowerProfile[] } {
  const racks = new Map<string, number[]>();
  for (const s of cluster.servers) {
    let list = racks.get(s.rack);
    if (!list) racks.set(s.rack, (list = []));
    list.push(s.index);
  }
  const domains: SimPowerDomain[] = [];
  const domainOf = new Int32Array(cluster.servers.length);
  const profileOf: PowerProfile[] = new Array<PowerProfile>(cluster.servers.length);
  let r = 0;
  for (const [rack, servers] of racks) {
    // A rack is one hardware generation: profiles go to racks in turn.
    const profile = o.profiles[r++ % o.profiles.length]!;
    const groups: number[][] = [];
    if (o.domainLevel === "rack") groups.push(servers);
    else
      for (let i = 0; i < servers.length; i += o.serversPerChassis)
        groups.push(servers.slice(i, i + o.serversPerChassis));
    groups.forEach((g, c) => {
      const id = o.domainLevel === "rack" ? rack : `${rack}/c${c}`;
      for (const s of g) {
        domainOf[s] = domains.length;
        profileOf[s] = profile;
      }
      domains.push({ id, rack, servers: g, profile });
    });
  }
  return { domains, domainOf, profileOf };
}

/** The nameplate (100 % load) draw of a profile. */
export function peakWatts(p: PowerProfile): number {
  return p.loadWatts[p.loadWatts.length - 1] ?? p.idleWatts;
}

/** The distinct profiles of `profiles`, in first-seen order. */
export function uniqueProfiles(profiles: readonly PowerProfile[]): PowerProfile[] {
  const seen = new Map<string, PowerProfile>();
  for (const p of profiles) if (!seen.has(p.id)) seen.set(p.id, p);
  return [...seen.values()];
}

/** Per server and slot of the plan window: the share of the server busy with primary and with secondary work. */
export interface RecordedHistory {
  slots: number;
  slotSec: number;
  startMs: number;
  serverIds: readonly string[];
  critical: Float32Array[];
  noncritical: Float32Array[];
}

/** The planner's input for `domains` from a recorded history. */
export function drawsHistoryOf(h: RecordedHistory, domains: readonly SimPowerDomain[]): DrawsHistory {
  const samples: DrawSample[] = [];
  const timesS: number[] = [];
  for (let k = 0; k < h.slots; k++) {
    const timeS = h.startMs / 1000 + k * h.slotSec;
    timesS.push(timeS);
    for (const d of domains)
      for (const s of d.servers)
        samples.push({
          timeS,
          domain: d.id,
          server: h.serverIds[s]!,
          criticalUtil: h.critical[s]![k]!,
          noncriticalUtil: h.noncritical[s]![k]!,
        });
  }
  return {
    source: "simulated history",
    samples,
    timesS,
    domains: domains.map((d) => d.id).sort(),
    serversPerDomain: domains[0]?.servers.length ?? 0,
    measured: false,
  };
}

/** Server-weighted oversubscription figures of `budgets` over the servers' profiles. */
export function oversubscriptionFigures(
  budgets: PowerBudgets,
  profileOf: readonly PowerProfile[],
): OversubscriptionFigures {
  const byId = new Map(budgets.plans.map((p) => [p.profileId, p.plan]));
  let nameplate = 0;
  let full = 0;
  let per = 0;
  let enforced = 0;
  for (const p of profileOf) {
    const plan = byId.get(p.id);
    const peak = peakWatts(p);
    nameplate += peak;
    full += plan ? plan.fullServer.budgetWattsPerServer : peak;
    per += plan ? plan.perContainer.budgetWattsPerServer : peak;
    enforced += budgets.perServerWatts[p.id] ?? peak;
  }
  const fullServerPct = nameplate > 0 ? (100 * (nameplate - full)) / nameplate : 0;
  const perContainerPct = nameplate > 0 ? (100 * (nameplate - per)) / nameplate : 0;
  return {
    fullServerPct,
    perContainerPct,
    ratio: fullServerPct > 1e-9 ? perContainerPct / fullServerPct : Number.NaN,
    enforcedPct: nameplate > 0 ? (100 * (nameplate - enforced)) / nameplate : 0,
    budgetSource: budgets.source,
  };
}
