/** The simulator's reports (markdown, CSV, SVG plots) from hand-made results, and the small grid end to end. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import type { UtilizationLevel } from "../../sim/model.js";
import { formatChange, formatFraction, writeReport } from "../../sim/report.js";
import type { ComputePolicy, ComputeResult, StoragePlacement, StorageResult } from "../../sim/results.js";
import { parseLevels, parseReplications, parseSeed } from "../../cli/sim-commands.js";
import { renderBarPanels } from "../../sim/plots.js";
import { COMPUTE_CSV_HEADER, computeCsv, renderComputeReport } from "../../sim/compute-report.js";
import { STORAGE_CSV_HEADER, renderStorageReport, storageCsv } from "../../sim/experiments/storage/index.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-report-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function computeResult(level: UtilizationLevel, policy: ComputePolicy, scale: number): ComputeResult {
  return {
    level,
    policy,
    servers: 1000,
    days: 30,
    seed: 1,
    traces: "generated",
    jobs: 2_000,
    avgJobTimeS: 1234.5678 * scale,
    byType: {
      short: { jobs: 1_500, avgJobTimeS: 61.25 * scale },
      medium: { jobs: 500, avgJobTimeS: 901 * scale },
      long: { jobs: 0, avgJobTimeS: 0 },
    },
    tasksRun: 250_000,
    taskKills: Math.round(4_000 * scale),
    jobManagerKills: Math.round(40 * scale),
    avgTaskWaitS: 2.5 * scale,
    wastedCoreHours: 321.04 * scale,
    jobsWaited: 7,
    primaryCoreHoursTaken: 0,
    events: 3_000_000,
    wallMs: 12_000,
  };
}

function storageResult(
  level: UtilizationLevel,
  placement: StoragePlacement,
  replication: number,
  blocksLost: number,
): StorageResult {
  return {
    level,
    placement,
    replication,
    servers: 10_000,
    days: 365,
    seed: 1,
    traces: "generated",
    blocks: 300_000,
    blocksLost,
    accesses: 3_650_000,
    unavailableAccesses: placement === "stock" ? 36_500 : 365,
    reimages: 42_000,
    reReplicationBytes: 1.5 * 2 ** 40,
    reReplicationMBps: 50,
    events: 9_000_000,
    wallMs: 60_000,
  };
}

const COMPUTE: ComputeResult[] = [
  computeResult("high", "history", 0.8),
  computeResult("low", "stock", 1),
  computeResult("high", "stock", 1),
  computeResult("low", "history", 0.9),
];

const STORAGE: StorageResult[] = [
  storageResult("medium", "stock", 3, 30_000),
  storageResult("medium", "diversity", 3, 9),
  storageResult("medium", "stock", 4, 120),
  storageResult("medium", "diversity", 4, 0),
];

/** RFC 4180 CSV to rows of strings (quotes, doubled quotes, commas and newlines inside quotes). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(cell);
      cell = "";
    } else if (c === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
    } else cell += c;
  }
  if (cell !== "" || row.length > 0) rows.push([...row, cell]);
  return rows;
}

/** The markdown table that follows the line starting with `caption`, as rows of trimmed cells. */
function tableAfter(markdown: string, caption: string): string[][] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.startsWith(caption));
  expect(start, `no "${caption}" in the report`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .slice(1, -1)
        .split("|")
        .map((c) => c.trim()),
    );
  }
  return rows.filter((r) => !r.every((c) => /^-+:?$/.test(c)));
}

/** Throws unless every tag of `svg` is closed in order (a well-formedness check without an XML parser). */
function expectBalancedTags(svg: string): void {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z][\w:-]*)[^>]*?(\/?)>/g)) {
    const [, closing, name, selfClosing] = m;
    if (selfClosing) continue;
    if (closing) expect(stack.pop(), `</${name}> closes nothing open`).toBe(name);
    else stack.push(name!);
  }
  expect(stack).toEqual([]);
}

