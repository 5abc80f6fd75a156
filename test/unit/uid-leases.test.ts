/**
 * Host-wide container uid leases: two node managers sharing a lease directory never hold one uid, a restarted one
 * finds its leases again, a released uid is free again, accounts and busy uids are skipped, a holder that is gone
 * gives its leases back, and a full range fails the launch with a coded error.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { distEntry } from "../../common/paths.js";
import { parseUidRange, UidLeases } from "../../nodemanager/uid-leases.js";
import { thrown } from "../error-code.js";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "harvest-uid-leases-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A node manager's leases in `dir`; its data directory is a real one (it exists) unless `dataDir` is given. */
function holder(
  nodeId: string,
  opts: { dataDir?: string; inUse?: number[]; busy?: number[]; max?: number; nowMs?: () => number } = {},
) {
  const leases = new UidLeases(
    join(dir, "leases"),
    { min: 70000, max: opts.max ?? 70009 },
    { dataDir: opts.dataDir ?? dir, nodeId },
    {
      idsInUse: () => new Set(opts.inUse ?? []),
      processUids: () => new Set(opts.busy ?? []),
      ...(opts.nowMs ? { nowMs: opts.nowMs } : {}),
    },
  );
  leases.open();
  return leases;
}

describe("UidLeases", () => {
  it("never gives one uid to two applications, even across two node managers of the host", () => {
    const a = holder("n1");
    const b = holder("n2");
    const uids = [a.acquire("app_1"), b.acquire("app_1"), a.acquire("app_2"), b.acquire("app_2"), a.acquire("app_3")];
    expect(new Set(uids).size).toBe(uids.length);
    expect(a.acquire("app_1")).toBe(uids[0]);
    expect(readdirSync(join(dir, "leases")).sort()).toEqual(uids.map(String).sort());
  });

  it("skips uids an account or a running process uses", () => {
    const a = holder("n1", { inUse: [70000, 70001], busy: [70002] });
    expect(a.acquire("app_1")).toBe(70003);
  });

  it("finds its own leases again after a restart, and frees a uid only on release", () => {
    const first = holder("n1");
    const uid = first.acquire("app_1");
    const restarted = holder("n1");
    expect(restarted.uidOf("app_1")).toBe(uid);
    expect(holder("n2").acquire("app_9")).not.toBe(uid);
    restarted.release("app_1");
    expect(readdirSync(join(dir, "leases"))).not.toContain(String(uid));
  });

  it("fails the launch with a coded error when every uid is taken, then takes back a gone holder's leases", () => {
    const gone = holder("old", { dataDir: join(dir, "removed-cluster"), max: 70001 });
    gone.acquire("app_1");
    gone.acquire("app_2");
    const live = holder("n1", { max: 70001, busy: [70001] });
    // 70000 is a gone holder's with no process: taken back. 70001's process still runs: never.
    expect(live.acquire("app_3")).toBe(70000);
    expect(thrown(() => live.acquire("app_4")).code).toBe("CONTAINER_LAUNCH_FAILED");
  });

  it("sweeps a gone holder's leases when it opens the directory, but not one whose uid still has a process", () => {
    const gone = holder("old", { dataDir: join(dir, "removed-cluster") });
    const uids = [gone.acquire("app_1"), gone.acquire("app_2"), gone.acquire("app_3")];
    holder("n1", { busy: [uids[2]!] });
    expect(readdirSync(join(dir, "leases"))).toEqual([String(uids[2])]);
  });

  it("takes back no stale lease whose lock another node manager holds, and breaks a lock left for a minute", () => {
    const gone = holder("old", { dataDir: join(dir, "removed-cluster"), max: 70000 });
    gone.acquire("app_1");
    const lock = join(dir, "leases", "70000.lock");
    writeFileSync(lock, "");
    // The lock is fresh: another node manager is taking 70000 back right now. The range has nothing else.
    const now = Date.now();
    const live = holder("n1", { max: 70000, nowMs: () => now });
    expect(thrown(() => live.acquire("app_2")).code).toBe("CONTAINER_LAUNCH_FAILED");
    // Its taker died holding it: a minute on, the lock is broken and the lease taken back.
    utimesSync(lock, new Date(now - 61_000), new Date(now - 61_000));
    expect(live.acquire("app_2")).toBe(70000);
    expect(readdirSync(join(dir, "leases"))).toEqual(["70000"]);
  });

  it("never hands one uid to two applications when node managers in four processes take back stale leases at once", async () => {
    // A full range of a removed cluster's leases (no process runs as 70000-70199), then four node managers of the
    // host, each a process of its own, opening the directory and leasing uids for 45 applications at the same time.
    const range = { min: 70000, max: 70199 };
    const leaseDir = join(dir, "leases");
    const gone = new UidLeases(leaseDir, range, { dataDir: join(dir, "removed-cluster"), nodeId: "old" });
    gone.open();
    for (let i = range.min; i <= range.max; i++) gone.acquire(`app_old_${i}`);
    const module = pathToFileURL(distEntry("nodemanager/uid-leases.js")).href;
    const taker = (nodeId: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const script = `
          const { UidLeases } = await import(${JSON.stringify(module)});
          const leases = new UidLeases(${JSON.stringify(leaseDir)}, ${JSON.stringify(range)},
            { dataDir: ${JSON.stringify(dir)}, nodeId: "${nodeId}" });
          leases.open();
          const got = [];
          for (let i = 0; i < 45; i++) got.push(leases.acquire("app_${nodeId}_" + i));
          process.stdout.write(JSON.stringify(got));`;
        const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        let err = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        child.on("error", reject);
        child.on("close", (code) =>
          code === 0 ? resolve(out) : reject(new Error(`${nodeId} exited ${code}: ${err}`)),
        );
      });
    const got = (await Promise.all(["n1", "n2", "n3", "n4"].map(taker))).flatMap((o) => JSON.parse(o) as number[]);
    expect(got).toHaveLength(180);
    const twice = got.filter((uid, i) => got.indexOf(uid) !== i);
    expect(twice, "uids leased to two applications").toEqual([]);
    // The lease files are those 180 (the stale ones swept, no lock left behind).
    expect(readdirSync(leaseDir).sort()).toEqual(got.map(String).sort());
  });

  it("leaves alone a lease file it cannot read, and a lease of a holder whose data directory still exists", () => {
    const me = holder("n1", { max: 70001 });
    writeFileSync(join(dir, "leases", "70000"), "half-writ");
    const other = holder("n2", { max: 70001 });
    expect(other.acquire("app_1")).toBe(70001);
    expect(thrown(() => me.acquire("app_2")).code).toBe("CONTAINER_LAUNCH_FAILED");
  });

  it("parses a range and refuses one that reaches system accounts, runs backwards or is not min-max", () => {
    expect(parseUidRange("61184-65519")).toEqual({ min: 61184, max: 65519 });
    for (const bad of ["0-100", "999-2000", "65519-61184", "61184", "a-b", "61184-4294967295"])
      expect(() => parseUidRange(bad), bad).toThrow();
  });
});
