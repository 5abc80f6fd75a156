/**
 * Primary-tenant CPU-utilization traces: readers for the real traces in `../shared/data` (NAB AWS CloudWatch, Bitbrains
 * GWA-T-12) and for our own plain CSV, a step-hold lookup for replay, and resampling.
 *
 * Every reader (the RM's history import, the simulator's replay, the daemons' `trace:` replay, the demo's primaries)
 * goes through one normalization, `parseTraceText`, which reads real files as they are and counts what it changed
 * (`TraceWarnings`):
 * - CPU outside 0..100 % of the server (multi-core VMs report several hundred, monitoring noise dips below 0) is
 *   clamped to 0..100 and counted (`clampedHigh`, `clampedLow`); float error within 1e-6 of the bounds is not counted.
 * - Rows out of time order are sorted into place (`outOfOrder`): a row is a measurement keyed by its timestamp, and the
 *   file order carries nothing the timestamp does not.
 * - Rows sharing a timestamp are merged into their mean (`duplicatesMerged`, rows folded away): the RM's history keeps
 *   one mean per slot (sum and count), so the mean is what importing the rows one by one would store, and it is the
 *   right value for NAB's folded daylight-saving hour (twelve 5-minute readings stamped 03:00 are that hour's average).
 * - Gaps: an interval between consecutive samples of k >= 2 steps (k = interval / median step, rounded) misses k - 1
 *   samples. Up to `maxBridgeSteps` steps (default 6: 30 minutes at 5-minute steps) it is bridged by holding the
 *   previous value at each missing step (`gapsBridged`, `samplesBridged`); longer ones stay gaps (`gapsKept`). See
 *   `DEFAULT_MAX_BRIDGE_STEPS` for why.
 * - A last line without a final newline that does not parse was cut off mid-write: it is dropped (`truncatedLastLine`).
 * - Any other line that does not parse (non-numeric value, wrong column count, impossible date, blank line) is skipped
 *   and counted with its line number (`skippedLines`, `skipped`). More than `maxSkippedLines` (default 10) of them,
 *   or fewer than 2 usable samples, makes the file unreadable: TRACE_MALFORMED naming the file and a line.
 * A header that is none of ours (or not the format asked for), and an empty file, are unreadable too.
 * `readTraceFiles` reads many files, skipping unreadable ones with a warning naming file and line; it fails only when
 * none is readable.
 */
