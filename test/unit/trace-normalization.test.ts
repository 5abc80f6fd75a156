/**
 * The one normalization every trace reader goes through (common/trace-io.ts): generated files with each quirk of real
 * utilization files, checked to the exact normalized series and warning counts; the reader of many files; each
 * consumer (the daemons' `trace:` replay, the demo's primaries, the simulator's real templates) on a quirky folder; and
 * every real NAB and Bitbrains file of ../shared/data (skipped when it is absent).
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { choosePrimaries } from "../../cli/primary-traces.js";
import { ManualClock } from "../../common/clock.js";
import { detailsOf, HarvestError, isHarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import { sharedDataDir } from "../../common/paths.js";
import { createPrimaryMonitor } from "../../common/primary-monitor.js";
import type { TraceWarnings } from "../../common/trace-io.js";
import {
  DEFAULT_MAX_BRIDGE_STEPS,
  describeTraceWarnings,
  hasTraceWarnings,
  noTraceWarnings,
  parseTraceText,
  readTraceFile,
  readTraceFiles,
} from "../../common/trace-io.js";
import { loadRealTemplates } from "../../sim/real-traces.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-trace-norm-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let counter = 0;
function tempFile(content: string, name = `quirk-${counter++}.csv`, dir = tmp): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

const MIN = 60_000;
/** 2014-02-14 00:00:00 UTC, the base of the generated NAB files. */
const T0 = Date.UTC(2014, 1, 14, 0, 0, 0);
/** A NAB `timestamp,value` line `minutes` after T0. */
function nabLine(minutes: number, value: string): string {
  return `${new Date(T0 + minutes * MIN).toISOString().slice(0, 19).replace("T", " ")},${value}`;
}
/** A NAB file of `rows` (minutes after T0, value), one line each, with a final newline. */
function nab(rows: Array<[number, string] | string>): string {
  return ["timestamp,value", ...rows.map((r) => (typeof r === "string" ? r : nabLine(r[0], r[1])))].join("\n") + "\n";
}
const at = (...minutes: number[]): number[] => minutes.map((m) => T0 + m * MIN);

/** `noTraceWarnings()` with `changes`. */
function w(changes: Partial<TraceWarnings>): TraceWarnings {
  return { ...noTraceWarnings(), ...changes };
}

async function unreadable(promise: Promise<unknown>): Promise<HarvestError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isHarvestError(err, "TRACE_MALFORMED")).toBe(true);
  return err as HarvestError;
}

