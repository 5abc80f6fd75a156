/**
 * The TenantAdmin service of a real resource manager over gRPC on loopback: tenants and their servers, history imports
 * (and their rejection, line numbers included, keeping nothing), streamed samples, reimage records, classes built from
 * the history, and all of it surviving a restart.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import { isHarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import { SeededRng } from "../../common/rng.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { codeOf } from "../error-code.js";

const DAY_S = 86_400;
const STEP_S = 300;
const quiet = new Logger("test", "error");

/** A plain `time_s,cpu_pct` history of `days` days ending now, from `f(t_s)` clamped to 0..100. */
function csvHistory(days: number, f: (t: number, i: number) => number): string {
  const end = Math.floor(Date.now() / 1000 / STEP_S) * STEP_S;
  const lines = ["time_s,cpu_pct"];
  let i = 0;
  for (let t = end - days * DAY_S; t < end; t += STEP_S, i++)
    lines.push(`${t},${Math.min(100, Math.max(0, f(t, i))).toFixed(2)}`);
  return lines.join("\n") + "\n";
}

/** The same history as NAB writes it (`timestamp,value` with UTC date-times). */
function nabHistory(csv: string): string {
  const rows = csv.trim().split("\n").slice(1);
  return (
    "timestamp,value\n" +
    rows
      .map((r) => {
        const [t, v] = r.split(",") as [string, string];
        return `${new Date(Number(t) * 1000).toISOString().slice(0, 19).replace("T", " ")},${v}`;
      })
      .join("\n") +
    "\n"
  );
}

const rng = new SeededRng(7);
const noise = (sd: number): number => rng.normal(0, sd);
// A web front end: a strong daily cycle; a crawler: flat; a batch farm: a bounded random walk with bursts.
const periodic = csvHistory(7, (t) => 45 + 30 * Math.sin((2 * Math.PI * t) / DAY_S) + noise(3));
const flat = csvHistory(7, () => 20 + noise(1));
let walk = 50;
const unpredictable = csvHistory(7, () => {
  walk = Math.min(95, Math.max(5, walk + noise(6)));
  return rng.next() < 0.03 ? 95 : walk;
});