describe("compute report", () => {
  const report = renderComputeReport(COMPUTE, { command: "harvest sim compute --compare --utilization low,high" });

  it("puts both policies side by side per level and job type, with the change from stock to history", () => {
    const rows = tableAfter(report.markdown, "Average job execution time");
    expect(rows[0]).toEqual(["utilization", "job type", "stock (s)", "history (s)", "history vs stock"]);
    expect(rows.slice(1).map((r) => `${r[0]} ${r[1]}`)).toEqual([
      "low all",
      "low short",
      "low medium",
      "low long",
      "high all",
      "high short",
      "high medium",
      "high long",
    ]);
    expect(rows[1]).toEqual(["low", "all", "1,234.6", "1,111.1", "-10.0%"]);
    expect(rows[5]).toEqual(["high", "all", "1,234.6", "987.7", "-20.0%"]);
    // No long jobs finished: a dash, not a zero-second average.
    expect(rows[4]).toEqual(["low", "long", "-", "-", "-"]);
  });

  it("tabulates task kills and wasted core-hours per level and every figure per run", () => {
    expect(tableAfter(report.markdown, "Task attempts killed")[2]).toEqual(["high", "4,000", "3,200", "-20.0%"]);
    expect(tableAfter(report.markdown, "Core-hours of work lost")[1]).toEqual(["low", "321.0", "288.9", "-10.0%"]);
    const runs = tableAfter(report.markdown, "Every run:");
    expect(runs[0]).toContain("events/s");
    expect(runs.slice(1).map((r) => `${r[0]} ${r[1]}`)).toEqual([
      "low stock",
      "low history",
      "high stock",
      "high history",
    ]);
    expect(runs[1]![runs[0]!.indexOf("events/s")]).toBe("250,000");
  });

  it("names the command that made it and links every plot", () => {
    expect(report.markdown).toContain("```sh\nharvest sim compute --compare --utilization low,high\n```");
    expect(report.markdown).toContain("1,000 servers, 30 simulated days, seed 1, generated traces.");
    for (const p of report.plots) expect(report.markdown).toContain(`](compute-${p.suffix}.svg)`);
  });

  it("has no change column when only one policy ran", () => {
    const single = renderComputeReport(COMPUTE.filter((r) => r.policy === "history"));
    expect(tableAfter(single.summary, "Average job execution time")[0]).toEqual([
      "utilization",
      "job type",
      "history (s)",
    ]);
  });

  it("compares history with both stock baselines and shows what stock-unaware took from the primary", () => {
    const unaware: ComputeResult = {
      ...computeResult("low", "stock-unaware", 0.5),
      taskKills: 0,
      wastedCoreHours: 0,
      primaryCoreHoursTaken: 42.25,
    };
    const three = renderComputeReport([...COMPUTE, unaware]);
    const time = tableAfter(three.summary, "Average job execution time");
    expect(time[0]).toEqual([
      "utilization",
      "job type",
      "stock (s)",
      "stock-unaware (s)",
      "history (s)",
      "history vs stock",
      "history vs stock-unaware",
    ]);
    expect(time[1]).toEqual(["low", "all", "1,234.6", "617.3", "1,111.1", "-10.0%", "+80.0%"]);
    expect(time[5]).toEqual(["high", "all", "1,234.6", "-", "987.7", "-20.0%", "-"]);
    expect(three.summary).toContain("stock-unaware never kills a task: its job times are the jobs' times without");
    // Kills and waste compare with primary-aware stock only (stock-unaware has none to compare with).
    expect(tableAfter(three.summary, "Task attempts killed")[1]).toEqual(["low", "4,000", "0", "3,600", "-10.0%"]);
    const taken = tableAfter(three.summary, "Primary core-hours taken");
    expect(taken[0]).toEqual(["utilization", "stock", "stock-unaware", "history"]);
    expect(taken[1]).toEqual(["low", "0.0", "42.3", "0.0"]);
    const runs = tableAfter(three.markdown, "Every run:");
    expect(runs.slice(1).map((r) => `${r[0]} ${r[1]}`)).toEqual([
      "low stock",
      "low stock-unaware",
      "low history",
      "high stock",
      "high history",
    ]);
    expect(runs[2]![runs[0]!.indexOf("primary core-h taken")]).toBe("42.3");
    const csv = parseCsv(computeCsv([...COMPUTE, unaware]));
    expect(csv[2]![COMPUTE_CSV_HEADER.indexOf("primary_core_hours_taken")]).toBe("42.25");
    expect(csv[2]![COMPUTE_CSV_HEADER.indexOf("policy")]).toBe("stock-unaware");
    // Without stock-unaware there is no taken table nor note.
    expect(report.summary).not.toContain("Primary core-hours taken");
  });

  it("writes CSV that parses back to one row per run with rounded figures", () => {
    const rows = parseCsv(computeCsv(COMPUTE));
    expect(rows[0]).toEqual(COMPUTE_CSV_HEADER);
    expect(rows).toHaveLength(1 + COMPUTE.length);
    const record = Object.fromEntries(COMPUTE_CSV_HEADER.map((h, i) => [h, rows[1]![i]]));
    expect(record).toMatchObject({
      level: "low",
      policy: "stock",
      servers: "1000",
      avg_job_time_s: "1234.568",
      short_avg_job_time_s: "61.25",
      long_jobs: "0",
      wasted_core_hours: "321.04",
      events_per_s: "250000",
    });
    for (const row of rows.slice(1)) expect(row).toHaveLength(COMPUTE_CSV_HEADER.length);
  });

  it("plots job time by level and policy, and per job type, as well-formed SVG", () => {
    expect(report.plots.map((p) => p.suffix)).toEqual(["job-time", "job-time-by-type"]);
    for (const p of report.plots) {
      expect(p.svg.startsWith("<svg")).toBe(true);
      expect(p.svg.trimEnd().endsWith("</svg>")).toBe(true);
      expectBalancedTags(p.svg);
      for (const text of ["stock", "history", "low", "high"]) expect(p.svg).toContain(`>${text}<`);
      expect(p.svg).not.toContain(">medium<"); // no medium-level runs: no medium category
    }
    for (const type of ["short jobs", "medium jobs", "long jobs"]) expect(report.plots[1]!.svg).toContain(type);
  });

  it("renders the same bytes for the same results", () => {
    const again = renderComputeReport([...COMPUTE].reverse(), {
      command: "harvest sim compute --compare --utilization low,high",
    });
    expect(again).toEqual(report);
  });
});

