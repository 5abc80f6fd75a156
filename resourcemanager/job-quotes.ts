/**
 * The resource manager's survival quotes (policy/survival-quote.ts): what it knows at a job's submission turned into
 * the quote's inputs. The servers are the running nodes, each with its tenant's kill rate (from the tenants' stored
 * history over the classifier's window, computed once per classification); the task durations are the lifetime
 * model's; the slots are the task containers free now beside the primaries and the reserve; the past runs are the job
 * history's entries of the job's name.
 */
import type { DagSpec } from "../common/dag-spec.js";
import { maxConcurrency } from "../common/dag-spec.js";
import { errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { LifetimeModel } from "./policy/lifetime.js";
import type { Scheduler } from "./policy/scheduler.js";
import {
  freeTaskSlots,
  quoteJob,
  quoteVerticesOfDag,
  resolveSurvivalQuoteOptions,
  tenantKillsPerHour,
} from "./policy/survival-quote.js";
import type { QuoteServer, SurvivalQuote, SurvivalQuoteOptions } from "./policy/survival-quote.js";
import type { RmStore } from "./state-store.js";
import type { TenantRegistry } from "./tenant-registry.js";

const DAY_MS = 86_400_000;

/** Quotes jobs at submission; see the file header. */
export class JobQuotes {
  private readonly options: SurvivalQuoteOptions;
  /** Kill rates per tenant, for the classification made at `clusteredMs`. */
  private rates: { clusteredMs: number; byTenant: Promise<Map<string, number>> } | undefined;
  /** The last rates computed, which quotes use while those of a newer classification are being computed. */
  private ready: Map<string, number> | undefined;
  private readonly deps: {
    tenants: Pick<TenantRegistry, "snapshot" | "serverSeries" | "ownerOf" | "tenants" | "options">;
    lifetimes: Pick<LifetimeModel, "taskDistribution">;
    store: Pick<RmStore, "history">;
    scheduler: Pick<Scheduler, "nodeViews">;
    /** The scheduler's reserve, a share of each node's cores. */
    reserveFraction: number;
    log: Logger;
  };

  /** The quotes over the resource manager's parts; `options` its `survivalQuote` and `reserveFraction`. */
  constructor(
    tenants: JobQuotes["deps"]["tenants"],
    lifetimes: JobQuotes["deps"]["lifetimes"],
    store: JobQuotes["deps"]["store"],
    scheduler: JobQuotes["deps"]["scheduler"],
    options: { survivalQuote: Partial<SurvivalQuoteOptions>; reserveFraction: number },
    log: Logger,
  ) {
    this.options = resolveSurvivalQuoteOptions(options.survivalQuote);
    this.deps = { tenants, lifetimes, store, scheduler, reserveFraction: options.reserveFraction, log };
  }

  /** The quote of `dag` submitted now; undefined (logged) when it cannot be made, which never fails a submission. */
  async quote(dag: DagSpec): Promise<SurvivalQuote | undefined> {
    try {
      const rates = await this.tenantRates();
      const taskMilli = Math.max(1, ...dag.vertices.map((v) => v.resources.vcoresMilli));
      const serverRates: number[] = [];
      const servers: QuoteServer[] = [];
      for (const v of this.deps.scheduler.nodeViews()) {
        const tenant = this.deps.tenants.ownerOf(v.nodeId);
        const rate = tenant ? rates.get(tenant.name) : undefined;
        if (rate !== undefined) serverRates.push(rate);
        servers.push({
          capacityMilli: v.capacity.vcoresMilli,
          primaryMilli: v.primaryUsage.vcoresMilli,
          reserveMilli: Math.ceil(v.capacity.vcoresMilli * this.deps.reserveFraction),
          allocatedMilli: v.allocated.vcoresMilli,
        });
      }
      const { slots, serversWithRoom } = freeTaskSlots(servers, taskMilli);
      const past = await this.deps.store.history(dag.name, this.options.pastRunsWindow);
      return quoteJob({
        job: dag.name,
        vertices: quoteVerticesOfDag(dag),
        lifetimes: this.deps.lifetimes,
        serverKillsPerHour: serverRates,
        slots: Math.max(1, Math.min(maxConcurrency(dag), slots)),
        tasksPerServer: serversWithRoom > 0 ? slots / serversWithRoom : 1,
        pastRuns: past.map((h) => ({
          tasksPreempted: h.tasksPreempted,
          durationMs: h.durationMs,
          succeeded: h.outcome === "JOB_SUCCEEDED",
        })),
        options: this.options,
      });
    } catch (err) {
      this.deps.log.warn("could not quote a job", { name: dag.name, error: errorMessage(err) });
      return undefined;
    }
  }

  /** Each tenant's kill rate over the classifier's window, computed once per classification. */
  /**
   * Each tenant's kill rates for the last classification. Reading every server's history takes a while on a large
   * cluster, so a submission waits for it only when no rates were ever computed; otherwise it is quoted with the last
   * rates while the new ones are computed. A computation that failed is tried again at the next quote.
   */
  private async tenantRates(): Promise<Map<string, number>> {
    const clusteredMs = this.deps.tenants.snapshot.clusteredMs;
    if (this.rates?.clusteredMs !== clusteredMs) {
      const entry = { clusteredMs, byTenant: this.computeRates(clusteredMs) };
      this.rates = entry;
      entry.byTenant.then(
        (byTenant) => {
          if (this.rates === entry) this.ready = byTenant;
        },
        (err: unknown) => {
          if (this.rates === entry) this.rates = undefined;
          this.deps.log.warn("could not compute the tenants' kill rates", { error: errorMessage(err) });
        },
      );
    }
    return this.ready ?? (await this.rates.byTenant);
  }

  private async computeRates(toMs: number): Promise<Map<string, number>> {
    const { tenants } = this.deps;
    const fromMs = toMs - Math.round(tenants.options.windowDays * DAY_MS);
    const out = new Map<string, number>();
    for (const t of tenants.tenants()) {
      const perServer = [];
      for (const s of t.servers) perServer.push(await tenants.serverSeries(s, fromMs, toMs));
      const rate = tenantKillsPerHour(perServer, this.options.killSlackPct);
      if (rate !== undefined) out.set(t.name, rate);
    }
    return out;
  }
}
