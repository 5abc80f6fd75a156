/**
 * Harvest deployed the way an operator deploys it on many machines, here on one: each daemon started on its own with
 * `harvest daemon start <kind> --config <file>` from the shipped example configs (deploy/conf), binding every
 * interface and advertising another address, found by users through a client configuration file. And a local
 * `cluster up` cluster whose daemons are killed and restarted in place with `harvest cluster restart`.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromGrpcError } from "../../common/errors.js";
import { loadHarvestProto, makeClient } from "../../common/grpc.js";
import { packageRoot } from "../../common/paths.js";
import { isRunning, localDfsClient, readCluster } from "../../localcluster/cluster.js";
import type { ClusterDescriptor } from "../../localcluster/cluster.js";
import { runHarvest } from "../processes.js";
import { stablePort } from "../../localcluster/ports.js";
import type { CliRun } from "../processes.js";
import { requireBuild, traceSpec } from "../integration/harness.js";

type Run = CliRun;

function harvest(env: NodeJS.ProcessEnv, ...args: string[]): Run {
  return runHarvest(args, { env: { HARVEST_CLUSTER_DIR: "/nonexistent", HARVEST_CONF: "", ...env } });
}

/** A port free right now, below the ephemeral range, for configs that name fixed ports as deployments do. */
const freePort = (): Promise<number> => stablePort();

function example(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(packageRoot(), "deploy", "conf", path), "utf8")) as Record<string, unknown>;
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** How the waits below poll the cluster. */
const POLL = { timeoutMs: 30_000, intervalMs: 250 };

