/**
 * Power meters of a node manager: one interface, three sources.
 *
 * - "rapl": the real thing where it exists. The Intel RAPL package energy counters in sysfs
 *   (`/sys/class/powercap/intel-rapl:<n>/energy_uj`, one per socket, also exposed for AMD by recent kernels), summed
 *   over packages; watts are the energy between two reads over the time between them. RAPL sees the CPU packages,
 *   not the whole server (no DRAM, disks, fans or PSU losses): the caller's budget must be in the same terms.
 * - "model": no meter at all (this machine has no readable RAPL): the server's CPU utilization through a SPECpower
 *   hardware profile (common/power-profiles.ts). Named as a model in its description, as DESIGN.md asks of fakes.
 * - "trace": a replay of measured watts from a `time_s,watts` CSV, for tests, demos and the simulator.
 *
 * A meter never throws from `read`: it answers undefined when no reading can be made (the first RAPL read, which only
 * sets the baseline; an unreadable counter; a utilization that is not a number), and the capping agent treats missing
 * readings as stale telemetry. Configuration problems (an unknown spec, `rapl` without counters, a malformed trace)
 * are thrown once, at creation, as coded errors.
 */
import { readFileSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { HarvestError } from "../common/errors.js";
import { invalidOption, stripUndefined } from "../common/options.js";
import { DEFAULT_POWER_PROFILE_ID, profileWatts, resolvePowerProfile } from "../common/power-profiles.js";
import type { PowerProfile } from "../common/power-profiles.js";

/** Where a meter's watts come from. */
export type PowerMeterKind = "rapl" | "model" | "trace";

/** One reading of a meter. */
export interface PowerReading {
  /** When it was taken (the `nowMs` passed to `read`). */
  timeMs: number;
  /** Average draw since the previous reading (rapl), or the draw now (model, trace). */
  watts: number;
  /** The static part the meter knows (profile idle, or an estimate); watts - idleWatts is the dynamic power. */
  idleWatts: number;
}

/** A source of power readings. */
export interface PowerMeter {
  readonly kind: PowerMeterKind;
  /** What is measured, e.g. "model: <profile name>", "rapl: /sys/class/powercap/intel-rapl:0", "trace: file.csv". */
  readonly description: string;
  /** A reading at `nowMs` (the caller's clock), or undefined when none can be made. */
  read(nowMs: number): PowerReading | undefined;
  /** Releases what the meter holds; later reads answer undefined. Idempotent. */
  close(): void;
}

/** What a meter may need from the node manager. */
export interface PowerMeterInputs {
  /** Whole-server CPU utilization now, 0..1 (primary + secondary, measured). */
  utilization(): number;
}

/** Settings of the meters. */
export interface PowerMeterOptions {
  /** The powercap sysfs directory holding the `intel-rapl:<n>` zones (injectable for tests). @default "/sys/class/powercap" */
  raplRoot: string;
  /**
   * The static watts the meter reports as `idleWatts`, overriding its own estimate: for rapl the lowest reading seen
   * so far, for trace the lowest watts in the file, for model the profile's idle watts.
   * @default undefined (the meter's own estimate)
   */
  idleWatts: number | undefined;
}

const DEFAULTS: PowerMeterOptions = { raplRoot: "/sys/class/powercap", idleWatts: undefined };

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolvePowerMeterOptions(options: Partial<PowerMeterOptions> = {}): PowerMeterOptions {
  const o: PowerMeterOptions = { ...DEFAULTS, ...stripUndefined(options) };
  if (typeof o.raplRoot !== "string" || o.raplRoot === "") invalidOption("power meter", "raplRoot", "must be a path");
  if (o.idleWatts !== undefined && !(Number.isFinite(o.idleWatts) && o.idleWatts >= 0))
    invalidOption("power meter", "idleWatts", `must be a number of watts >= 0 (got ${o.idleWatts})`);
  return o;
}

/**
 * Creates the meter a spec names: "auto" (rapl when its counters are readable, else model with the default profile),
 * "rapl", "model", "model:<profile>" (a builtin profile id or spec:<n>), "trace:<file>[@speed]" (speed > 0, a replay
 * factor: 2 plays twice as fast). Throws CONFIG_INVALID (details.field "powerMeter") for a spec it cannot use and
 * TRACE_MALFORMED (with the line) for a bad trace file.
 */
export function createPowerMeter(
  spec: string,
  inputs: PowerMeterInputs,
  options: Partial<PowerMeterOptions> = {},
): PowerMeter {
  const o = resolvePowerMeterOptions(options);
  const s = spec.trim();
  if (s === "auto") {
    if (readableRaplZones(o.raplRoot).length > 0) return new RaplPowerMeter(o);
    return new ModelPowerMeter(resolvePowerProfile(DEFAULT_POWER_PROFILE_ID), inputs, o);
  }
  if (s === "rapl") return new RaplPowerMeter(o);
  if (s === "model") return new ModelPowerMeter(resolvePowerProfile(DEFAULT_POWER_PROFILE_ID), inputs, o);
  if (s.startsWith("model:")) return new ModelPowerMeter(resolvePowerProfile(s.slice("model:".length)), inputs, o);
  if (s.startsWith("trace:")) {
    const { file, speed } = parseTraceSpec(s.slice("trace:".length), spec);
    return new TracePowerMeter(file, speed, o);
  }
  throw new HarvestError(
    "CONFIG_INVALID",
    `unknown power meter ${JSON.stringify(spec)}: use auto, rapl, model, model:<profile> or trace:<file>[@speed]`,
    { details: { field: "powerMeter" } },
  );
}

/**
 * The meter spec a node manager's `powerMeter` and `powerProfile` options name: "auto" and "model" model the configured
 * profile where there is no RAPL (createPowerMeter's own "auto" and "model" take the default profile).
 */
export function nodePowerMeterSpec(powerMeter: string, powerProfile: string): string {
  if (powerMeter === "auto") return raplAvailable() ? "rapl" : `model:${powerProfile}`;
  return powerMeter === "model" ? `model:${powerProfile}` : powerMeter;
}

function parseTraceSpec(rest: string, spec: string): { file: string; speed: number } {
  // The speed suffix is the text after the last '@' when it is a number, so a path may itself contain '@'.
  const at = rest.lastIndexOf("@");
  let file = rest;
  let speed = 1;
  if (at >= 0) {
    const raw = rest.slice(at + 1);
    if (/^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$/.test(raw)) {
      speed = Number(raw);
      file = rest.slice(0, at);
      if (!(speed > 0) || !Number.isFinite(speed))
        throw new HarvestError(
          "CONFIG_INVALID",
          `power meter ${JSON.stringify(spec)}: the replay speed after '@' must be > 0`,
          { details: { field: "powerMeter" } },
        );
    }
  }
  if (file.trim() === "")
    throw new HarvestError("CONFIG_INVALID", `power meter ${JSON.stringify(spec)} names no trace file`, {
      details: { field: "powerMeter" },
    });
  return { file, speed };
}

// ------------------------------------------------------------------------------------------------ RAPL

/** One RAPL package zone. */
interface RaplZone {
  dir: string;
  energyFile: string;
  /** The counter wraps to 0 after this many microjoules; undefined when the kernel does not say. */
  maxRangeUj: number | undefined;
}

const RAPL_ZONE_RE = /^intel-rapl:\d+$/;

/**
 * The top-level RAPL zones (`intel-rapl:<n>`, not their `:<n>:<m>` subzones) whose name is a package, in order.
 * Zones without a `name` file count as packages; a `psys` (platform) zone is left out, as it would count the packages
 * twice.
 */
function raplPackageZones(root: string): RaplZone[] {
  let entries: string[];
  try {
    entries = readdirSync(root);
  } catch {
    return [];
  }
  const zones: RaplZone[] = [];
  for (const e of entries.filter((x) => RAPL_ZONE_RE.test(x)).sort(byZoneNumber)) {
    const dir = join(root, e);
    const name = readTrimmed(join(dir, "name"));
    if (name !== undefined && !name.startsWith("package")) continue;
    const max = Number(readTrimmed(join(dir, "max_energy_range_uj")));
    zones.push({ dir, energyFile: join(dir, "energy_uj"), maxRangeUj: max > 0 ? max : undefined });
  }
  return zones;
}

function byZoneNumber(a: string, b: string): number {
  return Number(a.slice(a.indexOf(":") + 1)) - Number(b.slice(b.indexOf(":") + 1));
}

/** Package zones whose energy counter this process can read now (energy_uj is root-only on kernels since 5.10). */
function readableRaplZones(root: string): RaplZone[] {
  return raplPackageZones(root).filter((z) => readCounter(z.energyFile) !== undefined);
}

/** True when `root` (default /sys/class/powercap) has at least one readable RAPL package counter. */
export function raplAvailable(root: string = DEFAULTS.raplRoot): boolean {
  return readableRaplZones(root).length > 0;
}

function readTrimmed(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    return undefined;
  }
}

