/**
 * The resource manager's in-memory model of an application (`AppRuntime`), what the application lifecycle needs from
 * the rest of the daemon (`ApplicationDeps`) and tells it (`ApplicationObserver`), and the two transition helpers through
 * which every application and attempt state change goes (app-state.ts, attempt-state.ts).
 */
import type { JobDfsCleanup } from "./job-dfs-cleanup.js";
import type { JobQuotes } from "./job-quotes.js";
import type { Clock } from "../common/clock.js";
import type { Logger } from "../common/log.js";
import type { AdmissionControl } from "./admission-control.js";
import { nextAppState } from "./app-state.js";
import type { AppEvent } from "./app-state.js";
import { nextAttemptState } from "./attempt-state.js";
import type { AttemptEvent, AttemptState } from "./attempt-state.js";
import type { NodeTracker } from "./node-tracker.js";
import type { ResourceManagerOptions } from "./options.js";
import type { JobDemandModel } from "./policy/admission-queue.js";
import type { HistoryPlacement, JobPlacement } from "./policy/history-placement.js";
import type { LifetimeModel } from "./policy/lifetime.js";
import type { LifetimeNodeChoice } from "./policy/node-choice.js";
import type { PowerAwarePolicy } from "./policy/power-placement.js";
import type { AtRisk } from "./preemption-notices.js";
import type { Scheduler } from "./policy/scheduler.js";
import type { AppRecord, RmStore } from "./state-store.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerRef } from "../proto/generated/harvest/v1/ContainerRef.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgress } from "../proto/generated/harvest/v1/JobProgress.js";

/** One application as the resource manager holds it in memory. */
export interface AppRuntime {
  record: AppRecord;
  /**
   * The current attempt's job-manager container. Invariant: set in LAUNCHED; undefined in RECOVERED, RESYNCING and
   * WAITING; in REGISTERED set once a node reported it (a job manager may register again after a restart first). It
   * stays set when the job ends, so that the job manager's own end is still recorded.
   */
  amContainerId: string | undefined;
  /**
   * Where the current attempt (`record.attempt`) is. Changed only through `moveAttempt` (ATTEMPT_MACHINE). Invariant:
   * only REGISTERED is served by Allocate; any other state is told to resync (register again).
   */
  attemptState: AttemptState;
  /** The job manager's last call (or its launch, adoption or resync window's opening): its liveness expiry counts from it. */
  lastAmContactMs: number;
  /**
   * After a restart: until then, node managers may still report this job's job manager. Invariant: non-zero only in
   * RESYNCING (`moveAttempt` clears it on leaving).
   */
  resyncUntilMs: number;
  /** Granted containers not yet handed to the job manager. */
  delivery: ContainerOutput[];
  /** Completed containers not yet reported to the job manager. */
  completed: ContainerStatus[];
  /** Containers at risk of preemption (node managers' notices) not yet told to the job manager. */
  atRisk: AtRisk[];
  /** Completions from before a restart already passed on (a node reports them until it is told they are recorded). */
  forwarded: Set<string>;
  /** Containers the job manager said at registration it runs, to settle once the nodes had time to report them. */
  claims: Set<string> | undefined;
  /** Claims answered LOST: a node that reports one later (it came back late) has it killed, as the job was told. */
  toldLost: Set<string>;
  progress: JobProgress | undefined;
  containers: Map<string, ContainerRef>;
  taskCounts: ContainerCounts;
  amCounts: ContainerCounts;
  /** Algorithm 1's decision, kept for reports once the job ended. */
  placement?: JobPlacement | undefined;
  /** Vertex names by container priority (the job manager asks at a vertex's topological position), parsed once. */
  vertices?: string[];
  /** Run times of the tasks that succeeded, by vertex (for the job history and the lifetime model). */
  taskDurations: Map<string, number[]>;
  /** Core-ms its ended containers held (admission's mean demand). */
  heldCoreMs: number;
  /** Its end being made durable (`Applications.finish`); unset before and after. */
  ending?: Promise<void> | undefined;
}

/** How an application's containers ended, counted over all its attempts. */
export interface ContainerCounts {
  allocated: number;
  succeeded: number;
  failed: number;
  preempted: number;
  lost: number;
  killed: number;
}

function zeroCounts(): ContainerCounts {
  return { allocated: 0, succeeded: 0, failed: 0, preempted: 0, lost: 0, killed: 0 };
}

/** What the application lifecycle tells as it happens (the daemon's metrics count it). */
export interface ApplicationObserver {
  /** A job was accepted (durable). */
  submitted(appId: string): void;
  /** A job ended (durable), in its final state. */
  finished(appId: string, state: AppRecord["state"], outcome: AppRecord["outcome"]): void;
  /** A container this resource manager granted ended, once per container, with how it ended and where it ran. */
  containerEnded(isAm: boolean, cause: ExitCauseOutput, nodeId?: string): void;
  /** `count` containers at risk of preemption were told to their job manager (an Allocate answer). */
  noticesDelivered?(count: number): void;
}

/** What the application lifecycle needs from the rest of the resource manager. */
export interface ApplicationDeps {
  options: ResourceManagerOptions;
  store: RmStore;
  scheduler: Scheduler;
  nodes: NodeTracker;
  admission: AdmissionControl;
  demand: JobDemandModel;
  lifetimes: LifetimeModel;
  history: HistoryPlacement | undefined;
  /** Quotes each job's survival at submission. @default none (no quote) */
  quotes?: JobQuotes;
  powerPolicy: PowerAwarePolicy | undefined;
  nodeChoice: LifetimeNodeChoice | undefined;
  clock: Clock;
  log: Logger;
  /** The resource manager's address (job managers call it). */
  address: () => string;
  /** This incarnation's start time: container ids carry it, so that a container from before a restart is told apart. */
  epoch: () => number;
  /** The active term when the resource managers are highly available (0: not): container tokens carry it. */
  haEpoch: () => number;
  /** Told of submissions, ends and container completions. @default none */
  observer?: ApplicationObserver;
  /** Removes an ended job's DFS staging directory and cancels its delegation token at the namenode. */
  jobCleanup: JobDfsCleanup;
  /**
   * Offers every running node to the scheduler now, between heartbeats; grants come back through `onAllocated`.
   * @default none (grants on heartbeats only)
   */
  offerNodes?: () => void;
}

/** A fresh runtime for a stored or new record; its attempt starts in `attemptState`. */
export function newRuntime(record: AppRecord, attemptState: AttemptState = "WAITING"): AppRuntime {
  return {
    record,
    amContainerId: undefined,
    attemptState,
    lastAmContactMs: 0,
    resyncUntilMs: 0,
    delivery: [],
    completed: [],
    atRisk: [],
    forwarded: new Set(),
    claims: undefined,
    toldLost: new Set(),
    progress: undefined,
    containers: new Map(),
    taskCounts: zeroCounts(),
    amCounts: zeroCounts(),
    taskDurations: new Map(),
    heldCoreMs: 0,
  };
}

/** Moves an application through its one transition function (APP_INVALID_TRANSITION when refused). */
export function moveApp(app: AppRuntime, event: AppEvent): void {
  app.record.state = nextAppState(app.record.state, event);
}

/** Moves the current attempt through its one transition function; leaving RESYNCING closes the resync window. */
export function moveAttempt(app: AppRuntime, event: AttemptEvent): void {
  const to = nextAttemptState(app.attemptState, event, app.record.appId);
  if (to !== "RESYNCING") app.resyncUntilMs = 0;
  app.attemptState = to;
}