describe("one daemon per host, started from the example configs", () => {
  const work = mkdtempSync(join(tmpdir(), "harvest-deploy-"));
  // The node manager runs as root and its containers as nobody, who must get to their directories below.
  chmodSync(work, 0o755);
  const env = { HARVEST_CONF: join(work, "home", "client.json") };
  const configs: Record<string, string> = {};
  const daemon = (verb: string, kind: string): Run => harvest(env, "daemon", verb, kind, "--config", configs[kind]!);
  let rmAddress = "";

  beforeAll(async () => {
    requireBuild();
    const [rmPort, nnPort, nmPort, dnPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const secret = randomBytes(16).toString("hex");
    const trace = traceSpec(work, "quiet", 300, new Array<number>(300).fill(5));
    // The operator's CA and certificates, as the README's deployment steps issue them: one daemon certificate per
    // machine (here both "machines" are this one), and the user's.
    const ca = join(work, "ca");
    const tlsDir = join(work, "tls");
    const issue = (out: string, name: string, role: string, ...hosts: string[]): string[] => [
      ...["security", "issue", "--dir", ca, "--out", out, "--name", name, "--role", role],
      ...(hosts.length > 0 ? ["--host", ...hosts] : []),
    ];
    for (const args of [
      ["security", "init", "--dir", ca],
      issue(tlsDir, "master", "daemon", "127.0.0.1"),
      issue(tlsDir, "server-1", "daemon", "127.0.0.1"),
      issue(join(work, "home"), "ops", "admin"),
    ]) {
      const r = harvest({}, ...args);
      if (r.code !== 0) throw new Error(`harvest ${args.join(" ")}: ${r.stderr}`);
    }
    cpSync(join(ca, "ca.pem"), join(work, "home", "ca.pem"));
    // Containers (nobody) read the CA certificate the node manager names; the CA's key stays 0600.
    chmodSync(ca, 0o711);
    const tlsOf = (host: string): Record<string, string> => ({
      ca: join(ca, "ca.pem"),
      cert: join(tlsDir, `${host}.pem`),
      key: join(tlsDir, `${host}-key.pem`),
    });
    // The shipped examples, with this test's directories and ports: every interface bound, loopback advertised (the
    // host name a real server advertises is not resolvable everywhere), web servers on free ports.
    const here = { host: "0.0.0.0", advertiseHost: "127.0.0.1", httpPort: 0 };
    rmAddress = `127.0.0.1:${rmPort}`;
    const nnAddress = `127.0.0.1:${nnPort}`;
    const write = (kind: string, config: Record<string, unknown>): void => {
      configs[kind] = join(work, "etc", `${kind}.json`);
      mkdirSync(join(work, "etc"), { recursive: true });
      writeFileSync(configs[kind], JSON.stringify(config, null, 2), { mode: 0o600 });
    };
    const rm = example("master/resourcemanager.json");
    write("resourcemanager", {
      ...rm,
      ...here,
      port: rmPort,
      dataDir: join(work, "rm"),
      stagingDir: join(work, "staging"),
      secret,
      nnAddress,
      tls: tlsOf("master"),
    });
    write("namenode", {
      ...example("master/namenode.json"),
      ...here,
      port: nnPort,
      dataDir: join(work, "nn"),
      rmAddress,
      tls: tlsOf("master"),
    });
    write("nodemanager", {
      ...example("server/nodemanager.json"),
      ...here,
      port: nmPort,
      rmAddress,
      nnAddress,
      dataDir: join(work, "nm"),
      // Room for the test job's widest stage at once, so Algorithm 1 (the example's policy) has a class that fits it.
      capacity: { vcoresMilli: 16000, memoryMb: 16384 },
      primary: trace,
      secret,
      tls: tlsOf("server-1"),
    });
    write("datanode", {
      ...example("server/datanode.json"),
      ...here,
      port: dnPort,
      namenodeAddress: nnAddress,
      dataDir: join(work, "dn"),
      primary: trace,
      tls: tlsOf("server-1"),
    });
    // The example's relative ca/cert/key resolve against the client file's directory, as in ~/.harvest.
    writeFileSync(
      env.HARVEST_CONF,
      JSON.stringify({ ...example("client.json"), rmAddress, nnAddress, cert: "ops.pem", key: "ops-key.pem" }),
    );
  });

  afterAll(() => {
    for (const kind of ["nodemanager", "datanode", "namenode", "resourcemanager"])
      if (configs[kind]) daemon("stop", kind);
    rmSync(work, { recursive: true, force: true });
  });

  it("refuses to start a daemon whose config has neither tls nor insecure: true", () => {
    const bare = join(work, "etc", "bare.json");
    const { tls: _tls, ...withoutTls } = JSON.parse(readFileSync(configs["namenode"]!, "utf8")) as Record<
      string,
      unknown
    >;
    writeFileSync(bare, JSON.stringify({ ...withoutTls, dataDir: join(work, "bare"), port: 0 }), { mode: 0o600 });
    const r = harvest(env, "daemon", "start", "namenode", "--config", bare);
    expect(r.code).toBe(1);
    expect(readFileSync(join(work, "bare", "logs", "harvest-namenode.log"), "utf8")).toMatch(/tls is required/);
  });

  it("starts each daemon in the background with a pid file and a log, and refuses a second copy", () => {
    for (const kind of ["resourcemanager", "namenode", "nodemanager", "datanode"]) {
      const r = daemon("start", kind);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`${kind} running as process`);
    }
    const rmPid = Number(readFileSync(join(work, "rm", "harvest-resourcemanager.pid"), "utf8").split(" ")[0]);
    expect(rmPid).toBeGreaterThan(0);
    expect(readFileSync(join(work, "rm", "logs", "harvest-resourcemanager.log"), "utf8")).toContain(
      "resource manager serving",
    );
    const again = daemon("start", "resourcemanager");
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("DAEMON_ALREADY_RUNNING");
    const st = harvest(env, "daemon", "status", "rm", "--config", configs["resourcemanager"]!, "--json");
    expect(st.code).toBe(0);
    expect(JSON.parse(st.stdout)).toMatchObject({ running: true, pid: rmPid, address: rmAddress });
  });

  it("advertises its configured address, not the wildcard it binds", async () => {
    const nodes = await waitFor(
      () => {
        const r = harvest(env, "cluster", "status", "--json");
        const parsed =
          r.code === 0 ? (JSON.parse(r.stdout) as { nodes: { nmAddress: string; state: string }[] }) : null;
        return parsed?.nodes.some((n) => n.state === "RUNNING") ? parsed.nodes : undefined;
      },
      { what: "the node manager to register", ...POLL },
    );
    expect(nodes.map((n) => n.nmAddress.split(":")[0])).toEqual(["127.0.0.1"]);
    const fsck = harvest(env, "fs", "ls", "/", "--json");
    expect(fsck.code, fsck.stderr).toBe(0);
  });

  it("runs a job and stores a file for a user who knows the cluster only by its client configuration", async () => {
    const dag = join(packageRoot(), "examples", "dags", "three-stage.json");
    const submit = harvest(env, "job", "submit", dag, "--wait");
    expect(submit.code, submit.stderr + submit.stdout).toBe(0);
    expect(submit.stdout).toMatch(/succeeded in/);
    const local = join(work, "payload.bin");
    writeFileSync(local, randomBytes(3 * 1024 * 1024 + 17));
    await waitFor(
      () =>
        harvest(env, "fs", "put", local, "/deploy/payload.bin", "--replication", "1").code === 0 ? true : undefined,
      { what: "the datanode to register", ...POLL },
    );
    // The same cluster through --config instead of $HARVEST_CONF.
    const back = join(work, "back.bin");
    const get = harvest({ HARVEST_CONF: "" }, "fs", "get", "/deploy/payload.bin", back, "--config", env.HARVEST_CONF);
    expect(get.code, get.stderr).toBe(0);
    expect(sha256(back)).toBe(sha256(local));
  }, 180_000);

  it("brings a killed resource manager back on the same address, and its node manager rejoins", async () => {
    const pid = Number(readFileSync(join(work, "rm", "harvest-resourcemanager.pid"), "utf8").split(" ")[0]);
    process.kill(pid, "SIGKILL");
    await waitFor(() => (daemon("status", "resourcemanager").code === 3 ? true : undefined), {
      what: "the resource manager to die",
      ...POLL,
    });
    expect(daemon("status", "resourcemanager").stdout).toContain("stopped");
    const start = daemon("start", "resourcemanager");
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).toContain(rmAddress);
    await waitFor(
      () => {
        const r = harvest(env, "cluster", "status", "--json");
        if (r.code !== 0) return undefined;
        const nodes = (JSON.parse(r.stdout) as { nodes: { state: string }[] }).nodes;
        return nodes.some((n) => n.state === "RUNNING") ? true : undefined;
      },
      { what: "the node manager to re-register", ...POLL },
    );
  });

  it("stops each daemon and says so; a stopped daemon's status exits 3", () => {
    for (const kind of ["nodemanager", "datanode", "namenode", "resourcemanager"]) {
      const r = daemon("stop", kind);
      expect(r.code, r.stderr).toBe(0);
      expect(daemon("status", kind).code).toBe(3);
    }
    const again = daemon("stop", "namenode");
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("DAEMON_NOT_RUNNING");
    expect(existsSync(join(work, "nn", "harvest-namenode.pid"))).toBe(false);
  });

  it("refuses bad configurations with a message naming the field", () => {
    const bad = join(work, "etc", "bad-rm.json");
    writeFileSync(bad, JSON.stringify({ dataDir: join(work, "bad"), host: "0.0.0.0", advertiseHost: "not a host" }));
    const fg = harvest(env, "daemon", "resourcemanager", "--config", bad);
    expect(fg.code).toBe(2);
    expect(fg.stderr).toContain("advertiseHost");
    writeFileSync(bad, JSON.stringify({ ...example("master/resourcemanager.json"), dataDir: join(work, "bad") }));
    const placeholder = harvest(env, "daemon", "start", "rm", "--config", bad);
    expect(placeholder.code).toBe(1);
    expect(placeholder.stderr).toContain("secret");
    expect(harvest(env, "daemon", "start", "bogus", "--config", bad).stderr).toContain("unknown daemon");
    const client = join(work, "bad-client.json");
    writeFileSync(client, JSON.stringify({ rmAddress: "no-port" }));
    const r = harvest(env, "job", "list", "--config", client);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("rmAddress");
    expect(r.stderr).toContain("CONFIG_INVALID");
  });
});

