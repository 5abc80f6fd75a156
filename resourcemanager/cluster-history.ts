/**
 * The cluster's recent history as the web pages plot it: a bounded ring of samples (one per `sampleMs`, over the last
 * day at most) of the cluster's cores (capacity, the primaries', Harvest's), kills per clock hour, per-server kills,
 * and counters of jobs submitted and ended since the cluster's history began. It is kept in the resource manager's
 * store (LevelDB, or etcd with HA) at every sample, the samples by clock hour (one small record rewritten per sample,
 * the day's 25 records at most) and the tallies beside them, and once more at a graceful stop, so a restart or a
 * failover continues the same day; what happened since the last sample (kills, jobs) is lost with a crash.
 */
import type { Clock } from "../common/clock.js";
import { errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { ApplicationObserver } from "./app-runtime.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { HistorySample, JobCounters, NodeKills, StoredUsageTallies, UsageHistoryStore } from "./state-store.js";

export type { HistorySample, JobCounters, NodeKills } from "./state-store.js";

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
  /** Where each sample is kept, once restored from it. */
  private store: { at: UsageHistoryStore; log: Logger } | undefined;
  /** The clock hours the store holds samples of. */
  private readonly storedHours = new Set<number>();
  /** The saves, one after the other. */
  private saving: Promise<void> = Promise.resolve();
  private restored = false;

  constructor(
    private readonly cores: CoresSource,
    private readonly clock: Clock,
    readonly sampleMs: number,
  ) {
    this.capacity = Math.min(MAX_HISTORY_SAMPLES, Math.max(1, Math.ceil(HISTORY_WINDOW_MS / sampleMs)));
    this.counters = { sinceMs: clock.nowMs(), submitted: 0, finished: 0, failed: 0, killed: 0 };
  }

  /**
   * Continues the history `store` keeps (a restart, or a new active), and keeps every later sample there. A store that
   * cannot be read starts the history afresh, logged.
   */
  async restore(store: UsageHistoryStore, log: Logger): Promise<void> {
    this.store = { at: store, log };
    let kept: Awaited<ReturnType<UsageHistoryStore["usageHistory"]>>;
    try {
      kept = await store.usageHistory();
    } catch (err) {
      log.warn("cannot read the cluster's history; it starts afresh", { error: errorMessage(err) });
      return;
    }
    const since = this.clock.nowMs() - HISTORY_WINDOW_MS;
    for (const hour of kept.hours.keys()) this.storedHours.add(hour);
    const samples = [...kept.hours.values()].flat().filter((x) => x.timeMs > since);
    samples.sort((a, b) => a.timeMs - b.timeMs);
    this.samples.splice(0, this.samples.length, ...samples.slice(-this.capacity));
    if (kept.tallies) {
      Object.assign(this.counters, kept.tallies.counters);
      for (const [hour, kills] of kept.tallies.hourly) if (hour >= since - HOUR_MS) this.hourly.set(hour, kills);
      for (const [nodeId, k] of kept.tallies.nodes) this.nodes.set(nodeId, { ...k });
      this.restored = true;
    }
  }

  /** Takes a sample now and one every `sampleMs` until `stop()`. */
  start(): void {
    if (this.timer) return;
    if (!this.restored) this.counters.sinceMs = this.clock.nowMs();
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
    this.save(s.timeMs);
  }

  /** Keeps the hour of `timeMs` and the tallies in the store, after the saves before it; never rejects. */
  private save(timeMs: number): void {
    const store = this.store;
    if (!store) return;
    const hour = Math.floor(timeMs / HOUR_MS) * HOUR_MS;
    const samples = this.samples.filter((x) => x.timeMs >= hour && x.timeMs < hour + HOUR_MS).map((x) => ({ ...x }));
    const tallies: StoredUsageTallies = {
      counters: { ...this.counters },
      hourly: [...this.hourly.entries()],
      nodes: [...this.nodes.entries()].map(([id, k]) => [id, { ...k }]),
    };
    const drop = [...this.storedHours].filter((h) => h < timeMs - HISTORY_WINDOW_MS - HOUR_MS);
    this.saving = this.saving.then(async () => {
      try {
        await store.at.putUsageHistory(hour, samples, tallies, drop);
        this.storedHours.add(hour);
        for (const h of drop) this.storedHours.delete(h);
      } catch (err) {
        store.log.warn("cannot keep the cluster's history sample", { error: errorMessage(err) });
      }
    });
  }

  /** Resolves once the saves under way are done. */
  async saved(): Promise<void> {
    await this.saving;
  }

  /**
   * Stops sampling and keeps the tallies counted since the last sample (a graceful stop), waiting at most
   * `waitMs` for the store (a stop must not hang on an unreachable coordination service); never rejects.
   */
  async close(waitMs = 2_000): Promise<void> {
    this.stop();
    const last = this.samples.at(-1);
    if (last) this.save(last.timeMs);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.saving, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
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
