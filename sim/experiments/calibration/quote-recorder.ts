/**
 * The simulator's side of survival quotes: every job is quoted at its submission by the resource manager's own
 * `quoteJob` (resourcemanager/policy/survival-quote.ts), from what the resource manager would know then (its servers'
 * kill rates from the primaries' history before the run, the task durations its lifetime model learned from the
 * tasks finished so far, the task containers free now), and what then happened to it is recorded beside the quote:
 * the kills of its tasks (each a re-run) and its completion time.
 */
import { LifetimeModel, quoteJob, tenantKillsPerHour } from "../../../resourcemanager/index.js";
import type { PastRun, QuoteVertex, SurvivalQuote, SurvivalQuoteOptions } from "../../../resourcemanager/index.js";
import type { ComputeObserver } from "../../compute.js";
import type { SimJob, SimJobShape } from "../../jobs.js";
import type { SimCluster } from "../../model.js";

/** One job's quote and what happened. */
export interface QuotedJob {
  id: number;
  name: string;
  submitMs: number;
  quote: SurvivalQuote;
  /** Its task attempts killed by primaries (each re-ran). */
  kills: number;
  /** Submission to its last task's end; undefined while unfinished (at the horizon). */
  durationMs?: number;
}

/**
 * The kill rate (per hour) of every server of `cluster`, from its tenant's history in [fromMs, toMs) as the resource
 * manager's tenant registry computes it (`tenantKillsPerHour` over the tenant's servers' series, each the tenant's
 * average server plus the server's offset, clamped to 0..100). A server whose tenant has no history gets undefined.
 */
export function serverKillRates(
  cluster: SimCluster,
  fromMs: number,
  toMs: number,
  slackPct: number,
): (number | undefined)[] {
  const out = new Array<number | undefined>(cluster.servers.length).fill(undefined);
  const from = Math.max(0, Math.floor(fromMs / cluster.slotMs));
  for (const t of cluster.tenants) {
    const to = Math.min(t.utilization.length, Math.floor(toMs / cluster.slotMs));
    const timesMs: number[] = [];
    for (let k = from; k < to; k++) timesMs.push(k * cluster.slotMs);
    const perServer = t.servers.map((s) => {
      const offset = cluster.servers[s]!.offsetPct;
      const cpuPct: number[] = [];
      for (let k = from; k < to; k++) cpuPct.push(Math.min(100, Math.max(0, t.utilization[k]! + offset)));
      return { timesMs, cpuPct, stepSec: cluster.slotMs / 1000 };
    });
    const rate = tenantKillsPerHour(perServer, slackPct);
    for (const s of t.servers) out[s] = rate;
  }
  return out;
}

/** A simulated job's vertices as the quote sees them (the shape is already in topological order). */
export function quoteVerticesOfShape(shape: SimJobShape): QuoteVertex[] {
  return shape.vertices.map((v) => ({ name: v.name, tasks: v.tasks, inputs: v.inputs }));
}

/** Quotes every job at submission and records its outcome; `observer()` plugs it into `runCompute`. */
export class QuoteRecorder {
  /** Every job quoted, by job id. */
  readonly jobs = new Map<number, QuotedJob>();
  /** The resource manager's lifetime model, fed as the resource manager feeds it: finished tasks and jobs. */
  private readonly lifetimes = new LifetimeModel();
  /** When each running task attempt started, by `${job}:${vertex}:${task}`. */
  private readonly starts = new Map<string, number>();
  private readonly knownRates: number[];
  /** Each job name's finished runs, newest first (the resource manager's job history query). */
  private readonly past = new Map<string, PastRun[]>();

  constructor(
    serverRates: readonly (number | undefined)[],
    private readonly options: Partial<SurvivalQuoteOptions> = {},
  ) {
    this.knownRates = serverRates.filter((r): r is number => r !== undefined);
  }

  /** The hooks `runCompute` calls. */
  observer(): ComputeObserver {
    const key = (job: SimJob, vertex: number, task: number): string => `${job.id}:${vertex}:${task}`;
    return {
      onJobSubmitted: ({ job, nowMs, freeTaskSlots, serversWithRoom }) => {
        const quote = quoteJob({
          job: job.shape.name,
          vertices: quoteVerticesOfShape(job.shape),
          lifetimes: this.lifetimes,
          serverKillsPerHour: this.knownRates,
          slots: Math.min(job.shape.maxConcurrency, freeTaskSlots),
          tasksPerServer: serversWithRoom > 0 ? freeTaskSlots / serversWithRoom : 1,
          pastRuns: this.past.get(job.shape.name) ?? [],
          options: this.options,
        });
        this.jobs.set(job.id, { id: job.id, name: job.shape.name, submitMs: nowMs, quote, kills: 0 });
      },
      onTaskStart: ({ job, vertex, task, nowMs }) => void this.starts.set(key(job, vertex, task), nowMs),
      onTaskKilled: ({ job, vertex, task }) => {
        this.starts.delete(key(job, vertex, task));
        const q = this.jobs.get(job.id);
        if (q) q.kills++;
      },
      onTaskEnded: ({ job, vertex, task, nowMs }) => {
        const k = key(job, vertex, task);
        const started = this.starts.get(k);
        this.starts.delete(k);
        if (started !== undefined)
          this.lifetimes.observeTask(job.shape.name, job.shape.vertices[vertex]!.name, nowMs - started);
      },
      onJobFinished: ({ job, durationMs }) => {
        this.lifetimes.observeJob(job.shape.name, durationMs);
        const q = this.jobs.get(job.id);
        if (q) q.durationMs = durationMs;
        const runs = this.past.get(job.shape.name) ?? [];
        runs.unshift({ tasksPreempted: q?.kills ?? 0, durationMs, succeeded: true });
        // Only the newest window is ever read.
        if (runs.length > 100) runs.length = 100;
        this.past.set(job.shape.name, runs);
      },
    };
  }
}
