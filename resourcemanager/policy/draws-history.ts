/**
 * The draws history of the oversubscription planner (seeds/000 section III-E): parsed from and written to the draws
 * CSV, or generated from utilization patterns and a hardware profile. Pure: no I/O, no clock.
 *
 * ## The draws CSV
 *
 * One row per server per time slot, a header naming the columns (any order), `#` lines are comments:
 *
 *     time_s,domain,server,critical_util,noncritical_util[,watts]
 *     0,chassis-0,s01,0.31,0.22
 *     0,chassis-0,s02,45%,12%
 *
 * - `time_s`: the slot's start (seconds, any origin); rows must not go back in time.
 * - `domain` (optional): the power domain the server draws from; without it every server is in one domain. Every domain
 *   must hold the same number of servers (one budget serves every domain, as seeds/000 computes one chassis budget per
 *   hardware generation) and a server never changes domain.
 * - `server`: the server's name; every slot needs exactly one row for every server (a missing row is a truncated file).
 * - `critical_util`, `noncritical_util`: the share of the server's CPU busy with each kind of work, `0..1` or `0%..100%`;
 *   their sum is at most 1.
 * - `watts` (optional): the server's measured draw. Without it the draw is modelled from the hardware profile at
 *   `critical_util + noncritical_util`.
 *
 * A domain's reading in a slot is the sum of its servers' draws: N readings = domains x slots. Errors: TRACE_MALFORMED
 * with the 1-based line (details: file, line, reason); options out of range: INVALID_ARGUMENT naming the option.
 */
import { HarvestError } from "../../common/errors.js";
import { SeededRng } from "../../common/rng.js";
import { generateUtilization } from "../../common/trace-gen.js";
import type { UtilizationPattern } from "../../common/trace-gen.js";

// ------------------------------------------------------------------------------------------------ the draws CSV

/** One row of a draws history: one server in one time slot. */
export interface DrawSample {
  timeS: number;
  domain: string;
  server: string;
  /** Share of the server's CPU busy with critical (primary-tenant) work, 0..1. */
  criticalUtil: number;
  /** Share of the server's CPU busy with non-critical (secondary) work, 0..1. */
  noncriticalUtil: number;
  /** The measured draw, when the history has a `watts` column. */
  watts?: number;
}

/** A validated draws history: complete slots, equal domains. */
export interface DrawsHistory {
  /** Where it came from (a file name, or "generated"). */
  source: string;
  samples: DrawSample[];
  /** The distinct slot times, ascending. */
  timesS: number[];
  /** The domains' names, sorted. */
  domains: string[];
  /** Servers in each domain (the same for every domain). */
  serversPerDomain: number;
  /** True when draws are measured (`watts` column) rather than modelled from the profile. */
  measured: boolean;
}

/** The columns a draws CSV must have. */
export const DRAWS_REQUIRED_COLUMNS = ["time_s", "server", "critical_util", "noncritical_util"] as const;
/** The columns a draws CSV may have. */
export const DRAWS_OPTIONAL_COLUMNS = ["domain", "watts"] as const;
/** The domain of every server when the CSV has no `domain` column. */
export const DEFAULT_DOMAIN = "all";

type Column = (typeof DRAWS_REQUIRED_COLUMNS)[number] | (typeof DRAWS_OPTIONAL_COLUMNS)[number];
const KNOWN_COLUMNS: readonly string[] = [...DRAWS_REQUIRED_COLUMNS, ...DRAWS_OPTIONAL_COLUMNS];
const NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
/** Float error tolerated on a utilization before it counts as out of range. */
const UTIL_TOLERANCE = 1e-6;

/**
 * Parses and validates a draws CSV (format in this module's comment). `source` names the file in errors. Throws
 * TRACE_MALFORMED (details: file, line, reason) on the first problem; never returns part of a file.
 */