describe("the normalization, one quirk at a time", () => {
  it("reads a clean file unchanged and reports no warnings", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "10"],
          [5, "20"],
          [10, "30"],
        ]),
      ),
    );
    expect(r.format).toBe("nab");
    expect(r.series.timesMs).toEqual(at(0, 5, 10));
    expect(r.series.cpuPct).toEqual([10, 20, 30]);
    expect(r.series.stepSec).toBe(300);
    expect(r.warnings).toEqual(noTraceWarnings());
    expect(hasTraceWarnings(r.warnings)).toBe(false);
    expect(describeTraceWarnings(r.warnings)).toBe("");
  });

  it("clamps CPU 350 % (a multi-core VM) to 100 and counts it", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "10"],
          [5, "350"],
          [10, "20"],
          [15, "100"],
        ]),
      ),
    );
    expect(r.series.cpuPct).toEqual([10, 100, 20, 100]);
    expect(r.warnings).toEqual(w({ clampedHigh: 1 }));
    expect(describeTraceWarnings(r.warnings)).toBe("1 value(s) above 100 % clamped");
  });

  it("clamps monitoring noise below 0 (-0.4) to 0 and counts it, instead of rejecting the file", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "5"],
          [5, "-0.4"],
          [10, "7"],
          [15, "0"],
        ]),
      ),
    );
    expect(r.series.cpuPct).toEqual([5, 0, 7, 0]);
    expect(r.warnings).toEqual(w({ clampedLow: 1 }));
  });

  it("merges repeated timestamps into their mean", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "10"],
          [5, "20"],
          [5, "40"],
          [5, "30"],
          [10, "50"],
        ]),
      ),
    );
    expect(r.series.timesMs).toEqual(at(0, 5, 10));
    expect(r.series.cpuPct).toEqual([10, 30, 50]);
    expect(r.warnings).toEqual(w({ duplicatesMerged: 2 }));
  });

  it("sorts rows that are out of time order into place (and merges what then coincides)", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "10"],
          [10, "30"],
          [5, "20"],
          [15, "40"],
          [10, "50"],
        ]),
      ),
    );
    expect(r.series.timesMs).toEqual(at(0, 5, 10, 15));
    expect(r.series.cpuPct).toEqual([10, 20, 40, 40]);
    expect(r.warnings).toEqual(w({ outOfOrder: 2, duplicatesMerged: 1 }));
  });

  const gappy = nab([
    [0, "10"],
    [5, "20"],
    // A 10-minute gap (2 steps): one missing sample.
    [15, "30"],
    [20, "40"],
    // A 3-hour gap (36 steps).
    [200, "50"],
    [205, "60"],
  ]);

  it(`bridges a 10-minute gap by holding the last value and keeps a 3-hour gap (default: up to ${DEFAULT_MAX_BRIDGE_STEPS} steps)`, async () => {
    const r = await readTraceFile(tempFile(gappy));
    expect(r.series.timesMs).toEqual(at(0, 5, 10, 15, 20, 200, 205));
    expect(r.series.cpuPct).toEqual([10, 20, 20, 30, 40, 50, 60]);
    expect(r.series.stepSec).toBe(300);
    expect(r.warnings).toEqual(w({ gapsBridged: 1, samplesBridged: 1, gapsKept: 1, gapKeptMs: 180 * MIN }));
    expect(describeTraceWarnings(r.warnings)).toBe("1 short gap(s) bridged with 1 held sample(s); 1 gap(s) kept (3 h)");
  });

  it("takes the bridging threshold as an option", () => {
    const none = parseTraceText(gappy, "gappy.csv", undefined, { maxBridgeSteps: 1 });
    expect(none.series.timesMs).toEqual(at(0, 5, 15, 20, 200, 205));
    expect(none.warnings).toEqual(w({ gapsKept: 2, gapKeptMs: 190 * MIN }));
    const all = parseTraceText(gappy, "gappy.csv", undefined, { maxBridgeSteps: 36 });
    expect(all.series.timesMs.length).toBe(6 + 1 + 35);
    expect(all.series.cpuPct[40]).toBe(50);
    expect(all.series.cpuPct.slice(4, 40).every((v) => v === 40)).toBe(true);
    expect(all.warnings).toEqual(w({ gapsBridged: 2, samplesBridged: 36 }));
    expect(() => parseTraceText(gappy, "gappy.csv", undefined, { maxBridgeSteps: 0 })).toThrow(HarvestError);
  });

  it("drops a truncated last line (no final newline) with a warning naming it", async () => {
    const text =
      nab([
        [0, "10"],
        [5, "20"],
        [10, "30"],
      ]) + "2014-02-14 00:1";
    const r = await readTraceFile(tempFile(text));
    expect(r.series.cpuPct).toEqual([10, 20, 30]);
    expect(r.warnings).toEqual(w({ truncatedLastLine: 5 }));
    expect(describeTraceWarnings(r.warnings)).toBe("truncated last line 5 dropped");
  });

  it("keeps a last line without a final newline when it parses", async () => {
    const r = await readTraceFile(
      tempFile(
        nab([
          [0, "10"],
          [5, "20"],
        ]) + nabLine(10, "30"),
      ),
    );
    expect(r.series.cpuPct).toEqual([10, 20, 30]);
    expect(r.warnings).toEqual(noTraceWarnings());
  });

  it("skips a garbage line in the middle with a warning naming its line", async () => {
    const r = await readTraceFile(
      tempFile(nab([[0, "10"], "garbage!!", [5, "20"], "", [10, "abc"], [15, "40"], [20, "50"]])),
    );
    // The 10-minute hole the bad value left is bridged like any other.
    expect(r.series.timesMs).toEqual(at(0, 5, 10, 15, 20));
    expect(r.series.cpuPct).toEqual([10, 20, 20, 40, 50]);
    expect(r.warnings).toEqual(
      w({
        skippedLines: 3,
        skipped: [
          { line: 3, reason: "expected 2 columns (timestamp,value), found 1" },
          { line: 5, reason: "blank line" },
          { line: 6, reason: 'non-numeric value "abc"' },
        ],
        gapsBridged: 1,
        samplesBridged: 1,
      }),
    );
  });

  it("finds a file unreadable past maxSkippedLines bad lines, naming the line that crossed it", () => {
    const rows: Array<[number, string] | string> = [];
    for (let i = 0; i < 20; i++) rows.push([i * 5, "10"], `bad ${i}`);
    const text = nab(rows);
    const err = (() => {
      try {
        parseTraceText(text, "many-bad.csv", undefined, { maxSkippedLines: 3 });
      } catch (e) {
        return e as HarvestError;
      }
      return undefined;
    })();
    expect(err?.code).toBe("TRACE_MALFORMED");
    // Bad lines are 3, 5, 7, 9: the fourth crosses a limit of 3.
    expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("9");
    expect(err?.message).toContain("many-bad.csv:9:");
    expect(err?.message).toContain("the first is line 3");
    // The default limit (10) takes the same file's 20 bad lines as unreadable too, at the 11th (line 23).
    expect(() => parseTraceText(text, "many-bad.csv")).toThrow(/many-bad\.csv:23:/);
  });

  it("finds an empty file unreadable at line 1", async () => {
    const path = tempFile("");
    const err = await unreadable(readTraceFile(path));
    expect(err.details).toMatchObject({ file: path, line: "1", reason: "empty file" });
  });

  it("finds a file of only garbage unreadable, naming its first bad line", async () => {
    const path = tempFile("timestamp,value\nnot a row\n???\n");
    const err = await unreadable(readTraceFile(path));
    expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.file).toBe(path);
    expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("2");
    expect(err.message).toContain("only 0 usable sample(s)");
  });

  it("applies all the rules at once, to every format alike", () => {
    const bbHeader =
      "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t" +
      "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\tDisk write throughput [KB/s];\t" +
      "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]";
    const bb = (t: number, pct: string): string =>
      [t, 4, 2926, 686.6, pct, 4194304, 304785, 0, 7.5, 3.3, 6.5].join(";\t");
    const t0 = 1372629600;
    const text = [
      bbHeader,
      bb(t0, "350"),
      bb(t0 + 300, "-0.4"),
      bb(t0 + 300, "20"),
      "garbage",
      bb(t0 + 900, "30"),
      bb(t0 + 600, "40"),
      bb(t0 + 900 + 3 * 3600, "50"),
      bb(t0 + 1200 + 3 * 3600, "60"),
      "1372641600;\t4;\t29",
    ].join("\n");
    const plain = [
      "time_s,cpu_pct",
      `${t0},350`,
      `${t0 + 300},-0.4`,
      `${t0 + 300},20`,
      "garbage",
      `${t0 + 900},30`,
      `${t0 + 600},40`,
      `${t0 + 900 + 3 * 3600},50`,
      `${t0 + 1200 + 3 * 3600},60`,
      "13726416",
    ].join("\n");
    for (const [file, body] of [
      ["vm.csv", text],
      ["plain.csv", plain],
    ] as const) {
      const r = parseTraceText(body, file);
      expect(r.series.timesMs).toEqual([0, 300, 600, 900, 900 + 3 * 3600, 1200 + 3 * 3600].map((s) => (t0 + s) * 1000));
      expect(r.series.cpuPct).toEqual([100, 10, 40, 30, 50, 60]);
      expect(r.warnings).toEqual(
        w({
          clampedHigh: 1,
          clampedLow: 1,
          duplicatesMerged: 1,
          outOfOrder: 1,
          gapsKept: 1,
          gapKeptMs: 3 * 3600 * 1000,
          truncatedLastLine: 10,
          skippedLines: 1,
          skipped: [{ line: 5, reason: expect.any(String) as string }],
        }),
      );
    }
  });
});

