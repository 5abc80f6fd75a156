import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";
import type { TraceFormat, UtilizationSeries } from "../../common/trace-io.js";
import {
  detectTraceFormat,
  readTraceFile,
  readUtilizationFile,
  resample,
  valueAt,
  writeUtilizationCsv,
} from "../../common/trace-io.js";

const dataDir = sharedDataDir();
const nabDirs = dataDir
  ? [join(dataDir, "nab_aws_cloudwatch", "realAWSCloudwatch"), join(dataDir, "nab_aws_cloudwatch", "realKnownCause")]
  : [];
const bitbrainsDir = dataDir ? join(dataDir, "bitbrains_rnd_2013-7", "raw") : "";
const DAY_MS = 86_400_000;
const SYSTEM_FAILURE = "ec2_request_latency_system_failure.csv";

const tmp = mkdtempSync(join(tmpdir(), "harvest-trace-io-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let fileCounter = 0;
function tempFile(content: string): string {
  const path = join(tmp, `trace-${fileCounter++}.csv`);
  writeFileSync(path, content);
  return path;
}

function csvFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".csv"))
    .sort()
    .map((f) => join(dir, f));
}

/** Reads `path` expecting TRACE_MALFORMED and returns the error. */
async function malformed(path: string, format?: TraceFormat): Promise<HarvestError> {
  const err: unknown = await readUtilizationFile(path, format).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HarvestError);
  const herr = err as HarvestError;
  expect(herr.code).toBe("TRACE_MALFORMED");
  expect(detailsOf(herr, "TRACE_MALFORMED", "CONFIG_INVALID")?.file).toBe(path);
  return herr;
}

function expectSane(series: UtilizationSeries): void {
  expect(series.timesMs.length).toBe(series.cpuPct.length);
  expect(series.startMs).toBe(series.timesMs[0]);
  const backwards = series.timesMs.findIndex((t, i) => i > 0 && t <= series.timesMs[i - 1]!);
  expect(backwards).toBe(-1);
  expect(Math.min(...series.cpuPct)).toBeGreaterThanOrEqual(0);
  expect(Math.max(...series.cpuPct)).toBeLessThanOrEqual(100);
}

if (!dataDir) {
  console.warn(
    "trace-io.test: shared data not found (../shared/data or HARVEST_SHARED_DATA); skipping the real-trace checks",
  );
}

