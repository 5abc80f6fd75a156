/**
 * The node manager's Prometheus metrics (`harvest_nm_*`, common/metrics.ts for the conventions): heartbeats, the
 * containers' lifecycle and why they were killed, how fast the node yields to its primary tenant, what it harvests,
 * and the capping agent's state. Counters are bumped by the node manager as things happen; gauges read the node
 * manager's state when `/metrics` is scraped, so they are never stale.
 */
import { Histogram } from "prom-client";
import type { Counter, Registry } from "prom-client";
import {
  counter,
  daemonRegistry,
  LATENCY_BUCKETS_SECONDS,
  scrapedGauge,
  scrapedLabelledGauge,
} from "../common/metrics.js";
import type { PrimarySample } from "../common/primary-monitor.js";
import type { CappingSnapshot } from "./policy/capping-agent.js";
import type { ExitCause } from "./container.js";

/** A running container as the gauges count it. */
export interface MetricsContainer {
  isAm: boolean;
  vcoresMilli: number;
  memoryMb: number;
}

/** What the gauges read at each scrape. */
export interface NodeManagerMetricsSource {
  /** The node's advertised cores, x1000. */
  readonly capacityMilli: number;
  /** The containers whose processes are running now (those being killed included). */
  running(): Iterable<MetricsContainer>;
  /** The primary tenant's latest sample. */
  primary(): PrimarySample;
  /** The capping agent's view; undefined before the node manager has started it. */
  capping(): CappingSnapshot | undefined;
}

/** Buckets of yield latency: a kill lands within a yield tick plus the SIGTERM grace, seconds at worst. */
const YIELD_BUCKETS_SECONDS = LATENCY_BUCKETS_SECONDS.filter((s) => s >= 0.005 && s <= 30);

/** The label value of an exit cause: the wire name in lower case (`preempted_by_primary`). */
export function causeLabel(cause: ExitCause | undefined): string {
  return (cause ?? "unknown").toLowerCase();
}

/** The meter kind of a power meter's description ("rapl: ...", "model: ...", "trace: ..."). */
function meterKind(description: string): string {
  const kind = description.split(":")[0]?.trim() ?? "";
  return /^[a-z]+$/.test(kind) ? kind : "other";
}

/** A node manager's metrics, in a registry of their own (with the process and gRPC server metrics). */
export class NodeManagerMetrics {
  /** The registry `/metrics` serves; also given to the gRPC server (createServer). */
  readonly registry: Registry;
  private readonly heartbeats: Counter;
  private readonly launched: Counter<"kind">;
  private readonly completed: Counter<"cause">;
  private readonly kills: Counter<"cause">;
  private readonly yieldSeconds: Histogram;
  private readonly localized: Counter<"outcome">;
  private readonly localizedBytes: Counter;
  private readonly shuffleBytes: Counter;
  private readonly statusRejected: Counter<"reason">;
  private readonly notices: Counter;
  private readonly logCopies: Counter<"outcome">;
  private readonly logBytes: Counter;

