/**
 * The RM's history import reads a file through the same normalization as every other trace reader: a real-looking file
 * with quirks (CPU above 100 %, a dip below 0, a repeated timestamp, a garbage line, a truncated last line) is imported
 * with the counts returned to the client, and one with nothing readable is rejected naming its file and line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import { isHarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import { noTraceWarnings, parseTraceText } from "../../common/trace-io.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";

describe("the RM's history import", () => {
  let dir: string;
  let rm: ResourceManager;
  let admin: TenantAdminClient;
  const logged: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-trace-import-"));
    rm = new ResourceManager(
      { dataDir: join(dir, "rm") },
      { logger: new Logger("rm", "warn", (line) => logged.push(line)) },
    );
    await rm.start();
    admin = new TenantAdminClient(rm.address);
    await admin.register({ name: "web" });
    await admin.assign("web", ["s1"]);
  });
  afterAll(async () => {
    admin.close();
    await rm.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const end = Math.floor(Date.now() / 1000 / 300) * 300;
  const rows: string[] = [];
  for (let i = 0; i < 100; i++) rows.push(`${end - (100 - i) * 300},${20 + (i % 7)}`);
  rows[10] = `${end - 90 * 300},350`;
  rows[20] = `${end - 80 * 300},-0.4`;
  rows.splice(30, 0, rows[30]!.replace(/,.*/, ",40"));
  rows.splice(50, 0, "garbage");
  const quirky = ["time_s,cpu_pct", ...rows].join("\n") + "\n" + `${end},1`.slice(0, 5);

  it("imports a quirky file and returns what the normalization changed", async () => {
    const r = await admin.importHistoryData(Buffer.from(quirky), { format: "csv", server: "s1", fileName: "web.csv" });
    const expected = parseTraceText(quirky, "web.csv", "csv");
    expect(r.samples).toBe(100);
    expect(r.samples).toBe(expected.series.timesMs.length);
    expect(r.warnings).toEqual({
      ...noTraceWarnings(),
      clampedHigh: 1,
      clampedLow: 1,
      duplicatesMerged: 1,
      truncatedLastLine: 104,
      skippedLines: 1,
      skipped: [{ line: 52, reason: "expected 2 columns (time_s,cpu_pct), found 1" }],
    });
    expect(r.warnings).toEqual(expected.warnings);
    expect(logged.some((l) => l.includes("history import web.csv normalized: 1 value(s) above 100 % clamped"))).toBe(
      true,
    );
  });

  it("reports no warnings for a clean file", async () => {
    const clean = ["time_s,cpu_pct", `${end - 600},10`, `${end - 300},20`].join("\n") + "\n";
    const r = await admin.importHistoryData(Buffer.from(clean), { format: "csv", server: "s1" });
    expect(r.samples).toBe(2);
    expect(r.warnings).toBeUndefined();
  });

  it("rejects a file with nothing readable, naming its file and line", async () => {
    const err = await admin
      .importHistoryData(Buffer.from("time_s,cpu_pct\nfoo\nbar\n"), { format: "csv", server: "s1", fileName: "x.csv" })
      .catch((e: unknown) => e);
    expect(isHarvestError(err, "TRACE_MALFORMED")).toBe(true);
    expect((err as { details: Record<string, string> }).details).toMatchObject({ file: "x.csv", line: "2" });
  });
});
