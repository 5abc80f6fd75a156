/** Settings of admission control (the policy, its threshold, the horizon and steps), their defaults and validation. */
import { invalidOption, stripUndefined } from "../../common/options.js";

const DAY_MS = 86_400_000;

// ---------------------------------------------------------------------------------------------------------------------
// Options.

/** The admission policy: none (the baseline: admit at once, as stock YARN) or seeds/003's three moment policies. */
export type AdmissionPolicy = "none" | "zeroth" | "first" | "second";

/** How the primaries' variances add up over servers (see the module comment). */
export type PrimaryCorrelation = "independent" | "tenant" | "full";

/** Settings of admission control. */
export interface AdmissionOptions {
  /** Which policy decides. "none" is the baseline beside the others (DESIGN.md principle 2). @default "none" */
  policy: AdmissionPolicy;
  /**
   * Zeroth: admit while the secondary demand after admission is at most this share of the cores harvestable now.
   * Below 1 keeps room for the primaries to grow before kills start, as the paper's threshold reserves cores for
   * scale-outs; above 1 (at most 4) oversubscribes, as seeds/003's zeroth-moment threshold may: a job's demand is its
   * widest stage for its whole life, which it rarely holds. Tune it (`tuneThreshold`).
   * @default 0.8
   */
  zerothThreshold: number;
  /**
   * First (Markov): admit while E[D] / C is at most this at every step. Markov's bound is loose, so this is tuned far
   * above the SLA itself (seeds/003 section 4.2): 0.8 keeps the expected demand a fifth below capacity.
   * @default 0.8
   */
  firstThreshold: number;
  /**
   * Second (Cantelli): admit while Cantelli's bound is at most this at every step. 0.1 keeps the expected demand three
   * standard deviations below capacity (sqrt(0.9 / 0.1) = 3), the usual three-sigma margin; like the paper's, it is a
   * starting point to tune, not the SLA.
   * @default 0.1
   */
  secondThreshold: number;
  /** The steps go at most this far ahead of now (the job's predicted lifetime, capped). @default 86400000 (a day) */
  horizonMs: number;
  /** Distance between the steps evaluated. @default 300000 (5 minutes) */
  stepMs: number;
  /** How the primaries' variances add up over servers. @default "independent" (as seeds/003) */
  primaryCorrelation: PrimaryCorrelation;
  /**
   * The queue lets a job that fits pass a waiting job before it (backfill) instead of keeping strict order (priority,
   * then submission: the head blocks everyone behind it). See `AdmissionQueue`.
   * @default false
   */
  backfill: boolean;
}

/** The defaults of every `AdmissionOptions` field. */
export const DEFAULT_ADMISSION_OPTIONS: Readonly<AdmissionOptions> = Object.freeze({
  policy: "none",
  zerothThreshold: 0.8,
  firstThreshold: 0.8,
  secondThreshold: 0.1,
  horizonMs: DAY_MS,
  stepMs: 300_000,
  primaryCorrelation: "independent",
  backfill: false,
});

/** Most steps one decision evaluates (horizonMs / stepMs): a day at 1-second steps is fine, a year is not. */
export const MAX_ADMISSION_STEPS = 100_000;

const POLICIES: readonly AdmissionPolicy[] = ["none", "zeroth", "first", "second"];
const CORRELATIONS: readonly PrimaryCorrelation[] = ["independent", "tenant", "full"];

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveAdmissionOptions(partial: Partial<AdmissionOptions> = {}): AdmissionOptions {
  const o: AdmissionOptions = { ...DEFAULT_ADMISSION_OPTIONS, ...stripUndefined(partial) };
  const bad = (field: string, why: string): never => invalidOption("admission", field, why);
  if (!POLICIES.includes(o.policy)) bad("policy", `must be one of ${POLICIES.join(", ")}, got ${String(o.policy)}`);
  const fraction = (field: "zerothThreshold" | "firstThreshold", v: number, max: number): void => {
    if (!(typeof v === "number" && v > 0 && v <= max)) bad(field, `must be in (0, ${max}], got ${String(v)}`);
  };
  fraction("zerothThreshold", o.zerothThreshold, 4);
  // Markov's bound is a probability: 1 already admits everything.
  fraction("firstThreshold", o.firstThreshold, 1);
  // 1 would admit even when the expected demand exceeds capacity (Cantelli's bound never exceeds 1).
  if (!(typeof o.secondThreshold === "number" && o.secondThreshold > 0 && o.secondThreshold < 1))
    bad("secondThreshold", `must be in (0, 1), got ${String(o.secondThreshold)}`);
  if (!(Number.isInteger(o.stepMs) && o.stepMs > 0)) bad("stepMs", "must be a whole number of ms > 0");
  if (!(Number.isFinite(o.horizonMs) && o.horizonMs >= 0)) bad("horizonMs", "must be a number of ms >= 0");
  if (o.horizonMs / o.stepMs > MAX_ADMISSION_STEPS)
    bad("horizonMs", `must be at most ${MAX_ADMISSION_STEPS} steps of stepMs (${o.stepMs} ms)`);
  if (!CORRELATIONS.includes(o.primaryCorrelation))
    bad("primaryCorrelation", `must be one of ${CORRELATIONS.join(", ")}`);
  if (typeof o.backfill !== "boolean") bad("backfill", "must be true or false");
  return o;
}

/** The threshold `options.policy` compares with (1 for "none", which compares nothing). */
export function thresholdOf(options: AdmissionOptions): number {
  switch (options.policy) {
    case "none":
      return 1;
    case "zeroth":
      return options.zerothThreshold;
    case "first":
      return options.firstThreshold;
    case "second":
      return options.secondThreshold;
  }
}
