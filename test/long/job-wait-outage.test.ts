/**
 * `harvest job submit --wait` as a user runs it while the resource manager dies and is restarted: the command rides
 * out the outage, says so once on stderr, and exits 0 with the job's real outcome.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, describe, expect, it } from "vitest";
import { distEntry } from "../../common/paths.js";
import { readCluster } from "../../localcluster/cluster.js";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { requireBuild } from "../integration/harness.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-e2e-outage-"));
const env = { ...process.env, HARVEST_CLUSTER_DIR: dir };

function harvest(...args: string[]): CliRun {
  return runHarvest(args, { env, timeoutMs: 60_000 });
}

/** Runs `harvest args` in the background; resolves with its exit code and output when it ends. */
function harvestAsync(...args: string[]): {
  stdout: () => string;
  done: Promise<{ code: number; stdout: string; stderr: string }>;
} {
  const child = spawn(process.execPath, [distEntry("cli/harvest.js"), ...args], { env });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  const done = new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr })),
  );
  return { stdout: () => stdout, done };
}

describe("harvest job submit --wait across a resource-manager outage", () => {
  afterAll(() => {
    if (existsSync(join(dir, "cluster.json"))) harvest("cluster", "down");
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps following the job while the RM is down and restarted, and exits 0 when it succeeds", async () => {
    requireBuild();
    const up = harvest("cluster", "up", "--servers", "1", "--primary", "trace", "--speed", "1", "--json");
    expect(up.code, up.stderr).toBe(0);
    const dag = join(dir, "long.json");
    writeFileSync(
      dag,
      JSON.stringify({
        name: "long",
        vertices: [
          {
            name: "hold",
            parallelism: 1,
            command: [
              "node",
              "${HARVEST_HOME}/dist/examples/tasks/cpu-work.js",
              "--seconds",
              "0.1",
              "--hold-seconds",
              "4",
            ],
            resources: { vcores: 1, memoryMb: 128 },
          },
        ],
      }),
    );

    const wait = harvestAsync("job", "submit", dag, "--wait", "--rm-retry", "60s");
    await waitFor(() => /submitted application_\d+_\d+/.test(wait.stdout()), {
      what: "the job to be submitted",
      timeoutMs: 30_000,
    });
    const appId = /submitted (application_\d+_\d+)/.exec(wait.stdout())![1]!;
    await waitFor(
      () => {
        const s = harvest("job", "status", appId, "--json");
        return s.code === 0 && (JSON.parse(s.stdout) as { state: string }).state === "RUNNING";
      },
      { what: "the job to run", timeoutMs: 30_000 },
    );

    // The RM dies (kill -9) and is back on the same address and data directory about 2 s later.
    process.kill(readCluster(dir).rm.pid, "SIGKILL");
    // The outage itself is what the waiting command must ride out, so its length is a sleep.
    await new Promise((r) => setTimeout(r, 2_000));
    const restart = harvest("cluster", "restart", "rm");
    expect(restart.code, restart.stderr).toBe(0);

    const r = await wait.done;
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toContain(`${appId} succeeded in`);
    const said = r.stderr
      .split("\n")
      .filter((l) => l.includes("resource manager unreachable; retrying for up to 60 s"));
    expect(said).toHaveLength(1);
    // The job's real outcome, from the restarted RM.
    const status = harvest("job", "status", appId, "--json");
    expect((JSON.parse(status.stdout) as { state: string }).state).toBe("FINISHED");
  });
});
