/**
 * What the simulator's tests share: a simulated cluster built by hand (tenants in order, their servers numbered in
 * turn), a one-vertex job, a run's figures without its wall-clock ones, and the field an option error names.
 */
import { Command } from "commander";
import { vi } from "vitest";
import { registerSimCommands } from "../cli/sim-commands.js";
import { isHarvestError } from "../common/errors.js";
import { SeededRng } from "../common/rng.js";
import type { UtilizationPattern } from "../common/trace-gen.js";
import type { ComputeRunResult } from "../sim/compute.js";
import { jobShape } from "../sim/jobs.js";
import type { SimJobShape } from "../sim/jobs.js";
import { DAY_MS } from "../sim/model.js";
import type { SimCluster, SimServer, SimTenant } from "../sim/model.js";
import { detailsOf } from "../common/errors.js";

/** Runs `harvest <argv...>` (a `sim` command) in this process; returns what it printed on stdout (stderr is dropped). */
export async function runSimCommand(argv: readonly string[]): Promise<string> {
  const program = new Command().exitOverride();
  registerSimCommands(program);
  const out: string[] = [];
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    out.push(String(chunk));
    return true;
  });
  const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  try {
    await program.parseAsync([...argv], { from: "user" });
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
  return out.join("");
}

/** A one-vertex job of `tasks` tasks of `taskMs` each. */
export function flatJob(name: string, tasks: number, taskMs: number): SimJobShape {
  return jobShape(name, [{ name: "work", tasks, taskMs }]);
}

/** The figures of a run that must not depend on the wall clock. */
export function figures(r: ComputeRunResult): Omit<ComputeRunResult, "wallMs" | "eventsPerSec"> {
  const { wallMs: _wall, eventsPerSec: _rate, ...rest } = r;
  return rest;
}

/** The field a HarvestError names (`CODE:field`), or the error itself; undefined when `fn` does not throw. */
export function fieldOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return isHarvestError(err) ? `${err.code}:${detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field}` : err;
  }
  return undefined;
}

/** One tenant of a hand-built cluster. */
export interface TenantSpec {
  pattern: UtilizationPattern;
  servers: number;
  cores: number;
  /** CPU % of the tenant in slot k (slots of `slotMs` from time 0). */
  pct: (k: number) => number;
}

/** How a hand-built cluster's slots and servers are set: 5-minute slots and servers s0, s1, ... unless told. */
export interface HandClusterOptions {
  slotMs?: number;
  /** The id of server `index`. */
  serverId?: (index: number) => string;
}

/** A cluster of `tenants`, a rack per tenant. */
export function handCluster(
  tenants: readonly TenantSpec[],
  historyMs: number,
  experimentMs: number,
  options: HandClusterOptions = {},
): SimCluster {
  const slotMs = options.slotMs ?? 300_000;
  const serverId = options.serverId ?? ((index: number) => `s${index}`);
  const horizonMs = historyMs + experimentMs;
  const slots = Math.ceil(horizonMs / slotMs);
  const servers: SimServer[] = [];
  const built: SimTenant[] = tenants.map((spec, t) => {
    const ids: number[] = [];
    for (let i = 0; i < spec.servers; i++) {
      const index = servers.length;
      ids.push(index);
      servers.push({
        index,
        id: serverId(index),
        rack: `r${t}`,
        tenant: t,
        cores: spec.cores,
        diskBytes: 1e12,
        offsetPct: 0,
      });
    }
    const utilization = new Float32Array(slots);
    for (let k = 0; k < slots; k++) utilization[k] = spec.pct(k);
    return {
      index: t,
      id: `t${t}`,
      environment: `e${t}`,
      machineFunction: spec.pattern,
      pattern: spec.pattern,
      servers: ids,
      utilization,
      reimagesPerServerMonth: 0,
    };
  });
  return {
    servers,
    tenants: built,
    racks: tenants.length,
    slotMs,
    historyMs,
    horizonMs,
    reimages: [],
    level: "medium",
    source: "generated",
    seed: 1,
  };
}

/** The size of each tenant of a `threePatternCluster`, and the CPU % of the constant and unpredictable ones. */
export interface ThreePatternTenants {
  servers: number;
  cores: number;
  constantPct: number;
  /** The unpredictable tenant's CPU % is seeded noise in [0, noisePct). */
  noisePct: number;
}

/**
 * Three tenants, one per utilization pattern, after a week of history: constant, periodic (40 +- 30 % over each day)
 * and unpredictable.
 */
export function threePatternCluster(
  tenants: ThreePatternTenants,
  experimentMs: number,
  options: HandClusterOptions = {},
): SimCluster {
  const { servers, cores } = tenants;
  const slotMs = options.slotMs ?? 300_000;
  const rng = new SeededRng(5);
  const noise = Array.from({ length: 5000 }, () => tenants.noisePct * rng.next());
  return handCluster(
    [
      { pattern: "constant", servers, cores, pct: () => tenants.constantPct },
      { pattern: "periodic", servers, cores, pct: (k) => 40 + 30 * Math.sin((2 * Math.PI * k * slotMs) / DAY_MS) },
      { pattern: "unpredictable", servers, cores, pct: (k) => noise[k % noise.length]! },
    ],
    7 * DAY_MS,
    experimentMs,
    options,
  );
}
