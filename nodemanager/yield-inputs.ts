/**
 * The yield controller's view of the node at a tick (`YieldInput`): the running containers with their start and their
 * tasks' last reported progress, the primary's sample, the reserve kept for it, and the victim order of the options.
 * Memory counts only where the primary's is measured (the proc monitor; traces carry CPU only).
 */
import type { PrimarySample } from "../common/primary-monitor.js";
import type { NodeManagerOptions } from "./options.js";
import type { YieldInput } from "./policy/yield-controller.js";

/** What the yield controller reads of a running container (a `ContainerProcess`). */
export interface YieldSource {
  readonly spec: { readonly containerId: string; readonly vcoresMilli: number; memoryMb: number; isAm: boolean };
  /** When its process started. */
  readonly startedMs: number;
}

/** The options the yield step reads. */
export type YieldOptions = Pick<NodeManagerOptions, "capacity" | "reserveFraction" | "victimOrder" | "victimNearEndMs">;

/** The yield controller's input for `live` at `nowMs`; `progressOf` gives a task's last reported progress. */
export function yieldInput(
  live: readonly YieldSource[],
  sample: PrimarySample,
  options: YieldOptions,
  nowMs: number,
  progressOf: (containerId: string) => number | undefined,
): YieldInput {
  return {
    capacityMilli: options.capacity.vcoresMilli,
    primaryMilli: sample.cpuMilli,
    reserveMilli: Math.ceil(options.capacity.vcoresMilli * options.reserveFraction),
    ...(sample.memoryMb !== undefined
      ? {
          capacityMemoryMb: options.capacity.memoryMb,
          primaryMemoryMb: sample.memoryMb,
          reserveMemoryMb: Math.ceil(options.capacity.memoryMb * options.reserveFraction),
        }
      : {}),
    containers: live.map((c) => {
      const progress = c.spec.isAm ? undefined : progressOf(c.spec.containerId);
      return {
        containerId: c.spec.containerId,
        vcoresMilli: c.spec.vcoresMilli,
        memoryMb: c.spec.memoryMb,
        startedMs: c.startedMs,
        isAm: c.spec.isAm,
        ...(progress !== undefined ? { progress } : {}),
      };
    }),
    order: options.victimOrder,
    nowMs,
    nearEndMs: options.victimNearEndMs,
  };
}