import { readFile, writeFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { HarvestError, detailsOf, errorMessage, isHarvestError } from "./errors.js";

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

/**
 * How a reader treats rows that carry the same timestamp: always merged into their mean. Kept so that callers written
 * when "reject" was the default still compile.
 */
export type DuplicateTimePolicy = "merge";

/**
 * Bridging threshold, in steps, of `ReadTraceOptions.maxBridgeSteps`. Half an hour at the real traces' 5-minute steps:
 * the holes of a few missed polls (NAB's 10- to 20-minute ones, Bitbrains' 10-minute ones) are monitoring artefacts
 * while the workload ran on, and holding the last value for up to 30 minutes cannot make or erase the hour-scale
 * features the classifier and the demo look for (daily cycles, bursts). Longer holes (Bitbrains' 55-minute and 30-hour
 * outages, NAB's daylight-saving hour) say nothing about what ran, so they stay gaps: the RM's history keeps those slots
 * empty rather than averaging invented values; replay (`valueAt`) and `resample` hold the last value across them, as
 * they hold every sample until the next.
 */
export const DEFAULT_MAX_BRIDGE_STEPS = 6;

/**
 * Most skipped lines a readable file may have. Real monitoring files have the odd corrupt line (a crash mid-write, a
 * header repeated on append); many more means the file is not in the format we think it is.
 */
export const DEFAULT_MAX_SKIPPED_LINES = 10;

/** Options for the readers. */
export interface ReadTraceOptions {
  /** @deprecated Repeated timestamps are always merged into their mean; accepted and ignored. */
  duplicateTimes?: DuplicateTimePolicy;
  /**
   * Gaps of at most this many steps (interval / median step, rounded) are bridged by holding the previous value; longer
   * ones stay gaps. 1 bridges nothing.
   * @default DEFAULT_MAX_BRIDGE_STEPS (6)
   */
  maxBridgeSteps?: number;
  /**
   * More skipped (unparseable) lines than this make the file unreadable. A truncated last line is not counted.
   * @default DEFAULT_MAX_SKIPPED_LINES (10)
   */
  maxSkippedLines?: number;
}

/** What the normalization changed in one file. All zero (and `skipped` empty) for a clean file. */
export interface TraceWarnings {
  /** Values above 100 % of the server, clamped to 100. */
  clampedHigh: number;
  /** Values below 0, clamped to 0. */
  clampedLow: number;
  /** Rows whose time was earlier than a row above them, sorted into place. */
  outOfOrder: number;
  /** Rows folded into another row with the same timestamp (n rows at one time count n - 1). */
  duplicatesMerged: number;
  /** Gaps of at most `maxBridgeSteps` steps, bridged. */
  gapsBridged: number;
  /** Samples inserted into the bridged gaps (each holds the value before its gap). */
  samplesBridged: number;
  /** Gaps longer than `maxBridgeSteps` steps, left as gaps. */
  gapsKept: number;
  /** The total time inside the kept gaps (from the sample before to the sample after), in ms. */
  gapKeptMs: number;
  /** The 1-based number of the truncated last line that was dropped, or 0 when there was none. */
  truncatedLastLine: number;
  /** Lines skipped because they did not parse. */
  skippedLines: number;
  /** The first skipped lines (at most `maxSkippedLines` + 1), with the reason. */
  skipped: { line: number; reason: string }[];
}

/** A file read through the normalization. */
export interface TraceReadResult {
  /** The file as named to the reader. */
  file: string;
  format: TraceFormat;
  series: UtilizationSeries;
  warnings: TraceWarnings;
}

/** A file `readTraceFiles` skipped. */
export interface UnreadableTrace {
  file: string;
  /** The 1-based line that made it unreadable, when the file could be read at all. */
  line?: number;
  reason: string;
  error: HarvestError;
}

/**
 * The gRPC trailing-metadata key under which the RM's history import returns an import's `TraceWarnings` (JSON), while
 * ImportHistoryResponse has no field for them. Binary (`-bin`) because skipped-line reasons quote file content.
 */
export const TRACE_WARNINGS_METADATA_KEY = "harvest-trace-warnings-bin";

/** The header line of our own plain format. */
export const PLAIN_CSV_HEADER = "time_s,cpu_pct";

const NAB_HEADER = "timestamp,value";
const BITBRAINS_SEPARATOR = ";\t";
const BITBRAINS_COLUMNS = 11;
const BITBRAINS_TIME_COLUMN = 0;
const BITBRAINS_CPU_PCT_COLUMN = 4;

/** Float error tolerated beyond 0..100 before a value counts as out of range (it is clamped either way). */
const RANGE_TOLERANCE_PCT = 1e-6;

const NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const NAB_TIME_RE = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/** No warnings. */
export function noTraceWarnings(): TraceWarnings {
  return {
    clampedHigh: 0,
    clampedLow: 0,
    outOfOrder: 0,
    duplicatesMerged: 0,
    gapsBridged: 0,
    samplesBridged: 0,
    gapsKept: 0,
    gapKeptMs: 0,
    truncatedLastLine: 0,
    skippedLines: 0,
    skipped: [],
  };
}

/** Whether the normalization changed anything. */
export function hasTraceWarnings(w: TraceWarnings): boolean {
  return (
    w.clampedHigh + w.clampedLow + w.outOfOrder + w.duplicatesMerged + w.gapsBridged + w.gapsKept + w.skippedLines >
      0 || w.truncatedLastLine > 0
  );
}

/**
 * One line of what the normalization changed, e.g. `1832 value(s) above 100 % clamped; 1 gap(s) kept (30.7 h)`; empty
 * for a clean file.
 */
export function describeTraceWarnings(w: TraceWarnings): string {
  const parts: string[] = [];
  if (w.clampedHigh > 0) parts.push(`${w.clampedHigh} value(s) above 100 % clamped`);
  if (w.clampedLow > 0) parts.push(`${w.clampedLow} value(s) below 0 clamped`);
  if (w.outOfOrder > 0) parts.push(`${w.outOfOrder} row(s) out of time order sorted`);
  if (w.duplicatesMerged > 0) parts.push(`${w.duplicatesMerged} row(s) with a repeated timestamp merged (mean)`);
  if (w.gapsBridged > 0) parts.push(`${w.gapsBridged} short gap(s) bridged with ${w.samplesBridged} held sample(s)`);
  if (w.gapsKept > 0) parts.push(`${w.gapsKept} gap(s) kept (${formatHours(w.gapKeptMs)})`);
  if (w.truncatedLastLine > 0) parts.push(`truncated last line ${w.truncatedLastLine} dropped`);
  if (w.skippedLines > 0) {
    const shown = w.skipped.slice(0, 3).map((s) => `line ${s.line}: ${s.reason}`);
    const more = w.skippedLines > shown.length ? `, ...` : "";
    parts.push(`${w.skippedLines} unreadable line(s) skipped (${shown.join("; ")}${more})`);
  }
  return parts.join("; ");
}

/** The counts of `w` as flat log fields (no per-line detail beyond the first skipped line). */
export function traceWarningFields(w: TraceWarnings): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const [k, v] of Object.entries(w)) if (typeof v === "number" && v > 0) fields[k] = v;
  if (w.skipped[0]) fields["firstSkippedLine"] = w.skipped[0].line;
  return fields;
}

