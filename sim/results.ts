/**
 * What the simulator's experiments measure, shared by the experiments that produce it and the reports (tables, CSV,
 * SVG plots) that show it.
 */
import type { TraceSource, UtilizationLevel } from "./model.js";
import type { PlacementPolicyName } from "../namenode/index.js";

/** Job types of seeds/004's Algorithm 1. */
export type SimJobType = "short" | "medium" | "long";

/**
 * Task placement policies the compute experiment compares: primary-aware stock YARN (grants only within the headroom
 * the primary leaves, kills secondary tasks when the primary needs its cores back), primary-unaware stock YARN (sees
 * every server's full capacity and never kills: the primary pays instead), and history-based placement (Algorithm 1).
 */
export type ComputePolicy = "stock" | "stock-unaware" | "history";

/** Replica placement policies the storage experiment compares: the namenode's own. */
export type StoragePlacement = PlacementPolicyName;

/** How a run was set up (every experiment reports it with its figures). */
export interface RunSetup {
  level: UtilizationLevel;
  servers: number;
  /** Simulated days of the experiment (history excluded). */
  days: number;
  seed: number;
  traces: TraceSource;
}

/** Per-type job figures. */
export interface JobTypeFigures {
  jobs: number;
  /** Mean execution time (submission to end), seconds. */
  avgJobTimeS: number;
}

/** One compute run: a policy on one cluster and job stream. */
export interface ComputeResult extends RunSetup {
  policy: ComputePolicy;
  /** Jobs that finished within the run. */
  jobs: number;
  /** Mean job execution time (submission to end), seconds. */
  avgJobTimeS: number;
  byType: Record<SimJobType, JobTypeFigures>;
  tasksRun: number;
  /** Task attempts killed because their server's primary tenant needed the cores back. */
  taskKills: number;
  /** Job-manager containers killed (each also lost its job's running tasks, counted in `taskKills`). */
  jobManagerKills: number;
  /** Mean time a task waited for a container, from runnable (or killed) to granted, seconds. */
  avgTaskWaitS: number;
  /** Core-hours of work lost in killed attempts (and killed job managers' containers). */
  wastedCoreHours: number;
  /** Jobs that had to wait for a class (Algorithm 1 found none at first). */
  jobsWaited: number;
  /**
   * Core-hours the primary tenants wanted but could not get because secondary tasks held the cores: the integral over
   * the run of min(primary demand, max(0, primary demand + secondary held - capacity)) summed over servers. Only the
   * primary-unaware policy takes any (the others run containers at the lowest CPU weight and yield, so 0).
   */
  primaryCoreHoursTaken: number;
  /** Simulation events processed, and how long the run took on the wall clock. */
  events: number;
  wallMs: number;
}

/** One storage run: a placement policy and replication factor on one cluster. */
export interface StorageResult extends RunSetup {
  placement: StoragePlacement;
  replication: number;
  /** Blocks written over the run. */
  blocks: number;
  /** Blocks whose every replica was destroyed before re-replication restored one. */
  blocksLost: number;
  /** Block accesses attempted, and those refused because every replica's primary tenant was busy. */
  accesses: number;
  unavailableAccesses: number;
  reimages: number;
  /** Bytes copied by re-replication. */
  reReplicationBytes: number;
  /** Re-replication bandwidth each server gave, MB/s. */
  reReplicationMBps: number;
  events: number;
  wallMs: number;
}
