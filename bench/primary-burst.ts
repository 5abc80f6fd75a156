/**
 * The primary's view of yielding: how much CPU a primary tenant's burst gets in its first 100 ms while Harvest's
 * containers are burning every core, against the same burst alone, in the same run. This is what the kernel does
 * before any yield tick: containers at the lowest CPU weight (what the node manager's cgroups give them now) lose the
 * CPU at once; containers at the default weight (stock YARN, and Harvest before issue 12) split it evenly with the
 * primary until the yield controller kills them.
 *
 * Real parts: the containers are started by the node manager's own ContainerProcess in cgroups made by its own
 * detectCgroups; the burst is `cores` real shell busy loops outside Harvest's groups, like a primary's processes. The
 * CPU each burst process got is its /proc/<pid>/schedstat run time, read 100 ms after it was spawned (normalised by the
 * exact elapsed time).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ContainerProcess, detectCgroups, fixedContainerAccount } from "../nodemanager/index.js";
import type { CgroupController } from "../nodemanager/index.js";
import { readProcessCpu } from "./node-bench.js";
import { fmt, preciseNowMs, ratio, summarize, table } from "./report.js";
import type { Summary } from "./report.js";

/** How the containers compete with the burst. */
type BurstMode = "alone" | "harvest" | "default-weight";

/** What one mode measured: the burst's CPU share of its cores in its first window, one sample per trial. */
export interface BurstModeResult {
  mode: BurstMode;
  detail: string;
  share: Summary;
}

const BURN = "for (;;) {}";

/** Writes a weight file where it exists (the stock baseline resets Harvest's lowest weight to the default). */
function setDefaultWeight(c: CgroupController, groupName: string, containerIds: string[]): void {
  const roots =
    c.mode === "v2"
      ? [existsSync("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified"]
      : ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"];
  const [file, value] = c.mode === "v2" ? ["cpu.weight", "100"] : ["cpu.shares", "1024"];
  for (const root of roots) {
    const parts = groupName.split("/");
    for (let i = 1; i <= parts.length; i++) {
      const f = join(root, ...parts.slice(0, i), file);
      if (existsSync(f)) writeFileSync(f, value);
    }
    for (const id of containerIds) {
      const f = join(root, groupName, id, file);
      if (existsSync(f)) writeFileSync(f, value);
    }
  }
}

async function burstTrial(cores: number, windowMs: number): Promise<number> {
  const procs: ChildProcess[] = [];
  const t0 = preciseNowMs();
  for (let i = 0; i < cores; i++)
    procs.push(spawn("/bin/sh", ["-c", "while :; do :; done"], { stdio: "ignore", detached: true }));
  await sleep(windowMs);
  const elapsedMs = preciseNowMs() - t0;
  let ns = 0;
  for (const p of procs) if (p.pid) ns += readProcessCpu(p.pid, false)?.cpuNs ?? 0;
  for (const p of procs) {
    try {
      if (p.pid) process.kill(-p.pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
  await Promise.all(procs.map((p) => new Promise((r) => (p.exitCode !== null ? r(null) : p.once("exit", r)))));
  return ns / 1e6 / (elapsedMs * cores);
}

async function runBurstMode(mode: BurstMode, trials: number, windowMs: number): Promise<BurstModeResult> {
  const cores = cpus().length;
  const groupName = `harvest-bench/${randomBytes(5).toString("hex")}`;
  const cgroups = mode === "alone" ? detectCgroups(groupName, "none") : detectCgroups(groupName, "auto");
  const dir = mkdtempSync(join(tmpdir(), "harvest-burst-"));
  // The containers run as a default node manager's account (nobody under root), which must get into `dir`.
  chmodSync(dir, 0o755);
  const account = fixedContainerAccount("nobody");
  const containers: ContainerProcess[] = [];
  try {
    if (mode !== "alone") {
      for (let i = 0; i < cores; i++) {
        const containerId = `container_1700000000000_0001_01_${String(i + 1).padStart(6, "0")}`;
        containers.push(
          new ContainerProcess(
            {
              containerId,
              appId: "application_1700000000000_0001",
              argv: ["node", "-e", BURN],
              env: {},
              vcoresMilli: 1000,
              memoryMb: 256,
              isAm: false,
              account,
              workDir: join(dir, containerId),
            },
            cgroups,
            Date.now(),
            () => undefined,
          ),
        );
      }
      if (mode === "default-weight")
        setDefaultWeight(
          cgroups,
          groupName,
          containers.map((c) => c.spec.containerId),
        );
      await sleep(500);
    }
    const samples: number[] = [];
    for (let t = 0; t < trials; t++) {
      samples.push(await burstTrial(cores, windowMs));
      await sleep(50);
    }
    const detail =
      mode === "alone"
        ? "no secondary containers"
        : `${cores} containers burning a core each, ${cgroups.reason}${mode === "default-weight" ? ", weights reset to the default (stock)" : cgroups.mode === "none" ? ", nice 19" : ", lowest CPU weight"}`;
    return { mode, detail, share: summarize(samples) };
  } finally {
    for (const c of containers) c.killNow("KILLED_BY_USER");
    await Promise.all(containers.map((c) => c.waitForExit()));
    cgroups.close();
    for (const root of [
      "/sys/fs/cgroup",
      "/sys/fs/cgroup/unified",
      "/sys/fs/cgroup/cpu",
      "/sys/fs/cgroup/cpuacct",
      "/sys/fs/cgroup/memory",
    ])
      try {
        rmdirSync(join(root, "harvest-bench"));
      } catch {
        // Absent, or another run's groups are still in it.
      }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs the burst alone, against Harvest's containers, and against containers at the default weight. */
export async function primaryBurstReport(
  trials: number,
  windowMs: number,
  progress: (line: string) => void,
): Promise<{ lines: string[]; result: Record<string, unknown> }> {
  const results: BurstModeResult[] = [];
  for (const mode of ["alone", "harvest", "default-weight"] as const) {
    progress(`primary burst: ${mode}`);
    results.push(await runBurstMode(mode, trials, windowMs));
  }
  const alone = results[0]!.share;
  const rows = results.map((r) => [
    r.mode,
    String(r.share.count),
    fmt(r.share.mean * 100, 1),
    fmt(r.share.p50 * 100, 1),
    fmt(r.share.min * 100, 1),
    ratio(r.share.mean, alone.mean),
  ]);
  const harvest = results[1]!.share;
  const lines = [
    `primary's view: CPU a burst of ${cpus().length} busy processes gets in its first ${windowMs} ms (% of its cores), ${trials} trials per mode`,
    ...table(["mode", "n", "mean %", "p50 %", "min %", "vs alone"], rows),
    ...results.map((r) => `  ${r.mode}: ${r.detail}`),
    `with Harvest's containers / alone: ${ratio(harvest.mean, alone.mean)} (goal >= 0.9x with cgroups)`,
  ];
  return {
    lines,
    result: { windowMs, trials, modes: results.map((r) => ({ mode: r.mode, detail: r.detail, share: r.share })) },
  };
}
