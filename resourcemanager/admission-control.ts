/**
 * The resource manager's admission control (seeds/003): jobs wait in a queue (priority, then submission order) until
 * the configured policy admits them into the harvested capacity; `none` admits at once, as before. The policies and the
 * queue are the pure `policy/admission*.ts`; this module gathers their inputs from the daemon: each server's capacity,
 * reserve, allocation and live primary usage, each primary's demand profile from the tenant registry's history (by time
 * of day for tenants whose pattern is periodic), the admitted jobs' demand and re-predicted ends from the lifetime
 * model, and, optionally, thresholds tuned by `harvest sim admission` (a JSON file).
 *
 * A server with no history yet counts at its primary's live usage with no variance: the pure module's prior (the
 * whole server) would keep a new cluster from admitting anything under the first and second policies until its
 * history builds up; the live usage is the best estimate there is, and the profile replaces it once there is history.
 */
import { readFileSync } from "node:fs";
import { errorMessage, HarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { AdmissionOutlook, idleClusterDecision } from "./policy/admission.js";
import { AdmissionQueue } from "./policy/admission-queue.js";
import { DemandProfile, fixedDemand } from "./policy/demand-profile.js";
import { resolveAdmissionOptions } from "./policy/admission-options.js";
import type { AdmissionDecision, AdmissionServer, AdmittedJob } from "./policy/admission.js";
import type { AdmissionOptions, AdmissionPolicy } from "./policy/admission-options.js";
import type { PrimaryDemandSource } from "./policy/demand-profile.js";
import type { QueueEntry } from "./policy/admission-queue.js";

/** A job waiting for admission. */
export interface AdmissionJob {
  appId: string;
  priority: number;
  /** Job manager + max concurrency x the largest task, milli-cores, capped at what the cluster could hold. */
  demandMilli: number;
  /** The job's name, for its predicted lifetime. */
  name: string;
}

/** What admission control reads from the daemon. */
export interface AdmissionDeps {
  /** The servers that may take work now (registered, not draining). */
  servers(): Omit<AdmissionServer, "primary">[];
  /** Every admitted job that has not ended. */
  admitted(nowMs: number): AdmittedJob[];
  /** A job's predicted lifetime, ms, from its name (re-predicted from its uptime for running jobs by the caller). */
  lifetimeMs(name: string): number;
  /** A server's utilization history over [fromMs, toMs). */
  history(server: string, fromMs: number, toMs: number): Promise<UtilizationSeries>;
  /** Whether the tenant owning a server has a periodic pattern (time-of-day moments). */
  periodic(server: string): boolean;
  nowMs(): number;
}

/**
 * Reads a thresholds file written by `harvest sim admission` (`{ "admissionOptions": { ... }, "sla": ... }`) and
 * returns its options. CONFIG_INVALID when it cannot be read or holds something else.
 */
export function readAdmissionThresholds(path: string): Partial<AdmissionOptions> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `resource manager option admissionThresholdsFile: cannot read ${path}: ${errorMessage(err)}`,
      { details: { field: "admissionThresholdsFile" } },
    );
  }
  const options = (parsed as { admissionOptions?: unknown } | null)?.admissionOptions;
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw new HarvestError(
      "CONFIG_INVALID",
      `resource manager option admissionThresholdsFile: ${path} holds no "admissionOptions" object (write it with 'harvest sim admission')`,
      { details: { field: "admissionThresholdsFile" } },
    );
  const picked: Partial<AdmissionOptions> = {};
  for (const k of ["zerothThreshold", "firstThreshold", "secondThreshold"] as const) {
    const v = (options as Record<string, unknown>)[k];
    if (v !== undefined) picked[k] = v as number;
  }
  return picked;
}

/** Admission control as the resource manager runs it. */
export class AdmissionControl {
  readonly options: AdmissionOptions;
  private readonly queue: AdmissionQueue<AdmissionJob>;
  private readonly profiles = new Map<string, DemandProfile>();
  private profilesBuiltMs = Number.NEGATIVE_INFINITY;
  private refreshing = false;

