/**
 * What a compute run reports: the shared {@link ComputeResult}, what the simulator also counts, and the figures its
 * features add (`FeatureFigures`).
 */
import type { AdmissionPolicy, NodeChoiceKind } from "../../resourcemanager/index.js";
import type { LifetimeSource } from "../compute-options.js";
import type { ReimageFigures } from "../features/server-events-options.js";
import type { ComputeResult, SimJobType } from "../results.js";

/** A compute run's figures: the shared {@link ComputeResult} and what the simulator also counts. */
export interface ComputeRunResult extends ComputeResult {
  /** Runs submitted, and those still running at the horizon (not in the averages). */
  jobsSubmitted: number;
  jobsUnfinished: number;
  /** Task attempts that completed (`tasksRun` counts every attempt started, killed ones included). */
  tasksCompleted: number;
  /** Jobs that ran on any server after waiting `classWaitMs` for a class (history only). */
  jobsOpenedToAll: number;
  /** Task kills per job type (the type of the job the task belonged to). */
  killsByType: Record<SimJobType, number>;
  /** Times the classes were built. */
  classifications: number;
  /** Classes of the last classification, "pattern-index: servers" (history only). */
  classes: string[];
  /** The node choice and the lifetimes it was given. */
  nodeChoice: NodeChoiceKind;
  lifetimes: LifetimeSource;
  /**
   * Time-averaged share of servers with no secondary container (job managers count), over the experiment; a server
   * away for a reclaim or reimage has none.
   */
  emptyServerShare: number;
  /** The same among the servers in service whose primary (and reserve) leaves room for a task; 0 when none ever did. */
  emptyShareWithRoom: number;
  /** Whole-server reclaims, the share of them that found the server empty, and the core-hours their kills lost. */
  reclaims: number;
  reclaimsHittingEmpty: number;
  reclaimKilledCoreHours: number;
  /** What planned reimages cost (only with `reimages`). `taskKills` and `wastedCoreHours` count these kills too. */
  reimages?: ReimageFigures;
  /** Simulation events per wall-clock second. */
  eventsPerSec: number;
  /** The admission policy ("none" without admission control) and the threshold it compared with (1 for none). */
  admission: AdmissionPolicy;
  admissionThreshold: number;
  /**
   * Jobs the admission policy let in, jobs it refused on arrival because even an idle cluster would not admit them
   * (`neverAdmissible`: never queued, never run, not in `jobs`), and jobs still waiting at the horizon. Without
   * admission control every arrival counts as admitted at once.
   */
  jobsAdmitted: number;
  jobsRejected: number;
  jobsQueuedAtEnd: number;
  /** Average wait in the admission queue of the admitted jobs, s (also inside their job times). */
  avgAdmissionWaitS: number;
  /**
   * Core-hours held by secondary containers (tasks and job managers, from grant to release or the horizon, launches
   * included) over the experiment period.
   */
  secondaryCoreHours: number;
  /** Core-hours harvestable over the experiment period: capacity - primary - reserve, floored at 0 per server. */
  harvestableCoreHours: number;
  /** secondaryCoreHours / harvestableCoreHours (above 1 only under stock-unaware, which takes the primary's cores). */
  harvestedUtilization: number;
  /**
   * The SLA metric of admission control: the core-hours killed containers held up to their kill
   * (`wastedCoreHours`) over `secondaryCoreHours`, i.e. the share of what secondary containers held that kills threw
   * away. 0 when nothing ran.
   */
  killedTaskHoursFraction: number;
  /**
   * Containers named in preemption notices (each attempt once), and how many of them a primary killed afterwards
   * (both 0 with the notice off).
   */
  noticesSent: number;
  noticedKilled: number;
}

/**
 * The figures of a run that its features set (`SimFeature.figures`). Without a feature they keep the values of a run
 * without it: no reclaims, no reimages, every arrival admitted at once.
 */
export type FeatureFigures = Pick<
  ComputeRunResult,
  | "reclaims"
  | "reclaimsHittingEmpty"
  | "reclaimKilledCoreHours"
  | "reimages"
  | "admission"
  | "admissionThreshold"
  | "jobsAdmitted"
  | "jobsRejected"
  | "jobsQueuedAtEnd"
  | "avgAdmissionWaitS"
>;