export function parseDrawsCsv(text: string, source = "draws.csv"): DrawsHistory {
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${source}:${line}: ${reason}`, {
      details: { file: source, line: String(line), reason },
    });
  const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
  // A final newline leaves one empty element; trailing blank lines are tolerated, inner ones are not.
  while (lines.length > 0 && lines[lines.length - 1]!.trim() === "") lines.pop();

  let headerIdx = 0;
  while (headerIdx < lines.length && lines[headerIdx]!.trimStart().startsWith("#")) headerIdx++;
  if (headerIdx >= lines.length) throw malformed(Math.max(1, headerIdx), "empty file (no header line)");
  const header = lines[headerIdx]!.split(",").map((c) => c.trim().toLowerCase());
  const col = new Map<Column, number>();
  header.forEach((name, i) => {
    if (!KNOWN_COLUMNS.includes(name))
      throw malformed(
        headerIdx + 1,
        `unknown column ${JSON.stringify(name)} (expected ${DRAWS_REQUIRED_COLUMNS.join(",")}, optionally domain and watts)`,
      );
    if (col.has(name as Column)) throw malformed(headerIdx + 1, `column ${name} appears twice`);
    col.set(name as Column, i);
  });
  for (const name of DRAWS_REQUIRED_COLUMNS)
    if (!col.has(name)) throw malformed(headerIdx + 1, `missing column ${name} (header: ${header.join(",")})`);

  const samples: DrawSample[] = [];
  const sampleLines: number[] = [];
  const domainOf = new Map<string, { domain: string; line: number }>();
  const seenInSlot = new Set<string>();
  let lastTime = -Infinity;
  let lastTimeLine = 0;
  for (let i = headerIdx + 1; i < lines.length; i++) {
    const lineNo = i + 1;
    const raw = lines[i]!;
    if (raw.trimStart().startsWith("#")) continue;
    if (raw.trim() === "") throw malformed(lineNo, "blank line inside the data");
    const fields = raw.split(",").map((f) => f.trim());
    if (fields.length !== header.length)
      throw malformed(
        lineNo,
        `${fields.length} field(s) where the header has ${header.length} (a truncated or malformed row)`,
      );
    const field = (c: Column): string | undefined => {
      const idx = col.get(c);
      return idx === undefined ? undefined : fields[idx];
    };

    const timeText = field("time_s")!;
    const timeS = NUMBER_RE.test(timeText) ? Number(timeText) : NaN;
    if (!Number.isFinite(timeS) || timeS < 0)
      throw malformed(lineNo, `time_s ${JSON.stringify(timeText)} is not a number of seconds >= 0`);
    if (timeS < lastTime)
      throw malformed(lineNo, `time goes back (${timeS} s after ${lastTime} s on line ${lastTimeLine})`);
    if (timeS > lastTime) seenInSlot.clear();
    lastTime = timeS;
    lastTimeLine = lineNo;

    const server = field("server")!;
    if (server === "") throw malformed(lineNo, "empty server name");
    const domain = field("domain") ?? DEFAULT_DOMAIN;
    if (domain === "") throw malformed(lineNo, "empty domain name");
    if (seenInSlot.has(server)) throw malformed(lineNo, `second row for server ${server} in the slot at ${timeS} s`);
    seenInSlot.add(server);
    const known = domainOf.get(server);
    if (known === undefined) domainOf.set(server, { domain, line: lineNo });
    else if (known.domain !== domain)
      throw malformed(
        lineNo,
        `server ${server} is in domain ${domain} here but in ${known.domain} on line ${known.line}`,
      );

    const util = (c: "critical_util" | "noncritical_util"): number => {
      const v = parseShare(field(c)!);
      if (v === undefined || v < -UTIL_TOLERANCE || v > 1 + UTIL_TOLERANCE)
        throw malformed(lineNo, `${c} ${JSON.stringify(field(c))} must be a share in 0..1 or a percentage 0%..100%`);
      return Math.min(1, Math.max(0, v));
    };
    const criticalUtil = util("critical_util");
    const noncriticalUtil = util("noncritical_util");
    if (criticalUtil + noncriticalUtil > 1 + UTIL_TOLERANCE)
      throw malformed(
        lineNo,
        `critical_util + noncritical_util = ${round(criticalUtil + noncriticalUtil, 6)} exceeds the whole server (1)`,
      );
    const sample: DrawSample = { timeS, domain, server, criticalUtil, noncriticalUtil };
    const wattsText = field("watts");
    if (wattsText !== undefined) {
      const watts = NUMBER_RE.test(wattsText) ? Number(wattsText) : NaN;
      if (!(watts > 0) || !Number.isFinite(watts))
        throw malformed(lineNo, `watts ${JSON.stringify(wattsText)} is not a positive number`);
      sample.watts = watts;
    }
    samples.push(sample);
    sampleLines.push(lineNo);
  }
  if (samples.length === 0) throw malformed(lines.length + 1, "no data rows after the header");
  return assembleHistory(samples, source, col.has("watts"), (idx, reason) =>
    malformed(sampleLines[idx] ?? lines.length, reason),
  );
}

/** Writes samples in the draws CSV format (with a `domain` column, and `watts` when every sample has it). */
export function formatDrawsCsv(samples: readonly DrawSample[], comment?: string): string {
  const withWatts = samples.length > 0 && samples.every((s) => s.watts !== undefined);
  const out: string[] = [];
  if (comment) for (const l of comment.split("\n")) out.push(`# ${l}`);
  out.push(`time_s,domain,server,critical_util,noncritical_util${withWatts ? ",watts" : ""}`);
  for (const s of samples)
    out.push(
      `${s.timeS},${s.domain},${s.server},${round(s.criticalUtil, 4)},${round(s.noncriticalUtil, 4)}` +
        (withWatts ? `,${round(s.watts!, 2)}` : ""),
    );
  return out.join("\n") + "\n";
}

