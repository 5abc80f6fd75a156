/** Human output of the `harvest` command: tables, durations and the live per-vertex progress display. */
import { TERMINAL_STATES } from "../client/job-client.js";
import type { JobClient, JobReport } from "../client/job-client.js";
import { liveVertexProgress } from "../common/live-progress.js";

export { table } from "../common/text-table.js";

/** "1m 03.2s", "850 ms" */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m ${(s - m * 60).toFixed(1).padStart(4, "0")}s`;
}

/** The fields of a survival quote the CLI prints (the proto's `SurvivalQuote`). */
export interface QuoteFields {
  pNoKill: number;
  expectedReruns: number;
  etaP10Ms: number;
  etaP50Ms: number;
  etaP90Ms: number;
  basis: string;
}

/**
 * A survival quote in one line: "survival quote: 83 % chance that no task is killed, 0.4 re-runs expected, done in
 * 1m 10.0s to 4m 02.0s (median 2m 00.0s) from submission [vertex, 3 past runs]"; "" for none.
 */
export function quoteText(q: QuoteFields | null | undefined): string {
  if (!q) return "";
  const pct = q.pNoKill >= 0.995 && q.pNoKill < 1 ? "> 99" : Math.round(q.pNoKill * 100).toString();
  return (
    `survival quote: ${pct} % chance that no task is killed, ${q.expectedReruns.toFixed(1)} re-runs expected, ` +
    `done in ${duration(q.etaP10Ms)} to ${duration(q.etaP90Ms)} (median ${duration(q.etaP50Ms)}) from submission` +
    (q.basis ? ` [${q.basis}]` : "")
  );
}

/** A progress bar of `width` characters. */
export function bar(done: number, total: number, width = 20): string {
  const filled = total > 0 ? Math.round((done / total) * width) : 0;
  return "[" + "#".repeat(filled) + ".".repeat(width - filled) + "]";
}

/**
 * The lines of the live job display: a header line, then per vertex its progress (succeeded tasks count 1, running
 * tasks the fraction they reported) and its counters (the running tasks' so far included).
 */
export function progressLines(r: JobReport, nowMs: number): string[] {
  const lines: string[] = [];
  const elapsed = r.startMs > 0 ? (r.finishMs > 0 ? r.finishMs : nowMs) - r.submitMs : nowMs - r.submitMs;
  lines.push(
    `${r.appId}  ${r.name}  ${r.state}  ${duration(elapsed)}${r.attempts > 1 ? `  (job manager attempt ${r.attempts})` : ""}`,
  );
  const vertices = r.progress?.vertices ?? [];
  const live = liveVertexProgress(r);
  const nameWidth = Math.max(6, ...vertices.map((v) => v.name.length));
  for (const [i, v] of vertices.entries()) {
    const l = live[i]!;
    const extra = [
      v.running > 0 ? `${v.running} running` : "",
      v.preempted > 0 ? `${v.preempted} preempted` : "",
      v.lost > 0 ? `${v.lost} lost` : "",
      v.failedAttempts > 0 ? `${v.failedAttempts} failed` : "",
    ]
      .filter(Boolean)
      .join(", ");
    lines.push(
      `  ${v.name.padEnd(nameWidth)} ${bar(l.progress, 1)} ${String(v.succeeded).padStart(4)}/${v.total} ${percent(l.progress)}  ${v.state.padEnd(9)} ${extra}`,
    );
    const local = localityText(v);
    if (local) lines.push(`  ${" ".repeat(nameWidth)} ${local}`);
    const counters = Object.entries(l.counters);
    const soFar =
      l.reporting > 0 && Object.keys(l.runningCounters).length > 0 ? " (running tasks' so far included)" : "";
    if (counters.length > 0)
      lines.push(
        `  ${" ".repeat(nameWidth)} counters: ${counters.map(([k, n]) => `${k} ${String(n)}`).join(", ")}${soFar}`,
      );
  }
  if (vertices.length === 0) lines.push(`  ${r.diagnostics || "waiting for the job manager"}`);
  return lines;
}

/**
 * "input: 7 of 8 task starts node-local (88 %), 1 rack-local, 0 off-switch" for a vertex over a DFS input, "" for
 * another.
 */
export function localityText(v: { nodeLocal?: number; rackLocal?: number; offSwitch?: number }): string {
  const node = v.nodeLocal ?? 0;
  const rack = v.rackLocal ?? 0;
  const off = v.offSwitch ?? 0;
  const starts = node + rack + off;
  if (starts === 0) return "";
  return `input: ${node} of ${starts} task starts node-local (${Math.round((100 * node) / starts)} %), ${rack} rack-local, ${off} off-switch`;
}

/** "37%", right-aligned in 4 characters; 100% only when all is done. */
function percent(fraction: number): string {
  return `${String(fraction < 1 ? Math.min(99, Math.floor(fraction * 100)) : 100).padStart(3)}%`;
}

/** What changes the display of a job: its state, its vertices' counts and its running tasks' reports. */
export function progressKey(r: JobReport): string {
  return r.state + JSON.stringify(r.progress?.vertices ?? []) + JSON.stringify(liveVertexProgress(r));
}

/** A job's report for `--json`: the resource manager's, with each vertex's live progress (`vertexProgress`). */
export function reportJson(r: JobReport): JobReport & { vertexProgress: ReturnType<typeof liveVertexProgress> } {
  return { ...r, vertexProgress: liveVertexProgress(r) };
}

/** Redraws a block of lines in place on a terminal; appends when not a terminal and the text changed. */
export class LiveDisplay {
  private lastLines = 0;
  private lastText = "";
  constructor(private readonly out: NodeJS.WriteStream = process.stdout) {}

  /** Shows `lines`; off a terminal they are printed only when `key` (default: the text) changed. */
  update(lines: string[], key?: string): void {
    const text = lines.join("\n");
    const changeKey = key ?? text;
    if (this.out.isTTY) {
      if (this.lastLines > 0) this.out.write(`\x1b[${this.lastLines}F\x1b[J`);
      this.out.write(text + "\n");
      this.lastLines = lines.length;
    } else if (changeKey !== this.lastText) {
      this.out.write(text + "\n");
    }
    this.lastText = changeKey;
  }
}

/** Polls a job to its end, redrawing the per-vertex display when `live`. */
export async function follow(c: JobClient, appId: string, live: boolean, pollMs = 500): Promise<JobReport> {
  const display = new LiveDisplay();
  for (;;) {
    const r = await c.status(appId);
    if (live) display.update(progressLines(r, Date.now()), progressKey(r));
    if (TERMINAL_STATES.includes(r.state)) return r;
    await new Promise((res) => setTimeout(res, pollMs));
  }
}

/** Task attempts that ran to an end (not containers given back unused). */
export function taskAttemptsRun(r: JobReport): number {
  const t = r.taskContainers;
  return t ? t.succeeded + t.failed + t.preempted + t.lost : 0;
}

/** The closing lines of a followed job (counts from the resource manager, over every job-manager attempt). */
export function outcomeText(r: JobReport): string {
  const t = r.taskContainers;
  const am = r.amContainers;
  const lines = [
    `${r.appId} ${r.state === "FINISHED" ? "succeeded" : r.state.toLowerCase()} in ${duration(r.finishMs - r.submitMs)}`,
    `  task attempts run ${taskAttemptsRun(r)}: preempted by primary tenants and re-run ${t?.preempted ?? 0}, lost with a node ${t?.lost ?? 0}, failed ${t?.failed ?? 0}`,
    `  job-manager attempts ${r.attempts} (${am?.preempted ?? 0} preempted, ${am?.lost ?? 0} lost, ${am?.failed ?? 0} failed)`,
  ];
  if (r.diagnostics) lines.push(`  ${r.diagnostics}`);
  return lines.join("\n");
}