describe.skipIf(!dataDir)(
  "real traces (skipped when ../shared/data is absent; set HARVEST_SHARED_DATA to point at it)",
  () => {
    it("reads every NAB AWS CloudWatch ec2/rds file as 4,032 five-minute samples over 14 days", async () => {
      const files = csvFiles(nabDirs[0]!);
      expect(files.length).toBe(10);
      for (const file of files) {
        const { series, warnings } = await readTraceFile(file);
        expectSane(series);
        // A few files miss a poll or three; those short holes are bridged with held samples.
        expect(series.timesMs.length).toBe(4032 + warnings.samplesBridged);
        expect(series.stepSec).toBe(300);
        const spanDays = (series.timesMs.at(-1)! - series.startMs) / DAY_MS;
        expect(spanDays).toBeGreaterThan(13.9);
        expect(spanDays).toBeLessThan(14.1);
      }
    });

    it("treats NAB timestamps as UTC and keeps the values", async () => {
      const series = await readUtilizationFile(join(nabDirs[0]!, "ec2_cpu_utilization_24ae8d.csv"));
      expect(series.name).toBe("ec2_cpu_utilization_24ae8d");
      expect(series.startMs).toBe(Date.UTC(2014, 1, 14, 14, 30, 0));
      expect(series.cpuPct[0]).toBeCloseTo(0.132, 9);
      expect(series.timesMs.at(-1)).toBe(Date.UTC(2014, 1, 28, 14, 25, 0));
      expect(series.cpuPct.at(-1)).toBeCloseTo(0.134, 9);
    });

    it("reads the 62-day NAB auto-scaling-group series", async () => {
      const series = await readUtilizationFile(join(nabDirs[1]!, "cpu_utilization_asg_misconfiguration.csv"));
      expectSane(series);
      expect(series.timesMs.length).toBe(18050);
      expect((series.timesMs.at(-1)! - series.startMs) / DAY_MS).toBeCloseTo(62.67, 1);
      expect(Math.max(...series.cpuPct)).toBe(100);
    });

    it("merges NAB's folded spring-forward hour into the mean of its rows", async () => {
      const file = join(nabDirs[1]!, SYSTEM_FAILURE);
      const { series: merged, warnings } = await readTraceFile(file);
      expectSane(merged);
      // Lines 558..569 are twelve rows stamped 2014-03-09 03:00:00: they become one sample (4,032 - 11), and one
      // 10-minute hole elsewhere is bridged with one held sample.
      expect(warnings.duplicatesMerged).toBe(11);
      expect(warnings.samplesBridged).toBe(1);
      expect(merged.timesMs.length).toBe(4021 + 1);
      // The deprecated option changes nothing.
      expect(await readUtilizationFile(file, undefined, { duplicateTimes: "merge" })).toEqual(merged);
      const rows = readFileSync(file, "utf8").split("\n").slice(557, 569);
      const folded = rows.map((r) => Number(r.split(",")[1]));
      const at = merged.timesMs.indexOf(Date.UTC(2014, 2, 9, 3, 0, 0));
      expect(merged.cpuPct[at]).toBeCloseTo(folded.reduce((a, b) => a + b, 0) / folded.length, 9);
    });

    it("reads every Bitbrains VM as about 30 days at 300 s steps with Unix-second timestamps", async () => {
      const files = csvFiles(bitbrainsDir);
      expect(files.length).toBe(8);
      for (const file of files) {
        const { series, warnings } = await readTraceFile(file);
        expectSane(series);
        expect(series.stepSec).toBe(300);
        const dataRows = readFileSync(file, "utf8").trimEnd().split("\n").length - 1;
        expect(series.timesMs.length).toBe(dataRows + warnings.samplesBridged);
        const spanDays = (series.timesMs.at(-1)! - series.startMs) / DAY_MS;
        expect(spanDays).toBeGreaterThan(29.9);
        expect(spanDays).toBeLessThan(30.1);
        // July 2013 (2013-06-30 22:03 UTC .. 2013-07-30 21:57 UTC), i.e. column 0 is seconds, not ms.
        expect(series.startMs).toBeGreaterThanOrEqual(Date.UTC(2013, 5, 30));
        expect(series.timesMs.at(-1)!).toBeLessThan(Date.UTC(2013, 6, 31));
      }
    });

    it("takes Bitbrains column 4 as the CPU % and clamps VM 44's above-nominal-clock readings to 100", async () => {
      const vm9 = await readUtilizationFile(join(bitbrainsDir, "9.csv"));
      expect(vm9.startMs).toBe(1372629804 * 1000);
      expect(vm9.cpuPct[0]).toBeCloseTo(23.466666666666665, 9);

      const file44 = join(bitbrainsDir, "44.csv");
      const rawPct = readFileSync(file44, "utf8")
        .trimEnd()
        .split("\n")
        .slice(1)
        .map((line) => Number(line.split(";\t")[4]));
      expect(Math.max(...rawPct)).toBeGreaterThan(100);
      const { series: vm44, warnings } = await readTraceFile(file44);
      expect(Math.max(...vm44.cpuPct)).toBe(100);
      expect(warnings.clampedHigh).toBe(rawPct.filter((p) => p > 100).length);
      expect(warnings.clampedHigh).toBe(1832);
    });

    it("detects the format from the header and refuses a file read as the wrong format", async () => {
      const nab = join(nabDirs[0]!, "ec2_cpu_utilization_5f5533.csv");
      const bb = join(bitbrainsDir, "411.csv");
      expect(await readUtilizationFile(nab)).toEqual(await readUtilizationFile(nab, "nab"));
      expect(await readUtilizationFile(bb)).toEqual(await readUtilizationFile(bb, "bitbrains"));
      expect(detailsOf(await malformed(nab, "bitbrains"), "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("1");
      expect(detailsOf(await malformed(bb, "csv"), "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("1");
    });

    it("resamples a 14-day NAB series to hourly means", async () => {
      const series = await readUtilizationFile(join(nabDirs[0]!, "ec2_cpu_utilization_5f5533.csv"));
      const hourly = resample(series, 3600);
      expect(hourly.stepSec).toBe(3600);
      expect(hourly.timesMs.length).toBe(336);
      const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
      expect(mean(hourly.cpuPct)).toBeCloseTo(mean(series.cpuPct), 0);
      const firstHour = series.cpuPct.slice(0, 12);
      expect(hourly.cpuPct[0]).toBeCloseTo(mean(firstHour), 9);
    });
  },
);

describe("unreadable traces", () => {
  const nabHeader = "timestamp,value\n";
  const bbHeader =
    "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t" +
    "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\tDisk write throughput [KB/s];\t" +
    "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n";
  const bbRow = (t: number, pct: string): string =>
    [t, 1, 2926, 686.6, pct, 4194304.0, 304785.1, 0.0, 7.5, 3.3, 6.5].join(";\t") + "\n";

  const cases: Array<{
    what: string;
    content: string;
    line: number;
    format?: TraceFormat;
  }> = [
    { what: "an empty file", content: "", line: 1 },
    { what: "a file of blank lines", content: "\n\n", line: 1 },
    { what: "an unknown header", content: "time,cpu\n0,1\n300,2\n", line: 1 },
    { what: "a header without data", content: nabHeader, line: 2 },
    {
      what: "a single sample",
      content: nabHeader + "2014-02-14 14:30:00,1\n",
      line: 3,
    },
    {
      what: "a NAB row with an extra column",
      content: nabHeader + "2014-02-14 14:30:00,1\n2014-02-14 14:35:00,1,7\n",
      line: 3,
    },
    {
      what: "a NAB empty value",
      content: nabHeader + "2014-02-14 14:30:00,\n2014-02-14 14:35:00,1\n",
      line: 2,
    },
    {
      what: "an impossible NAB date",
      content: nabHeader + "2014-02-28 14:30:00,1\n2014-02-30 14:35:00,1\n",
      line: 3,
    },
    {
      what: "a NAB timestamp in another format",
      content: nabHeader + "2014-02-28T14:30:00Z,1\n",
      line: 2,
    },
    {
      what: "a Bitbrains row cut short",
      content: bbHeader + bbRow(1372629804, "5") + "1372630104;\t1;\t2926",
      line: 3,
    },
    {
      what: "a Bitbrains row with comma separators",
      content: bbHeader + bbRow(1372629804, "5") + "1372630104,1,2926,686.6,5,4194304,304785,0,7.5,3.3,6.5\n",
      line: 3,
    },
    {
      what: "a non-numeric Bitbrains CPU %",
      content: bbHeader + bbRow(1372629804, "5") + bbRow(1372630104, "n/a"),
      line: 3,
    },
    {
      what: "a fractional Bitbrains timestamp",
      content: bbHeader + bbRow(1372629804.5, "5") + bbRow(1372630104, "5"),
      line: 2,
    },
    {
      what: "a plain CSV with a missing column",
      content: "time_s,cpu_pct\n0,10\n300\n",
      line: 3,
    },
    {
      what: "a plain CSV with a hex number",
      content: "time_s,cpu_pct\n0,10\n300,0x10\n",
      line: 3,
    },
    {
      what: "a plain CSV with a negative time",
      content: "time_s,cpu_pct\n-300,10\n0,10\n",
      line: 2,
    },
    {
      what: "a plain CSV read as NAB",
      content: "time_s,cpu_pct\n0,10\n300,20\n",
      line: 1,
      format: "nab",
    },
  ];

  for (const c of cases) {
    it(`rejects ${c.what} (no 2 usable samples, or not our format) naming the file and line ${c.line}`, async () => {
      const path = tempFile(c.content);
      const err = await malformed(path, c.format);
      expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe(String(c.line));
      expect(err.message).toContain(`${path}:${c.line}:`);
    });
  }

  it("accepts CRLF line endings, a missing final newline and tiny float error around 0 and 100 (not counted)", async () => {
    const path = tempFile("timestamp,value\r\n2014-02-14 14:30:00,100.0000000001\r\n2014-02-14 14:35:00,-1e-9");
    const { series, warnings } = await readTraceFile(path);
    expect(series.cpuPct).toEqual([100, 0]);
    expect(series.stepSec).toBe(300);
    expect(warnings.clampedHigh + warnings.clampedLow).toBe(0);
  });

  it("clamps Bitbrains readings above 100 to 100, however far, and counts them", async () => {
    const path = tempFile(
      bbHeader + bbRow(1372629804, "104.7") + bbRow(1372630104, "2.077696E1") + bbRow(1372630404, "180"),
    );
    const { series, warnings } = await readTraceFile(path);
    expect(series.cpuPct[0]).toBe(100);
    expect(series.cpuPct[1]).toBeCloseTo(20.77696, 9);
    expect(series.cpuPct[2]).toBe(100);
    expect(warnings.clampedHigh).toBe(2);
  });

  it("merges a repeated Bitbrains timestamp into the mean", async () => {
    const path = tempFile(bbHeader + bbRow(1372629804, "5") + bbRow(1372629804, "7") + bbRow(1372630104, "1"));
    const { series, warnings } = await readTraceFile(path);
    expect(series.timesMs).toEqual([1372629804_000, 1372630104_000]);
    expect(series.cpuPct).toEqual([6, 1]);
    expect(warnings.duplicatesMerged).toBe(1);
  });
});

describe("plain CSV, lookup and resampling", () => {
  const series: UtilizationSeries = {
    name: "four",
    stepSec: 300,
    startMs: 0,
    timesMs: [0, 300_000, 600_000, 900_000],
    cpuPct: [10, 50, 95.125, 20],
  };

  it("writes the plain format and reads it back unchanged, detecting its header", async () => {
    const path = join(tmp, "written.csv");
    await writeUtilizationCsv(path, series);
    expect(readFileSync(path, "utf8").split("\n")[0]).toBe("time_s,cpu_pct");
    expect(detectTraceFormat(readFileSync(path, "utf8").split("\n")[0]!)).toBe("csv");
    const back = await readUtilizationFile(path);
    expect(back).toEqual({ ...series, name: "written" });
  });

  it("holds each sample until the next and wraps around after the last one's step", () => {
    expect(valueAt(series, 0)).toBe(10);
    expect(valueAt(series, 299_999)).toBe(10);
    expect(valueAt(series, 300_000)).toBe(50);
    expect(valueAt(series, 899_999)).toBe(95.125);
    expect(valueAt(series, 1_199_999)).toBe(20);
    // The period is 4 steps: 1,200,000 ms.
    expect(valueAt(series, 1_200_000)).toBe(10);
    expect(valueAt(series, 1_200_000 * 7 + 650_000)).toBe(95.125);
    expect(valueAt(series, -1)).toBe(20);
  });

  it("resamples to the mean of each slot and holds the last value over empty slots", () => {
    const irregular: UtilizationSeries = {
      name: "gappy",
      stepSec: 60,
      startMs: 1_000,
      timesMs: [1_000, 61_000, 121_000, 601_000],
      cpuPct: [10, 20, 60, 80],
    };
    const out = resample(irregular, 300);
    expect(out.timesMs).toEqual([1_000, 301_000, 601_000]);
    expect(out.cpuPct).toEqual([30, 30, 80]);
    expect(out.stepSec).toBe(300);
  });
});
