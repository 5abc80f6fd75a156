/** The scheduler bench's part (1): allocations per second of the resource manager's scheduler over simulated nodes. */
import { formatAppId, formatContainerId } from "../common/ids.js";
import { SeededRng } from "../common/rng.js";
import { Scheduler, StockSchedulerPolicy } from "../resourcemanager/index.js";
import type { Allocation } from "../resourcemanager/index.js";
import { settledMemory } from "./report.js";
import { CONTAINER, DEMAND_CONTAINERS, EPOCH, NODE_CAPACITY } from "./scheduler-flags.js";
import type { SchedulerFlags } from "./scheduler-flags.js";

// ------------------------------------------------------------------------------------------------ (1) allocation

/** What one allocation run measured. */
export interface AllocationResult {
  nodes: number;
  wallMs: number;
  /** Time inside Scheduler calls (heartbeat handling and asks), a subset of wallMs. */
  schedulerMs: number;
  heartbeats: number;
  allocations: number;
  releases: number;
  appsSubmitted: number;
  appsFinished: number;
  liveContainers: number;
  hungryApps: number;
  allocationsPerSec: number;
  allocationsPerSchedulerSec: number;
  heartbeatsPerSec: number;
  heapNodeTableBytes: number;
  heapLiveStateBytes: number;
  liveContainersAtHeapCheck: number;
}

interface SimApp {
  seq: number;
  total: number;
  granted: number;
  released: number;
}

