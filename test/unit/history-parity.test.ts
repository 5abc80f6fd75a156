/**
 * One policy path (issue 13): Algorithm 1's decisions in the compute simulator are the resource manager's. One small
 * scenario runs through the simulator (`runCompute`, history policy), and its every classification, job and finish is
 * replayed through the daemon path: `HistoryPlacement` reading `LiveClassViews` over a `Scheduler`'s node views mapped
 * by `liveNodeOf`, as the resource manager's live nodes are, with the job types the resource manager computes from its
 * job history. Both must decide the same: classes per job, waits, and the servers each job may use.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { Logger } from "../../common/log.js";
import { SeededRng } from "../../common/rng.js";
import {
  HistorySchedulerPolicy,
  jobTypeOf,
  resolveClassWeights,
} from "../../resourcemanager/policy/class-selection.js";
import type { JobType } from "../../resourcemanager/policy/class-selection.js";
import type { TenantClass } from "../../resourcemanager/policy/classifier.js";
import { HistoryPlacement, LiveClassViews, liveNodeOf } from "../../resourcemanager/policy/history-placement.js";
import type { PlacementDecision } from "../../resourcemanager/policy/history-placement.js";
import { Scheduler } from "../../resourcemanager/policy/scheduler.js";
import { runCompute, Stream, streamSeed } from "../../sim/compute.js";
import { jobStream } from "../../sim/jobs.js";
import type { SimJob, SimJobShape } from "../../sim/jobs.js";
import { DAY_MS } from "../../sim/model.js";
import { flatJob, threePatternCluster } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const SLOT_MS = 5 * MINUTE_MS;
const RESERVE = 0.1;
const SEED = 7;
/** Small, so that a job's last run can fall out of the history the resource manager reads. */
const JOB_HISTORY_WINDOW = 5;

/** What the simulator did, in the order it did it. */
type SimEvent =
  | { kind: "classified"; nowMs: number; classes: readonly TenantClass[] }
  | { kind: "decision"; nowMs: number; job: SimJob; jobType: JobType; decision: PlacementDecision }
  | { kind: "placed"; job: SimJob; servers: readonly number[] | undefined }
  | { kind: "finished"; nowMs: number; job: SimJob; durationMs: number };

/** A decision as both paths report it: the draw's outcome and whether the job waits, not the wording. */
function outcome(d: PlacementDecision): string {
  return d.kind === "classes" ? `classes ${d.classIds.join("+")}` : d.kind;
}