  constructor(
    policy: AdmissionPolicy,
    options: Partial<AdmissionOptions>,
    private readonly deps: AdmissionDeps,
    private readonly log: Logger,
    /** Days of history a demand profile reads. */
    private readonly historyDays = 14,
    /** Profiles are rebuilt this often. */
    private readonly refreshMs = 600_000,
  ) {
    this.options = resolveAdmissionOptions({ ...options, policy });
    this.queue = new AdmissionQueue({ backfill: this.options.backfill });
  }

  get enabled(): boolean {
    return this.options.policy !== "none";
  }

  /** Jobs waiting now. */
  get waiting(): number {
    return this.queue.size;
  }

  /**
   * The decision an idle cluster would make on the job: when it does not admit, no state of this cluster will, and
   * the job is refused at submit (ADMISSION_IMPOSSIBLE) instead of waiting for ever.
   */
  checkAdmissible(job: Omit<AdmissionJob, "appId">): void {
    if (!this.enabled) return;
    const servers = this.deps.servers();
    if (servers.length === 0) return;
    const d = idleClusterDecision(
      servers,
      { demandMilli: job.demandMilli, lifetimeMs: this.deps.lifetimeMs(job.name) },
      this.options,
    );
    if (!d.admit)
      throw new HarvestError(
        "ADMISSION_IMPOSSIBLE",
        `job ${JSON.stringify(job.name)} can never be admitted: it needs ${(job.demandMilli / 1000).toFixed(1)} cores, and even an idle cluster of ${servers.length} server(s) ${d.reason.replace(/^waits: /, "would hold it: ")}`,
        { details: { demandMilli: String(job.demandMilli), policy: this.options.policy } },
      );
  }

  /** Queues a job (at submit, or at recovery with its submission time). */
  enqueue(job: AdmissionJob, sinceMs: number): void {
    this.queue.enqueue(job, sinceMs);
  }

  /** Takes a job out of the queue (killed while waiting). */
  remove(appId: string): void {
    this.queue.remove(appId);
  }

  has(appId: string): boolean {
    return this.queue.has(appId);
  }

  /** Why each waiting job waits. */
  snapshot(): QueueEntry[] {
    return this.queue.snapshot();
  }

  /** Admits what the policy lets through now; returns the admitted jobs with their decisions. */
  admitReady(): { job: AdmissionJob; decision: AdmissionDecision; waitedMs: number }[] {
    if (this.queue.size === 0) return [];
    const now = this.deps.nowMs();
    if (now - this.profilesBuiltMs >= this.refreshMs) void this.refreshProfiles();
    const servers: AdmissionServer[] = this.deps.servers().map((s) => ({
      ...s,
      primary: this.primaryOf(s.serverId, s.capacityMilli, s.primaryNowMilli),
    }));
    if (servers.length === 0) return [];
    const outlook = new AdmissionOutlook({ servers, admitted: this.deps.admitted(now) }, now, this.options);
    return this.queue.admitReady(now, (job) => {
      const candidate = { appId: job.appId, demandMilli: job.demandMilli, lifetimeMs: this.deps.lifetimeMs(job.name) };
      const d = outlook.decide(candidate);
      if (d.admit) outlook.commit(candidate);
      return d;
    });
  }

  /** Rebuilds every server's demand profile from the tenant history (in the background; errors are logged). */
  async refreshProfiles(): Promise<void> {
    if (this.refreshing || !this.enabled || this.options.policy === "zeroth") return;
    this.refreshing = true;
    this.profilesBuiltMs = this.deps.nowMs();
    try {
      const to = this.deps.nowMs();
      const from = to - this.historyDays * 86_400_000;
      for (const s of this.deps.servers()) {
        const series = await this.deps.history(s.serverId, from, to);
        const profile = new DemandProfile(series, { periodic: this.deps.periodic(s.serverId) });
        if (profile.samples > 0) this.profiles.set(s.serverId, profile);
      }
    } catch (err) {
      this.log.warn("could not rebuild the primaries' demand profiles", { error: errorMessage(err) });
    } finally {
      this.refreshing = false;
    }
  }

  private primaryOf(server: string, capacityMilli: number, primaryNowMilli: number): PrimaryDemandSource {
    const profile = this.profiles.get(server);
    if (profile) return profile;
    return fixedDemand(capacityMilli > 0 ? (100 * primaryNowMilli) / capacityMilli : 0, 0);
  }
}
