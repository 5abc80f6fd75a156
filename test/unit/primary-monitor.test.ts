import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { alive } from "../processes.js";
import { ManualClock, systemClock } from "../../common/clock.js";
import { detailsOf, HarvestError, isHarvestError } from "../../common/errors.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { writeUtilizationCsv } from "../../common/trace-io.js";
import {
  BurnPrimaryMonitor,
  ProcPrimaryMonitor,
  TracePrimaryMonitor,
  burnHelperCommand,
  createPrimaryMonitor,
} from "../../common/primary-monitor.js";
import type { ProcStatTotals } from "../../common/proc-stats.js";
import { clockTicksPerSecond, parseProcStat, processTreeCpuMs, readProcStatTotals } from "../../common/proc-stats.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-primary-monitor-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) {
    // Each test child leads its own process group; kill the group so that grandchildren go too.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

/** A trace of the given values at 5-minute steps. */
function steps(name: string, cpuPct: number[]): UtilizationSeries {
  return {
    name,
    stepSec: 300,
    startMs: 0,
    timesMs: cpuPct.map((_, i) => i * 300_000),
    cpuPct,
  };
}

/** Busy-loops this process for `ms` of wall time. */
function spin(ms: number): void {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x = (x + Math.sqrt(x + 1)) % 1e9;
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("TracePrimaryMonitor", () => {
  const trace = steps("four", [10, 50, 95, 20]);

  it("replays the trace's values at speed on the injected clock and wraps around", async () => {
    const clock = new ManualClock(1_000_000);
    const monitor = new TracePrimaryMonitor({
      trace,
      capacityMilli: 4000,
      clock,
      speed: 600,
    });
    expect(monitor.source).toBe("trace:four");
    await monitor.start();
    const seen: number[] = [];
    // At 600x a 300 s step lasts 500 ms; sample in the middle of each step for two laps.
    clock.advance(250);
    for (let i = 0; i < 8; i++) {
      seen.push(monitor.sample().cpuMilli);
      clock.advance(500);
    }
    expect(seen).toEqual([400, 2000, 3800, 800, 400, 2000, 3800, 800]);
    // 4,250 ms in: the ninth step is the first one of the third lap.
    expect(monitor.sample().utilization).toBeCloseTo(0.1, 9);
    clock.advance(500);
    expect(monitor.sample().utilization).toBeCloseTo(0.5, 9);
    await monitor.stop();
  });

  it("starts at the offset so that servers replaying one file are not in lockstep", async () => {
    const clock = new ManualClock();
    const monitor = new TracePrimaryMonitor({
      trace,
      capacityMilli: 2000,
      clock,
      speed: 600,
      offsetMs: 600_000,
    });
    await monitor.start();
    expect(monitor.sample()).toEqual({ cpuMilli: 1900, utilization: 0.95 });
    clock.advance(500);
    expect(monitor.sample()).toEqual({ cpuMilli: 400, utilization: 0.2 });
  });

  it("reads a trace file named by a trace: spec", async () => {
    const path = join(tmp, "replay.csv");
    await writeUtilizationCsv(path, trace);
    const clock = new ManualClock();
    const monitor = createPrimaryMonitor(`trace:${path}`, {
      capacityMilli: 8000,
      clock,
      speed: 300,
      containerCpuMs: () => 0,
    });
    expect(monitor.source).toBe(`trace:${path}`);
    await monitor.start();
    expect(monitor.sample().cpuMilli).toBe(800);
    clock.advance(1000);
    expect(monitor.sample().cpuMilli).toBe(4000);
    await monitor.stop();
  });

  it("refuses to start on a malformed trace file", async () => {
    const path = join(tmp, "broken.csv");
    writeFileSync(path, "time_s,cpu_pct\n0,10\n300,ten\n");
    const monitor = createPrimaryMonitor(`trace:${path}`, {
      capacityMilli: 1000,
      clock: new ManualClock(),
      speed: 1,
      containerCpuMs: () => 0,
    });
    const err = await errorOf(monitor.start());
    expect(isHarvestError(err, "TRACE_MALFORMED")).toBe(true);
    expect(detailsOf(err as HarvestError, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("3");
    expect(() => monitor.sample()).toThrow(HarvestError);
  });
});

describe("createPrimaryMonitor", () => {
  const options = {
    capacityMilli: 4000,
    clock: systemClock,
    speed: 600,
    containerCpuMs: () => 0,
  };

  it("builds each source from its spec", () => {
    const path = join(tmp, "spec.csv");
    writeFileSync(path, "time_s,cpu_pct\n0,10\n300,20\n");
    expect(createPrimaryMonitor("proc", options)).toBeInstanceOf(ProcPrimaryMonitor);
    expect(createPrimaryMonitor(`trace:${path}`, options)).toBeInstanceOf(TracePrimaryMonitor);
    const burn = createPrimaryMonitor(`burn:${path}`, options);
    expect(burn).toBeInstanceOf(BurnPrimaryMonitor);
    expect(burn.source).toBe(`burn:${path}`);
  });

  for (const spec of [
    "",
    "proc:x",
    "Proc",
    "replay:/tmp/x.csv",
    "trace",
    "trace:",
    "burn:",
    "trace:/no/such/trace.csv",
  ]) {
    it(`rejects the spec ${JSON.stringify(spec)} with CONFIG_INVALID naming it`, () => {
      let caught: unknown;
      try {
        createPrimaryMonitor(spec, options);
      } catch (err) {
        caught = err;
      }
      expect(isHarvestError(caught, "CONFIG_INVALID")).toBe(true);
      expect(detailsOf(caught as HarvestError, "CONFIG_INVALID", "INVALID_ARGUMENT")?.spec).toBe(spec);
      expect((caught as HarvestError).message).toContain(JSON.stringify(spec));
    });
  }

  it("rejects a zero capacity or speed", () => {
    const path = join(tmp, "spec2.csv");
    writeFileSync(path, "time_s,cpu_pct\n0,10\n300,20\n");
    expect(
      isHarvestError(
        errorOfSync(() => createPrimaryMonitor("proc", { ...options, capacityMilli: 0 })),
        "CONFIG_INVALID",
      ),
    ).toBe(true);
    expect(
      isHarvestError(
        errorOfSync(() => createPrimaryMonitor(`trace:${path}`, { ...options, speed: 0 })),
        "CONFIG_INVALID",
      ),
    ).toBe(true);
  });
});

function errorOfSync(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("ProcPrimaryMonitor arithmetic", () => {
  /** A scripted /proc/stat: each call returns the next totals. */
  function scripted(...totals: Array<[busyMs: number, idleMs: number]>): () => ProcStatTotals {
    let i = 0;
    return () => {
      const [busyMs, idleMs] = totals[Math.min(i++, totals.length - 1)]!;
      return { busyMs, idleMs, totalMs: busyMs + idleMs };
    };
  }

  it("scales the machine's busy share minus the containers' share to the node's capacity", async () => {
    let containerMs = 500;
    const monitor = new ProcPrimaryMonitor({
      capacityMilli: 8000,
      containerCpuMs: () => containerMs,
      // Baseline, then +2000 ms busy of +4000 ms, then +4000 busy of +4000, then no tick at all.
      readTotals: scripted([1000, 3000], [3000, 5000], [7000, 5000], [7000, 5000]),
    });
    await monitor.start();
    containerMs = 1500; // containers used 1000 of the 4000 ms: 25 % of the machine.
    expect(monitor.sample()).toEqual({ cpuMilli: 2000, utilization: 0.25 });
    containerMs = 1500; // the machine is fully busy and the containers idle: the primary owns the whole node.
    expect(monitor.sample()).toEqual({ cpuMilli: 8000, utilization: 1 });
    // No clock tick elapsed: the previous reading stands.
    expect(monitor.sample()).toEqual({ cpuMilli: 8000, utilization: 1 });
  });

  it("measures the primary's memory as the machine's used memory less the containers', on the node's memory", async () => {
    let containerBytes = 0;
    const gib = 1024 ** 3;
    const monitor = new ProcPrimaryMonitor({
      capacityMilli: 2000,
      containerCpuMs: () => 0,
      readTotals: scripted([0, 0], [1000, 1000], [2000, 2000]),
      capacityMemoryMb: 4096,
      containerMemoryBytes: () => containerBytes,
      // A 16 GiB machine with 6 GiB available: 10 GiB used.
      readMemInfo: () => ({ totalBytes: 16 * gib, availableBytes: 6 * gib }),
    });
    await monitor.start();
    // 10 of 16 GiB is the primary's, on a node that advertises 4 GiB: 2560 MB.
    expect(monitor.sample().memoryMb).toBe(2560);
    containerBytes = 2 * gib; // 2 GiB of the used memory is Harvest's own.
    expect(monitor.sample().memoryMb).toBe(2048);
  });

  it("never reports a negative primary when the containers account for everything", async () => {
    let containerMs = 0;
    const monitor = new ProcPrimaryMonitor({
      capacityMilli: 2000,
      containerCpuMs: () => containerMs,
      readTotals: scripted([0, 0], [1000, 1000], [1500, 2500]),
    });
    await monitor.start();
    containerMs = 1200; // more than the 1000 busy ms (the two readings are not atomic)
    expect(monitor.sample().cpuMilli).toBe(0);
    containerMs = 0; // a container total going down must not inflate the primary
    expect(monitor.sample().cpuMilli).toBe(500);
  });

  it("parses the aggregate cpu line of /proc/stat, leaving guest time inside user", () => {
    const text = "cpu  100 20 30 400 50 6 4 0 10 0\ncpu0 50 10 15 200 25 3 2 0 5 0\nintr 1\n";
    const totals = parseProcStat(text);
    const msPerTick = 1000 / clockTicksPerSecond();
    expect(totals.busyMs).toBeCloseTo((100 + 20 + 30 + 6 + 4) * msPerTick, 6);
    expect(totals.idleMs).toBeCloseTo((400 + 50) * msPerTick, 6);
    expect(totals.totalMs).toBeCloseTo(totals.busyMs + totals.idleMs, 6);
  });
});

const onLinux = process.platform === "linux";

describe.skipIf(!onLinux)("ProcPrimaryMonitor on the real /proc (skipped off Linux)", () => {
  it("reads monotonic machine totals and this process's own CPU time", () => {
    const a = readProcStatTotals();
    spin(50);
    const b = readProcStatTotals();
    expect(b.totalMs).toBeGreaterThan(a.totalMs);
    expect(b.busyMs).toBeGreaterThanOrEqual(a.busyMs);
    expect(processTreeCpuMs([process.pid])).toBeGreaterThan(0);
    expect(processTreeCpuMs([2 ** 22 + 17])).toBe(0);
    expect(processTreeCpuMs([])).toBe(0);
  });

  it("counts load outside the node's containers as the primary's", async () => {
    const monitor = new ProcPrimaryMonitor({
      capacityMilli: 4000,
      containerCpuMs: () => 0,
    });
    await monitor.start();
    // This test process is not a container: one busy core of this machine is primary load.
    spin(400);
    const s = monitor.sample();
    expect(s.cpuMilli).toBeGreaterThanOrEqual(0);
    expect(s.cpuMilli).toBeLessThanOrEqual(4000);
    expect(s.utilization).toBeCloseTo(s.cpuMilli / 4000, 9);
    expect(s.utilization).toBeGreaterThan(0.25 / cpus().length);
    await monitor.stop();
  });

  it("does not count the CPU of the node's containers, grandchildren included, as the primary's", async () => {
    // A container whose root process idles while its child burns one core.
    const root = spawn(
      process.execPath,
      [
        "-e",
        "const c = require('node:child_process').spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });" +
          "process.on('SIGTERM', () => { c.kill('SIGKILL'); process.exit(0); }); setInterval(() => {}, 1000);",
      ],
      { stdio: "ignore", detached: true },
    );
    children.push(root);
    const rootPid = root.pid!;
    const containerCpuMs = (): number => processTreeCpuMs([rootPid]);
    // Wait until the grandchild is burning.
    await expect.poll(() => containerCpuMs(), { timeout: 10_000, interval: 50 }).toBeGreaterThan(100);

    const withContainers = new ProcPrimaryMonitor({
      capacityMilli: 2000,
      containerCpuMs,
    });
    const blind = new ProcPrimaryMonitor({
      capacityMilli: 2000,
      containerCpuMs: () => 0,
    });
    const machineBefore = readProcStatTotals();
    const containerBefore = containerCpuMs();
    await withContainers.start();
    await blind.start();
    await sleep(1000);
    const counted = blind.sample();
    const primary = withContainers.sample();
    const machineAfter = readProcStatTotals();
    const containerShare = (containerCpuMs() - containerBefore) / (machineAfter.totalMs - machineBefore.totalMs);
    process.kill(-rootPid, "SIGKILL");

    // The grandchild really ran (a busy core is 1/cpus of the machine; allow heavy contention).
    expect(containerShare).toBeGreaterThan(0.15 / cpus().length);
    // The blind monitor counts it as primary load; the real one subtracts it.
    expect(counted.cpuMilli - primary.cpuMilli).toBeGreaterThan(containerShare * 2000 * 0.5);
    expect(counted.cpuMilli - primary.cpuMilli).toBeLessThan(containerShare * 2000 * 1.5 + 100);
    expect(primary.cpuMilli).toBeGreaterThanOrEqual(0);
    expect(primary.cpuMilli).toBeLessThanOrEqual(2000);
  });
});

/** A burn monitor on four cores replaying `trace` at 600x, started. */
async function startBurnMonitor(trace: ReturnType<typeof steps>): Promise<BurnPrimaryMonitor> {
  const monitor = new BurnPrimaryMonitor({ trace, capacityMilli: 4000, speed: 600, containerCpuMs: () => 0 });
  await monitor.start();
  return monitor;
}

/** The share of the whole machine's CPU time the process tree of `pid` used over the next `ms`. */
async function shareOfMachine(pid: number, ms: number): Promise<number> {
  const before = processTreeCpuMs([pid]);
  const machineBefore = readProcStatTotals();
  await sleep(ms);
  return (processTreeCpuMs([pid]) - before) / (readProcStatTotals().totalMs - machineBefore.totalMs);
}

describe.skipIf(!onLinux)("BurnPrimaryMonitor (skipped off Linux)", () => {
  it("really burns the trace's share of the machine, which the proc measurement sees", async () => {
    const monitor = await startBurnMonitor(steps("full", [100, 100, 100]));
    try {
      const pid = monitor.helperPid()!;
      expect(alive(pid)).toBe(true);
      const helperShare = await shareOfMachine(pid, 1500);
      const s = monitor.sample();
      // The trace asks for every core. Other work on a shared machine takes its fair share of the cores, so only
      // demand a clear burn (an idle helper stays under 0.05, see the next test) rather than the full machine.
      expect(helperShare).toBeGreaterThan(0.15);
      // The proc measurement sees the burn as primary load: the machine is at least as busy as the helper made it.
      expect(s.utilization).toBeGreaterThanOrEqual(helperShare - 0.05);
      expect(s.utilization).toBeLessThanOrEqual(1);
    } finally {
      const pid = monitor.helperPid();
      await monitor.stop();
      expect(pid === undefined || !alive(pid)).toBe(true);
    }
    // stop() is idempotent.
    await monitor.stop();
  });

  it("burns next to nothing while the trace is idle", async () => {
    const monitor = await startBurnMonitor(steps("idle", [0, 0, 0]));
    try {
      expect(await shareOfMachine(monitor.helperPid()!, 1000)).toBeLessThan(0.05);
    } finally {
      await monitor.stop();
    }
  });

  it("exits by itself when its parent dies", async () => {
    const { entry, execArgv } = burnHelperCommand();
    // A stand-in node manager that starts the helper, reports its pid and then is killed without cleaning up.
    const script =
      "const { fork } = require('node:child_process');" +
      "const c = fork(process.env.ENTRY, [], { execArgv: JSON.parse(process.env.EXEC_ARGV), stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });" +
      "c.on('message', (m) => { if (m.type === 'ready') process.stdout.write(c.pid + '\\n'); });" +
      "c.send({ type: 'start', series: { name: 'idle', stepSec: 300, startMs: 0, timesMs: [0, 300000], cpuPct: [0, 0] }, speed: 1, offsetMs: 0 });";
    const parent = spawn(process.execPath, ["-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
      env: {
        ...process.env,
        ENTRY: entry,
        EXEC_ARGV: JSON.stringify(execArgv),
      },
      detached: true,
    });
    children.push(parent);
    const helperPid = await new Promise<number>((resolve, reject) => {
      let out = "";
      parent.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("\n")) resolve(Number(out.trim()));
      });
      parent.once("exit", (code) => reject(new Error(`stand-in parent exited early (${code})`)));
    });
    expect(alive(helperPid)).toBe(true);
    parent.kill("SIGKILL");
    await expect.poll(() => alive(helperPid), { timeout: 10_000, interval: 100 }).toBe(false);
  });
});