function readCounter(file: string): number | undefined {
  const raw = readTrimmed(file);
  if (raw === undefined || !/^\d+$/.test(raw)) return undefined;
  return Number(raw);
}

/**
 * Sums the RAPL package energy counters. The first read only records the counters (undefined); each later read gives
 * the average watts since the previous one. A counter that went down wrapped around at max_energy_range_uj; one that
 * went down without a known range, or cannot be read, gives no reading and restarts from the next read.
 */
export class RaplPowerMeter implements PowerMeter {
  readonly kind = "rapl";
  readonly description: string;
  private readonly zones: readonly RaplZone[];
  private readonly idleOverride: number | undefined;
  private lastEnergyUj: number[] | undefined;
  private lastMs = 0;
  private lowestWatts = Infinity;
  private closed = false;

  /** Throws CONFIG_INVALID when `options.raplRoot` has no readable package counter. */
  constructor(options: Partial<PowerMeterOptions> = {}) {
    const o = resolvePowerMeterOptions(options);
    this.zones = readableRaplZones(o.raplRoot);
    if (this.zones.length === 0)
      throw new HarvestError(
        "CONFIG_INVALID",
        `no readable RAPL package counter under ${o.raplRoot} (intel-rapl:<n>/energy_uj): the intel_rapl driver is not ` +
          "loaded, the CPU has none, or energy_uj is root-only (kernels >= 5.10); use the model meter instead",
        { details: { field: "powerMeter", file: o.raplRoot } },
      );
    this.idleOverride = o.idleWatts;
    this.description = `rapl: ${this.zones.map((z) => z.dir).join(" + ")}`;
  }

