/**
 * Primary-tenant CPU-utilization traces: readers for the real traces in `../shared/data` (NAB AWS CloudWatch, Bitbrains
 * GWA-T-12) and for our own plain CSV, a step-hold lookup for replay, and resampling. A reader either returns a complete,
 * validated series or throws TRACE_MALFORMED naming the file and the 1-based line; it never returns part of a file.
 */
import { readFile, writeFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { HarvestError } from "./errors.js";

/** A CPU-utilization time series of one primary tenant (or one server), oldest sample first. */
export interface UtilizationSeries {
  /** The file's base name without extension, or a generator-chosen name. */
  name: string;
  /** The median distance between consecutive samples, in seconds. */
  stepSec: number;
  /** The time of the first sample (Unix ms); equal to `timesMs[0]`. */
  startMs: number;
  /** Sample times (Unix ms), strictly increasing. */
  timesMs: number[];
  /** CPU utilization at each sample time, in percent of the machine (0..100). */
  cpuPct: number[];
}

/** The trace formats the readers understand. */
export type TraceFormat = "nab" | "bitbrains" | "csv";

/** How a reader treats consecutive rows that carry the same timestamp. */
export type DuplicateTimePolicy = "reject" | "merge";

/** Options for the readers. */
export interface ReadTraceOptions {
  /**
   * `reject` treats a repeated timestamp as malformed; `merge` folds a run of rows with the same timestamp into their
   * mean. A time that goes backwards is always malformed.
   * NAB's `ec2_request_latency_system_failure.csv` needs `merge`: its US spring-forward hour (2014-03-09 02:xx) was
   * folded onto twelve rows stamped 03:00:00.
   * @default "reject"
   */
  duplicateTimes?: DuplicateTimePolicy;
}

/** The header line of our own plain format. */
export const PLAIN_CSV_HEADER = "time_s,cpu_pct";

const NAB_HEADER = "timestamp,value";
const BITBRAINS_SEPARATOR = ";\t";
const BITBRAINS_COLUMNS = 11;
const BITBRAINS_TIME_COLUMN = 0;
const BITBRAINS_CPU_PCT_COLUMN = 4;

/** Float error tolerated beyond 0..100 before a value counts as out of range (it is then clamped). */
const RANGE_TOLERANCE_PCT = 1e-6;

/**
 * Bitbrains' "CPU usage [%]" is usage MHz over provisioned MHz, which goes past 100 when the cores run above their
 * nominal clock (VM 44 of the Rnd 2013-7 sample reaches 105.4 % on 1,832 rows). A primary cannot use more than its
 * machine, so such values are clamped to 100; anything beyond this ceiling is treated as corrupt.
 */
export const BITBRAINS_MAX_CPU_PCT = 125;

const NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const NAB_TIME_RE = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/** Reads a utilization trace, detecting the format from the header line when `format` is omitted. */
export async function readUtilizationFile(
  path: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): Promise<UtilizationSeries> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new HarvestError("INVALID_ARGUMENT", `cannot read trace file ${path}: ${(err as Error).message}`, {
      details: { file: path },
      cause: err,
    });
  }
  return parseUtilizationText(text, path, format, options);
}

/** Reads a NAB AWS CloudWatch series (`timestamp,value`, UTC `YYYY-MM-DD HH:MM:SS`, value = CPU %). */
export function readNabFile(path: string, options?: ReadTraceOptions): Promise<UtilizationSeries> {
  return readUtilizationFile(path, "nab", options);
}

/** Reads a Bitbrains GWA-T-12 VM file (`;\t`-separated, 11 columns, column 0 Unix seconds, column 4 CPU %). */
export function readBitbrainsFile(path: string, options?: ReadTraceOptions): Promise<UtilizationSeries> {
  return readUtilizationFile(path, "bitbrains", options);
}

/** Reads our plain `time_s,cpu_pct` CSV. */
export function readPlainCsvFile(path: string, options?: ReadTraceOptions): Promise<UtilizationSeries> {
  return readUtilizationFile(path, "csv", options);
}

/** The format a header line announces, or undefined when it is none of ours. */
export function detectTraceFormat(headerLine: string): TraceFormat | undefined {
  const header = headerLine.replace(/^\uFEFF/, "").trim();
  if (header === NAB_HEADER) return "nab";
  if (header === PLAIN_CSV_HEADER) return "csv";
  if (header.startsWith("Timestamp [ms]" + BITBRAINS_SEPARATOR)) return "bitbrains";
  return undefined;
}

/**
 * Parses the text of a trace file. `file` is used only in error messages and for the series name.
 * Throws TRACE_MALFORMED (details: file, line, reason) on the first bad line.
 */