describe("Algorithm 1: the simulator decides as the resource manager does", () => {
  it.each(["wait", "stock"] as const)(
    "chooses the same classes, waits and servers for every job (fallback %s)",
    (classFallback) => {
      // Three tenants, one per pattern, two 8-core servers each; a week of history for the classifier.
      const cluster = threePatternCluster({ servers: 2, cores: 8, constantPct: 15, noisePct: 70 }, 2 * DAY_MS);
      // Short, middling and long jobs in turn, one at a time (each ends before the next arrives, so the servers hold no
      // secondary work when a job is placed), a minute into a slot (so both paths see that slot's primaries); then one
      // too wide for every class together: it waits, then runs anywhere. "rare" runs again only after more jobs than the
      // history window holds, so the resource manager no longer knows it: medium again.
      const shapes = new Map<string, SimJobShape>([
        ["quick", flatJob("quick", 2, 2 * MINUTE_MS)],
        ["middling", flatJob("middling", 4, 20 * MINUTE_MS)],
        ["slow", flatJob("slow", 6, 90 * MINUTE_MS)],
        ["rare", flatJob("rare", 1, MINUTE_MS)],
      ]);
      const names = ["rare", ...Array.from({ length: 9 }, (_, i) => ["quick", "middling", "slow"][i % 3]!), "rare"];
      names.push("quick", "middling", "slow");
      const submits = names.map((name, i) => ({
        shape: shapes.get(name)!,
        submitMs: 7 * DAY_MS + i * 2 * HOUR_MS + MINUTE_MS,
      }));
      submits.push({
        shape: flatJob("wide", 60, MINUTE_MS),
        submitMs: 7 * DAY_MS + names.length * 2 * HOUR_MS + MINUTE_MS,
      });
      const stream = jobStream(submits);

      const events: SimEvent[] = [];
      const r = runCompute(cluster, stream, {
        policy: "history",
        seed: SEED,
        reserveFraction: RESERVE,
        jobHistoryWindow: JOB_HISTORY_WINDOW,
        classFallback,
        checkInvariants: true,
        observer: {
          onClassified: (e) => events.push({ kind: "classified", ...e }),
          onDecision: (e) => events.push({ kind: "decision", ...e }),
          onJobPlaced: (e) => events.push({ kind: "placed", job: e.job, servers: e.servers }),
          onJobFinished: (e) =>
            events.push({
              kind: "finished",
              nowMs: e.job.submitMs + e.durationMs,
              job: e.job,
              durationMs: e.durationMs,
            }),
        },
      });
      expect(r.jobs).toBe(names.length + 1);
      // The wide job: waits for a class (seeds/004), or is placed as stock places it at once.
      expect(r.jobsWaited).toBe(classFallback === "wait" ? 1 : 0);
      expect(r.jobsOpenedToAll).toBe(1);

      // The daemon path: the resource manager's scheduler, live nodes, class views and placement.
      const clock = new ManualClock(0);
      const policy = new HistorySchedulerPolicy();
      const scheduler = new Scheduler(policy, { reserveFraction: RESERVE, maxAllocationsPerHeartbeat: 0 }, () => "c");
      for (const s of cluster.servers)
        scheduler.addNode(s.id, { vcoresMilli: s.cores * 1000, memoryMb: s.cores * 8192 }, s.rack);
      const views = new LiveClassViews(() => [...scheduler.nodeViews()].map((v) => liveNodeOf(v, RESERVE)));
      const placement = new HistoryPlacement(
        policy,
        { weights: resolveClassWeights({}), classWaitMs: 60_000, classFallback },
        views,
        clock,
        new SeededRng(streamSeed(SEED, Stream.Classes)),
        new Logger("parity", "error", () => undefined),
      );
      /** The primaries at `nowMs`, as the node managers' heartbeats tell the resource manager. */
      const primariesAt = (nowMs: number): void => {
        for (const t of cluster.tenants) {
          const u = t.utilization[Math.min(Math.floor(nowMs / SLOT_MS), t.utilization.length - 1)]!;
          for (const s of t.servers) {
            const server = cluster.servers[s]!;
            const pct = Math.min(100, Math.max(0, u + server.offsetPct));
            scheduler.updatePrimaryUsage(server.id, {
              vcoresMilli: Math.round((server.cores * 1000 * pct) / 100),
              memoryMb: 0,
            });
          }
        }
      };
      /** The resource manager's job history, newest first. */
      const history: { name: string; durationMs: number }[] = [];
      const daemonType = (name: string): JobType => {
        const past = history.slice(0, JOB_HISTORY_WINDOW);
        return jobTypeOf(
          past.find((h) => h.name === name)?.durationMs,
          past.map((h) => h.durationMs),
        );
      };

      const simDecisions: string[] = [];
      const daemonDecisions: string[] = [];
      const types = new Set<JobType>();
      const outcomes = new Set<string>();
      const asked = new Set<number>();
      let pendingRetry: PlacementDecision[] | undefined;
      let running = 0;
      for (const e of events) {
        switch (e.kind) {
          case "classified":
            views.setClasses(e.classes);
            break;
          case "decision": {
            clock.set(e.nowMs);
            primariesAt(e.nowMs);
            const appId = `j${e.job.id}`;
            let d: PlacementDecision | undefined;
            if (!asked.has(e.job.id)) {
              // Registration and first ask: the job manager's RegisterApplicationMaster, then its first allocate.
              asked.add(e.job.id);
              expect(running).toBe(0);
              expect(daemonType(e.job.shape.name)).toBe(e.jobType);
              placement.register(appId, e.jobType, e.job.shape.maxConcurrency);
              d = placement.onAsk(appId, 1000);
            } else {
              // A retry: the monitor tick retries every waiting job at once.
              pendingRetry ??= placement.retryWaiting();
              d = pendingRetry.find((x) => x.appId === appId);
              pendingRetry = pendingRetry.filter((x) => x !== d);
              if (pendingRetry.length === 0) pendingRetry = undefined;
            }
            expect(d, `daemon decision for ${appId} at ${e.nowMs}`).toBeDefined();
            simDecisions.push(`${appId} ${e.jobType} ${outcome(e.decision)}`);
            daemonDecisions.push(`${appId} ${e.jobType} ${outcome(d!)}`);
            types.add(e.jobType);
            outcomes.add(e.decision.kind);
            break;
          }
          case "placed": {
            running++;
            const allowed = policy.assigned(`j${e.job.id}`);
            if (e.servers === undefined) expect(policy.isOpenToAll(`j${e.job.id}`)).toBe(true);
            else expect([...allowed!].sort()).toEqual(e.servers.map((s) => cluster.servers[s]!.id).sort());
            break;
          }
          case "finished":
            running--;
            placement.remove(`j${e.job.id}`);
            history.unshift({ name: e.job.shape.name, durationMs: e.durationMs });
            break;
        }
      }
      expect(pendingRetry).toBeUndefined();
      expect(daemonDecisions).toEqual(simDecisions);
      // The scenario exercises what it is meant to: every job type, classes chosen, a wait and the fallback to any.
      expect([...types].sort()).toEqual(["long", "medium", "short"]);
      if (classFallback === "wait") {
        expect([...outcomes].sort()).toEqual(["any", "classes", "wait"]);
        expect(simDecisions.length).toBe(names.length + 1 + 60_000 / 5000);
      } else {
        expect([...outcomes].sort()).toEqual(["any", "classes"]);
        expect(simDecisions.length).toBe(names.length + 1);
      }
      // The second run of "rare" (job 10) is typed as a job never seen, as the resource manager types it.
      expect(simDecisions.find((d) => d.startsWith("j10 "))).toMatch(/^j10 medium /);
    },
  );
});