  read(nowMs: number): PowerReading | undefined {
    if (this.closed || !Number.isFinite(nowMs)) return undefined;
    const energy: number[] = [];
    for (const z of this.zones) {
      const e = readCounter(z.energyFile);
      if (e === undefined) {
        this.lastEnergyUj = undefined;
        return undefined;
      }
      energy.push(e);
    }
    const previous = this.lastEnergyUj;
    const dtMs = nowMs - this.lastMs;
    if (previous !== undefined && dtMs === 0) return undefined; // same instant: keep the baseline
    this.lastEnergyUj = energy;
    this.lastMs = nowMs;
    if (previous === undefined || dtMs < 0) return undefined;
    let deltaUj = 0;
    for (let i = 0; i < energy.length; i++) {
      let d = energy[i]! - previous[i]!;
      if (d < 0) {
        const range = this.zones[i]!.maxRangeUj;
        if (range === undefined) return undefined;
        d += range;
      }
      deltaUj += d;
    }
    // uJ / ms = mW; / 1000 = W.
    const watts = deltaUj / dtMs / 1000;
    this.lowestWatts = Math.min(this.lowestWatts, watts);
    return { timeMs: nowMs, watts, idleWatts: this.idleOverride ?? this.lowestWatts };
  }

  close(): void {
    this.closed = true;
  }
}

// ------------------------------------------------------------------------------------------------ model

/** The server's measured CPU utilization through a hardware power profile (no meter on the machine). */
export class ModelPowerMeter implements PowerMeter {
  readonly kind = "model";
  readonly description: string;
  private readonly idleWatts: number;
  private closed = false;

  constructor(
    readonly profile: PowerProfile,
    private readonly inputs: PowerMeterInputs,
    options: Partial<PowerMeterOptions> = {},
  ) {
    const o = resolvePowerMeterOptions(options);
    this.idleWatts = o.idleWatts ?? profile.idleWatts;
    this.description = `model: ${profile.name} (${profile.id})`;
  }

  read(nowMs: number): PowerReading | undefined {
    if (this.closed) return undefined;
    const u = this.inputs.utilization();
    if (!Number.isFinite(u)) return undefined;
    return { timeMs: nowMs, watts: profileWatts(this.profile, u), idleWatts: this.idleWatts };
  }

  close(): void {
    this.closed = true;
  }
}

// ------------------------------------------------------------------------------------------------ trace

/** A parsed power trace: seconds from the file and watts, times strictly increasing. */
export interface PowerTrace {
  timesSec: number[];
  watts: number[];
}