describe("reading many files", () => {
  const dir = join(tmp, "many");
  mkdirSync(dir, { recursive: true });
  const good1 = tempFile(
    nab([
      [0, "10"],
      [5, "350"],
    ]),
    "a-good.csv",
    dir,
  );
  const bad = tempFile("timestamp,value\n2014-02-14 00:00:00,1\nnope\n", "b-bad.csv", dir);
  const good2 = tempFile(
    nab([
      [0, "20"],
      [5, "30"],
    ]),
    "c-good.csv",
    dir,
  );
  const empty = tempFile("", "d-empty.csv", dir);

  it("skips an unreadable file with its file and line, and reads the rest", async () => {
    const seen: string[] = [];
    const { traces, skipped } = await readTraceFiles([good1, bad, good2, empty, join(dir, "missing.csv")], {
      onSkip: (s) => seen.push(`${s.file}:${s.line ?? "-"}`),
    });
    expect(traces.map((t) => t.file)).toEqual([good1, good2]);
    expect(traces[0]!.warnings.clampedHigh).toBe(1);
    expect(skipped.map((s) => [s.file, s.line])).toEqual([
      [bad, 3],
      [empty, 1],
      [join(dir, "missing.csv"), undefined],
    ]);
    expect(seen).toEqual([`${bad}:3`, `${empty}:1`, `${join(dir, "missing.csv")}:-`]);
  });

  it("fails with TRACE_MALFORMED only when no file is readable", async () => {
    const err = await unreadable(readTraceFiles([bad, empty]));
    expect(err.details).toMatchObject({ file: bad, line: "3", files: "2" });
    expect(err.message).toContain("none of 2 trace file(s) is readable");
    expect(await readTraceFiles([])).toEqual({ traces: [], skipped: [] });
  });
});

