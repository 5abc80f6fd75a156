/**
 * The resource manager's durable state in LevelDB: applications (written before the client is answered), finished-job
 * history, the id counters and the application ids reserved for submissions to come, the delegation tokens of ended
 * jobs still to cancel at the namenode, and the power-domain tree set through the admin API. A restarted resource
 * manager reads it back.
 */
import { Level } from "level";
import type { SurvivalQuote } from "./policy/survival-quote.js";
import type { JobOutcome } from "./types.js";

// fsync before resolving (classic-level's WriteOptions.sync; the `level` facade's types leave it out).
const DURABLE = { sync: true } as never;

/** An application as persisted. */
export interface AppRecord {
  appId: string;
  seq: number;
  name: string;
  user: string;
  dagJson: string;
  state: AppState;
  outcome: JobOutcome;
  diagnostics: string;
  submitMs: number;
  startMs: number;
  finishMs: number;
  /** The current (or last) attempt number, from 1. */
  attempt: number;
  /** Attempts that failed for real (not preempted, not lost, not a resource manager restart). */
  failedAttempts: number;
  maxConcurrency: number;
  /** The DAG's priority, 0..100 (records written before it existed have none: 0). */
  priority?: number;
  /** Cores admission control counts for the job (job manager + max concurrency x largest task), milli-cores. */
  demandMilli?: number;
  /** When admission control let it in (0: never queued). */
  admittedMs?: number;
  /**
   * The submitter's namenode delegation token, handed to the job's containers (a secret: the store lives in the
   * resource manager's data directory, and the token never appears in reports or logs).
   */
  dfsToken?: string;
  /** The job's staging directory in the DFS (`dfs:/user/<user>/.staging/<appId>`); absent: the local `stagingDir`. */
  stagingDir?: string;
  /** Servers where this job's manager failed or was preempted, newest last: its next attempts go elsewhere. */
  amAvoidNodes?: string[];
  /** Its survival quote, made at submission (absent: none could be made, or a record from before quotes). */
  quote?: SurvivalQuote;
}

/**
 * What the resource manager does at the namenode once a job has ended: remove its DFS staging directory (as its
 * token's holder on a secure cluster, as `user` on a plaintext one) and cancel its delegation token ("" on a plaintext
 * cluster: there is none).
 */
export interface JobCleanup {
  token: string;
  stagingDir?: string;
  /** The job's submitter, whom a plaintext namenode is told the removal is by. */
  user?: string;
}

/** Application states, as YARN names them. */
/** QUEUED: waiting for admission control (`admission`); ACCEPTED: admitted, waiting for its job manager to run. */
export type AppState = "QUEUED" | "ACCEPTED" | "RUNNING" | "FINISHED" | "FAILED" | "KILLED";

/** A finished job in the history. */
export interface HistoryRecord {
  appId: string;
  name: string;
  durationMs: number;
  outcome: JobOutcome;
  finishMs: number;
  tasksRun: number;
  tasksPreempted: number;
  /**
   * Run times (ms, start to finish as the node managers reported them) of the job's task containers that succeeded,
   * by vertex, at most `MAX_DURATIONS_PER_VERTEX` each: the lifetime model's samples (`policy/lifetime.ts`). Absent in
   * records written before lifetimes were kept.
   */
  taskDurations?: Record<string, number[]>;
  /** The cores its containers held on average over the run, milli-cores (admission's `JobDemandModel`). */
  meanDemandMilli?: number;
  /** Task starts over an input split, and how many were on a server holding a replica of it (absent: none). */
  locatedStarts?: number;
  nodeLocalStarts?: number;
}

/** The power-domain tree as stored (PowerAdmin.SetDomains and SetBudget write it whole). */
export interface StoredPowerDomains {
  domains: { path: string; budgetWatts: number }[];
  nodes: Record<string, string>;
  updatedMs: number;
}

/** Most task run times a history record keeps per vertex. */
export const MAX_DURATIONS_PER_VERTEX = 200;

/** A server's drain, as kept across restarts. */
export interface StoredDrain {
  nodeId: string;
  startedMs: number;
  /** 0: none. */
  deadlineMs: number;
}

/** An application id reserved (GetNewApplication) for a submission to come, as persisted. */
export interface AppIdReservation {
  appId: string;
  /** Its sequence number, from the counter submissions draw from too, so the two never collide. */
  seq: number;
  /** Who reserved it: on a secure cluster only they may submit with it. */
  user: string;
  reservedMs: number;
}

// The cluster's last day as the store keeps it (resourcemanager/cluster-history.ts).

/** One sample of the cluster's cores over the servers not lost. */
export interface HistorySample {
  timeMs: number;
  capacityMilli: number;
  primaryMilli: number;
  harvestedMilli: number;
  containers: number;
}

/** A server's kills since the history began, by cause, and the last one. */
export interface NodeKills {
  primary: number;
  power: number;
  drain: number;
  lastMs: number;
}

