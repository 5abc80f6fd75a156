/** Small helpers the benchmarks share: precise time, percentiles, memory after a full GC, and plain-text tables. */
import { setTimeout as sleep } from "node:timers/promises";

/** Wall time in ms with sub-millisecond precision (Date.now() scale), comparable across threads of this process. */
export function preciseNowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Order statistics of a sample. */
export interface Summary {
  count: number;
  min: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** The q-quantile (0..1) of ascending `sorted` by the nearest-rank method; NaN when empty. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

/** count, min, p50, p99 (nearest rank), max and mean of the finite `values` (NaN marks a missing reading). */
export function summarize(values: ArrayLike<number>): Summary {
  const sorted = Float64Array.from(Array.from(values).filter(Number.isFinite)).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length > 0 ? sum / sorted.length : Number.NaN,
  };
}

/** Process memory in bytes. */
export interface MemorySnapshot {
  rssBytes: number;
  heapUsedBytes: number;
  /** Memory of C++ objects bound to JS objects, array buffers included. */
  externalBytes: number;
}

/** True when this process was started with --expose-gc (run.js makes sure of it). */
export function canCollectGarbage(): boolean {
  return typeof globalThis.gc === "function";
}

/** Memory after full garbage collections (several, with pauses so finalizers and weak callbacks run). */
export async function settledMemory(): Promise<MemorySnapshot> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await sleep(20);
  }
  const m = process.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, externalBytes: m.external };
}

/** `value` with `digits` decimals, or "-" for NaN. */
export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "-" : value > 0 ? "inf" : "-inf";
  return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return `${fmt(bytes / 1024 / 1024, 1)} MiB`;
}

/** A ratio as "1.23x", or "-" when undefined. */
export function ratio(value: number, baseline: number): string {
  if (!(Number.isFinite(value) && Number.isFinite(baseline)) || baseline === 0) return "-";
  return `${fmt(value / baseline, 2)}x`;
}

/** A table row of a summary of latencies: the label, the count, p50, p99, max and mean. */
export function summaryRow(label: string, x: Summary): string[] {
  return [label, String(x.count), fmt(x.p50), fmt(x.p99), fmt(x.max), fmt(x.mean)];
}

/** A plain-text table: the first column left-aligned, the others right-aligned. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
}

/** A figure against its baseline and a goal ratio, e.g. "TLS at least 0.8x plaintext". */
export interface GoalCheck {
  /** value / baseline, or baseline / value when lower is better; NaN when undefined. */
  ratio: number;
  met: boolean;
  /** The ratio as "0.93x" ("-" when undefined). */
  text: string;
  /** ">= 0.80x: met", ">= 0.80x: NOT met", or "-" when the ratio is undefined. */
  verdict: string;
}

/**
 * `value / baseline` checked against `goal` (met when the ratio is at least `goal`). For a figure where less is better
 * (a latency, a duration) pass `lowerIsBetter`: the ratio is then baseline / value, a speed, so that a goal of 0.8x
 * means "at most 1.25x as long".
 */
export function goalRatio(value: number, baseline: number, goal: number, lowerIsBetter = false): GoalCheck {
  const [num, den] = lowerIsBetter ? [baseline, value] : [value, baseline];
  const r = Number.isFinite(num) && Number.isFinite(den) && den !== 0 ? num / den : Number.NaN;
  const met = Number.isFinite(r) && r >= goal;
  return {
    ratio: r,
    met,
    text: ratio(num, den),
    verdict: Number.isFinite(r) ? `>= ${fmt(goal, 2)}x: ${met ? "met" : "NOT met"}` : "-",
  };
}

/** `fn`'s value and how long it took, in ms. */
export function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const v = fn();
  return [v, performance.now() - t0];
}

/** `fn`'s value and how long it took to resolve, in ms. */
export async function timedAsync<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await fn();
  return [v, performance.now() - t0];
}
