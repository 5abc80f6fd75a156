/**
 * Host-wide container uid leases: two node managers sharing a lease directory never hold one uid, a restarted one
 * finds its leases again, a released uid is free again, accounts and busy uids are skipped, a holder that is gone
 * gives its leases back, and a full range fails the launch with a coded error.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseUidRange, UidLeases } from "../../nodemanager/uid-leases.js";
import { thrown } from "../error-code.js";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "harvest-uid-leases-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A node manager's leases in `dir`; its data directory is a real one (it exists) unless `dataDir` is given. */
function holder(nodeId: string, opts: { dataDir?: string; inUse?: number[]; busy?: number[]; max?: number } = {}) {
  const leases = new UidLeases(
    join(dir, "leases"),
    { min: 70000, max: opts.max ?? 70009 },
    { dataDir: opts.dataDir ?? dir, nodeId },
    { idsInUse: () => new Set(opts.inUse ?? []), hasProcesses: (uid) => (opts.busy ?? []).includes(uid) },
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
