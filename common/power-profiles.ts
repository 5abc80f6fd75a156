/**
 * Hardware power profiles: a server's wall power as a function of its CPU load, in the shape of a SPECpower_ssj2008
 * result (average watts at active idle and at 10 %, 20 %, ..., 100 % of calibrated throughput). The node manager's
 * model meter, the per-container power model's fallback and the RM's oversubscription planner read servers through
 * one of these when no meter is there.
 *
 * Two sources: a few builtin profiles typed in by hand from named published results (so a fresh clone has them), and
 * the whole SPECpower file in `../shared/data/specpower_ssj2008/spec_data.csv` (619 results) when it is present,
 * addressed as `spec:<n>`, n the 1-based result row under the header.
 *
 * Caveat from the data's README: a SPECpower "target load" is a share of the server's calibrated maximum throughput,
 * close to, but not the same as, OS CPU utilization. The profiles treat it as utilization; that is the usual reading
 * (and the one seeds/000's oversubscription model makes), and the error it brings is small next to the spread between
 * servers.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "./errors.js";
import { sharedDataDir } from "./paths.js";

/** Watts of one server model as a function of CPU load. */
export interface PowerProfile {
  /** Stable id: a builtin id (`dell-r740-xeon-8180`) or `spec:<n>`. */
  id: string;
  /** Vendor and model, for people. */
  name: string;
  /** Where the numbers come from (SPECpower result: sponsor, system, CPU, publication date). */
  source: string;
  /** Average watts at active idle (0 % load). */
  idleWatts: number;
  /** Average watts at 10 %, 20 %, ..., 100 % load (10 entries, non-decreasing, none below idleWatts). */
  loadWatts: readonly number[];
  /** Cores enabled (all sockets). */
  cores?: number;
  /** CPU sockets ("chips"). */
  sockets?: number;
}

/** Load levels of a profile: idle, then 10 % steps to 100 %. */
export const PROFILE_LOAD_LEVELS = 10;

/** The SPECpower file, relative to the shared data directory. */
export const SPECPOWER_RELATIVE_PATH = join("specpower_ssj2008", "spec_data.csv");

/**
 * Builtin profiles, copied by hand from SPECpower_ssj2008 results in spec_data.csv (row numbers are that file's, so
 * `spec:<row>` gives the same numbers). Chosen to span the generations Harvest's seeds talk about: a 2010 Westmere
 * server (high idle share), a 2015 Haswell one (the generation of the Kepler nx12 training server), a 2017 Skylake
 * one (the default: the most common shape in the data, two sockets) and two 2021 AMD EPYC servers (one and two
 * sockets). SPECpower_ssj2008 results are published by SPEC (https://www.spec.org/power_ssj2008/).
 */
export const BUILTIN_POWER_PROFILES: readonly PowerProfile[] = deepFreeze([
  {
    id: "dell-r710-xeon-x5670",
    name: "Dell PowerEdge R710 (2 x Intel Xeon X5670)",
    source:
      "SPECpower_ssj2008 result of Dell Inc., PowerEdge R710, Intel Xeon X5670 2.93 GHz, published Aug 11, 2010 (spec:76)",
    idleWatts: 64.0,
    loadWatts: [104, 116, 126, 137, 148, 158, 173, 190, 210, 232],
    cores: 12,
    sockets: 2,
  },
  {
    id: "dell-r730-xeon-e5-2699v3",
    name: "Dell PowerEdge R730 (2 x Intel Xeon E5-2699 v3)",
    source:
      "SPECpower_ssj2008 result of Dell Inc., PowerEdge R730, Intel Xeon E5-2699 v3 2.30 GHz, published Feb 18, 2015 (spec:591)",
    idleWatts: 46.9,
    loadWatts: [87.8, 107, 124, 141, 156, 171, 191, 215, 243, 272],
    cores: 36,
    sockets: 2,
  },
  {
    id: "dell-r740-xeon-8180",
    name: "Dell PowerEdge R740 (2 x Intel Xeon Platinum 8180)",
    source:
      "SPECpower_ssj2008 result of Dell Inc., PowerEdge R740, Intel Xeon Platinum 8180 2.50 GHz, published Sep 13, 2017 (spec:355)",
    idleWatts: 52.3,
    loadWatts: [129, 147, 170, 195, 224, 255, 292, 344, 408, 457],
    cores: 56,
    sockets: 2,
  },
  {
    id: "hpe-dl325g10p-epyc-7763",
    name: "HPE ProLiant DL325 Gen10 Plus (1 x AMD EPYC 7763)",
    source:
      "SPECpower_ssj2008 result of Hewlett Packard Enterprise, ProLiant DL325 Gen10 Plus, AMD EPYC 7763 2.45 GHz, published Mar 15, 2021 (spec:13)",
    idleWatts: 56.8,
    loadWatts: [100, 116, 130, 143, 162, 191, 211, 231, 250, 268],
    cores: 64,
    sockets: 1,
  },
  {
    id: "lenovo-sr665-epyc-7763",
    name: "Lenovo ThinkSystem SR665 (2 x AMD EPYC 7763)",
    source:
      "SPECpower_ssj2008 result of Lenovo Global Technology, ThinkSystem SR665, AMD EPYC 7763 2.45 GHz, published May 6, 2021 (spec:48)",
    idleWatts: 108,
    loadWatts: [171, 192, 215, 237, 256, 281, 304, 331, 382, 455],
    cores: 128,
    sockets: 2,
  },
]);