/** Jobs counted since the history began (`sinceMs`: the first start of a resource manager on its store). */
export interface JobCounters {
  sinceMs: number;
  submitted: number;
  finished: number;
  failed: number;
  killed: number;
}

/** The tallies a store keeps beside the samples. */
export interface StoredUsageTallies {
  counters: JobCounters;
  /** Kills by clock hour: [hour's start, kills]. */
  hourly: [number, number][];
  nodes: [string, NodeKills][];
}

/** Where the history is kept (the resource manager's store). */
export interface UsageHistoryStore {
  /** The samples of every stored clock hour, and the tallies (undefined before the first save). */
  usageHistory(): Promise<{ hours: Map<number, HistorySample[]>; tallies: StoredUsageTallies | undefined }>;
  /** Replaces the hour `hourMs`'s samples and the tallies, and removes the hours `dropHours`, at once. */
  putUsageHistory(
    hourMs: number,
    samples: HistorySample[],
    tallies: StoredUsageTallies,
    dropHours: readonly number[],
  ): Promise<void>;
}

/** Milliseconds as a key part that sorts as the number does. */
export const padMs = (ms: number): string => String(ms).padStart(15, "0");

/**
 * The resource manager's durable state, whatever keeps it: LevelDB in the data directory ({@link RmStateStore}), or
 * the coordination service when the resource managers are highly available (etcd-state-store.ts, every write fenced
 * by the active's term). Every write resolves only once it is durable.
 */
export interface RmStore extends UsageHistoryStore {
  /** The largest job record (DAG and all) a submission may store; undefined: no limit but the disk's. */
  readonly submittedRecordLimitBytes?: number;
  open(): Promise<void>;
  close(): Promise<void>;
  clusterTimestamp(nowMs: number): Promise<number>;
  nextAppSeq(): Promise<number>;
  putApp(app: AppRecord, opts?: { unreserve?: boolean }): Promise<void>;
  putReservation(r: AppIdReservation): Promise<void>;
  deleteReservations(appIds: readonly string[]): Promise<void>;
  loadReservations(): Promise<AppIdReservation[]>;
  finishApp(app: AppRecord, history: HistoryRecord, cleanup?: JobCleanup): Promise<void>;
  pendingJobCleanups(): Promise<({ appId: string } & JobCleanup)[]>;
  jobCleanedUp(appId: string): Promise<void>;
  deleteApps(appIds: string[]): Promise<void>;
  loadApps(): Promise<AppRecord[]>;
  powerDomains(): Promise<StoredPowerDomains | undefined>;
  putPowerDomains(tree: StoredPowerDomains): Promise<void>;
  drains(): Promise<StoredDrain[]>;
  putDrains(drains: readonly StoredDrain[]): Promise<void>;
  history(name: string, limit: number): Promise<HistoryRecord[]>;
}

/** LevelDB-backed store; every write resolves only once it is in the log. */
export class RmStateStore implements RmStore {
  private readonly db: Level<string, unknown>;
  /** The last `nextAppSeq` call: each reads the counter only once the one before has written it. */
  private appSeqChain: Promise<unknown> = Promise.resolve();

  constructor(path: string) {
    this.db = new Level<string, unknown>(path, { valueEncoding: "json" });
  }

  async open(): Promise<void> {
    await this.db.open();
  }

  async close(): Promise<void> {
    await this.db.close();
  }

  /** The cluster timestamp (first start), created on first use. */
  async clusterTimestamp(nowMs: number): Promise<number> {
    const existing = (await this.db.get("meta!clusterTs")) as number | undefined;
    if (existing !== undefined) return existing;
    await this.db.put("meta!clusterTs", nowMs, DURABLE);
    return nowMs;
  }

  /**
   * Reserves the next application sequence number durably. Calls are chained: two at once (a submission and a
   * GetNewApplication) would otherwise both read the same last number.
   */
  nextAppSeq(): Promise<number> {
    const next = this.appSeqChain.then(async () => {
      const last = ((await this.db.get("meta!appSeq")) as number | undefined) ?? 0;
      await this.db.put("meta!appSeq", last + 1, DURABLE);
      return last + 1;
    });
    this.appSeqChain = next.catch(() => undefined);
    return next;
  }

  /** Writes an application; with `unreserve`, drops the reservation of its id in the same batch. */
  async putApp(app: AppRecord, opts: { unreserve?: boolean } = {}): Promise<void> {
    if (!opts.unreserve) {
      await this.db.put(`app!${app.appId}`, app, DURABLE);
      return;
    }
    await this.db.batch(
      [
        { type: "put", key: `app!${app.appId}`, value: app },
        { type: "del", key: `reserved!${app.appId}` },
      ],
      DURABLE,
    );
  }

  async putReservation(r: AppIdReservation): Promise<void> {
    await this.db.put(`reserved!${r.appId}`, r, DURABLE);
  }

  async deleteReservations(appIds: readonly string[]): Promise<void> {
    await this.db.batch(
      appIds.map((id) => ({ type: "del" as const, key: `reserved!${id}` })),
      DURABLE,
    );
  }