function formatHours(ms: number): string {
  const h = ms / 3_600_000;
  return h >= 1 ? `${Math.round(h * 10) / 10} h` : `${Math.round(ms / 60_000)} min`;
}

/** Reads a utilization trace through the normalization, detecting the format from the header when it is omitted. */
export async function readTraceFile(
  path: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): Promise<TraceReadResult> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new HarvestError("INVALID_ARGUMENT", `cannot read trace file ${path}: ${(err as Error).message}`, {
      details: { file: path },
      cause: err,
    });
  }
  return parseTraceText(text, path, format, options);
}

/** Reads a utilization trace (see `readTraceFile`), returning the series only. */
export async function readUtilizationFile(
  path: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): Promise<UtilizationSeries> {
  return (await readTraceFile(path, format, options)).series;
}

/**
 * Reads many trace files, in the order given: an unreadable one is skipped (reported to `onSkip`, with the file and
 * line) and the rest are read. Throws TRACE_MALFORMED (details: file, line, reason of the first failure; files: how
 * many) when there are files but none is readable; an empty list gives empty results.
 */
export async function readTraceFiles(
  paths: readonly string[],
  options: ReadTraceOptions & {
    format?: TraceFormat;
    onSkip?: (skipped: UnreadableTrace) => void;
  } = {},
): Promise<{ traces: TraceReadResult[]; skipped: UnreadableTrace[] }> {
  const traces: TraceReadResult[] = [];
  const skipped: UnreadableTrace[] = [];
  const results = await Promise.allSettled(paths.map((p) => readTraceFile(p, options.format, options)));
  results.forEach((r, i) => {
    if (r.status === "fulfilled") {
      traces.push(r.value);
      return;
    }
    const file = paths[i]!;
    const error = isHarvestError(r.reason)
      ? r.reason
      : new HarvestError("TRACE_MALFORMED", `${file}: ${errorMessage(r.reason)}`, {
          details: { file },
          cause: r.reason,
        });
    const read = detailsOf(error, "TRACE_MALFORMED");
    const line = read?.line !== undefined ? Number(read.line) : undefined;
    const s: UnreadableTrace = {
      file,
      ...(line !== undefined ? { line } : {}),
      reason: read?.reason ?? error.message,
      error,
    };
    skipped.push(s);
    options.onSkip?.(s);
  });
  if (paths.length > 0 && traces.length === 0) {
    const first = skipped[0]!;
    throw new HarvestError(
      "TRACE_MALFORMED",
      `none of ${paths.length} trace file(s) is readable; first: ${first.error.message}`,
      {
        details: {
          file: first.file,
          ...(first.line !== undefined ? { line: String(first.line) } : {}),
          reason: first.reason,
          files: String(paths.length),
        },
        cause: first.error,
      },
    );
  }
  return { traces, skipped };
}

