/**
 * The power experiment (seeds/000 sections II-IV; seeds/001 section 3): servers grouped into power domains (chassis,
 * or racks) with a budget each, primary tenants that own the servers, and Harvest's secondary tasks on the spare
 * cores. When a domain nears its budget, its servers must get under their even share: either by the per-container
 * capping agent the node manager runs (`CappingAgent` and its `CappingController`: secondary containers throttled to
 * a floor, raised step by step, killed if need be; the primary never touched), or by the full-server baseline (a
 * RAPL-like cap that slows every core of the server alike, the primary's included). Tasks go to servers by the stock node choice (a random
 * server with room) or by the resource manager's power-aware placement. Measured: capping events, time over budget,
 * throttled core-seconds of critical (primary) and non-critical (secondary) work, task kills, and the oversubscription
 * the planner (`planOversubscription`, seeds/000 III-E) finds achievable on the cluster's own history.
 *
 * The policies are not re-implemented here: the capping controller, the yield controller's victim choice, the
 * criticality test, the planner, the hardware profiles, and the power-domain and power-placement policies of the
 * resource manager are the daemons' own code. The simulation (sim.ts) and its roles (`sim/roles/power-*.ts`) play the
 * daemons' parts around them (see `runPower`).
 */
import { performance } from "node:perf_hooks";
import { planOversubscription } from "../../../resourcemanager/index.js";
import type { SimCluster } from "../../model.js";
import { drawsHistoryOf, peakWatts, powerLayout, uniqueProfiles } from "./budgets.js";
import { resolvePowerOptions } from "./options.js";
import type { PowerBudgets, PowerOptions, PowerResult, ProfilePlan } from "./options.js";
import { PowerSim } from "./sim.js";

/**
 * The budgets a power run enforces: the planner's (seeds/000 III-E) on the cluster's own draws over the last
 * `planDays` of history, simulated without capping under the stock placement with the same secondary workload (each
 * server's primary and secondary shares averaged per slot of the cluster, as telemetry gives them); or, with
 * `budgetFraction`, that share of the nameplate. The plan is made either way, for the oversubscription figures.
 */
export function planPowerBudgets(cluster: SimCluster, options: PowerOptions = {}): PowerBudgets {
  const o = resolvePowerOptions(cluster, { ...options, budgets: undefined, observer: undefined });
  const started = performance.now();
  const sim = new PowerSim(cluster, o, "plan");
  sim.run();
  const history = sim.drawHistory();
  const wallMs = performance.now() - started;
  const layout = powerLayout(cluster, o);
  const plans: ProfilePlan[] = [];
  const perServerWatts: Record<string, number> = {};
  for (const profile of uniqueProfiles(o.profiles)) {
    const domains = layout.domains.filter((d) => d.profile.id === profile.id);
    if (domains.length === 0) continue;
    // The planner serves domains of one size (one budget per hardware generation): the most common size.
    const sizes = new Map<number, number>();
    for (const d of domains) sizes.set(d.servers.length, (sizes.get(d.servers.length) ?? 0) + 1);
    const size = [...sizes.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]![0];
    const chosen = domains.filter((d) => d.servers.length === size);
    const plan = planOversubscription(drawsHistoryOf(history, chosen), profile, o.planner);
    plans.push({ profileId: profile.id, domains: chosen.length, serversPerDomain: size, plan });
    const approach = o.planApproach === "per-container" ? plan.perContainer : plan.fullServer;
    const planned = Math.min(peakWatts(profile), (approach.minBudgetWatts * (1 + o.planBufferShare)) / size);
    perServerWatts[profile.id] = o.budgetFraction !== undefined ? o.budgetFraction * peakWatts(profile) : planned;
  }
  return {
    perServerWatts,
    source: o.budgetFraction !== undefined ? "fraction" : "plan",
    plans,
    history: { days: o.planDays, events: sim.events, wallMs, samples: history.slots * cluster.servers.length },
  };
}