describe("the TenantAdmin service", () => {
  let dir: string;
  let rm: ResourceManager;
  let admin: TenantAdminClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-tenants-"));
    rm = new ResourceManager({ dataDir: join(dir, "rm") }, { logger: quiet });
    await rm.start();
    admin = new TenantAdminClient(rm.address);
  });
  afterAll(async () => {
    admin.close();
    await rm.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("registers tenants and assigns servers, each server to one tenant", async () => {
    await admin.register({ name: "web", environment: "prod", machineFunction: "frontend" });
    await admin.register({ name: "crawler", environment: "prod", machineFunction: "crawl" });
    await admin.register({ name: "batch", environment: "test", machineFunction: "build", criticality: "non-critical" });
    await admin.assign("web", ["s1", "s2", "s5"]);
    await admin.assign("crawler", ["s3", "s4"]);
    // s5 moves from web to batch.
    await admin.assign("batch", ["s5", "s6"]);
    const tenants = await admin.list();
    expect(tenants.map((t) => [t.name, t.servers])).toEqual([
      ["batch", ["s5", "s6"]],
      ["crawler", ["s3", "s4"]],
      ["web", ["s1", "s2"]],
    ]);
    expect(tenants.find((t) => t.name === "batch")?.effectiveCriticality).toBe("non-critical");
  });

  it("rejects bad requests with a code and keeps serving", async () => {
    expect(await codeOf(admin.register({ name: "../etc" }))).toBe("TENANT_BAD_NAME");
    expect(await codeOf(admin.register({ name: "x", criticality: "sometimes" }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.assign("nobody", ["s9"]))).toBe("TENANT_NOT_FOUND");
    expect(await codeOf(admin.assign("web", ["bad/server"]))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.assign("web", []))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.list("nobody"))).toBe("TENANT_NOT_FOUND");
    expect(await codeOf(admin.importHistoryData(Buffer.from(periodic), { format: "csv" }))).toBe("INVALID_ARGUMENT");
    expect(
      await codeOf(admin.importHistoryData(Buffer.from(periodic), { format: "json" as never, server: "s1" })),
    ).toBe("INVALID_ARGUMENT");
    expect((await admin.list()).length).toBe(3);
  });

  it("imports history files for a tenant or a server, skipping bad lines with a count, and rejects an unreadable one", async () => {
    const before = await admin.recluster();
    expect(before.classes).toEqual([]);
    const r = await admin.importHistoryData(Buffer.from(periodic), {
      format: "csv",
      tenant: "web",
      fileName: "web.csv",
    });
    expect(r.servers).toBe(2);
    expect(r.samples).toBe(7 * 288);
    await admin.importHistoryData(Buffer.from(flat), { format: "csv", server: "s3" });
    await admin.importHistoryData(Buffer.from(flat), { format: "csv", server: "s4" });
    await admin.importHistoryData(Buffer.from(nabHistory(unpredictable)), { format: "nab", tenant: "batch" });

    await admin.recluster();
    // A cut-off last line and a bad value in the middle are skipped, counted and named; the rest of each file is kept
    // (real traces have both: every reader takes the same file the same way).
    const lines = flat.trim().split("\n");
    const truncated = lines.slice(0, 200).join("\n") + "\n" + lines[200]!.slice(0, 4) + "\n";
    const cut = await admin.importHistoryData(Buffer.from(truncated), { format: "csv", server: "s7" });
    expect(cut.samples).toBe(199);
    expect(cut.warnings?.skippedLines).toBe(1);
    const midBad = [...lines.slice(0, 50), "123,abc", ...lines.slice(50)].join("\n");
    const mid = await admin.importHistoryData(Buffer.from(midBad), { format: "csv", tenant: "crawler" });
    expect(mid.warnings?.skippedLines).toBe(1);
    // A file with nothing usable is rejected whole, naming the line where it gave up (the 11th bad one), and keeps
    // nothing.
    const slotsBefore = (await admin.list()).map((t) => t.historySlots);
    const garbage = "time_s,cpu_pct\n" + Array.from({ length: 20 }, (_, i) => `${i * 300},x`).join("\n") + "\n";
    const err = await admin.importHistoryData(Buffer.from(garbage), { format: "csv", server: "s20" }).catch((e) => e);
    expect(isHarvestError(err, "TRACE_MALFORMED")).toBe(true);
    expect((err as { details: Record<string, string> }).details["line"]).toBe("12");
    await admin.assign("crawler", ["s20"]);
    expect((await admin.list()).map((t) => t.historySlots)).toEqual(slotsBefore);
    await admin.assign("batch", ["s7"]);
  });

  it("takes streamed samples, and rejects a stream with a bad sample keeping none of it", async () => {
    const now = Date.now();
    const good = Array.from({ length: 30 }, (_, i) => ({ server: "s8", timeMs: now - i * 120_000, cpuPct: 33 }));
    expect(await admin.addSamples(good)).toBe(30);
    const bad = [...good.map((s) => ({ ...s, server: "s9" })), { server: "s9", timeMs: now, cpuPct: 150 }];
    expect(await codeOf(admin.addSamples(bad))).toBe("INVALID_ARGUMENT");
    await admin.register({ name: "probe" });
    await admin.assign("probe", ["s8", "s9"]);
    await admin.recluster();
    const probe = (await admin.list("probe"))[0]!;
    expect(probe.historySlots).toBe(30);
    expect(probe.averagePct).toBeCloseTo(33, 5);
  });

  it("records reimages and reports them per server per month", async () => {
    const day = 86_400_000;
    // web: 2 servers, 3 reimages in the last 90 days (one far older does not count) -> 3 / 2 / 3 months = 0.5.
    await admin.recordReimage("s1", Date.now() - 10 * day);
    await admin.recordReimage("s2", Date.now() - 20 * day);
    await admin.recordReimage("s2", 0);
    await admin.recordReimage("s1", Date.now() - 400 * day);
    // batch via an import: 6 reimages over its 3 servers -> 6 / 3 / 3 = 0.667.
    const t = (d: number): number => Math.floor((Date.now() - d * day) / 1000);
    const csv = ["time_s,server", ...[1, 2, 3].map((d) => `${t(d)},s5`), `${t(4)},s6`, `${t(5)},s6`, `${t(6)},s7`];
    const r = await admin.importHistoryData(Buffer.from(csv.join("\n") + "\n"), { format: "reimages" });
    expect(r.reimages).toBe(6);
    const bad = await admin
      .importHistoryData(Buffer.from("time_s,server\n100,s1\nyesterday,s2\n"), { format: "reimages" })
      .catch((e) => e);
    expect((bad as { code: string; details: Record<string, string> }).details["line"]).toBe("3");
    expect(await codeOf(admin.recordReimage("bad server"))).toBe("INVALID_ARGUMENT");
    await admin.recluster();
    const tenants = await admin.list();
    expect(tenants.find((x) => x.name === "web")?.reimagesPerServerMonth).toBeCloseTo(0.5, 6);
    expect(tenants.find((x) => x.name === "batch")?.reimagesPerServerMonth).toBeCloseTo(6 / 3 / 3, 6);
    expect(tenants.find((x) => x.name === "crawler")?.reimagesPerServerMonth).toBe(0);
  });

  it("builds classes whose patterns match the tenants' behaviour", async () => {
    const r = await admin.recluster();
    const classOf = (tenant: string): { pattern: string; averagePct: number; servers: string[] } | undefined =>
      r.classes.find((c) => c.tenants.includes(tenant));
    expect(classOf("web")?.pattern).toBe("periodic");
    expect(classOf("crawler")?.pattern).toBe("constant");
    expect(classOf("batch")?.pattern).toBe("unpredictable");
    expect(classOf("crawler")?.averagePct).toBeGreaterThan(18);
    expect(classOf("crawler")?.averagePct).toBeLessThan(22);
    expect(classOf("web")?.servers).toEqual(["s1", "s2"]);
    const web = (await admin.list("web"))[0]!;
    // Seeds/000's test sees the daily cycle of the web tier: user-facing.
    expect(web.measuredCriticality).toBe("critical");
    expect(web.peakPct).toBeGreaterThan(65);
  });

  it("keeps tenants, history and reimages across a restart", async () => {
    const before = await admin.list();
    const port = Number(rm.address.split(":")[1]);
    admin.close();
    await rm.stop();
    rm = new ResourceManager({ dataDir: join(dir, "rm"), port }, { logger: quiet });
    await rm.start();
    admin = new TenantAdminClient(rm.address);
    // The classes are rebuilt at start-up from what is stored.
    const classes = await admin.classes();
    expect(classes.classes.find((c) => c.tenants.includes("web"))?.pattern).toBe("periodic");
    const after = await admin.list();
    expect(after.map((t) => [t.name, t.servers, t.historySlots, t.reimages])).toEqual(
      before.map((t) => [t.name, t.servers, t.historySlots, t.reimages]),
    );
  });
});