/** A skipped file as one warning line: `file:line: reason (skipped)`. */
export function describeUnreadableTrace(s: UnreadableTrace): string {
  return `${s.file}${s.line !== undefined ? `:${s.line}` : ""}: ${s.reason} (file skipped)`;
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

/** Parses the text of a trace file (see `parseTraceText`), returning the series only. */
export function parseUtilizationText(
  text: string,
  file: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): UtilizationSeries {
  return parseTraceText(text, file, format, options).series;
}

/**
 * The normalization every reader goes through (the module comment states its rules). `file` is used in messages and
 * for the series name. Throws TRACE_MALFORMED (details: file, line, reason) when the file is unreadable.
 */
export function parseTraceText(
  text: string,
  file: string,
  format?: TraceFormat,
  options: ReadTraceOptions = {},
): TraceReadResult {
  const maxBridgeSteps = options.maxBridgeSteps ?? DEFAULT_MAX_BRIDGE_STEPS;
  const maxSkippedLines = options.maxSkippedLines ?? DEFAULT_MAX_SKIPPED_LINES;
  if (!(Number.isInteger(maxBridgeSteps) && maxBridgeSteps >= 1))
    throw new HarvestError("INVALID_ARGUMENT", `maxBridgeSteps must be an integer >= 1, got ${maxBridgeSteps}`);
  if (!(Number.isInteger(maxSkippedLines) && maxSkippedLines >= 0))
    throw new HarvestError("INVALID_ARGUMENT", `maxSkippedLines must be an integer >= 0, got ${maxSkippedLines}`);
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });

  const lines = text.split("\n");
  // Whether the writer finished its last line; a final newline also leaves one empty element.
  const endsWithNewline = /\n\s*$/.test(text);
  // Trailing blank lines are nothing.
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
  const parseRow = fmt === "nab" ? parseNabRow : fmt === "bitbrains" ? parseBitbrainsRow : parsePlainRow;

  const warnings = noTraceWarnings();
  const rows: Row[] = [];
  let latestMs = -Infinity;
  for (let i = 1; i < lines.length; i++) {
    const lineNo = i + 1;
    const raw = lines[i]!.replace(/\r$/, "");
    const row = raw.trim() === "" ? "blank line" : parseRow(raw);
    if (typeof row === "string") {
      if (i === lines.length - 1 && !endsWithNewline) {
        warnings.truncatedLastLine = lineNo;
        continue;
      }
      warnings.skippedLines++;
      if (warnings.skipped.length <= maxSkippedLines) warnings.skipped.push({ line: lineNo, reason: row });
      if (warnings.skippedLines > maxSkippedLines) {
        const first = warnings.skipped[0]!;
        throw malformed(
          lineNo,
          `${row}; more than ${maxSkippedLines} unreadable line(s) (the first is line ${first.line}: ${first.reason})`,
        );
      }
      continue;
    }
    if (row.pct > 100) {
      if (row.pct > 100 + RANGE_TOLERANCE_PCT) warnings.clampedHigh++;
      row.pct = 100;
    } else if (row.pct < 0) {
      if (row.pct < -RANGE_TOLERANCE_PCT) warnings.clampedLow++;
      row.pct = 0;
    }
    if (row.timeMs < latestMs) warnings.outOfOrder++;
    else latestMs = row.timeMs;
    rows.push(row);
  }
  // Stable: rows at one time keep their file order (the merge is a mean, so the order does not change the value).
  if (warnings.outOfOrder > 0) rows.sort((a, b) => a.timeMs - b.timeMs);

  // Merge repeated timestamps into their mean.
  const times: number[] = [];
  const values: number[] = [];
  let runCount = 0;
  for (const row of rows) {
    const last = times.length - 1;
    if (last >= 0 && times[last] === row.timeMs) {
      values[last] = (values[last]! * runCount + row.pct) / (runCount + 1);
      runCount++;
      warnings.duplicatesMerged++;
      continue;
    }
    times.push(row.timeMs);
    values.push(row.pct);
    runCount = 1;
  }

  if (times.length < 2) {
    // Name the line that cost the file its samples: the first skipped one, else the dropped truncated one.
    const first = warnings.skipped[0];
    const why = `only ${times.length} usable sample(s); a trace needs at least 2`;
    if (first) throw malformed(first.line, `${why} (line ${first.line}: ${first.reason})`);
    if (warnings.truncatedLastLine > 0)
      throw malformed(warnings.truncatedLastLine, `${why} (line ${warnings.truncatedLastLine} is truncated)`);
    throw malformed(lines.length + 1, why);
  }

  // Gaps, measured in median steps of the merged series.
  const stepMs = medianStepMs(times);
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let i = 0; i < times.length; i++) {
    if (i > 0) {
      const prev = times[i - 1]!;
      const steps = Math.round((times[i]! - prev) / stepMs);
      if (steps >= 2 && steps <= maxBridgeSteps) {
        warnings.gapsBridged++;
        for (let k = 1; k < steps; k++) {
          timesMs.push(Math.round(prev + k * stepMs));
          cpuPct.push(values[i - 1]!);
          warnings.samplesBridged++;
        }
      } else if (steps > maxBridgeSteps) {
        warnings.gapsKept++;
        warnings.gapKeptMs += times[i]! - prev;
      }
    }
    timesMs.push(times[i]!);
    cpuPct.push(values[i]!);
  }

  return {
    file,
    format: fmt,
    series: {
      name: basename(file, extname(file)),
      stepSec: stepMs / 1000,
      startMs: timesMs[0]!,
      timesMs,
      cpuPct,
    },
    warnings,
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
