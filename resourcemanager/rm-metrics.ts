/**
 * The resource manager's Prometheus metrics (`harvest_rm_*`, served at `/metrics` beside the process and gRPC metrics
 * of common/metrics.ts). Counters count events as they happen (the daemon calls the `on*` methods); gauges are read
 * from the live state when scraped (`collect`), so they cannot drift from what the services answer. Label values are
 * lower-case, as the other daemons' (`cause="preempted_by_primary"`, `kind="job_manager"`, `state="running"`).
 */
import { Counter, Gauge } from "prom-client";
import type { Registry } from "prom-client";
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
  private readonly completions: Counter<"kind" | "cause">;
  private readonly submittedApps: Counter;
  private readonly finishedApps: Counter<"final_state">;

  constructor(registry: Registry, source: RmGaugeSource) {
    const registers = [registry];
    this.heartbeats = new Counter({
      name: "harvest_rm_heartbeats_total",
      help: "Node-manager heartbeats received",
      registers,
    });
    this.allocated = new Counter({
      name: "harvest_rm_containers_allocated_total",
      help: "Containers granted, by kind (job_manager, task)",
      labelNames: ["kind"],
      registers,
    });
    this.completions = new Counter({
      name: "harvest_rm_container_completions_total",
      help: "Granted containers that ended, by kind and exit cause (preempted_by_primary: a primary spike; lost: with its node)",
      labelNames: ["kind", "cause"],
      registers,
    });
    this.submittedApps = new Counter({
      name: "harvest_rm_applications_submitted_total",
      help: "Applications accepted by SubmitApplication",
      registers,
    });
    this.finishedApps = new Counter({
      name: "harvest_rm_applications_finished_total",
      help: "Applications that ended, by final state (succeeded, failed, killed)",
      labelNames: ["final_state"],
      registers,
    });
    for (const kind of ["job_manager", "task"] as const) {
      this.allocated.inc({ kind }, 0);
      for (const cause of EXIT_CAUSES) this.completions.inc({ kind, cause: labelValue(cause) }, 0);
    }
    for (const finalState of FINAL_STATES) this.finishedApps.inc({ final_state: labelValue(finalState) }, 0);

    new Gauge({
      name: "harvest_rm_nodes",
      help: "Node managers by state (running, lost, draining, drained; a draining node counts only as draining)",
      labelNames: ["state"],
      registers,
      collect(this: Gauge<"state">) {
        const by = source.nodesByState();
        this.reset();
        for (const state of new Set([...NODE_STATES, ...Object.keys(by)]))
          this.set({ state: labelValue(state) }, by[state] ?? 0);
      },
    });
    new Gauge({
      name: "harvest_rm_containers_running",
      help: "Containers granted and not yet ended, by kind (job_manager, task)",
      labelNames: ["kind"],
      registers,
      collect(this: Gauge<"kind">) {
        const by = source.containersRunning();
        this.set({ kind: "job_manager" }, by.job_manager);
        this.set({ kind: "task" }, by.task);
      },
    });
    new Gauge({
      name: "harvest_rm_applications",
      help: "Applications the resource manager holds, by state (finished ones until evicted: maxCompletedApps)",
      labelNames: ["state"],
      registers,
      collect(this: Gauge<"state">) {
        const by = source.appsByState();
        this.reset();
        for (const state of new Set([...APP_STATES, ...Object.keys(by)]))
          this.set({ state: labelValue(state) }, by[state] ?? 0);
      },
    });
    new Gauge({
      name: "harvest_rm_admission_queue_length",
      help: "Jobs waiting for admission (0 under admission: none)",
      registers,
      collect(this: Gauge) {
        this.set(source.admissionQueueLength());
      },
    });
    new Gauge({
      name: "harvest_rm_millicores",
      help: "Milli-cores of the node managers not lost: capacity, used by primary tenants, allocated to Harvest's containers",
      labelNames: ["use"],
      registers,
      collect(this: Gauge<"use">) {
        const v = source.millicores();
        this.set({ use: "capacity" }, v.capacity);
        this.set({ use: "primary" }, v.primary);
        this.set({ use: "allocated" }, v.allocated);
      },
    });
    // The three power gauges read one listing per scrape each; a scrape is rare next to heartbeats.
    new Gauge({
      name: "harvest_rm_power_draw_watts",
      help: "Draw counted for each power domain (server leaves included), watts",
      labelNames: ["domain", "kind"],
      registers,
      collect(this: Gauge<"domain" | "kind">) {
        this.reset();
        for (const d of source.powerDomains()) this.set({ domain: d.path, kind: d.kind }, d.drawWatts);
      },
    });
    new Gauge({
      name: "harvest_rm_power_budget_watts",
      help: "Budget of each power domain that has one, watts",
      labelNames: ["domain", "kind"],
      registers,
      collect(this: Gauge<"domain" | "kind">) {
        this.reset();
        for (const d of source.powerDomains())
          if (d.budgetWatts > 0) this.set({ domain: d.path, kind: d.kind }, d.budgetWatts);
      },
    });
    new Gauge({
      name: "harvest_rm_power_domains_alerting",
      help: "Power domains near their budget now (their nodes run under node budgets)",
      registers,
      collect(this: Gauge) {
        this.set(source.powerDomains().filter((d) => d.alert).length);
      },
    });
  }

  /** A node manager's heartbeat arrived. */
  onHeartbeat(): void {
    this.heartbeats.inc();
  }

  /** A container was granted. */
  onAllocated(kind: ContainerKind): void {
    this.allocated.inc({ kind });
  }

  /** {@inheritDoc ApplicationObserver.submitted} */
  submitted(): void {
    this.submittedApps.inc();
  }

  /** {@inheritDoc ApplicationObserver.finished} */
  finished(_appId: string, _state: string, outcome: string): void {
    this.finishedApps.inc({ final_state: labelValue(outcome) });
  }

  /** {@inheritDoc ApplicationObserver.containerEnded} */
  containerEnded(isAm: boolean, cause: ExitCauseOutput): void {
    this.completions.inc({ kind: isAm ? "job_manager" : "task", cause: labelValue(cause) });
  }
}