export function parseUtilizationText(
  text: string,
  file: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): UtilizationSeries {
  const duplicateTimes = options.duplicateTimes ?? "reject";
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });

  const lines = text.split("\n");
  // A final newline leaves one empty element; trailing blank lines are tolerated, inner ones are not.
  while (lines.length > 0 && lines[lines.length - 1]!.replace(/\r$/, "").trim() === "") lines.pop();
  if (lines.length === 0) throw malformed(1, "empty file");

  const header = lines[0]!.replace(/\r$/, "");
  const detected = detectTraceFormat(header);
  const fmt = format ?? detected;
  if (fmt === undefined) {
    throw malformed(
      1,
      `unrecognized header ${JSON.stringify(header.slice(0, 80))} (expected NAB, Bitbrains or ${PLAIN_CSV_HEADER})`,
    );
  }
  if (detected !== fmt) throw malformed(1, `header ${JSON.stringify(header.slice(0, 80))} is not a ${fmt} header`);

  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  // Rows merged into the last sample under duplicateTimes = "merge".
  let mergedCount = 1;
  let previousLine = 1;

  for (let i = 1; i < lines.length; i++) {
    const lineNo = i + 1;
    const raw = lines[i]!.replace(/\r$/, "");
    if (raw.trim() === "") throw malformed(lineNo, "blank line inside the data");
    const row = fmt === "nab" ? parseNabRow(raw) : fmt === "bitbrains" ? parseBitbrainsRow(raw) : parsePlainRow(raw);
    if (typeof row === "string") throw malformed(lineNo, row);

    const maxPct = fmt === "bitbrains" ? BITBRAINS_MAX_CPU_PCT : 100 + RANGE_TOLERANCE_PCT;
    if (row.pct < -RANGE_TOLERANCE_PCT || row.pct > maxPct) {
      throw malformed(
        lineNo,
        `CPU value ${row.pct} is outside 0..${fmt === "bitbrains" ? BITBRAINS_MAX_CPU_PCT : 100}`,
      );
    }
    const pct = Math.min(100, Math.max(0, row.pct));

    const last = timesMs.length - 1;
    if (last >= 0) {
      const lastTimeMs = timesMs[last]!;
      if (row.timeMs === lastTimeMs && duplicateTimes === "merge") {
        cpuPct[last] = (cpuPct[last]! * mergedCount + pct) / (mergedCount + 1);
        mergedCount++;
        previousLine = lineNo;
        continue;
      }
      if (row.timeMs <= lastTimeMs) {
        throw malformed(
          lineNo,
          `time does not increase (${isoTime(row.timeMs)} after ${isoTime(lastTimeMs)} on line ${previousLine})`,
        );
      }
    }
    timesMs.push(row.timeMs);
    cpuPct.push(pct);
    mergedCount = 1;
    previousLine = lineNo;
  }

  if (timesMs.length < 2) {
    throw malformed(lines.length + 1, `only ${timesMs.length} sample(s); a trace needs at least 2`);
  }
  return {
    name: basename(file, extname(file)),
    stepSec: medianStepMs(timesMs) / 1000,
    startMs: timesMs[0]!,
    timesMs,
    cpuPct,
  };
}

interface Row {
  timeMs: number;
  pct: number;
}

function parseNumber(field: string): number | undefined {
  const s = field.trim();
  if (!NUMBER_RE.test(s)) return undefined;
  const value = Number(s);
  return Number.isFinite(value) ? value : undefined;
}

function parseNabRow(raw: string): Row | string {
  const fields = raw.split(",");
  if (fields.length !== 2) return `expected 2 columns (timestamp,value), found ${fields.length}`;
  const m = NAB_TIME_RE.exec(fields[0]!.trim());
  if (!m) return `bad timestamp ${JSON.stringify(fields[0])} (expected YYYY-MM-DD HH:MM:SS)`;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const timeMs = Date.UTC(y, mo - 1, d, h, mi, s);
  // Date.UTC rolls 2014-02-30 over into March; a round trip catches impossible dates and times.
  const back = new Date(timeMs);
  if (
    back.getUTCFullYear() !== y ||
    back.getUTCMonth() !== mo - 1 ||
    back.getUTCDate() !== d ||
    back.getUTCHours() !== h ||
    back.getUTCMinutes() !== mi ||
    back.getUTCSeconds() !== s
  ) {
    return `bad timestamp ${JSON.stringify(fields[0])} (no such date or time)`;
  }
  const pct = parseNumber(fields[1]!);
  if (pct === undefined) return `non-numeric value ${JSON.stringify(fields[1])}`;
  return { timeMs, pct };
}

function parseBitbrainsRow(raw: string): Row | string {
  const fields = raw.split(BITBRAINS_SEPARATOR);
  if (fields.length !== BITBRAINS_COLUMNS) {
    return `expected ${BITBRAINS_COLUMNS} columns separated by ';\\t', found ${fields.length}`;
  }
  const values: number[] = [];
  for (let c = 0; c < fields.length; c++) {
    const v = parseNumber(fields[c]!);
    if (v === undefined) return `non-numeric value ${JSON.stringify(fields[c])} in column ${c + 1}`;
    values.push(v);
  }
  const timeSec = values[BITBRAINS_TIME_COLUMN]!;
  // Despite the header's "[ms]", the column holds Unix seconds (seeds' data README).
  if (!Number.isInteger(timeSec) || timeSec < 0) return `bad timestamp ${JSON.stringify(fields[0])}`;
  return { timeMs: timeSec * 1000, pct: values[BITBRAINS_CPU_PCT_COLUMN]! };
}

