/**
 * The resource manager's drains (`harvest admin drain|undrain`, the `NodeAdmin` service): starts and stops them
 * durably, answers their status, and steps them every monitor tick, preempting in LARS order (the pure
 * `policy/drain.ts`) what will not end before a server's deadline.
 */
import type { Clock } from "../common/clock.js";
import { HarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { NodeDrain } from "../proto/generated/harvest/v1/NodeDrain.js";
import type { Applications } from "./applications.js";
import type { NodeTracker } from "./node-tracker.js";
import type { DrainContainer, DrainStatus, DrainTracker } from "./policy/drain.js";
import type { LifetimeModel } from "./policy/lifetime.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { Scheduler } from "./policy/scheduler.js";
import type { RmStore, StoredDrain } from "./state-store.js";

/** What the drains act on: the tracker of drain states and the daemon's parts that carry a drain out. */
export interface DrainServiceDeps {
  tracker: DrainTracker;
  scheduler: Scheduler;
  nodes: NodeTracker;
  apps: Applications;
  store: RmStore;
  lifetimes: LifetimeModel;
  clock: Clock;
  log: Logger;
}

/** Drains of servers before a planned reimage or maintenance, as the daemon runs them. */
export class DrainService {
  constructor(private readonly deps: DrainServiceDeps) {}

  /** Starts (or re-times) the drain of servers; durable before the answer. */
  async drain(nodeIds: readonly string[], deadlineMs: number): Promise<{ drains: NodeDrain[] }> {
    this.checkNodeIds(nodeIds);
    if (!(Number.isInteger(deadlineMs) && deadlineMs >= 0))
      throw new HarvestError("INVALID_ARGUMENT", "deadlineMs must be a Unix time in ms, or 0 for none", {
        details: { field: "deadlineMs" },
      });
    const now = this.deps.clock.nowMs();
    for (const id of nodeIds) {
      this.deps.tracker.start(id, now, deadlineMs);
      this.deps.scheduler.setSchedulable(id, false);
    }
    await this.persistDrains();
    this.deps.log.info("draining servers", {
      nodeIds,
      deadline: deadlineMs ? new Date(deadlineMs).toISOString() : "none",
    });
    // The first step now, so that the status answered shows what will be left to finish.
    this.step(now);
    return this.report(nodeIds);
  }

  /** Ends the drain of servers (they take containers again); durable before the answer, which is their last status. */
  async undrain(nodeIds: readonly string[]): Promise<{ drains: NodeDrain[] }> {
    this.checkNodeIds(nodeIds);
    const report = this.report(nodeIds);
    for (const id of nodeIds) {
      this.deps.tracker.stop(id);
      this.deps.scheduler.setSchedulable(id, true);
    }
    await this.persistDrains();
    this.deps.log.info("servers back in service", { nodeIds });
    return report;
  }

  /** Rejects an empty list and ids this resource manager has never seen (typos), naming the known ones. */
  private checkNodeIds(nodeIds: readonly string[]): void {
    if (nodeIds.length === 0)
      throw new HarvestError("INVALID_ARGUMENT", "name at least one server", { details: { field: "nodeIds" } });
    for (const id of nodeIds) {
      if (this.deps.nodes.has(id) || this.deps.tracker.isDraining(id)) continue;
      const known = this.deps.nodes.ids().join(", ") || "none";
      throw new HarvestError("NODE_NOT_FOUND", `no server ${JSON.stringify(id)}; known servers: ${known}`, {
        details: { nodeId: id },
      });
    }
  }

  private async persistDrains(): Promise<void> {
    const stored: StoredDrain[] = this.deps.tracker
      .status()
      .map((d) => ({ nodeId: d.nodeId, startedMs: d.startedMs, deadlineMs: d.deadlineMs }));
    await this.deps.store.putDrains(stored);
  }

  /** The status of the drains of `nodeIds` (every drain when omitted). */
  report(nodeIds?: readonly string[]): { drains: NodeDrain[] } {
    const wanted = nodeIds ? new Set(nodeIds) : undefined;
    const drains = this.deps.tracker
      .status()
      .filter((d) => !wanted || wanted.has(d.nodeId))
      .map((d: DrainStatus) => ({ ...d, registered: this.deps.nodes.get(d.nodeId)?.state === "RUNNING" }));
    return { drains };
  }

  /** One step of every drain: preempts what will not end before its server's deadline (LARS order, bounded rate). */
  step(now: number): void {
    for (const nodeId of this.deps.tracker.nodeIds()) {
      const containers: DrainContainer[] = this.deps.scheduler.containersOn(nodeId).map((alloc) => {
        const startMs = this.deps.apps.allocations.startedMs(alloc.appId, alloc.containerId) || now;
        return {
          containerId: alloc.containerId,
          startMs,
          isJobManager: alloc.priority === AM_PRIORITY,
          remainingMs: this.deps.lifetimes.remainingMs(
            this.deps.apps.allocations.containerKey(alloc.appId, alloc.priority),
            now - startMs,
          ),
        };
      });
      const step = this.deps.tracker.step(nodeId, now, containers);
      if (step.preempt.length === 0) continue;
      this.deps.log.info(step.atDeadline ? "drain deadline: preempting what is left" : "drain: preempting", {
        nodeId,
        containers: step.preempt,
      });
      for (const id of step.preempt)
        this.deps.apps.allocations.preempt(
          id,
          "PREEMPTED_BY_DRAIN",
          step.atDeadline
            ? `server ${nodeId} reached its drain deadline`
            : `server ${nodeId} is draining and this container was predicted to outlast its deadline`,
        );
    }
  }
}