/**
 * Runs one power experiment over the cluster's experiment period [historyMs, horizonMs). Deterministic: the same
 * cluster and options give the same figures but for `wallMs` and `eventsPerSec`.
 *
 * The model:
 * - Layout: racks (the cluster's) cut into chassis of `serversPerChassis`; budgets at the chassis (or rack) level, a
 *   domain's budget the sum of its servers' per-server budgets (see {@link planPowerBudgets}). A rack's servers share a
 *   hardware profile; a server draws `profileWatts(profile, (primary + secondary used) / capacity)`.
 * - Primary tenants: each server's primary uses capacity x its utilization (the tenant's series plus the server's
 *   offset), step-held per slot. Critical work is the primary's: Harvest never throttles it (DESIGN.md principle 3).
 *   Of it, user-facing is what the power-aware placement calls critical (`primaryOutlook`: seeds/000's Compare8 verdict
 *   on the tenant's history, else its seeds/004 pattern, as the tenant registry finds them: `primaryHistories`),
 *   reported apart.
 * - Secondary tasks: independent tasks of `taskCores`, Poisson arrivals offering `secondaryLoad` of the harvestable
 *   core-hours, log-normal durations (median `taskMedianMs`, capped at `taskMaxMs`), in one FIFO queue. A simpler
 *   process than the compute experiment's DAG jobs on purpose: power depends on how many cores are busy where, not on
 *   a job's shape, and the same arrivals in every run make the comparison exact. A task runs at its full allocation
 *   unless throttled; throttling slows its progress in proportion (quota / allocation, or the frequency).
 * - Placement: when a task heads the queue and servers have room (capacity - primary - reserve - allocated >= the
 *   task), stock picks one at random (heartbeats come in no useful order); power-aware offers it to them in heartbeat
 *   order through the resource manager's `PowerAwarePolicy.choose`, and the first that passes the budget filter with a
 *   score within the tolerance of the best takes it (see `choosePowerAware`). Nothing is placed while the head task
 *   fits nowhere (FIFO).
 * - Yielding: when a primary grows past what the reserve covers, the yield controller's `chooseVictims` kills the
 *   youngest tasks. Every killed task (yield or capping) re-runs from the start at the back of the queue.
 * - Domains: the resource manager's `PowerDomains` hears every change of a server's draw at once (a heartbeat on
 *   change) and alerts with its hysteresis (from 97 % of the budget until under 90 %); the budgets are set when the
 *   experiment starts. While a domain alerts its servers' node managers run their capping loops every control period
 *   (from the first period boundary after the alert, the agents' next tick), each under the node budget the domain
 *   gives it (`nodeBudget`, the even share, sent in the heartbeat acknowledgement), or none once the alert ends; the
 *   loops stop when no server of the domain has a budget or a cap left.
 * - Per-container capping: each server runs the node manager's `CappingAgent` every period, with a meter that reads
 *   the simulated draw and a throttler that carries the quotas out on the tasks (a throttled task uses, and progresses
 *   at, its quota); the containers it kills re-run. The agent keeps a budget the domain lifted until its controller
 *   lifts the cap after its quiet period, as the daemon does. The primary is never an input.
 * - Full-server capping (the baseline, seeds/000 II-B): a RAPL-like cap holds a server whose draw exceeds its budget
 *   at the highest frequency f in [raplMinFrequency, 1] whose draw idle + (profile(u) - idle) x f^k stays under it,
 *   recomputed every period while the budget is in force (RAPL settles well within a period of 1 s: "less than 2
 *   seconds"). Every core slows alike: the primary loses (1 - f) of its work, every task runs at f. No kills.
 * - Figures are measured from `historyMs`; the `warmupMs` before it (no budgets in force) fills the cluster.
 */
export function runPower(cluster: SimCluster, options: PowerOptions = {}): PowerResult {
  const budgets = options.budgets ?? planPowerBudgets(cluster, { ...options, onProgress: undefined });
  const o = resolvePowerOptions(cluster, { ...options, budgets });
  const started = performance.now();
  const sim = new PowerSim(cluster, o, o.capping);
  sim.run();
  return sim.result(performance.now() - started, budgets);
}