/** Drives the pure Scheduler with the workload described at the top of this file. */
export async function runAllocation(nodeCount: number, f: SchedulerFlags): Promise<AllocationResult> {
  const rng = new SeededRng(f.seed);
  const lifetimeRounds = f["lifetime-rounds"];
  // Harness state first, so that the heap deltas below are the scheduler's.
  const nodeIds = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(5, "0")}`);
  const basePrimaryMilli = Int32Array.from({ length: nodeCount }, () => rng.int(NODE_CAPACITY.vcoresMilli / 2));
  const basePrimaryMb = Int32Array.from({ length: nodeCount }, () => rng.int(NODE_CAPACITY.memoryMb / 2));
  const dueIds: string[][] = Array.from({ length: nodeCount }, () => []);
  const dueRounds: number[][] = Array.from({ length: nodeCount }, () => []);
  const apps = new Map<string, SimApp>();
  const hungry = new Set<string>();
  let containerSeq = 0;
  let appSeq = 0;
  let outstanding = 0;
  let heartbeats = 0;
  let allocations = 0;
  let releases = 0;
  let appsSubmitted = 0;
  let appsFinished = 0;

  const heap0 = await settledMemory();
  // The resource manager's id generator looks the application up the same way.
  const scheduler = new Scheduler(
    new StockSchedulerPolicy(),
    { reserveFraction: 0.1, maxAllocationsPerHeartbeat: 0 },
    (appId) => formatContainerId(EPOCH, apps.get(appId)?.seq ?? 0, 1, ++containerSeq),
  );
  for (const id of nodeIds) scheduler.addNode(id, NODE_CAPACITY);
  const heap1 = await settledMemory();

  // Time inside Scheduler calls only; the harness's own bookkeeping around them is not counted.
  let schedulerMs = 0;
  const submit = (): void => {
    const seq = ++appSeq;
    const appId = formatAppId(EPOCH, seq);
    const total = 10 + rng.int(491);
    apps.set(appId, { seq, total, granted: 0, released: 0 });
    hungry.add(appId);
    const t0 = performance.now();
    scheduler.addApp(appId, seq);
    scheduler.setAsks(appId, [{ priority: 0, resource: CONTAINER, count: total }]);
    schedulerMs += performance.now() - t0;
    outstanding += total;
    appsSubmitted++;
  };
  const onReleased = (alloc: Allocation): void => {
    releases++;
    const app = apps.get(alloc.appId);
    if (!app) return;
    app.released++;
    if (app.released === app.total) {
      const t0 = performance.now();
      scheduler.removeApp(alloc.appId);
      schedulerMs += performance.now() - t0;
      apps.delete(alloc.appId);
      appsFinished++;
    }
  };
  const finishing: string[] = [];
  const released: (Allocation | undefined)[] = [];
  // One node heartbeat, in the resource manager's order: completions, primary usage, grants.
  const heartbeat = (): void => {
    const i = heartbeats % nodeCount;
    const round = Math.floor(heartbeats / nodeCount);
    const nodeId = nodeIds[i]!;
    const ids = dueIds[i]!;
    const due = dueRounds[i]!;
    if (i === 0) {
      // Each job manager re-sends its remaining asks once a round (absolute counts, as Allocate does).
      const asks = [...hungry].map((appId) => {
        const app = apps.get(appId)!;
        return { appId, asks: [{ priority: 0, resource: CONTAINER, count: app.total - app.granted }] };
      });
      const t0 = performance.now();
      for (const a of asks) scheduler.setAsks(a.appId, a.asks);
      schedulerMs += performance.now() - t0;
    }
    finishing.length = 0;
    let kept = 0;
    for (let q = 0; q < ids.length; q++) {
      if (due[q]! <= round) {
        finishing.push(ids[q]!);
      } else {
        ids[kept] = ids[q]!;
        due[kept] = due[q]!;
        kept++;
      }
    }
    ids.length = kept;
    due.length = kept;
    const base = basePrimaryMilli[i]!;
    const usage = { vcoresMilli: base + Math.round((rng.next() - 0.5) * 0.2 * base), memoryMb: basePrimaryMb[i]! };
    const t0 = performance.now();
    released.length = 0;
    for (const id of finishing) released.push(scheduler.release(id));
    scheduler.updatePrimaryUsage(nodeId, usage);
    const granted = scheduler.allocateOnNode(nodeId);
    schedulerMs += performance.now() - t0;
    for (const alloc of released) if (alloc) onReleased(alloc);
    for (const alloc of granted) {
      ids.push(alloc.containerId);
      due.push(round + 1 + rng.int(lifetimeRounds));
      const app = apps.get(alloc.appId)!;
      app.granted++;
      if (app.granted === app.total) hungry.delete(alloc.appId);
    }
    allocations += granted.length;
    outstanding -= granted.length;
    while (outstanding < DEMAND_CONTAINERS) submit();
    heartbeats++;
  };

  // Warm-up: fill the cluster and let the JIT settle; not measured.
  const warmupHeartbeats = (lifetimeRounds + 2) * nodeCount;
  while (heartbeats < warmupHeartbeats) heartbeat();
  const liveAtHeapCheck = scheduler.stats().containers;
  const heap2 = await settledMemory();

  const counts0 = { heartbeats, allocations, releases, appsSubmitted, appsFinished };
  schedulerMs = 0;
  const start = performance.now();
  const deadline = start + f.seconds * 1000;
  for (;;) {
    for (let n = 0; n < 512; n++) heartbeat();
    if (performance.now() >= deadline) break;
  }
  const wallMs = performance.now() - start;
  const stats = scheduler.stats();
  const allocated = allocations - counts0.allocations;
  return {
    nodes: nodeCount,
    wallMs,
    schedulerMs,
    heartbeats: heartbeats - counts0.heartbeats,
    allocations: allocated,
    releases: releases - counts0.releases,
    appsSubmitted: appsSubmitted - counts0.appsSubmitted,
    appsFinished: appsFinished - counts0.appsFinished,
    liveContainers: stats.containers,
    hungryApps: stats.hungryApps,
    allocationsPerSec: allocated / (wallMs / 1000),
    allocationsPerSchedulerSec: allocated / (schedulerMs / 1000),
    heartbeatsPerSec: (heartbeats - counts0.heartbeats) / (wallMs / 1000),
    heapNodeTableBytes: heap1.heapUsedBytes - heap0.heapUsedBytes,
    heapLiveStateBytes: heap2.heapUsedBytes - heap1.heapUsedBytes,
    liveContainersAtHeapCheck: liveAtHeapCheck,
  };
}