  /** The reserved application ids not yet used or forgotten, oldest first. */
  async loadReservations(): Promise<AppIdReservation[]> {
    const out: AppIdReservation[] = [];
    for await (const value of this.db.values({ gt: "reserved!", lt: "reserved!\xff" }))
      out.push(value as AppIdReservation);
    return out.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Writes the finished application and its history entry atomically, and with them what the resource manager still
   * has to do at the namenode for the job (`cleanup`: its staging directory to remove, its delegation token to cancel;
   * `pendingJobCleanups` reads those not yet done back).
   */
  async finishApp(app: AppRecord, history: HistoryRecord, cleanup?: JobCleanup): Promise<void> {
    const ops: { type: "put"; key: string; value: unknown }[] = [
      { type: "put", key: `app!${app.appId}`, value: app },
      { type: "put", key: `hist!${padMs(history.finishMs)}!${history.appId}`, value: history },
    ];
    if (cleanup) ops.push({ type: "put", key: `tokencancel!${app.appId}`, value: cleanup });
    await this.db.batch(ops, DURABLE);
  }

  /** The ended jobs whose cleanup at the namenode is not done yet (their tokens are secrets, like `AppRecord.dfsToken`). */
  async pendingJobCleanups(): Promise<({ appId: string } & JobCleanup)[]> {
    const out: ({ appId: string } & JobCleanup)[] = [];
    for await (const [key, value] of this.db.iterator({ gt: "tokencancel!", lt: "tokencancel!\xff" })) {
      const appId = key.slice("tokencancel!".length);
      // A bare string: a token stored by a resource manager older than staging directories in the DFS.
      if (typeof value === "string") out.push({ appId, token: value });
      else {
        const v = value as JobCleanup;
        out.push({
          appId,
          token: v.token,
          ...(v.stagingDir ? { stagingDir: v.stagingDir } : {}),
          ...(v.user ? { user: v.user } : {}),
        });
      }
    }
    return out;
  }

  /** The job's cleanup at the namenode is done (or there was nothing left to do). */
  async jobCleanedUp(appId: string): Promise<void> {
    await this.db.del(`tokencancel!${appId}`, DURABLE);
  }

  async deleteApps(appIds: string[]): Promise<void> {
    await this.db.batch(
      appIds.map((id) => ({ type: "del" as const, key: `app!${id}` })),
      DURABLE,
    );
  }

  async loadApps(): Promise<AppRecord[]> {
    const apps: AppRecord[] = [];
    for await (const value of this.db.values({ gt: "app!", lt: "app!\xff" })) apps.push(value as AppRecord);
    return apps;
  }

  /** The power-domain tree last set through the admin API, or undefined when it never was. */
  async powerDomains(): Promise<StoredPowerDomains | undefined> {
    return (await this.db.get("power!domains")) as StoredPowerDomains | undefined;
  }

  /** The cluster's history (cluster-history.ts): its samples by clock hour and its tallies. */
  async usageHistory(): Promise<{ hours: Map<number, HistorySample[]>; tallies: StoredUsageTallies | undefined }> {
    const hours = new Map<number, HistorySample[]>();
    for await (const [key, value] of this.db.iterator({ gt: "usage!hour!", lt: "usage!hour!\xff" }))
      hours.set(Number(key.slice("usage!hour!".length)), value as HistorySample[]);
    return { hours, tallies: (await this.db.get("usage!tallies")) as StoredUsageTallies | undefined };
  }

  async putUsageHistory(
    hourMs: number,
    samples: HistorySample[],
    tallies: StoredUsageTallies,
    dropHours: readonly number[],
  ): Promise<void> {
    const ops: ({ type: "put"; key: string; value: unknown } | { type: "del"; key: string })[] = [
      { type: "put", key: `usage!hour!${padMs(hourMs)}`, value: samples },
      { type: "put", key: "usage!tallies", value: tallies },
      ...dropHours.map((h) => ({ type: "del" as const, key: `usage!hour!${padMs(h)}` })),
    ];
    await this.db.batch(ops, DURABLE);
  }

  async putPowerDomains(tree: StoredPowerDomains): Promise<void> {
    await this.db.put("power!domains", tree, DURABLE);
  }

  /** The drains in force (`harvest admin drain`), as last set. */
  async drains(): Promise<StoredDrain[]> {
    return ((await this.db.get("drain!all")) as StoredDrain[] | undefined) ?? [];
  }

  async putDrains(drains: readonly StoredDrain[]): Promise<void> {
    await this.db.put("drain!all", drains, DURABLE);
  }

  /** Finished jobs, newest first, optionally only those named `name`. */
  async history(name: string, limit: number): Promise<HistoryRecord[]> {
    const out: HistoryRecord[] = [];
    for await (const value of this.db.values({ gt: "hist!", lt: "hist!\xff", reverse: true })) {
      const h = value as HistoryRecord;
      if (name && h.name !== name) continue;
      out.push(h);
      if (limit > 0 && out.length >= limit) break;
    }
    return out;
  }
}