/**
 * Checks that every slot has a row for every server and that domains are equal, and indexes the history.
 * `problem(i, reason)` builds the error for the sample at index `i`.
 */
function assembleHistory(
  samples: DrawSample[],
  source: string,
  measured: boolean,
  problem: (sampleIdx: number, reason: string) => HarvestError,
): DrawsHistory {
  const serversOf = new Map<string, Set<string>>();
  for (const s of samples) {
    let set = serversOf.get(s.domain);
    if (!set) serversOf.set(s.domain, (set = new Set()));
    set.add(s.server);
  }
  const domains = [...serversOf.keys()].sort();
  const sizes = domains.map((d) => serversOf.get(d)!.size);
  const serversPerDomain = sizes[0]!;
  const odd = domains.findIndex((_, i) => sizes[i] !== serversPerDomain);
  if (odd >= 0) {
    const at = samples.findIndex((s) => s.domain === domains[odd]);
    throw problem(
      at,
      `domain ${domains[odd]} has ${sizes[odd]} server(s) but ${domains[0]} has ${serversPerDomain}: one budget serves ` +
        `every domain, so they must be the same size (plan each size separately)`,
    );
  }
  const allServers = domains.length * serversPerDomain;
  const timesS: number[] = [];
  // Samples are in time order (the parser checks it); a slot is a run of equal times.
  for (let start = 0; start < samples.length;) {
    const t = samples[start]!.timeS;
    let end = start;
    while (end < samples.length && samples[end]!.timeS === t) end++;
    if (end - start !== allServers) {
      const present = new Set(samples.slice(start, end).map((s) => s.server));
      const missing = [...serversOf.values()].flatMap((set) => [...set].filter((sv) => !present.has(sv)));
      throw problem(
        end - 1,
        `the slot at ${t} s has ${end - start} of ${allServers} servers (missing ${missing.slice(0, 5).join(", ")}` +
          `${missing.length > 5 ? ", ..." : ""}): every slot needs a row for every server (a truncated file?)`,
      );
    }
    timesS.push(t);
    start = end;
  }
  return { source, samples, timesS, domains, serversPerDomain, measured };
}

/** "45%" -> 0.45, "0.45" -> 0.45; undefined when not a number. */
function parseShare(text: string): number | undefined {
  const pct = text.endsWith("%");
  const body = pct ? text.slice(0, -1).trim() : text;
  if (!NUMBER_RE.test(body)) return undefined;
  return pct ? Number(body) / 100 : Number(body);
}

// ------------------------------------------------------------------------------------------------ the generator

/** What `generateDrawsHistory` generates. */
export interface GenerateDrawsOptions {
  /** Servers in all. */
  servers: number;
  /** Length of the history in days. */
  days: number;
  /** The seed: the same options and seed give the same CSV. */
  seed: number;
  /**
   * Slot length.
   * @default 300_000 (5 minutes, the step of the real traces)
   */
  slotMs?: number;
  /**
   * Servers per power domain (must divide `servers`).
   * @default servers (one domain)
   */
  serversPerDomain?: number;
  /**
   * The intended critical share of the busy CPU (beta). seeds/000 Table I: user-facing to non-user-facing cores 4:6.
   * @default 0.4
   */
  criticalShare?: number;
  /**
   * The intended mean busy share of a server (primary plus secondary work).
   * @default 0.45
   */
  meanUtil?: number;
}

/**
 * The primaries' patterns, cycled over servers, after seeds/004 section 3.2: periodic (user-facing, diurnal) ones on
 * about 40 % of the servers, roughly constant ones the most common, some unpredictable.
 */
