/** The `harvest` command as a user runs it: cluster up, job submit --wait, status/list/logs/history, cluster down. */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, describe, expect, it } from "vitest";
import { distEntry, packageRoot } from "../../common/paths.js";
import { allDaemons, isRunning } from "../../localcluster/cluster.js";
import { DATA_CLIENT_NODE_OPTIONS, DEFAULT_NODE_OPTIONS } from "../../localcluster/node-options.js";
import { MALLOC_TUNABLES, TUNABLES_VARIABLE } from "../../localcluster/malloc-tunables.js";
import type { ClusterDescriptor } from "../../localcluster/cluster.js";
import { procStatFields } from "../../common/proc-stats.js";
import { localUserName } from "../../common/fs-permission.js";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { requireBuild } from "../integration/harness.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-e2e-"));

function harvest(...args: string[]): CliRun {
  return runHarvest(args, { env: { HARVEST_CLUSTER_DIR: dir } });
}

/** A process's environment, from /proc. */
function environOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const at = kv.indexOf("=");
    if (at > 0) out[kv.slice(0, at)] = kv.slice(at + 1);
  }
  return out;
}

/** The processes whose parent is `pid` (field 4 of /proc/<pid>/stat). */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d) && Number(procStatFields(Number(d))?.[1]) === pid)
    .map(Number);
}

/**
 * `harvest fs cat <path>` started without GLIBC_TUNABLES, its output held back until the process it started again is
 * found; `then` acts on the two (the default lets the output flow). Resolves with that process's environment, the
 * bytes, and how the command ended.
 */
