/**
 * The resource manager's Prometheus metrics (`harvest_rm_*`, served at `/metrics` beside the process and gRPC metrics
 * of common/metrics.ts). Counters count events as they happen (the daemon calls the `on*` methods); gauges are read
 * from the live state when scraped (`collect`), so they cannot drift from what the services answer. Label values are
 * lower-case, as the other daemons' (`cause="preempted_by_primary"`, `kind="job_manager"`, `state="running"`).
 */
import type { Counter, Registry } from "prom-client";
import { counter, scrapedGauge, scrapedLabelledGauge, scrapedSeriesGauge } from "../common/metrics.js";
import type { ApplicationObserver } from "./applications.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";

/** Node states the `harvest_rm_nodes` gauge always reports (0 when none): a draining node counts as draining. */
export const NODE_STATES = ["RUNNING", "LOST", "DRAINING", "DRAINED"] as const;
/** Application states the `harvest_rm_applications` gauge always reports. */
export const APP_STATES = ["QUEUED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED"] as const;
/** Final states of a finished application (its outcome without the `JOB_` prefix). */
export const FINAL_STATES = ["SUCCEEDED", "FAILED", "KILLED"] as const;
/** The exit causes counted from the start (others appear when they first happen). */
const EXIT_CAUSES: readonly ExitCauseOutput[] = [
  "SUCCEEDED",
  "FAILED",
  "PREEMPTED_BY_PRIMARY",
  "PREEMPTED_BY_POWER",
  "PREEMPTED_BY_DRAIN",
  "LOST",
  "KILLED_BY_USER",
  "RELEASED",
  "EXCEEDED_MEMORY",
];

/** A container's kind as a label: a job manager's or a task's (as the node manager's metrics name them). */
export type ContainerKind = "job_manager" | "task";

/** A Harvest name (`PREEMPTED_BY_PRIMARY`, `RUNNING`, `JOB_SUCCEEDED`) as a label value (`preempted_by_primary`). */
export function labelValue(name: string): string {
  return name.replace(/^JOB_/, "").toLowerCase();
}

/** Every state of `always` (0 when none) and any other that `by` names, by label value. */
function byState(always: readonly string[], by: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const state of new Set([...always, ...Object.keys(by)])) out[labelValue(state)] = by[state] ?? 0;
  return out;
}

/** What the gauges read from the live state at each scrape. */
export interface RmGaugeSource {
  /** Nodes by state (`NODE_STATES`). */
  nodesByState(): Readonly<Record<string, number>>;
  /** Containers granted and not yet ended, by kind. */
  containersRunning(): Readonly<Record<ContainerKind, number>>;
  /** Applications known to the resource manager by state (`APP_STATES`). */
  appsByState(): Readonly<Record<string, number>>;
  /** Jobs waiting for admission. */
  admissionQueueLength(): number;
  /** Milli-cores of the nodes not lost: capacity, the primaries' use, Harvest's allocations. */
  millicores(): { capacity: number; primary: number; allocated: number };
  /** Every power domain (server leaves included) with its counted draw and budget (0: none). */
  powerDomains(): readonly { path: string; kind: string; drawWatts: number; budgetWatts: number; alert: boolean }[];
}

/** The resource manager's own metrics in its registry; also the application lifecycle's observer. */
export class RmMetrics implements ApplicationObserver {
  private readonly heartbeats: Counter;
  private readonly allocated: Counter<"kind">;
  private readonly localGrants: Counter<"locality">;
  private readonly completions: Counter<"kind" | "cause">;
  private readonly submittedApps: Counter;
  private readonly finishedApps: Counter<"final_state">;
  private readonly notices: Counter;

