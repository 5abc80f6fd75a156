/**
 * Issue 11: a Harvest cluster across Linux network namespaces (a master and three servers on a private bridge), a job
 * and a file copy across hosts, then a real partition of one server (its link silently drops packets) and its heal.
 * Every host has its own mount namespace too, in which the other hosts' directories are masked: jobs run with no shared
 * path (job files in the DFS, intermediate data through the shuffle), and a word count over all three edge types runs
 * through the cut to exact counts in the DFS.
 * Needs root and `ip netns`; skipped otherwise. One scenario run (about 1.5 minutes) feeds every assertion.
 */
import { readFileSync, readdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runMultihostScenario } from "../../labs/multihost.js";
import type { MultihostResult } from "../../labs/multihost.js";
import { listNamespaces, netnsAvailable, processesUnder } from "../../labs/netns-lab.js";
import { requireBuild } from "../integration/harness.js";

const available = netnsAvailable();
if (!available.ok) console.log(`skipping the multi-host test (network namespaces): ${available.why}`);

/** Pids of live processes whose command line mentions `text`. */
function processesMentioning(text: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text)) out.push(Number(entry));
    } catch {
      // Gone.
    }
  }
  return out;
}

describe.skipIf(!available.ok)("a cluster across network namespaces, through a partition of one server", () => {
  let r: MultihostResult;

  beforeAll(async () => {
    requireBuild();
    r = await runMultihostScenario({ print: (line) => console.log(`[multihost] ${line}`) });
  }, 420_000);

  afterAll(() => {
    // The run directory (configs, daemon logs, data) stays for a look when something failed.
    if (r?.ok) rmSync(r.runDir, { recursive: true, force: true });
    else if (r) console.log(`multi-host run kept for inspection: ${r.runDir} (logs in ${r.runDir}/logs)`);
  });

  it("runs the whole scenario, every daemon advertising its own namespace's address", () => {
    expect(r.error, r.error).toBeUndefined();
    const registered = r.checks.find((c) => c.name.startsWith("every server's node manager and datanode registered"));
    expect(registered?.ok, registered?.detail).toBe(true);
  });

  it("runs with mutual TLS: a client without a certificate is refused", () => {
    const tls = r.checks.find((c) => c.name.startsWith("a client without a certificate is refused"));
    expect(tls?.ok, tls?.detail).toBe(true);
  });

  it("runs a DAG job to success on every server, with no failed task", () => {
    expect(r.dagJob?.state).toBe("FINISHED");
    expect(r.dagJob?.outcome).toBe("JOB_SUCCEEDED");
    expect(r.dagJob?.taskContainers.failed).toBe(0);
    expect(Object.keys(r.dagJob?.tasksPerServer ?? {}).sort()).toEqual(["server-1", "server-2", "server-3"]);
  });

  it("reads back on server-2 exactly the bytes written with replication 3 on server-1", () => {
    expect(r.file?.readBackSha256).toBe(r.file?.sha256);
    expect(r.file?.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("marks the partitioned server's node manager LOST, then RUNNING again after the heal", () => {
    expect(r.partition?.nodeStates).toEqual(["RUNNING", "LOST", "RUNNING"]);
  });

  it("marks its datanode DEAD, re-replicates its replicas elsewhere, and takes it back LIVE after the heal", () => {
    expect(r.partition?.datanodeStates).toEqual(["LIVE", "DEAD", "LIVE"]);
    expect(r.partition?.reReplicatedAfterMs).toBeTypeOf("number");
  });

  it("finishes the job that ran across the cut, re-running its lost tasks without counting a failure", () => {
    const job = r.partition?.job;
    expect(job?.state).toBe("FINISHED");
    expect(job?.outcome).toBe("JOB_SUCCEEDED");
    expect(job?.taskContainers.failed).toBe(0);
    expect(job?.taskContainers.lost).toBeGreaterThanOrEqual(1);
  });

  it("never counts the partitioned server's old containers as successes, nor reads their output", () => {
    const job = r.partition?.job;
    expect(job?.containersAtCut.length).toBeGreaterThan(0);
    for (const c of job?.containersAtCut ?? []) expect(c.cause, c.containerId).not.toBe("SUCCEEDED");
    expect(job?.inputsFromCutContainers).toEqual([]);
  });

  it("kills the container processes left on the partitioned server, which would otherwise have held on", () => {
    const heal = r.heal;
    expect(heal?.processesAtCut).toBeGreaterThan(0);
    expect(heal?.processesGoneAfterMs).toBeTypeOf("number");
    // The held tasks end by themselves only once released, after this was measured.
    expect(heal?.processesGoneAfterMs).toBeLessThan(heal?.releasedAfterMs ?? 0);
  });

  it("completes the write in flight during the cut with identical bytes, or fails it with a coded error", () => {
    const write = r.partition?.write;
    expect(write).toBeDefined();
    if (write?.completed) expect(write.identical).toBe(true);
    else {
      expect(write?.errorCode, write?.errorMessage).toMatch(/^[A-Z][A-Z_]+$/);
      expect(write?.errorCode).not.toBe("TIMED_OUT");
    }
  });

  it("runs a word count over all three edge types through the cut, its counts in the DFS exact", () => {
    const job = r.checks.find((c) => c.name.startsWith("a word count over scatter-gather, one-to-one and broadcast"));
    expect(job?.ok, job?.detail).toBe(true);
  });

  it("gives every host its own files: no task sees another server's or the master's directories, nor the installation", () => {
    const masked = r.checks.find((c) => c.name.startsWith("no task sees another host's directories"));
    expect(masked?.ok, masked?.detail).toBe(true);
  });

  it("reports the file system healthy again after the heal", () => {
    const fsck = r.checks.find((c) => c.name.includes("fsck"));
    expect(r.heal?.fsckHealthy, fsck?.detail).toBe(true);
  });

  it("records how long each of the partitioned server's daemons took to rejoin", () => {
    // Timing claims belong to benchmarks: recorded and printed here, not bounded.
    console.log(
      `[multihost] rejoin after the heal: node manager ${r.heal?.nodeManagerRejoinMs} ms, datanode ${r.heal?.datanodeRejoinMs} ms; ` +
        `LOST after ${r.partition?.nodeLostAfterMs} ms, DEAD after ${r.partition?.datanodeDeadAfterMs} ms of the cut; ` +
        `fsck healthy ${r.heal?.fsckHealthyAfterMs} ms after the heal`,
    );
    expect(r.heal?.nodeManagerRejoinMs).toBeTypeOf("number");
    expect(r.heal?.datanodeRejoinMs).toBeTypeOf("number");
  });

  it("removes every namespace and process it created", () => {
    expect(r.prefix).toMatch(/^hv\d+[a-z]?-$/);
    expect(listNamespaces().filter((ns) => ns.startsWith(r.prefix))).toEqual([]);
    expect(processesMentioning(r.runDir)).toEqual([]);
    expect(processesUnder(r.runDir)).toEqual([]);
  });
});
