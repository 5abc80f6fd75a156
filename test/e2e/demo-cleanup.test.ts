/**
 * `harvest demo` leaves nothing behind: not its temporary directory, nor a daemon, when it fails or is interrupted
 * with Ctrl-C (its daemons are detached, so they would outlive a demo that just died).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { distEntry } from "../../common/paths.js";
import { allDaemons, isRunning } from "../../localcluster/cluster.js";
import type { ClusterDescriptor, DaemonRecord } from "../../localcluster/cluster.js";
import { runHarvest } from "../processes.js";
import { requireBuild } from "../integration/harness.js";
import { waitFor } from "../wait-for.js";

/** The demo's $TMPDIR, so that its temporary directories can be found (open to the containers' accounts). */
const tmp = mkdtempSync(join(tmpdir(), "harvest-demo-cleanup-"));
chmodSync(tmp, 0o755);
/** What the interrupted demo started, for a teardown that stops it if the test fails half-way. */
let demo: ChildProcess | undefined;
let daemons: DaemonRecord[] = [];
afterAll(() => {
  if (demo && demo.exitCode === null) demo.kill("SIGKILL");
  for (const d of daemons.filter(isRunning)) process.kill(d.pid, "SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

const demoDirs = (): string[] => readdirSync(tmp).filter((d) => d.startsWith("harvest-demo-"));

describe("harvest demo", () => {
  it("removes its temporary directory when it fails", () => {
    requireBuild();
    const r = runHarvest(["demo", "--primary", `trace:${join(tmp, "no-such-trace.csv")}`], { env: { TMPDIR: tmp } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no-such-trace.csv");
    expect(demoDirs()).toEqual([]);
  });

  it("stops every daemon and removes its directory on Ctrl-C, exiting 130", async () => {
    const child = (demo = spawn(process.execPath, [distEntry("cli/harvest.js"), "demo", "--servers", "2"], {
      env: { ...process.env, TMPDIR: tmp },
      stdio: ["ignore", "pipe", "pipe"],
    }));
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.stdout.resume();
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    // Once the cluster is up (its descriptor written), interrupt the demo as a terminal's Ctrl-C does.
    const descriptor = await waitFor(
      () => {
        const dir = demoDirs()[0];
        const file = dir ? join(tmp, dir, "cluster.json") : "";
        return file && existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as ClusterDescriptor) : undefined;
      },
      { what: "the demo's cluster to come up", timeoutMs: 90_000, intervalMs: 200 },
    );
    daemons = allDaemons(descriptor);
    // A resource manager, a namenode, and a node manager and a datanode per server.
    expect(daemons.length).toBe(6);
    child.kill("SIGINT");
    expect(await exited, stderr).toBe(130);
    expect(stderr).toContain("SIGINT: stopping the demo cluster");
    expect(daemons.filter(isRunning).map((d) => d.name)).toEqual([]);
    expect(demoDirs()).toEqual([]);
  }, 150_000);
});