describe("every consumer goes through the normalization", () => {
  const quirky = tempFile(nab([[0, "10"], [5, "350"], [5, "50"], [10, "-0.4"], "garbage", [20, "30"]]), "quirky.csv");
  const summary =
    "1 value(s) above 100 % clamped; 1 value(s) below 0 clamped; 1 row(s) with a repeated timestamp merged (mean); " +
    "1 short gap(s) bridged with 1 held sample(s); 1 unreadable line(s) skipped (line 6: expected 2 columns (timestamp,value), found 1)";

  it("the daemons' trace: replay logs one warning with the counts and replays the normalized series", async () => {
    const lines: string[] = [];
    const log = new Logger("nm:test", "info", (l) => lines.push(l));
    const clock = new ManualClock();
    const monitor = createPrimaryMonitor(`trace:${quirky}`, {
      capacityMilli: 1000,
      clock,
      speed: 300,
      containerCpuMs: () => 0,
      log,
    });
    await monitor.start();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`WARN  [nm:test] trace ${quirky} normalized: ${summary}`);
    expect(lines[0]).toContain('"clampedHigh":1');
    // 1 s at 300x is one 5-minute step: 10 %, then the mean of 100 (350 clamped) and 50, then 0 (-0.4 clamped).
    expect(monitor.sample().cpuMilli).toBe(100);
    clock.advance(1000);
    expect(monitor.sample().cpuMilli).toBe(750);
    clock.advance(1000);
    expect(monitor.sample().cpuMilli).toBe(0);
    await monitor.stop();
  });

  it("the demo's primaries warn once per file and carry the counts", async () => {
    const warned: string[] = [];
    const choices = await choosePrimaries(`trace:${quirky}`, 2, tmp, { warn: (m) => warned.push(m) });
    expect(warned).toEqual([`primary trace ${quirky}: ${summary}`]);
    expect(choices.map((c) => c.warnings?.clampedHigh)).toEqual([1, 1]);
  });

  it("the demo's primaries fail clearly on an unreadable file", async () => {
    const bad = tempFile("timestamp,value\nnothing here\n", "demo-bad.csv");
    const warned: string[] = [];
    const err = await unreadable(choosePrimaries(`trace:${bad}`, 1, tmp, { warn: (m) => warned.push(m) }));
    expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.file).toBe(bad);
    expect(warned).toEqual([
      `primary trace ${bad}:2: only 0 usable sample(s); a trace needs at least 2 (line 2: expected 2 columns (timestamp,value), found 1) (file skipped)`,
    ]);
  });

  it("the simulator's real templates skip an unreadable file, print the counts, and fail only when none is readable", async () => {
    const data = join(tmp, "shared");
    const bbDir = join(data, "bitbrains_rnd_2013-7", "raw");
    const nabDir = join(data, "nab_aws_cloudwatch", "realAWSCloudwatch");
    mkdirSync(bbDir, { recursive: true });
    mkdirSync(nabDir, { recursive: true });
    tempFile("Timestamp;garbage\n", "1.csv", bbDir);
    tempFile(
      nab([
        [0, "10"],
        [5, "350"],
        [10, "20"],
      ]),
      "ec2_a.csv",
      nabDir,
    );
    tempFile("timestamp,value\n", "ec2_b.csv", nabDir);
    const warned: string[] = [];
    const templates = await loadRealTemplates(data, { warn: (m) => warned.push(m) });
    expect(templates.map((t) => t.name)).toEqual(["nab/ec2_a"]);
    expect(templates[0]!.warnings?.clampedHigh).toBe(1);
    expect(warned).toEqual([
      `${join(bbDir, "1.csv")}:1: header "Timestamp;garbage" is not a bitbrains header (file skipped)`,
      `${join(nabDir, "ec2_b.csv")}:2: only 0 usable sample(s); a trace needs at least 2 (file skipped)`,
      `${join(nabDir, "ec2_a.csv")}: 1 value(s) above 100 % clamped`,
    ]);

    rmSync(join(nabDir, "ec2_a.csv"));
    const err = await unreadable(loadRealTemplates(data, { warn: () => undefined }));
    expect(err.details).toMatchObject({ file: join(bbDir, "1.csv"), line: "1", files: "2" });

    const emptyData = join(tmp, "no-traces");
    mkdirSync(emptyData, { recursive: true });
    const none = await loadRealTemplates(emptyData, { warn: () => undefined }).catch((e: unknown) => e);
    expect(isHarvestError(none, "CONFIG_INVALID")).toBe(true);
  });
});

