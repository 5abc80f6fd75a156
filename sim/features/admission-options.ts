/**
 * The options of admission control in the compute simulation, their resolver, and the state of the simulated
 * admission queue.
 */
import { isHarvestError } from "../../common/errors.js";
import { resolveAdmissionOptions, resolveLifetimeOptions } from "../../resourcemanager/index.js";
import type {
  AdmissionOptions,
  AdmissionPolicy,
  AdmissionServer,
  LifetimeOptions,
  QueuedJob,
  AdmissionQueue,
  JobDemandModel,
  LifetimeModel,
} from "../../resourcemanager/index.js";
import type { SimJob } from "../jobs.js";
import { checkAboveZero, invalidArgument } from "../options.js";

/** Whose options the messages name: INVALID_ARGUMENT "compute option <field> ...". */
export const WHAT = "compute";

/**
 * Admission control in the compute simulator (`ComputeOptions.admission`): seeds/003's policies with the resource
 * manager's settings (`AdmissionOptions`: thresholds, horizon, steps, correlation, backfill), plus how often the queue
 * is re-evaluated and the lifetime model's settings.
 */
export interface SimAdmissionOptions extends Partial<Omit<AdmissionOptions, "policy">> {
  /** "none": no queue; every job is submitted on arrival, exactly as without admission control. */
  policy: AdmissionPolicy;
  /**
   * While jobs wait, the queue is re-evaluated this often (the resource manager's monitor tick), besides on every
   * arrival and every job's end.
   * @default 60000
   */
  tickMs?: number;
  /**
   * The lifetime model that predicts a job's run time from its name's past runs (`LifetimeModel`; its
   * `defaultLifetimeMs` is the prediction before any job has finished).
   * @default {}
   */
  lifetime?: Partial<LifetimeOptions>;
}

/** {@link SimAdmissionOptions} resolved. */
export interface ResolvedSimAdmissionOptions {
  policy: AdmissionPolicy;
  options: AdmissionOptions;
  tickMs: number;
  lifetime: LifetimeOptions;
}

/**
 * Fills the defaults of `admission` and validates it: INVALID_ARGUMENT naming `admission.<field>`, as every compute
 * option (the resource manager's resolvers say CONFIG_INVALID, which is about a daemon's configuration).
 */
export function resolveSimAdmissionOptions(admission: SimAdmissionOptions): ResolvedSimAdmissionOptions {
  const { tickMs = 60_000, lifetime = {}, ...rest } = admission;
  const named = <T>(prefix: string, resolve: () => T): T => {
    try {
      return resolve();
    } catch (err) {
      if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
      invalidArgument(WHAT, `admission.${prefix}${String(err.details.field)}`, `is invalid: ${err.message}`);
    }
  };
  const options = named("", () => resolveAdmissionOptions(rest));
  const lifetimeOptions = named("lifetime.", () => resolveLifetimeOptions(lifetime));
  checkAboveZero(WHAT, "admission.tickMs", tickMs);
  return { policy: options.policy, options, tickMs, lifetime: lifetimeOptions };
}

/** A job in the simulated admission queue: the job and its demand (job manager + max concurrency x task size). */
export interface WaitingJob extends QueuedJob {
  job: SimJob;
  demandMilli: number;
  arrivedMs: number;
}

/** Waiting jobs the simulated `AdmissionQueue` holds under strict order; the rest wait in a backlog behind them. */
export const ADMISSION_WINDOW = 16;

/** Admission control's state in a run (see `AdmissionFeature.startAdmission`). */
export interface AdmissionState {
  readonly options: AdmissionOptions;
  readonly tickMs: number;
  readonly queue: AdmissionQueue<WaitingJob>;
  readonly lifetime: LifetimeModel;
  /** Every server as the policy sees it; allocation and live primary usage are refreshed before each pass. */
  readonly servers: AdmissionServer[];
  /** Capacity - reserve summed over servers (the paper's C): no job's demand counts above it. */
  readonly poolMilli: number;
  /** Admitted jobs not yet ended, by application id. */
  readonly admitted: Map<string, { name: string; demandMilli: number; admittedAtMs: number; heldCoreMs: number }>;
  /** What each recurring job held on average in its past runs: the demand the policies count. */
  readonly demand: JobDemandModel;
  /** Jobs waiting behind the queue's `ADMISSION_WINDOW` (strict order only), from `backlogHead` on. */
  backlog: WaitingJob[];
  backlogHead: number;
  /** The jobs in `queue`, by application id. */
  readonly queued: Map<string, WaitingJob>;
  /** A tick, or a pass after a job's end, is scheduled. */
  tickPending: boolean;
  passPending: boolean;
  jobsAdmitted: number;
  jobsRejected: number;
  /** Sum of the admitted jobs' waits in the queue. */
  waitMs: number;
}