function deepFreeze(profiles: PowerProfile[]): readonly PowerProfile[] {
  for (const p of profiles) {
    Object.freeze(p.loadWatts);
    Object.freeze(p);
  }
  return Object.freeze(profiles);
}

/** The profile used when none is configured: a two-socket 2017 Skylake server (the data's most common shape). */
export const DEFAULT_POWER_PROFILE_ID = "dell-r740-xeon-8180";

/** Watts of `profile` at `utilization` (0..1, clamped; NaN counts as 0): piecewise linear through idle and the 10 points. */
export function profileWatts(profile: PowerProfile, utilization: number): number {
  const points = profile.loadWatts;
  if (!(utilization > 0)) return profile.idleWatts;
  if (utilization >= 1) return points[points.length - 1] ?? profile.idleWatts;
  const x = utilization * PROFILE_LOAD_LEVELS;
  const i = Math.min(PROFILE_LOAD_LEVELS - 1, Math.floor(x));
  const lo = i === 0 ? profile.idleWatts : points[i - 1]!;
  const hi = points[i]!;
  return lo + (hi - lo) * (x - i);
}

/**
 * The DVFS model (seeds/000 section IV-A): a server drawing `nominalWatts` at nominal frequency draws
 * idle + (nominalWatts - idle) x frequency^exponent at `frequency` (a share of the nominal one): at a fixed
 * utilization only the dynamic part scales. The resource manager's oversubscription planner and the simulated
 * capping both use it.
 */
export function dvfsWatts(profile: PowerProfile, nominalWatts: number, frequency: number, exponent: number): number {
  return profile.idleWatts + (nominalWatts - profile.idleWatts) * frequency ** exponent;
}

/**
 * The utilization (0..1) at which `profile` draws `watts`: the inverse of profileWatts, clamped (at or below idle
 * gives 0, at or above the 100 % point gives 1). Where the curve is flat, the lowest such utilization.
 */
export function profileUtilization(profile: PowerProfile, watts: number): number {
  const points = profile.loadWatts;
  if (!(watts > profile.idleWatts)) return 0;
  if (watts >= (points[points.length - 1] ?? profile.idleWatts)) return 1;
  let lo = profile.idleWatts;
  for (let i = 0; i < points.length; i++) {
    const hi = points[i]!;
    // Invariant: lo < watts (the previous segment ended below it), so hi > lo here and the division is safe.
    if (hi >= watts) return (i + (watts - lo) / (hi - lo)) / PROFILE_LOAD_LEVELS;
    lo = hi;
  }
  return 1;
}

/**
 * Checks a profile's shape: a non-empty id, finite non-negative watts, exactly 10 load points, non-decreasing from
 * idle. Returns a reason, or undefined when the profile is sound.
 */
export function powerProfileProblem(profile: PowerProfile): string | undefined {
  if (profile.id.trim() === "") return "has an empty id";
  if (!Number.isFinite(profile.idleWatts) || profile.idleWatts < 0)
    return `has idle watts ${profile.idleWatts}, not a finite number >= 0`;
  if (profile.loadWatts.length !== PROFILE_LOAD_LEVELS)
    return `has ${profile.loadWatts.length} load points, not ${PROFILE_LOAD_LEVELS}`;
  let previous = profile.idleWatts;
  for (let i = 0; i < profile.loadWatts.length; i++) {
    const w = profile.loadWatts[i]!;
    const level = `${(i + 1) * 10} %`;
    if (!Number.isFinite(w)) return `has ${w} W at ${level}`;
    if (w < previous) return `falls from ${previous} W to ${w} W at ${level} (a profile must not decrease with load)`;
    previous = w;
  }
  return undefined;
}