function parsePlainRow(raw: string): Row | string {
  const fields = raw.split(",");
  if (fields.length !== 2) return `expected 2 columns (${PLAIN_CSV_HEADER}), found ${fields.length}`;
  const timeSec = parseNumber(fields[0]!);
  if (timeSec === undefined || timeSec < 0) return `bad timestamp ${JSON.stringify(fields[0])}`;
  const pct = parseNumber(fields[1]!);
  if (pct === undefined) return `non-numeric value ${JSON.stringify(fields[1])}`;
  return { timeMs: Math.round(timeSec * 1000), pct };
}

function isoTime(timeMs: number): string {
  const d = new Date(timeMs);
  return Number.isNaN(d.getTime()) ? `${timeMs} ms` : d.toISOString();
}

function medianStepMs(timesMs: number[]): number {
  const steps: number[] = [];
  for (let i = 1; i < timesMs.length; i++) steps.push(timesMs[i]! - timesMs[i - 1]!);
  steps.sort((a, b) => a - b);
  const mid = steps.length >> 1;
  return steps.length % 2 === 1 ? steps[mid]! : (steps[mid - 1]! + steps[mid]!) / 2;
}

/**
 * The length of one replay cycle of `series` in ms: its span plus one step, since the last sample holds for a step
 * before the trace wraps around to its first sample.
 */
export function seriesPeriodMs(series: UtilizationSeries): number {
  const last = series.timesMs[series.timesMs.length - 1] ?? series.startMs;
  return last - series.startMs + series.stepSec * 1000;
}

/**
 * The CPU % in force `offsetMs` after the series' start: each sample holds until the next one, and offsets past the
 * end (or before the start) wrap around.
 */
export function valueAt(series: UtilizationSeries, offsetMs: number): number {
  const n = series.timesMs.length;
  if (n === 0)
    throw new HarvestError("TRACE_MALFORMED", `series ${series.name} is empty`, { details: { file: series.name } });
  const periodMs = seriesPeriodMs(series);
  const wrapped = ((offsetMs % periodMs) + periodMs) % periodMs;
  const t = series.startMs + wrapped;
  // Binary search for the last sample at or before t.
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (series.timesMs[mid]! <= t) lo = mid;
    else hi = mid - 1;
  }
  return series.cpuPct[lo]!;
}

/**
 * Resamples onto a regular grid of `stepSec` slots from the series' start: each slot is the mean of the samples in it;
 * a slot without samples holds the previous slot's value.
 */
export function resample(series: UtilizationSeries, stepSec: number): UtilizationSeries {
  if (!(stepSec > 0)) throw new HarvestError("INVALID_ARGUMENT", `resample step must be > 0 s, got ${stepSec}`);
  const stepMs = stepSec * 1000;
  const n = series.timesMs.length;
  if (n === 0) return { ...series, stepSec, timesMs: [], cpuPct: [] };
  const last = series.timesMs[n - 1]!;
  const slots = Math.floor((last - series.startMs) / stepMs) + 1;
  const sums = new Array<number>(slots).fill(0);
  const counts = new Array<number>(slots).fill(0);
  for (let i = 0; i < n; i++) {
    const k = Math.floor((series.timesMs[i]! - series.startMs) / stepMs);
    sums[k]! += series.cpuPct[i]!;
    counts[k]! += 1;
  }
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  let held = series.cpuPct[0]!;
  for (let k = 0; k < slots; k++) {
    if (counts[k]! > 0) held = sums[k]! / counts[k]!;
    timesMs.push(series.startMs + k * stepMs);
    cpuPct.push(held);
  }
  return {
    name: series.name,
    stepSec,
    startMs: series.startMs,
    timesMs,
    cpuPct,
  };
}

/** Writes `series` in the plain `time_s,cpu_pct` format, times relative to Unix epoch in seconds. */
export async function writeUtilizationCsv(path: string, series: UtilizationSeries): Promise<void> {
  if (series.timesMs.length !== series.cpuPct.length) {
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `series ${series.name} has ${series.timesMs.length} times but ${series.cpuPct.length} values`,
    );
  }
  const rows = [PLAIN_CSV_HEADER];
  for (let i = 0; i < series.timesMs.length; i++) {
    rows.push(`${series.timesMs[i]! / 1000},${roundPct(series.cpuPct[i]!)}`);
  }
  await writeFile(path, rows.join("\n") + "\n", "utf8");
}

function roundPct(pct: number): number {
  return Math.round(pct * 1000) / 1000;
}