const dataDir = sharedDataDir();
if (!dataDir) {
  console.warn(
    "trace-normalization.test: shared data not found (../shared/data or HARVEST_SHARED_DATA); skipping the real-trace checks",
  );
}

describe.skipIf(!dataDir)("every real NAB and Bitbrains file (skipped when ../shared/data is absent)", () => {
  /** Per file: samples after normalization, and the warnings that are not zero. Measured once; the data never changes. */
  const expected: Record<string, { samples: number; warnings: Partial<TraceWarnings> }> = {
    "realAWSCloudwatch/ec2_cpu_utilization_24ae8d.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/ec2_cpu_utilization_53ea38.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/ec2_cpu_utilization_5f5533.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/ec2_cpu_utilization_77c1ca.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/ec2_cpu_utilization_825cc2.csv": {
      samples: 4034,
      warnings: { gapsBridged: 2, samplesBridged: 2 },
    },
    "realAWSCloudwatch/ec2_cpu_utilization_ac20cd.csv": {
      samples: 4037,
      warnings: { gapsBridged: 2, samplesBridged: 5 },
    },
    "realAWSCloudwatch/ec2_cpu_utilization_c6585a.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/ec2_cpu_utilization_fe7f93.csv": { samples: 4032, warnings: {} },
    "realAWSCloudwatch/rds_cpu_utilization_cc0c53.csv": {
      samples: 4033,
      warnings: { gapsBridged: 1, samplesBridged: 1 },
    },
    "realAWSCloudwatch/rds_cpu_utilization_e47b3b.csv": { samples: 4032, warnings: {} },
    "realKnownCause/cpu_utilization_asg_misconfiguration.csv": { samples: 18050, warnings: {} },
    "realKnownCause/ec2_request_latency_system_failure.csv": {
      samples: 4022,
      warnings: { duplicatesMerged: 11, gapsBridged: 1, samplesBridged: 1, gapsKept: 1, gapKeptMs: 3_840_000 },
    },
    "raw/239.csv": { samples: 8262, warnings: { gapsKept: 2, gapKeptMs: 113_714_000 } },
    "raw/288.csv": { samples: 8262, warnings: { gapsKept: 2, gapKeptMs: 113_714_000 } },
    "raw/308.csv": {
      samples: 8262,
      warnings: { gapsBridged: 1, samplesBridged: 1, gapsKept: 2, gapKeptMs: 113_714_000 },
    },
    "raw/39.csv": { samples: 8262, warnings: { gapsKept: 2, gapKeptMs: 113_714_000 } },
    "raw/411.csv": {
      samples: 8631,
      warnings: { gapsBridged: 1, samplesBridged: 1, gapsKept: 1, gapKeptMs: 2_704_000 },
    },
    "raw/44.csv": {
      samples: 8255,
      warnings: { clampedHigh: 1832, gapsBridged: 6, samplesBridged: 6, gapsKept: 2, gapKeptMs: 115_813_000 },
    },
    "raw/483.csv": { samples: 8262, warnings: { gapsKept: 2, gapKeptMs: 113_714_000 } },
    "raw/9.csv": {
      samples: 8262,
      warnings: { gapsBridged: 2, samplesBridged: 2, gapsKept: 2, gapKeptMs: 113_714_000 },
    },
  };
  const dirs = dataDir
    ? [
        join(dataDir, "nab_aws_cloudwatch", "realAWSCloudwatch"),
        join(dataDir, "nab_aws_cloudwatch", "realKnownCause"),
        join(dataDir, "bitbrains_rnd_2013-7", "raw"),
      ]
    : [];
  const files = dirs.flatMap((d) =>
    readdirSync(d)
      .filter((f) => f.endsWith(".csv"))
      .sort()
      .map((f) => join(d, f)),
  );

  it("finds the 12 NAB and 8 Bitbrains files", () => {
    expect(files.map((f) => f.split("/").slice(-2).join("/")).sort()).toEqual(Object.keys(expected).sort());
  });

  it("reads each with no error, a plausible length, values in 0..100, strictly increasing times, and its counts", async () => {
    const { traces, skipped } = await readTraceFiles(files);
    expect(skipped).toEqual([]);
    for (const t of traces) {
      const key = t.file.split("/").slice(-2).join("/");
      const s = t.series;
      const rows = s.timesMs.length - t.warnings.samplesBridged;
      // Plausible: 14 to 63 days at 5-minute steps.
      expect(s.stepSec, key).toBe(300);
      expect(rows, key).toBeGreaterThanOrEqual(4000);
      expect(rows, key).toBeLessThanOrEqual(18_100);
      const spanDays = (s.timesMs.at(-1)! - s.startMs) / 86_400_000;
      expect(spanDays, key).toBeGreaterThan(13.9);
      expect(spanDays, key).toBeLessThan(63);
      expect(s.cpuPct.length, key).toBe(s.timesMs.length);
      expect(
        s.cpuPct.every((v) => v >= 0 && v <= 100),
        key,
      ).toBe(true);
      expect(
        s.timesMs.every((v, i) => i === 0 || v > s.timesMs[i - 1]!),
        key,
      ).toBe(true);
      expect({ samples: s.timesMs.length, warnings: t.warnings }, key).toEqual({
        samples: expected[key]!.samples,
        warnings: w(expected[key]!.warnings),
      });
    }
  });
});
