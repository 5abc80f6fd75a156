/**
 * The cluster's recent history as the web pages plot it: a bounded ring of samples (one per `sampleMs`, over the last
 * day at most) of the cluster's cores (capacity, the primaries', Harvest's), kills per clock hour, per-server kills,
 * and counters of jobs submitted and ended since this resource manager started. In memory only: with HA, each resource
 * manager keeps its own, and a restart starts them afresh (the pages say since when).
 */
import type { Clock } from "../common/clock.js";
import type { ApplicationObserver } from "./app-runtime.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";

/** The window the history covers. */
export const HISTORY_WINDOW_MS = 24 * 3_600_000;
/** Samples kept at most, whatever the sampling period. */
export const MAX_HISTORY_SAMPLES = 1_440;

const HOUR_MS = 3_600_000;

/** Causes that count as kills: a container preempted so that its server's primary, power budget or drain wins. */
export const KILL_CAUSES: ReadonlySet<string> = new Set([
  "PREEMPTED_BY_PRIMARY",
  "PREEMPTED_BY_POWER",
  "PREEMPTED_BY_DRAIN",
]);

/** One sample of the cluster's cores over the servers not lost. */
export interface HistorySample {
  timeMs: number;
  capacityMilli: number;
  primaryMilli: number;
  harvestedMilli: number;
  containers: number;
}

/** A server's kills since the resource manager started, by cause, and the last one. */
export interface NodeKills {
  primary: number;
  power: number;
  drain: number;
  lastMs: number;
}

/** Jobs counted since the resource manager started. */
export interface JobCounters {
  sinceMs: number;
  submitted: number;
  finished: number;
  failed: number;
  killed: number;
}

/** What the pages and `/ws/v1/cluster/usage-history` show. */
export interface ClusterHistorySnapshot {
  sampleMs: number;
  samples: HistorySample[];
  /** The last 24 clock hours, oldest first, the current one last: kills that started in each. */
  killsPerHour: { hourMs: number; kills: number }[];
  counters: JobCounters;
}

/** What a sample reads: the registered servers that are not lost. */
export type CoresSource = () => Iterable<{
  capacity: { vcoresMilli: number };
  primaryUsage: { vcoresMilli: number };
  allocated: { vcoresMilli: number };
  containers: number;
}>;

/** The ring and counters (see the file comment). */
export class ClusterHistory {
  private readonly samples: HistorySample[] = [];
  private readonly capacity: number;
  /** Kills by clock hour (ms at the hour's start); hours older than the window are dropped. */
  private readonly hourly = new Map<number, number>();
  private readonly nodes = new Map<string, NodeKills>();
  private readonly counters: JobCounters;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cores: CoresSource,
    private readonly clock: Clock,
    readonly sampleMs: number,
  ) {
    this.capacity = Math.min(MAX_HISTORY_SAMPLES, Math.max(1, Math.ceil(HISTORY_WINDOW_MS / sampleMs)));
    this.counters = { sinceMs: clock.nowMs(), submitted: 0, finished: 0, failed: 0, killed: 0 };
  }

  /** Takes a sample now and one every `sampleMs` until `stop()`. */
  start(): void {
    if (this.timer) return;
    this.counters.sinceMs = this.clock.nowMs();
    this.sample();
    this.timer = setInterval(() => this.sample(), this.sampleMs);
    this.timer.unref();
  }

  /** Stops sampling (idempotent). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Records the cluster's cores now (the oldest sample goes once the ring is full). */
  sample(): void {
    const s: HistorySample = {
      timeMs: this.clock.nowMs(),
      capacityMilli: 0,
      primaryMilli: 0,
      harvestedMilli: 0,
      containers: 0,
    };
    for (const n of this.cores()) {
      s.capacityMilli += n.capacity.vcoresMilli;
      s.primaryMilli += n.primaryUsage.vcoresMilli;
      s.harvestedMilli += n.allocated.vcoresMilli;
      s.containers += n.containers;
    }
    this.samples.push(s);
    if (this.samples.length > this.capacity) this.samples.shift();
  }

  /** An observer that tells `inner` (the metrics) everything and counts jobs and kills here. */
  observing(inner: ApplicationObserver): ApplicationObserver {
    return {
      submitted: (appId) => {
        inner.submitted(appId);
        this.counters.submitted++;
      },
      finished: (appId, state, outcome) => {
        inner.finished(appId, state, outcome);
        if (state === "FINISHED") this.counters.finished++;
        else if (state === "FAILED") this.counters.failed++;
        else if (state === "KILLED") this.counters.killed++;
      },
      containerEnded: (isAm, cause, nodeId) => {
        inner.containerEnded(isAm, cause, nodeId);
        this.containerEnded(cause, nodeId);
      },
      noticesDelivered: (count) => inner.noticesDelivered?.(count),
    };
  }

  /** Counts a kill (other causes are not kills) for its hour and its server. */
  containerEnded(cause: ExitCauseOutput, nodeId: string | undefined): void {
    if (!KILL_CAUSES.has(cause)) return;
    const now = this.clock.nowMs();
    const hour = Math.floor(now / HOUR_MS) * HOUR_MS;
    this.hourly.set(hour, (this.hourly.get(hour) ?? 0) + 1);
    for (const h of this.hourly.keys()) if (h < hour - HISTORY_WINDOW_MS) this.hourly.delete(h);
    if (!nodeId) return;
    const k = this.nodes.get(nodeId) ?? { primary: 0, power: 0, drain: 0, lastMs: 0 };
    if (cause === "PREEMPTED_BY_PRIMARY") k.primary++;
    else if (cause === "PREEMPTED_BY_POWER") k.power++;
    else k.drain++;
    k.lastMs = now;
    this.nodes.set(nodeId, k);
  }

  /** A server's kills since the start (zeros for one never killed). */
  killsOn(nodeId: string): NodeKills {
    return { ...(this.nodes.get(nodeId) ?? { primary: 0, power: 0, drain: 0, lastMs: 0 }) };
  }

  /** The samples of the last day, kills per hour and the counters. */
  snapshot(): ClusterHistorySnapshot {
    const now = this.clock.nowMs();
    const current = Math.floor(now / HOUR_MS) * HOUR_MS;
    const killsPerHour: { hourMs: number; kills: number }[] = [];
    for (let i = 23; i >= 0; i--) {
      const hourMs = current - i * HOUR_MS;
      killsPerHour.push({ hourMs, kills: this.hourly.get(hourMs) ?? 0 });
    }
    return {
      sampleMs: this.sampleMs,
      samples: this.samples.filter((s) => s.timeMs > now - HISTORY_WINDOW_MS).map((s) => ({ ...s })),
      killsPerHour,
      counters: { ...this.counters },
    };
  }
}