const GENERATED_PRIMARY_PATTERNS: readonly UtilizationPattern[] = [
  "periodic",
  "constant",
  "periodic",
  "unpredictable",
  "constant",
];
/** The share of a server Harvest keeps free for its primary (secondary work never fills it). */
const GENERATED_RESERVE = 0.05;

/**
 * A seeded, realistic draws history in the draws CSV format, from the project's own trace generator (no data files):
 * each server's primary tenant (critical work) follows one of seeds/004's patterns; Harvest's secondary work
 * (non-critical) is bursty demand that only fills what the primary leaves, minus a reserve. Draws are left to the
 * planner's hardware profile (no `watts` column).
 */
export function generateDrawsHistory(options: GenerateDrawsOptions): string {
  const { servers, days, seed } = options;
  const slotMs = options.slotMs ?? 300_000;
  const perDomain = options.serversPerDomain ?? servers;
  const criticalShare = options.criticalShare ?? 0.4;
  const meanUtil = options.meanUtil ?? 0.45;
  const invalid = (field: string, v: unknown, what: string): HarvestError =>
    new HarvestError("INVALID_ARGUMENT", `generateDrawsHistory: ${field} must be ${what} (got ${String(v)})`, {
      details: { field },
    });
  if (!Number.isInteger(servers) || servers < 1) throw invalid("servers", servers, "a positive integer");
  if (!(days > 0) || !Number.isFinite(days)) throw invalid("days", days, "> 0");
  if (!(slotMs >= 1000) || !Number.isInteger(slotMs)) throw invalid("slotMs", slotMs, "a whole number >= 1000");
  if (!Number.isInteger(perDomain) || perDomain < 1 || servers % perDomain !== 0)
    throw invalid("serversPerDomain", perDomain, `a positive integer dividing servers (${servers})`);
  if (!(criticalShare >= 0 && criticalShare <= 1)) throw invalid("criticalShare", criticalShare, "in 0..1");
  if (!(meanUtil > 0 && meanUtil < 1)) throw invalid("meanUtil", meanUtil, "in (0, 1)");
  if ((days * 86_400_000) / slotMs > 10_000_000) throw invalid("days", days, "small enough for 10 M slots");

  const rng = new SeededRng(seed);
  const stepSec = slotMs / 1000;
  const primaryMeanPct = 100 * criticalShare * meanUtil;
  const secondaryMeanPct = 100 * (1 - criticalShare) * meanUtil;
  const series = Array.from({ length: servers }, (_, i) => {
    const pattern = GENERATED_PRIMARY_PATTERNS[i % GENERATED_PRIMARY_PATTERNS.length]!;
    const jitter = (): number => 0.7 + 0.6 * rng.next();
    const primary = generateUtilization({
      pattern,
      days,
      stepSec,
      meanPct: Math.min(95, primaryMeanPct * jitter()),
      seed: (seed * 7919 + i * 104_729) >>> 0,
    }).cpuPct;
    const demand = generateUtilization({
      pattern: "unpredictable",
      days,
      stepSec,
      meanPct: Math.min(95, secondaryMeanPct * jitter()),
      seed: (seed * 6271 + i * 130_003 + 17) >>> 0,
    }).cpuPct;
    return { primary, demand };
  });
  const slots = series[0]!.primary.length;
  const width = String(servers - 1).length;
  const domainWidth = String(servers / perDomain - 1).length;
  const samples: DrawSample[] = [];
  for (let t = 0; t < slots; t++) {
    for (let i = 0; i < servers; i++) {
      const s = series[i]!;
      const critical = Math.min(1, Math.max(0, s.primary[t]! / 100));
      const spare = Math.max(0, 1 - GENERATED_RESERVE - critical);
      const noncritical = Math.min(spare, Math.max(0, s.demand[t]! / 100));
      samples.push({
        timeS: (t * slotMs) / 1000,
        domain: `domain-${String(Math.floor(i / perDomain)).padStart(domainWidth, "0")}`,
        server: `server-${String(i).padStart(width, "0")}`,
        criticalUtil: critical,
        noncriticalUtil: noncritical,
      });
    }
  }
  return formatDrawsCsv(
    samples,
    `generated by harvest: ${servers} servers (${perDomain} per domain), ${days} day(s) of ${stepSec} s slots, ` +
      `seed ${seed}, critical share ${criticalShare}, mean utilization ${meanUtil}`,
  );
}

function round(v: number, digits: number): number {
  const m = 10 ** digits;
  return Math.round(v * m) / m;
}