describe("a local cluster whose daemons die and are restarted in place", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-restart-"));
  const env = { HARVEST_CLUSTER_DIR: dir };
  let desc: ClusterDescriptor;
  let upOutput = "";

  beforeAll(() => {
    requireBuild();
    const up = harvest(env, "cluster", "up", "--servers", "2", "--primary", "trace", "--speed", "1", "--json");
    expect(up.code, up.stderr).toBe(0);
    upOutput = up.stdout;
    desc = JSON.parse(up.stdout) as ClusterDescriptor;
  });

  it("keeps the cluster's secret out of cluster.json, client.json, --json output and every log", () => {
    const secret = (JSON.parse(readFileSync(desc.rm.config!, "utf8")) as { secret: string }).secret;
    expect(secret).toMatch(/^[0-9a-f]{32}$/);
    expect(upOutput).not.toContain(secret);
    for (const f of ["cluster.json", "client.json"])
      expect(readFileSync(join(dir, f), "utf8"), f).not.toContain(secret);
    for (const log of readdirSync(join(dir, "logs")))
      expect(readFileSync(join(dir, "logs", log), "utf8"), log).not.toContain(secret);
    for (const config of readdirSync(join(dir, "run")).filter((f) => f.endsWith(".json")))
      expect(statSync(join(dir, "run", config)).mode & 0o077, config).toBe(0);
  });

  afterAll(() => {
    if (existsSync(join(dir, "cluster.json"))) harvest(env, "cluster", "down");
    rmSync(dir, { recursive: true, force: true });
  });

  it("shows every daemon as running, then the killed ones as dead", () => {
    const ok = harvest(env, "cluster", "status", "--json");
    expect(ok.code, ok.stderr).toBe(0);
    const names = (r: Run): Record<string, string> =>
      Object.fromEntries(
        (JSON.parse(r.stdout) as { daemons: { name: string; state: string }[] }).daemons.map((d) => [d.name, d.state]),
      );
    expect(names(ok)).toEqual({
      rm: "running",
      nn: "running",
      "server-1": "running",
      "server-1-dn": "running",
      "server-2": "running",
      "server-2-dn": "running",
    });
    for (const pid of [desc.rm.pid, desc.nn!.pid, desc.nodes[0]!.pid]) process.kill(pid, "SIGKILL");
    const down = harvest(env, "cluster", "status", "--json");
    expect(down.code).toBe(1);
    expect(names(down)).toMatchObject({ rm: "dead", nn: "dead", "server-1": "dead", "server-2": "running" });
  });

  it("restarts the resource manager, namenode and a node manager on their own addresses, and the cluster works", async () => {
    expect(harvest(env, "cluster", "restart", "server-2").stderr).toContain("DAEMON_ALREADY_RUNNING");
    for (const name of ["rm", "nn", "server-1"]) {
      const r = harvest(env, "cluster", "restart", name);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("restarted");
    }
    const now = readCluster(dir);
    expect(now.rm.address).toBe(desc.rm.address);
    expect(now.nn!.address).toBe(desc.nn!.address);
    expect(now.nodes[0]!.address).toBe(desc.nodes[0]!.address);
    expect(now.rm.pid).not.toBe(desc.rm.pid);
    // Both node managers find the resource manager again (the survivor was retrying the same address).
    await waitFor(
      () => {
        const r = harvest(env, "cluster", "status", "--json");
        if (r.code !== 0) return undefined;
        const nodes = (JSON.parse(r.stdout) as { nodes: { state: string }[] }).nodes;
        return nodes.filter((n) => n.state === "RUNNING").length === 2 ? true : undefined;
      },
      { what: "both node managers to re-register", ...POLL },
    );
    // The restarted namenode knows no datanode until each reports again (the job's DAG is staged in the DFS).
    const dfs = localDfsClient(now);
    try {
      await waitFor(
        async () => ((await dfs.datanodes()).filter((d) => d.state === "LIVE").length === 2 ? true : undefined),
        { what: "both datanodes to report to the restarted namenode", retryOnError: true, ...POLL },
      );
    } finally {
      dfs.close();
    }
    const submit = harvest(env, "job", "submit", join(packageRoot(), "examples", "dags", "three-stage.json"), "--wait");
    expect(submit.code, submit.stderr + submit.stdout).toBe(0);
  });

  it("keeps requiring block tokens on a datanode restarted while its namenode is away", async () => {
    const local = join(dir, "tokens.bin");
    writeFileSync(local, randomBytes(256 * 1024));
    const put = harvest(env, "fs", "put", local, "/tokens.bin", "--replication", "2");
    expect(put.code, put.stderr).toBe(0);
    const now = readCluster(dir);
    const dn = now.nodes[1]!.datanode!;
    const dfs = localDfsClient(now);
    const [located] = (await dfs.blockLocations("/tokens.bin")).blocks;
    dfs.close();
    process.kill(now.nn!.pid, "SIGKILL");
    process.kill(dn.pid, "SIGKILL");
    await waitFor(() => (!isRunning(now.nn!) && !isRunning(dn) ? true : undefined), {
      what: "both to die",
      ...POLL,
    });
    const restarted = harvest(env, "cluster", "restart", "server-2-dn");
    expect(restarted.code, restarted.stderr).toBe(0);
    // No namenode to hand it keys: it serves nothing, not even to a token that was valid before.
    const dt = makeClient(loadHarvestProto().DataTransfer, dn.address, now.security);
    const read = (blockToken: string): Promise<string> =>
      new Promise((resolve) => {
        const st = dt.readBlock({ block: located!.block, offset: 0, length: 0, blockToken });
        st.on("data", () => undefined);
        st.on("error", (e) => resolve(fromGrpcError(e).code));
        st.on("end", () => resolve("OK"));
      });
    try {
      expect(await read("")).toBe("DATANODE_BAD_TOKEN");
      expect(await read(located!.blockToken)).toBe("DATANODE_BAD_TOKEN");
    } finally {
      dt.close();
    }
    expect(harvest(env, "cluster", "restart", "nn").code).toBe(0);
    const back = join(dir, "tokens-back.bin");
    await waitFor(() => (harvest(env, "fs", "get", "/tokens.bin", back, "--overwrite").code === 0 ? true : undefined), {
      what: "the file to read back",
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(sha256(back)).toBe(sha256(local));
  }, 120_000);

  it("stops the restarted daemons with cluster down, and nothing else", () => {
    const recorded = readCluster(dir);
    const all = [recorded.rm, recorded.nn!, ...recorded.nodes, ...recorded.nodes.map((n) => n.datanode!)];
    expect(all.every(isRunning)).toBe(true);
    const r = harvest(env, "cluster", "down");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("6 daemon processes");
    for (const d of all) expect(isRunning(d), d.name).toBe(false);
    // Config files hold the cluster's secret: readable by their owner only.
    expect(statSync(recorded.rm.config!).mode & 0o077).toBe(0);
  });
});