describe("storage report", () => {
  const report = renderStorageReport(STORAGE);

  it("compares blocks lost per level and replication factor across placements", () => {
    const rows = tableAfter(report.markdown, "Blocks lost");
    expect(rows).toEqual([
      ["utilization", "replication", "stock", "diversity", "diversity vs stock"],
      ["medium", "3", "30,000", "9", "-99.97%"],
      ["medium", "4", "120", "0", "-100.0%"],
    ]);
    expect(tableAfter(report.markdown, "Block accesses refused")[1]).toEqual([
      "medium",
      "3",
      "36,500",
      "365",
      "-99.0%",
    ]);
    expect(tableAfter(report.markdown, "Re-replication traffic")[1]).toEqual([
      "medium",
      "3",
      "1,536.0",
      "1,536.0",
      "0.0%",
    ]);
  });

  it("shows loss and unavailability as shares in the per-run table and CSV", () => {
    const runs = tableAfter(report.markdown, "Every run:");
    const lost = runs[0]!.indexOf("lost");
    expect(runs.slice(1).map((r) => r[lost])).toEqual(["10%", "0.003%", "0.04%", "0%"]);
    const rows = parseCsv(storageCsv(STORAGE));
    expect(rows[0]).toEqual(STORAGE_CSV_HEADER);
    expect(rows.slice(1).map((r) => r[STORAGE_CSV_HEADER.indexOf("lost_fraction")])).toEqual([
      "0.1",
      "0.00003",
      "0.0004",
      "0",
    ]);
    expect(rows[1]![STORAGE_CSV_HEADER.indexOf("re_replication_bytes")]).toBe(String(1.5 * 2 ** 40));
  });

  it("plots data loss on a log scale of 1 + n when it spans decades and has zeros", () => {
    const loss = report.plots.find((p) => p.suffix === "data-loss")!;
    expect(loss.svg).toContain("1 + blocks lost (log scale)");
    for (const text of ["stock", "diversity", "medium", "replication 3", "replication 4"])
      expect(loss.svg).toContain(`>${text}<`);
    expectBalancedTags(loss.svg);
    const unavailable = report.plots.find((p) => p.suffix === "unavailable")!;
    expect(unavailable.svg).toContain("accesses refused");
    expectBalancedTags(unavailable.svg);
  });
});

describe("report formatting", () => {
  it("formats changes and shares without hiding what is small", () => {
    expect(formatChange(80, 100)).toBe("-20.0%");
    expect(formatChange(105, 100)).toBe("+5.0%");
    expect(formatChange(1, 0)).toBe("-");
    expect(formatChange(0, 0)).toBe("0.0%");
    expect(formatChange(1, 10_000_000)).toBe("-~100%");
    expect(formatFraction(0.000123456)).toBe("0.0123%");
    expect(formatFraction(0)).toBe("0%");
  });

  it("draws a linear axis from zero for values of one magnitude", () => {
    const svg = renderBarPanels({
      title: "t",
      yName: "seconds",
      log: "auto",
      panels: [{ title: "", categories: ["a", "b"], series: [{ name: "x", values: [3, 5] }] }],
    });
    expect(svg).not.toContain("log scale");
    expect(svg).toContain(">seconds<");
  });
});