const TRACE_HEADER = "time_s,watts";
const NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * Parses a `time_s,watts` CSV (the header line is optional; blank lines and `#` comments are skipped). Times must be
 * strictly increasing and watts finite and >= 0. Throws TRACE_MALFORMED (details: file, line, reason) on the first
 * bad line, so a truncated file is rejected rather than replayed in part.
 */
export function parsePowerTrace(text: string, file: string): PowerTrace {
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  const timesSec: number[] = [];
  const watts: number[] = [];
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = lines[i]!.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (timesSec.length === 0 && line.replace(/\s/g, "") === TRACE_HEADER) continue;
    const parts = line.split(",").map((p) => p.trim());
    if (parts.length !== 2)
      throw malformed(lineNo, `${parts.length} field(s) where ${TRACE_HEADER} has 2 (truncated or malformed line)`);
    const [rawTime, rawWatts] = parts as [string, string];
    if (!NUMBER_RE.test(rawTime)) throw malformed(lineNo, `time ${JSON.stringify(rawTime)} is not a number`);
    if (!NUMBER_RE.test(rawWatts)) throw malformed(lineNo, `watts ${JSON.stringify(rawWatts)} is not a number`);
    const t = Number(rawTime);
    const w = Number(rawWatts);
    if (!Number.isFinite(t) || !Number.isFinite(w)) throw malformed(lineNo, "value out of range");
    if (w < 0) throw malformed(lineNo, `watts ${w} is negative`);
    const prev = timesSec[timesSec.length - 1];
    if (prev !== undefined && t <= prev)
      throw malformed(lineNo, `time ${t} s does not come after ${prev} s (times must increase)`);
    timesSec.push(t);
    watts.push(w);
  }
  if (timesSec.length === 0) throw malformed(Math.max(1, lines.length), "no samples");
  return { timesSec, watts };
}

/**
 * Replays a measured power trace. The first read is the trace's first sample; later reads advance by the time since
 * then (times the speed) and hold each sample until the next one (step-hold, like the utilization replay). At the end
 * it loops; a loop lasts the trace's span plus its median step, so the last sample is held as long as the others.
 * `idleWatts` is the lowest watts in the file unless configured.
 */
export class TracePowerMeter implements PowerMeter {
  readonly kind = "trace";
  readonly description: string;
  private readonly trace: PowerTrace;
  private readonly periodSec: number;
  private readonly idleWatts: number;
  private startMs: number | undefined;
  private closed = false;

  /** Reads and parses `file` now; throws CONFIG_INVALID when unreadable, TRACE_MALFORMED when malformed. */
  constructor(
    file: string,
    readonly speed = 1,
    options: Partial<PowerMeterOptions> = {},
  ) {
    const o = resolvePowerMeterOptions(options);
    if (!(speed > 0) || !Number.isFinite(speed)) invalidOption("power meter", "speed", `must be > 0 (got ${speed})`);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new HarvestError("CONFIG_INVALID", `cannot read power trace ${file}: ${(err as Error).message}`, {
        details: { field: "powerMeter", file },
        cause: err,
      });
    }
    this.trace = parsePowerTrace(text, file);
    const t = this.trace.timesSec;
    const steps = t.slice(1).map((x, i) => x - t[i]!);
    steps.sort((a, b) => a - b);
    const stepSec = steps.length > 0 ? steps[Math.floor(steps.length / 2)]! : 1;
    this.periodSec = t[t.length - 1]! - t[0]! + stepSec;
    this.idleWatts = o.idleWatts ?? Math.min(...this.trace.watts);
    this.description = `trace: ${basename(file)}${speed !== 1 ? ` at ${speed}x` : ""}`;
  }

  read(nowMs: number): PowerReading | undefined {
    if (this.closed || !Number.isFinite(nowMs)) return undefined;
    this.startMs ??= nowMs;
    const t = this.trace.timesSec;
    const elapsedSec = (((nowMs - this.startMs) / 1000) * this.speed) % this.periodSec;
    // A clock that steps back before the first read replays from the start.
    const at = t[0]! + Math.max(0, elapsedSec);
    // Last sample at or before `at` (binary search; t is strictly increasing).
    let lo = 0;
    let hi = t.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (t[mid]! <= at) lo = mid;
      else hi = mid - 1;
    }
    return { timeMs: nowMs, watts: this.trace.watts[lo]!, idleWatts: this.idleWatts };
  }

  close(): void {
    this.closed = true;
  }
}