// ------------------------------------------------------------------------------------------------ SPECpower file

const SPEC_DELIMITER = "|";
const LOAD_COLUMNS = Array.from({ length: PROFILE_LOAD_LEVELS }, (_, i) => `${(i + 1) * 10}_AvgPower`);
/** The columns a SPECpower results file must have (others are ignored). */
export const SPECPOWER_COLUMNS = [
  ...LOAD_COLUMNS,
  "ActiveIdle",
  "HW_Vendor",
  "HW_Model",
  "HW_CPUName",
  "HW_CPUsEnabled",
  "Publication",
] as const;
const NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

const specCache = new Map<string, PowerProfile[]>();

/** The SPECpower file in `../shared/data`, or undefined when the shared data is absent. */
export function defaultSpecPowerFile(): string | undefined {
  const dir = sharedDataDir();
  if (dir === undefined) return undefined;
  const file = join(dir, SPECPOWER_RELATIVE_PATH);
  return existsSync(file) ? file : undefined;
}

/**
 * Reads every result of a SPECpower_ssj2008 export (`spec_data.csv`: '|'-separated with a header row, fields quoted
 * with `"` where they contain the separator), one profile per row, ids `spec:<row>`. `file` defaults to the copy in
 * `../shared/data`. Throws CONFIG_INVALID (details.field "source") when the file is absent or unreadable, and
 * TRACE_MALFORMED naming the 1-based line for a truncated or malformed row; it never returns part of a file.
 * Parsed files are cached by path.
 */
export function loadSpecPowerProfiles(file?: string): PowerProfile[] {
  const path = file ?? defaultSpecPowerFile();
  if (path === undefined) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `the SPECpower_ssj2008 file is not there: put the shared data beside the checkout (../shared/data/${SPECPOWER_RELATIVE_PATH}) or set HARVEST_SHARED_DATA`,
      { details: { field: "source" } },
    );
  }
  const cached = specCache.get(path);
  if (cached) return cached.map((p) => ({ ...p }));
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot read the SPECpower file ${path}: ${(err as Error).message}`, {
      details: { field: "source", file: path },
      cause: err,
    });
  }
  const profiles = parseSpecPowerText(text, path);
  specCache.set(path, profiles);
  return profiles.map((p) => ({ ...p }));
}

/** Parses the text of a SPECpower export (see loadSpecPowerProfiles); `file` names it in errors. */
export function parseSpecPowerText(text: string, file: string): PowerProfile[] {
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  // A file ends with one newline; blank lines elsewhere are not part of the format.
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  if (lines.length === 0) throw malformed(1, "empty file (no header row)");

  const header = splitDelimited(lines[0]!);
  if (typeof header === "string") throw malformed(1, header);
  const column = new Map(header.map((name, i) => [name.trim(), i]));
  const missing = SPECPOWER_COLUMNS.filter((c) => !column.has(c));
  if (missing.length > 0) throw malformed(1, `header lacks column(s) ${missing.join(", ")}`);
  const at = (name: string): number => column.get(name)!;

  const profiles: PowerProfile[] = [];
  for (let n = 1; n < lines.length; n++) {
    const lineNo = n + 1;
    const fields = splitDelimited(lines[n]!);
    if (typeof fields === "string") throw malformed(lineNo, fields);
    if (fields.length !== header.length)
      throw malformed(
        lineNo,
        `${fields.length} field(s) where the header has ${header.length} (truncated or malformed row)`,
      );
    const watts = (name: string): number => {
      const raw = fields[at(name)]!.trim();
      if (!NUMBER_RE.test(raw)) throw malformed(lineNo, `${name} is ${JSON.stringify(raw)}, not a number of watts`);
      return Number(raw);
    };
    const idleWatts = watts("ActiveIdle");
    const loadWatts = LOAD_COLUMNS.map(watts);
    const field = (name: string): string => decodeEntities(fields[at(name)]!.trim());
    const vendor = field("HW_Vendor");
    const model = field("HW_Model");
    const cpu = field("HW_CPUName");
    const enabled = field("HW_CPUsEnabled");
    const cores = /(\d+)\s*cores?\b/i.exec(enabled);
    const sockets = /(\d+)\s*chips?\b/i.exec(enabled);
    const profile: PowerProfile = {
      id: `spec:${n}`,
      name: `${vendor} ${model}`,
      source: `SPECpower_ssj2008 result of ${vendor}, ${model}, ${cpu}, published ${field("Publication")} (row ${n} of ${SPECPOWER_RELATIVE_PATH})`,
      idleWatts,
      loadWatts,
      ...(cores ? { cores: Number(cores[1]) } : {}),
      ...(sockets ? { sockets: Number(sockets[1]) } : {}),
    };
    const problem = powerProfileProblem(profile);
    if (problem !== undefined) throw malformed(lineNo, `the power curve ${problem}`);
    profiles.push(profile);
  }
  if (profiles.length === 0) throw malformed(2, "no result rows under the header");
  return profiles;
}

/**
 * Splits one line on '|'. A field that starts with `"` is quoted: it runs to the closing quote (`""` is a quote) and
 * may contain '|'. Returns the fields, or a reason when a quote is left open (the file was cut inside a field).
 */