describe("writeReport", () => {
  it("writes the markdown, the CSV and one SVG per plot into the output directory", () => {
    const out = join(tmp, "written");
    const files = writeReport(out, renderStorageReport(STORAGE));
    expect(files.map((f) => f.slice(out.length + 1))).toEqual([
      "storage.md",
      "storage.csv",
      "storage-data-loss.svg",
      "storage-unavailable.svg",
    ]);
    expect(readFileSync(join(out, "storage.csv"), "utf8")).toBe(storageCsv(STORAGE));
  });
});

describe("sim flags", () => {
  it("reads levels, replication factors and seeds, naming the flag when one is wrong", () => {
    expect(parseLevels("all")).toEqual(["low", "medium", "high"]);
    expect(parseLevels("high,low")).toEqual(["low", "high"]);
    expect(parseReplications("4,3,4")).toEqual([3, 4]);
    expect(parseSeed("0")).toBe(0);
    for (const [fn, flag] of [
      [() => parseLevels("extreme"), "--utilization"],
      [() => parseReplications("three"), "--replication"],
      [() => parseSeed("-1"), "--seed"],
    ] as const) {
      let err: unknown;
      try {
        fn();
      } catch (e) {
        err = e;
      }
      expect(isHarvestError(err, "INVALID_ARGUMENT")).toBe(true);
      expect((err as Error).message).toContain(flag);
    }
  });
});

// The experiments need the compute and storage simulators; without them (while they are being written) this part
// skips rather than failing the whole file.
const simulatorsPresent = ["compute.ts", "jobs.ts", "storage.ts", "cluster-gen.ts"].every((f) =>
  existsSync(new URL(`../../sim/${f}`, import.meta.url)),
);

describe.skipIf(!simulatorsPresent)("the small grid", () => {
  it("runs compute and storage at every level and writes tables, CSV and plots", async () => {
    const { runGrid } = await import("../../sim/experiments.js");
    const out = join(tmp, "grid");
    const events: string[] = [];
    const grid = await runGrid({ preset: "small", out, onProgress: (e) => events.push(e.kind) });

    expect(grid.compute.results.map((r) => `${r.level} ${r.policy}`)).toEqual([
      "low stock",
      "low stock-unaware",
      "low history",
      "medium stock",
      "medium stock-unaware",
      "medium history",
      "high stock",
      "high stock-unaware",
      "high history",
    ]);
    for (const r of grid.compute.results) {
      if (r.policy === "stock-unaware") expect(r.taskKills).toBe(0);
      else expect(r.primaryCoreHoursTaken).toBe(0);
    }
    expect(grid.storage.results).toHaveLength(3 * 2 * 2);
    expect(events.filter((k) => k === "done")).toHaveLength(9 + 12);
    for (const r of grid.compute.results) expect(r.jobs).toBeGreaterThan(0);
    for (const r of grid.storage.results) expect(r.blocks).toBeGreaterThan(0);

    for (const name of ["compute", "storage"]) {
      const md = readFileSync(join(out, `${name}.md`), "utf8");
      expect(tableAfter(md, "Every run:").length).toBeGreaterThan(1);
      const csv = parseCsv(readFileSync(join(out, `${name}.csv`), "utf8"));
      expect(csv).toHaveLength(1 + (name === "compute" ? 9 : 12));
    }
    for (const svg of [
      "compute-job-time.svg",
      "compute-job-time-by-type.svg",
      "storage-data-loss.svg",
      "storage-unavailable.svg",
    ])
      expect(readFileSync(join(out, svg), "utf8").startsWith("<svg")).toBe(true);
  });

  it("falls back to generated traces, with a note, when real ones are asked for and absent", async () => {
    const { runComputeExperiment } = await import("../../sim/experiments.js");
    const saved = process.env["HARVEST_SHARED_DATA"];
    process.env["HARVEST_SHARED_DATA"] = join(tmp, "no-such-dir");
    try {
      const notes: string[] = [];
      const outcome = await runComputeExperiment({
        servers: 20,
        days: 1,
        policies: ["stock"],
        traces: "real",
        onProgress: (e) => {
          if (e.kind === "note") notes.push(e.message);
        },
      });
      expect(outcome.traces).toBe("generated");
      expect(outcome.results[0]!.traces).toBe("generated");
      expect(notes.some((n) => n.includes("using generated traces"))).toBe(true);
      expect(outcome.files).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env["HARVEST_SHARED_DATA"];
      else process.env["HARVEST_SHARED_DATA"] = saved;
    }
  });
});
