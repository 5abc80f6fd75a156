/**
 * The cluster generator's disk reimages: single servers, whole tenants and environments, as renewal processes at the
 * calibrated rates.
 */
import { SeededRng } from "../../common/rng.js";
import type { SimReimage } from "../model.js";
import { MONTH_MS } from "../model.js";
import {
  CORRELATED_SPREAD_MS,
  MONTHLY_RATE_LOG_SD,
  SINGLE_REIMAGE_REGULARITY,
  Stream,
  TENANT_REIMAGE_REGULARITY,
  WHOLE_TENANT_CHANCE,
} from "./calibration.js";
import type { EnvironmentPlan, TenantPlan } from "./tenants.js";
import { exponential, streamSeed } from "./random.js";

/** Reimages over [0, horizonMs), ascending by time (then server). */
export function generateReimages(
  plans: TenantPlan[],
  environments: EnvironmentPlan[],
  horizonMs: number,
  seed: number,
): SimReimage[] {
  const times: number[] = [];
  const servers: number[] = [];
  const add = (atMs: number, server: number): void => {
    if (atMs < horizonMs) {
      times.push(atMs);
      servers.push(server);
    }
  };
  const months = Math.ceil(horizonMs / MONTH_MS);
  for (let t = 0; t < plans.length; t++) {
    const p = plans[t]!;
    // One stream per process, so that a longer horizon extends a shorter one's reimages rather than redrawing them.
    const jitterRng = new SeededRng(streamSeed(seed, Stream.ReimageJitter, t));
    const singlesRng = new SeededRng(streamSeed(seed, Stream.SingleReimages, t));
    const rng = new SeededRng(streamSeed(seed, Stream.TenantReimages, t));
    // The environment's events already cover part of the tenant's rate.
    const own = Math.max(0, p.reimagesPerServerMonth - environments[p.environment]!.reimagesPerMonth);
    const meanHit = WHOLE_TENANT_CHANCE + (1 - WHOLE_TENANT_CHANCE) * 0.75;
    const tenantEventsPerMonth = (p.correlatedShare * own) / meanHit;
    const singlesPerMonth = (1 - p.correlatedShare) * own * p.size;
    const singles = new Renewals(SINGLE_REIMAGE_REGULARITY, singlesRng);
    const tenantWide = new Renewals(TENANT_REIMAGE_REGULARITY, rng);
    const pool = [...p.servers];
    for (let m = 0; m < months; m++) {
      const jitter = monthlyJitter(jitterRng);
      const to = Math.min(horizonMs, (m + 1) * MONTH_MS);
      singles.run((singlesPerMonth * jitter) / MONTH_MS, to, (at) => add(at, p.servers[singlesRng.int(p.size)]!));
      tenantWide.run((tenantEventsPerMonth * jitter) / MONTH_MS, to, (at) => {
        const whole = rng.next() < WHOLE_TENANT_CHANCE;
        const hit = whole ? p.size : Math.max(1, Math.round(p.size * (0.5 + 0.5 * rng.next())));
        // A partial Fisher-Yates shuffle picks `hit` distinct servers.
        for (let i = 0; i < hit; i++) {
          const j = i + rng.int(p.size - i);
          const s = pool[j]!;
          pool[j] = pool[i]!;
          pool[i] = s;
          add(at + rng.next() * CORRELATED_SPREAD_MS, s);
        }
      });
    }
  }
  for (let e = 0; e < environments.length; e++) {
    const env = environments[e]!;
    if (!(env.reimagesPerMonth > 0)) continue;
    const rng = new SeededRng(streamSeed(seed, Stream.EnvironmentReimages, e));
    const events = new Renewals(1, rng);
    for (let m = 0; m < months; m++) {
      const jitter = monthlyJitter(rng);
      const to = Math.min(horizonMs, (m + 1) * MONTH_MS);
      events.run((env.reimagesPerMonth * jitter) / MONTH_MS, to, (at) => {
        for (const t of env.tenants) for (const s of plans[t]!.servers) add(at + rng.next() * CORRELATED_SPREAD_MS, s);
      });
    }
  }
  const order = times.map((_, i) => i);
  order.sort((a, b) => times[a]! - times[b]! || servers[a]! - servers[b]!);
  return order.map((i) => ({ atMs: Math.floor(times[i]!), server: servers[i]! }));
}

/** A month's rate multiplier: lognormal with mean 1. */
export function monthlyJitter(rng: SeededRng): number {
  return Math.exp(rng.normal(-(MONTHLY_RATE_LOG_SD ** 2) / 2, MONTHLY_RATE_LOG_SD));
}

/**
 * A renewal process whose gaps are gamma-distributed with integer shape `regularity` (1: Poisson; larger: closer to
 * a schedule) and whose rate may change between calls; the pending arrival carries over.
 */
export class Renewals {
  private nextMs: number | undefined;
  constructor(
    private readonly regularity: number,
    private readonly rng: SeededRng,
  ) {}

  /** Calls `at` for each arrival before `toMs` at rate `perMs` (arrivals per ms). */
  run(perMs: number, toMs: number, at: (tMs: number) => void): void {
    if (!(perMs > 0)) return;
    // The first arrival falls a uniform share of a gap after time 0, as in a process that started long before.
    this.nextMs ??= this.rng.next() * this.gap(perMs);
    while (this.nextMs < toMs) {
      at(this.nextMs);
      this.nextMs += this.gap(perMs);
    }
  }

  private gap(perMs: number): number {
    let g = 0;
    for (let i = 0; i < this.regularity; i++) g += exponential(this.rng, perMs * this.regularity);
    return g;
  }
}
