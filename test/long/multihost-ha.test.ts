/**
 * Issue 43's proof: highly available masters across network namespaces (two master hosts, three servers, an etcd
 * member on each master host and on server-1). The active masters' host is cut off the network while a job runs and
 * files are written; the other host's masters take over, nothing acknowledged is lost, and once healed the old host's
 * masters step down and everything they could still do as the old term is refused. Then the new active's host is
 * killed (kill -9 of every process, its etcd member too) and the healed one takes over: the cluster could lose a
 * master again. Needs root, `ip netns` and etcd; skipped otherwise. One scenario run (about 1.5 minutes) feeds every
 * assertion.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runHaScenario } from "../../labs/multihost-ha.js";
import type { HaScenarioResult } from "../../labs/multihost-ha.js";
import { netnsAvailable } from "../../labs/netns-lab.js";
import { requireBuild } from "../integration/harness.js";
import { haveEtcd } from "../helpers/etcd.js";

const available = netnsAvailable();
if (!available.ok) console.log(`skipping the HA multi-host test (network namespaces): ${available.why}`);
if (!haveEtcd) console.log("skipping the HA multi-host test: no etcd (apt-get install etcd-server)");

describe.skipIf(!available.ok || !haveEtcd)("HA masters across network namespaces, losing the active's host", () => {
  let r: HaScenarioResult;
  const check = (prefix: string): { ok: boolean; detail: string } | undefined =>
    r.checks.find((c) => c.name.startsWith(prefix));

  beforeAll(async () => {
    requireBuild();
    r = await runHaScenario({ print: (line) => console.log(`[multihost-ha] ${line}`) });
  }, 480_000);

  afterAll(() => {
    if (r?.ok) rmSync(r.runDir, { recursive: true, force: true });
    else if (r) console.log(`HA multi-host run kept for inspection: ${r.runDir} (logs in ${r.runDir}/logs)`);
  });

  it("runs the whole scenario", () => {
    expect(r.error, r.error).toBeUndefined();
  });

  it("makes the other host's resource manager and namenode active by themselves, in newer terms", () => {
    for (const service of ["resource manager", "namenode"]) {
      const c = check(`master-b's ${service} becomes active within 15.0 s of cutting off master-a`);
      expect(c?.ok, c?.detail).toBe(true);
    }
    // The goal is 10 s: reported, not asserted (a wall-clock figure; docs/ha.md has the runs that measure it).
    console.log(
      `[multihost-ha] takeovers after the cut: rm ${r.failoverMs.rm} ms, nn ${r.failoverMs.nn} ms (goal 10000)`,
    );
    expect(r.epochs.rm?.[1]).toBeGreaterThan(r.epochs.rm?.[0] ?? Infinity);
    expect(r.epochs.nn?.[1]).toBeGreaterThan(r.epochs.nn?.[0] ?? Infinity);
  });

  it("finishes the job running through the loss, with no finished task run again", () => {
    const c = check("the job running through the loss finishes");
    expect(c?.ok, c?.detail).toBe(true);
  });

  it("reads back every acknowledged file byte-identical; the write in flight completed or failed with a code", () => {
    const files = check("every acknowledged file reads back byte-identical");
    expect(files?.ok, files?.detail).toBe(true);
    expect(r.files.acknowledged).toBeGreaterThan(5);
    expect(r.files.identical).toBe(r.files.acknowledged);
    const inflight = check("the write in flight through the loss");
    expect(inflight?.ok, inflight?.detail).toBe(true);
  });

  it("can lose a master again: kill -9 of every process of the new active's host, the healed host takes over", () => {
    for (const prefix of [
      "master-a's resource manager becomes active within 15.0 s of kill -9",
      "master-a's namenode becomes active within 15.0 s of kill -9",
      "every acknowledged file reads back byte-identical after master-b's host was killed too",
      "a new job runs on the masters that took over again",
    ]) {
      const c = check(prefix);
      expect(c?.ok, `${prefix}: ${c?.detail}`).toBe(true);
    }
    console.log(
      `[multihost-ha] takeovers after the kill: rm ${r.killFailoverMs.rm} ms, nn ${r.killFailoverMs.nn} ms (goal 10000)`,
    );
  });

  it("has the healed old masters step down, and refuses their old terms at every datanode and node manager", () => {
    for (const prefix of [
      "the old master, healed, steps down",
      "every datanode refuses a write on the old active namenode's token while master-a is cut off",
      "every datanode refuses a write on the old active namenode's token from master-a, healed",
      "every node manager refuses a container granted in the old resource manager's term",
    ]) {
      const c = check(prefix);
      expect(c?.ok, `${prefix}: ${c?.detail}`).toBe(true);
    }
  });
});