  constructor(registry: Registry, source: RmGaugeSource) {
    this.heartbeats = counter(registry, "harvest_rm_heartbeats_total", "Node-manager heartbeats received");
    this.allocated = counter(
      registry,
      "harvest_rm_containers_allocated_total",
      "Containers granted, by kind (job_manager, task)",
      ["kind"],
    );
    this.localGrants = counter(
      registry,
      "harvest_rm_locality_grants_total",
      "Task containers granted to asks over DFS input splits, by locality (node: on a server holding a replica; rack: " +
        "in one of its racks; any: elsewhere, after the locality delays)",
      ["locality"],
    );
    for (const locality of ["node", "rack", "any"]) this.localGrants.inc({ locality }, 0);
    this.completions = counter(
      registry,
      "harvest_rm_container_completions_total",
      "Granted containers that ended, by kind and exit cause (preempted_by_primary: a primary spike; lost: with its node)",
      ["kind", "cause"],
    );
    this.submittedApps = counter(
      registry,
      "harvest_rm_applications_submitted_total",
      "Applications accepted by SubmitApplication",
    );
    this.finishedApps = counter(
      registry,
      "harvest_rm_applications_finished_total",
      "Applications that ended, by final state (succeeded, failed, killed)",
      ["final_state"],
    );
    this.notices = counter(
      registry,
      "harvest_rm_preemption_notices_total",
      "Containers at risk of preemption that node managers reported and job managers were told (Allocate answers)",
    );
    for (const kind of ["job_manager", "task"] as const) {
      this.allocated.inc({ kind }, 0);
      for (const cause of EXIT_CAUSES) this.completions.inc({ kind, cause: labelValue(cause) }, 0);
    }
    for (const finalState of FINAL_STATES) this.finishedApps.inc({ final_state: labelValue(finalState) }, 0);

    scrapedLabelledGauge(
      registry,
      "harvest_rm_nodes",
      "Node managers by state (running, lost, draining, drained; a draining node counts only as draining)",
      "state",
      () => byState(NODE_STATES, source.nodesByState()),
    );
    scrapedLabelledGauge(
      registry,
      "harvest_rm_containers_running",
      "Containers granted and not yet ended, by kind (job_manager, task)",
      "kind",
      () => {
        const by = source.containersRunning();
        return { job_manager: by.job_manager, task: by.task };
      },
    );
    scrapedLabelledGauge(
      registry,
      "harvest_rm_applications",
      "Applications the resource manager holds, by state (finished ones until evicted: maxCompletedApps)",
      "state",
      () => byState(APP_STATES, source.appsByState()),
    );
    scrapedGauge(
      registry,
      "harvest_rm_admission_queue_length",
      "Jobs waiting for admission (0 under admission: none)",
      () => source.admissionQueueLength(),
    );
    scrapedLabelledGauge(
      registry,
      "harvest_rm_millicores",
      "Milli-cores of the node managers not lost: capacity, used by primary tenants, allocated to Harvest's containers",
      "use",
      () => {
        const v = source.millicores();
        return { capacity: v.capacity, primary: v.primary, allocated: v.allocated };
      },
    );
    // The three power gauges read one listing per scrape each; a scrape is rare next to heartbeats.
    scrapedSeriesGauge(
      registry,
      "harvest_rm_power_draw_watts",
      "Draw counted for each power domain (server leaves included), watts",
      ["domain", "kind"],
      () => source.powerDomains().map((d) => [{ domain: d.path, kind: d.kind }, d.drawWatts] as const),
    );
    scrapedSeriesGauge(
      registry,
      "harvest_rm_power_budget_watts",
      "Budget of each power domain that has one, watts",
      ["domain", "kind"],
      () =>
        source
          .powerDomains()
          .filter((d) => d.budgetWatts > 0)
          .map((d) => [{ domain: d.path, kind: d.kind }, d.budgetWatts] as const),
    );
    scrapedGauge(
      registry,
      "harvest_rm_power_domains_alerting",
      "Power domains near their budget now (their nodes run under node budgets)",
      () => source.powerDomains().filter((d) => d.alert).length,
    );
  }

  /** A node manager's heartbeat arrived. */
  onHeartbeat(): void {
    this.heartbeats.inc();
  }

  /** A container was granted; `locality` for a task over an input split. */
  onAllocated(kind: ContainerKind, locality?: "node" | "rack" | "any"): void {
    this.allocated.inc({ kind });
    if (locality) this.localGrants.inc({ locality });
  }

  /** {@inheritDoc ApplicationObserver.submitted} */
  submitted(): void {
    this.submittedApps.inc();
  }

  /** {@inheritDoc ApplicationObserver.finished} */
  finished(_appId: string, _state: string, outcome: string): void {
    this.finishedApps.inc({ final_state: labelValue(outcome) });
  }

  /** {@inheritDoc ApplicationObserver.noticesDelivered} */
  noticesDelivered(count: number): void {
    this.notices.inc(count);
  }

  /** {@inheritDoc ApplicationObserver.containerEnded} */
  containerEnded(isAm: boolean, cause: ExitCauseOutput): void {
    this.completions.inc({ kind: isAm ? "job_manager" : "task", cause: labelValue(cause) });
  }
}