function splitDelimited(line: string): string[] | string {
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    if (line[i] === '"') {
      let value = "";
      let j = i + 1;
      for (;;) {
        const q = line.indexOf('"', j);
        if (q < 0) return `unterminated quoted field ${fields.length + 1}`;
        value += line.slice(j, q);
        if (line[q + 1] === '"') {
          value += '"';
          j = q + 2;
          continue;
        }
        j = q + 1;
        break;
      }
      // Text between the closing quote and the next separator is kept, as Python's csv module does.
      const end = line.indexOf(SPEC_DELIMITER, j);
      fields.push(value + line.slice(j, end < 0 ? undefined : end));
      if (end < 0) return fields;
      i = end + 1;
    } else {
      const end = line.indexOf(SPEC_DELIMITER, i);
      fields.push(line.slice(i, end < 0 ? undefined : end));
      if (end < 0) return fields;
      i = end + 1;
    }
  }
}

const NAMED_ENTITIES: Record<string, string> = { quot: '"', amp: "&", lt: "<", gt: ">", apos: "'", nbsp: " " };

/** The SPEC reports' text fields carry HTML entities (`&quot;`); names read better without them. */
function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, body: string) => {
    if (body[0] === "#") {
      const code = body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? whole;
  });
}

/**
 * The profile a configuration names: a builtin id, or `spec:<n>` (result row n, 1-based, of the SPECpower file in
 * `../shared/data`). Throws CONFIG_INVALID (details.field "profile") for an unknown id, a bad row number, or
 * `spec:<n>` without the shared data.
 */
export function resolvePowerProfile(spec: string): PowerProfile {
  // Configuration files reach here unchecked: a number or null is a bad option, not a TypeError.
  if (typeof spec !== "string")
    throw new HarvestError("CONFIG_INVALID", `power profile must be a string, got ${JSON.stringify(spec)}`, {
      details: { field: "profile" },
    });
  const wanted = spec.trim();
  const builtin = BUILTIN_POWER_PROFILES.find((p) => p.id === wanted);
  if (builtin) return { ...builtin };
  const m = /^spec:(.*)$/i.exec(wanted);
  if (m) {
    const raw = m[1]!.trim();
    const row = Number(raw);
    if (!/^\d+$/.test(raw) || row < 1)
      throw new HarvestError("CONFIG_INVALID", `power profile ${JSON.stringify(spec)}: spec:<n> needs a row n >= 1`, {
        details: { field: "profile" },
      });
    if (defaultSpecPowerFile() === undefined)
      throw new HarvestError(
        "CONFIG_INVALID",
        `power profile ${JSON.stringify(spec)} needs the SPECpower file (../shared/data/${SPECPOWER_RELATIVE_PATH} or HARVEST_SHARED_DATA); ` +
          `without it use a builtin profile: ${BUILTIN_POWER_PROFILES.map((p) => p.id).join(", ")}`,
        { details: { field: "profile" } },
      );
    const all = loadSpecPowerProfiles();
    const profile = all[row - 1];
    if (!profile)
      throw new HarvestError(
        "CONFIG_INVALID",
        `power profile ${JSON.stringify(spec)}: the SPECpower file has rows 1..${all.length}`,
        { details: { field: "profile" } },
      );
    return profile;
  }
  throw new HarvestError(
    "CONFIG_INVALID",
    `unknown power profile ${JSON.stringify(spec)}: use one of ${BUILTIN_POWER_PROFILES.map((p) => p.id).join(", ")}, or spec:<n> for row n of the SPECpower file`,
    { details: { field: "profile" } },
  );
}
