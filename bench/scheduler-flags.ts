/** The scheduler bench's flags, its targets and the shape of its simulated cluster. */
import type { Resources } from "../common/resource.js";
import type { FlagSpec, Flags } from "./flags.js";

export const FLAGS = {
  nodes: { kind: "int", default: 10_000, min: 1, help: "simulated nodes for the allocation run" },
  "baseline-nodes": { kind: "int", default: 1_000, min: 1, help: "nodes of the allocation baseline run" },
  seconds: { kind: "number", default: 10, min: 0.1, help: "measured wall seconds of each run" },
  "lifetime-rounds": { kind: "int", default: 5, min: 1, help: "containers live 1..n heartbeats of their node" },
  "sim-nodes": { kind: "int", default: 2_000, min: 1, help: "node managers the swarm simulates (streams)" },
  rate: { kind: "number", default: 10_000, min: 1, help: "offered heartbeats/s in total" },
  "nodes-per-connection": { kind: "int", default: 1, min: 1, help: "swarm streams sharing one HTTP/2 connection" },
  part: { kind: "choice", default: "all", choices: ["all", "alloc", "ingest"], help: "which part to run" },
  tls: { kind: "bool", help: "ingest: run plaintext and mutual TLS in this run and compare them" },
  seed: { kind: "int", default: 1, min: 0, help: "seed of the simulated workload" },
} as const satisfies Record<string, FlagSpec>;

export type SchedulerFlags = Flags<typeof FLAGS>;

/** Anchor from YARN's published scheduler throughput (far bigger hardware); the target here, on one core. */
export const TARGET_ALLOCATIONS_PER_SEC = 40_000;
export const TARGET_HEARTBEATS_PER_SEC = 10_000;
export const TARGET_BYTES_PER_IDLE_NODE = 4 * 1024;
/** Issue 12: heartbeat ingest with TLS at least this fraction of plaintext. */
export const TARGET_TLS_INGEST_RATIO = 0.8;
/** A run during which the machine's cores were this busy measured queueing for a core more than the server. */
export const SATURATED_MACHINE_FRACTION = 0.9;
export const NODE_CAPACITY: Resources = { vcoresMilli: 16_000, memoryMb: 65_536 };
export const CONTAINER: Resources = { vcoresMilli: 1_000, memoryMb: 1_024 };
/** New applications arrive whenever fewer containers than this are outstanding, so the scheduler always has work. */
export const DEMAND_CONTAINERS = 5_000;
export const EPOCH = 1_700_000_000_000;