async function catRestarted(
  path: string,
  then: (cli: number, restarted: number) => void = () => undefined,
): Promise<{
  env: Record<string, string>;
  /** The restarted process's command line. */
  argv: string[];
  restarted: number;
  stdout: Buffer;
  code: number | null;
  signal: string | null;
}> {
  const env: NodeJS.ProcessEnv = { ...process.env, HARVEST_CLUSTER_DIR: dir };
  delete env[TUNABLES_VARIABLE];
  const child = spawn(process.execPath, [distEntry("cli/harvest.js"), "fs", "cat", path], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const chunks: Buffer[] = [];
  child.stdout.pause();
  child.stdout.on("data", (c: Buffer) => chunks.push(c));
  const ended = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.once("exit", (code, signal) => r({ code, signal })),
  );
  const restarted = await waitFor(() => childrenOf(child.pid!)[0], {
    what: "the command to start a second process",
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  const restartedEnv = environOf(restarted!);
  const argv = readFileSync(`/proc/${restarted!}/cmdline`, "utf8").split("\0");
  then(child.pid!, restarted!);
  child.stdout.resume();
  const end = await ended;
  return { env: restartedEnv, argv, restarted: restarted!, stdout: Buffer.concat(chunks), ...end };
}

describe("the harvest CLI", () => {
  afterAll(() => {
    if (existsSync(join(dir, "cluster.json"))) harvest("cluster", "down");
    rmSync(dir, { recursive: true, force: true });
  });

  it("says what to do when there is no cluster", () => {
    requireBuild();
    const r = harvest("job", "list");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("harvest cluster up");
    expect(r.stderr).toContain("CLUSTER_NOT_FOUND");
  });

  it("brings a cluster up, runs a DAG job to success with --wait, reports it, and tears everything down", async () => {
    const up = harvest("cluster", "up", "--servers", "2", "--primary", "trace", "--speed", "1", "--json");
    expect(up.code, up.stderr).toBe(0);
    const desc = JSON.parse(up.stdout) as ClusterDescriptor;
    expect(desc.nodes).toHaveLength(2);
    // Each datanode runs with its Node options (localcluster/node-options.ts), and no other daemon does.
    const daemons = allDaemons(desc);
    expect(daemons.filter((d) => d.kind === "datanode")).toHaveLength(2);
    for (const d of daemons) {
      const argv = readFileSync(`/proc/${d.pid}/cmdline`, "utf8").split("\0");
      for (const option of DEFAULT_NODE_OPTIONS.datanode)
        expect(argv.includes(option), `${d.name}: ${argv.join(" ")}`).toBe(d.kind === "datanode");
      // And the datanodes with glibc's malloc setting (localcluster/malloc-tunables.ts), unless this test's own has one.
      expect(environOf(d.pid)[TUNABLES_VARIABLE]).toBe(
        d.kind === "datanode" ? (process.env[TUNABLES_VARIABLE] ?? MALLOC_TUNABLES) : process.env[TUNABLES_VARIABLE],
      );
    }

    const again = harvest("cluster", "up", "--servers", "1");
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("CLUSTER_ALREADY_RUNNING");

    const status = harvest("cluster", "status", "--json");
    expect(status.code).toBe(0);
    expect((JSON.parse(status.stdout) as { nodes: { state: string }[] }).nodes.map((n) => n.state)).toEqual([
      "RUNNING",
      "RUNNING",
    ]);

    const submit = harvest("job", "submit", join(packageRoot(), "examples", "dags", "three-stage.json"), "--wait");
    expect(submit.code, submit.stderr + submit.stdout).toBe(0);
    expect(submit.stdout).toMatch(/succeeded in/);
    expect(submit.stdout).toContain("extract");
    // What the node managers said their containers run as, right after the id.
    expect(submit.stdout).toMatch(/^submitted application_\d+_\d+\ncontainers run as: \S/);
    const appId = /submitted (application_\d+_\d+)/.exec(submit.stdout)?.[1];
    expect(appId).toBeDefined();

    const list = harvest("job", "list", "--json");
    const apps = JSON.parse(list.stdout) as { appId: string; state: string }[];
    expect(apps.find((a) => a.appId === appId)?.state).toBe("FINISHED");

    const logs = harvest("job", "logs", appId!);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toContain("job finished");

    const history = harvest("job", "history", "--name", "three-stage", "--json");
    expect((JSON.parse(history.stdout) as { outcome: string }[])[0]?.outcome).toBe("JOB_SUCCEEDED");

    const bad = harvest("job", "submit", join(packageRoot(), "no-such.json"));
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("no such DAG file");

    // The file system, as a user drives it.
    const corpus = join(packageRoot(), "examples", "data", "corpus.txt");
    expect(harvest("fs", "mkdir", "/inputs").code).toBe(0);
    const put = harvest("fs", "put", corpus, "/inputs/corpus.txt", "--replication", "2", "--json");
    expect(put.code, put.stderr).toBe(0);
    expect((JSON.parse(put.stdout) as { length: number }).length).toBe(readFileSync(corpus).length);
    const putAgain = harvest("fs", "put", corpus, "/inputs/corpus.txt");
    expect(putAgain.code).toBe(1);
    expect(putAgain.stderr).toContain("NAMENODE_FILE_EXISTS");
    const cat = harvest("fs", "cat", "/inputs/corpus.txt");
    expect(cat.stdout).toBe(readFileSync(corpus, "utf8"));
    const ls = harvest("fs", "ls", "/inputs", "--json");
    expect((JSON.parse(ls.stdout) as { path: string }[]).map((e) => e.path)).toEqual(["/inputs/corpus.txt"]);
    // A data command started without glibc's malloc setting runs again with it (localcluster/malloc-tunables.ts): the second
    // process has it, the bytes and the exit code come through, and an interrupt of the first stops both.
    const big = join(dir, "big.bin");
    writeFileSync(big, randomBytes(4 << 20));
    expect(harvest("fs", "put", big, "/inputs/big.bin").code).toBe(0);
    const restarted = await catRestarted("/inputs/big.bin");
    expect(restarted.env[TUNABLES_VARIABLE]).toBe(MALLOC_TUNABLES);
    // With the data client's Node options too (localcluster/node-options.ts), given before the script.
    for (const option of DATA_CLIENT_NODE_OPTIONS)
      expect(restarted.argv.indexOf(option), restarted.argv.join(" ")).toBeGreaterThan(0);
    expect(restarted.argv.indexOf(DATA_CLIENT_NODE_OPTIONS[0]!)).toBeLessThan(
      restarted.argv.findIndex((w) => w.endsWith("harvest.js")),
    );
    expect(restarted.code).toBe(0);
    expect(restarted.stdout.equals(readFileSync(big))).toBe(true);
    const interrupted = await catRestarted("/inputs/big.bin", (cli) => process.kill(cli, "SIGINT"));
    expect(interrupted.signal).toBe("SIGINT");
    expect(existsSync(`/proc/${interrupted.restarted}`)).toBe(false);
    // A reader that stops early (more than a pipe's worth is left to write) ends the command quietly, with status 0.
    const head = spawnSync(
      "bash",
      [
        "-c",
        `"$0" "$1" fs cat /inputs/big.bin | head -c 10 | wc -c; echo "\${PIPESTATUS[0]}"`,
        process.execPath,
        distEntry("cli/harvest.js"),
      ],
      { env: { ...process.env, HARVEST_CLUSTER_DIR: dir }, encoding: "utf8" },
    );
    expect(head.stdout.trim().split(/\s+/), head.stderr).toEqual(["10", "0"]);
    expect(head.stderr).toBe("");
    expect(harvest("fs", "rm", "/inputs/big.bin").code).toBe(0);
    const local = join(dir, "corpus.copy");
    expect(harvest("fs", "get", "/inputs/corpus.txt", local).code).toBe(0);
    expect(readFileSync(local)).toEqual(readFileSync(corpus));
    expect(harvest("fs", "mv", "/inputs/corpus.txt", "/inputs/text.txt").code).toBe(0);
    const fsck = harvest("fs", "fsck", "/", "--json");
    expect(fsck.code, fsck.stdout).toBe(0);
    expect((JSON.parse(fsck.stdout) as { healthy: boolean; files: number }).healthy).toBe(true);
    const badPath = harvest("fs", "stat", "/inputs/../etc");
    expect(badPath.code).toBe(1);
    expect(badPath.stderr).toContain("DFS_BAD_PATH");
    const missing = harvest("fs", "cat", "/inputs/none.txt");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("NAMENODE_FILE_NOT_FOUND");
    const reimage = harvest("admin", "reimage", "server-1", "--json");
    expect(reimage.code, reimage.stderr).toBe(0);
    expect((JSON.parse(reimage.stdout) as { blocksWiped: number }).blocksWiped).toBeGreaterThanOrEqual(1);
    await waitFor(() => harvest("fs", "fsck", "/inputs").code === 0, {
      what: "fsck to find /inputs healthy after the reimage",
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    expect(harvest("fs", "cat", "/inputs/text.txt").stdout).toBe(readFileSync(corpus, "utf8"));
    expect(harvest("fs", "rm", "-r", "/inputs").code).toBe(0);
    expect(harvest("fs", "stat", "/inputs").code).toBe(1);
    // A person's home, as the admin makes it; a relative path is below the caller's own home.
    const home = harvest("admin", "user", "add", "alice", "--json");
    expect(home.code, home.stderr).toBe(0);
    expect(JSON.parse(home.stdout)).toMatchObject({ path: "/user/alice", owner: "alice", mode: 0o700, created: true });
    const relative = harvest("fs", "mkdir", "scratch", "--json");
    expect(relative.code, relative.stderr).toBe(0);
    expect((JSON.parse(relative.stdout) as { path: string }).path).toBe(`/user/${localUserName()}/scratch`);

    // Primary tenants and their history, as an operator registers them.
    expect(harvest("admin", "tenant", "register", "web", "--environment", "prod", "--function", "frontend").code).toBe(
      0,
    );
    expect(harvest("admin", "tenant", "assign", "web", "server-1", "server-2").code).toBe(0);
    const end = Math.floor(Date.now() / 1000);
    const rows = Array.from({ length: 3 * 288 }, (_, i) => {
      const t = end - (3 * 288 - i) * 300;
      return `${t},${(40 + 30 * Math.sin((2 * Math.PI * t) / 86_400)).toFixed(1)}`;
    });
    const historyFile = join(dir, "web.csv");
    writeFileSync(historyFile, ["time_s,cpu_pct", ...rows].join("\n") + "\n");
    const imported = harvest("admin", "history", "import", historyFile, "--tenant", "web");
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toContain(`imported ${rows.length} sample(s) onto 2 server(s)`);
    const truncatedFile = join(dir, "cut.csv");
    writeFileSync(truncatedFile, ["time_s,cpu_pct", ...rows.slice(0, 10), rows[10]!.slice(0, 5)].join("\n"));
    // A cut-off last line is dropped and said so; the rest of the file is kept (real traces end that way).
    const cut = harvest("admin", "history", "import", truncatedFile, "--server", "server-2");
    expect(cut.code, cut.stderr).toBe(0);
    expect(cut.stdout).toContain("imported 10 sample(s)");
    expect(cut.stdout + cut.stderr).toMatch(/warning: .*cut\.csv: truncated last line 12 dropped/);
    // A file with nothing usable is refused, naming the file and the line.
    const junk = join(dir, "junk.csv");
    writeFileSync(
      junk,
      ["time_s,cpu_pct", ...Array.from({ length: 12 }, (_, i) => `${i * 300},busy`)].join("\n") + "\n",
    );
    const refused = harvest("admin", "history", "import", junk, "--server", "server-2");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("junk.csv:");
    expect(refused.stderr).toContain("TRACE_MALFORMED");
    const past = harvest("admin", "reimage", "server-2", "--at", new Date(Date.now() - 86_400_000).toISOString());
    expect(past.code, past.stderr).toBe(0);
    expect(past.stdout).toContain("counted against tenant web");
    const recluster = harvest("admin", "recluster");
    expect(recluster.code, recluster.stderr).toBe(0);
    expect(recluster.stdout).toMatch(/periodic-0\s+periodic/);
    const tenants = JSON.parse(harvest("admin", "tenant", "list", "--json").stdout) as {
      name: string;
      pattern: string;
      reimages: number;
    }[];
    expect(tenants.map((t) => [t.name, t.pattern, t.reimages])).toEqual([["web", "periodic", 2]]);
    expect(harvest("admin", "classes", "--json").stdout).toContain('"periodic-0"');

    // A planned reimage: the operator drains server-2, jobs keep running on server-1, then it comes back.
    const drain = harvest("admin", "drain", "server-2", "--deadline", "10m", "--json");
    expect(drain.code, drain.stderr).toBe(0);
    const drained = JSON.parse(drain.stdout) as {
      drains: { nodeId: string; deadlineMs: number }[];
      datanodes: { datanodeId: string; state: string }[];
    };
    expect(drained.drains.map((d) => d.nodeId)).toEqual(["server-2"]);
    expect(drained.drains[0]!.deadlineMs).toBeGreaterThan(Date.now() + 9 * 60_000);
    expect(drained.datanodes.map((d) => [d.datanodeId, d.state !== "NORMAL"])).toEqual([["server-2", true]]);
    // A job of the same shape with light tasks: what matters here is where they run.
    const light = join(dir, "light.json");
    const threeStage = JSON.parse(
      readFileSync(join(packageRoot(), "examples", "dags", "three-stage.json"), "utf8"),
    ) as {
      vertices: { command: string[] }[];
    };
    for (const v of threeStage.vertices) v.command[v.command.indexOf("--seconds") + 1] = "0.05";
    writeFileSync(light, JSON.stringify(threeStage));
    const during = harvest("job", "submit", light, "--wait");
    expect(during.code, during.stderr + during.stdout).toBe(0);
    const duringId = /submitted (application_\d+_\d+)/.exec(during.stdout)?.[1];
    const ran = JSON.parse(harvest("job", "status", duringId!, "--json").stdout) as {
      containers: { nodeId: string }[];
    };
    expect(new Set(ran.containers.map((x) => x.nodeId))).toEqual(new Set(["server-1"]));
    const drainStatus = harvest("admin", "drain", "--status");
    expect(drainStatus.code, drainStatus.stderr).toBe(0);
    expect(drainStatus.stdout).toMatch(/server-2\s+DRAINED/);
    expect(drainStatus.stdout).toMatch(/server-2\s+DECOMMISSION(ED|_IN_PROGRESS)/);
    const typo = harvest("admin", "drain", "server-9");
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain("NODE_NOT_FOUND");
    expect(typo.stderr).toContain("server-1, server-2");
    const badDeadline = harvest("admin", "drain", "server-2", "--deadline", "tomorrow");
    expect(badDeadline.code).toBe(1);
    expect(badDeadline.stderr).toContain("INVALID_ARGUMENT");
    expect(harvest("admin", "undrain", "server-2").code).toBe(0);
    expect(harvest("admin", "drain", "--status").stdout).toContain("no server is draining");

    const down = harvest("cluster", "down");
    expect(down.code, down.stderr).toBe(0);
    for (const d of [desc.rm, desc.nn!, ...desc.nodes, ...desc.nodes.map((n) => n.datanode!)])
      expect(isRunning(d)).toBe(false);
    expect(existsSync(join(dir, "cluster.json"))).toBe(false);
    expect(readFileSync(join(dir, "logs", "rm.log"), "utf8")).toContain("resource manager serving");
  }, 180_000);
});