  constructor(nodeId: string, source: NodeManagerMetricsSource) {
    const registry = daemonRegistry("nodemanager", nodeId);
    this.registry = registry;
    const registers = [registry];
    this.heartbeats = counter(registry, "harvest_nm_heartbeats_total", "Heartbeats sent to the resource manager");
    this.launched = counter(
      registry,
      "harvest_nm_containers_launched_total",
      "Containers launched, by kind (task or job_manager)",
      ["kind"],
    );
    this.completed = counter(
      registry,
      "harvest_nm_containers_completed_total",
      "Containers that ended, by exit cause (succeeded, failed, preempted_by_primary, preempted_by_power, ...)",
      ["cause"],
    );
    this.kills = counter(
      registry,
      "harvest_nm_container_kills_total",
      "Containers this node manager decided to kill, by cause: preempted_by_primary (the yield controller), " +
        "preempted_by_power (the capping agent), released (the job manager), and what the resource manager asked " +
        "(killed_by_user, preempted_by_drain, ...); lost when the node manager stops",
      ["cause"],
    );
    this.localized = counter(
      registry,
      "harvest_nm_localized_resources_total",
      "Containers' local resources, by outcome: fetched from the DFS into the file cache, or found cached",
      ["outcome"],
    );
    this.localizedBytes = counter(
      registry,
      "harvest_nm_localized_bytes_total",
      "Bytes fetched from the DFS into the file cache for containers' local resources",
    );
    this.shuffleBytes = counter(
      registry,
      "harvest_nm_shuffle_bytes_total",
      "Bytes of finished tasks' outputs this node's shuffle service sent to the tasks of their jobs",
    );
    this.statusRejected = counter(
      registry,
      "harvest_nm_task_status_rejected_total",
      "Tasks' status files ignored (once per task), by reason: not_regular (a link, FIFO, ...), not_owner, too_big, " +
        "not_json, bad_shape (a value out of range or not finite), unreadable",
      ["reason"],
    );
    this.notices = counter(
      registry,
      "harvest_nm_preemption_notices_total",
      "Containers reported at risk of preemption (the preemption notice: the primary came within the notice margin " +
        "of taking back their cores), once each time one becomes at risk",
    );
    this.logCopies = counter(
      registry,
      "harvest_nm_log_copies_total",
      "Exited containers whose stdout and stderr were copied into the DFS, by outcome: copied, failed (or timed out)",
      ["outcome"],
    );
    this.logBytes = counter(registry, "harvest_nm_log_copy_bytes_total", "Bytes of container logs copied into the DFS");
    this.yieldSeconds = new Histogram({
      name: "harvest_nm_yield_seconds",
      help:
        "Per container preempted for the primary tenant: seconds from the yield tick that saw the primary need the " +
        "cores to the container's exit (its cores free again)",
      buckets: YIELD_BUCKETS_SECONDS,
      registers,
    });
    scrapedLabelledGauge(
      registry,
      "harvest_nm_containers_running",
      "Containers whose processes run now, by kind (task or job_manager)",
      "kind",
      () => {
        let tasks = 0;
        let ams = 0;
        for (const c of source.running())
          if (c.isAm) ams++;
          else tasks++;
        return { task: tasks, job_manager: ams };
      },
    );
    scrapedGauge(
      registry,
      "harvest_nm_capacity_millicores",
      "Cores this node offers to Harvest, x1000",
      () => source.capacityMilli,
    );
    scrapedGauge(
      registry,
      "harvest_nm_harvested_millicores",
      "Cores allocated to the running containers (what Harvest holds on this node), x1000",
      () => {
        let milli = 0;
        for (const c of source.running()) milli += c.vcoresMilli;
        return milli;
      },
    );
    scrapedGauge(registry, "harvest_nm_harvested_memory_mb", "Memory allocated to the running containers, MB", () => {
      let mb = 0;
      for (const c of source.running()) mb += c.memoryMb;
      return mb;
    });
    scrapedGauge(
      registry,
      "harvest_nm_primary_cpu_millicores",
      "Cores the primary tenant uses, x1000, at the yield controller's latest sample",
      () => source.primary().cpuMilli,
    );
    scrapedGauge(
      registry,
      "harvest_nm_power_capped",
      "1 while the capping agent holds a cap on the containers (capped, or stale: no meter reading), else 0",
      () => {
        const p = source.capping();
        return p && p.state !== "uncapped" ? 1 : 0;
      },
    );
    scrapedGauge(
      registry,
      "harvest_nm_power_budget_watts",
      "The power budget in force on this node (the smaller of its own and its power domain's), watts; 0: none",
      () => source.capping()?.budgetWatts ?? 0,
    );
    scrapedLabelledGauge(
      registry,
      "harvest_nm_power_draw_watts",
      "The server's power draw at the last reading, watts, by meter (rapl: measured; model, trace: modelled)",
      "meter",
      () => {
        const p = source.capping();
        return p?.watts !== undefined ? { [meterKind(p.meter)]: p.watts } : {};
      },
    );
    scrapedGauge(
      registry,
      "harvest_nm_throttled_containers",
      "Containers the capping agent runs below their allocation now",
      () => source.capping()?.throttledContainers ?? 0,
    );
  }

  /** A heartbeat went to the resource manager. */
  heartbeatSent(): void {
    this.heartbeats.inc();
  }

  /** A container's process started. */
  containerLaunched(isAm: boolean): void {
    this.launched.inc({ kind: isAm ? "job_manager" : "task" });
  }

  /** A container's process ended, for `cause`. */
  /** One container's localization: resources fetched, found cached, and the bytes fetched. */
  resourcesLocalized(fetched: number, cached: number, bytes: number): void {
    if (fetched > 0) this.localized.inc({ outcome: "fetched" }, fetched);
    if (cached > 0) this.localized.inc({ outcome: "cached" }, cached);
    if (bytes > 0) this.localizedBytes.inc(bytes);
  }

  /** A task's status file was ignored, for `reason`. */
  taskStatusRejected(reason: string): void {
    this.statusRejected.inc({ reason });
  }

  /** One output fetch served. */
  shuffleServed(bytes: number): void {
    this.shuffleBytes.inc(bytes);
  }

  containerCompleted(cause: ExitCause | undefined): void {
    this.completed.inc({ cause: causeLabel(cause) });
  }

  /** The node manager began killing a container for `cause` (counted once per container). */
  containerKilled(cause: ExitCause): void {
    this.kills.inc({ cause: causeLabel(cause) });
  }

  /** An exited container's logs were copied into the DFS (`ok`), or the copy failed or timed out. */
  logsUploaded(ok: boolean, bytes: number): void {
    this.logCopies.inc({ outcome: ok ? "copied" : "failed" });
    if (bytes > 0) this.logBytes.inc(bytes);
  }

  /** A container became at risk of preemption (told on the next heartbeat). */
  preemptionNoticed(): void {
    this.notices.inc();
  }

  /** A container preempted for the primary tenant exited `seconds` after the tick that chose it. */
  yieldCompleted(seconds: number): void {
    this.yieldSeconds.observe(seconds);
  }
}
