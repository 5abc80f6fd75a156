/**
 * Prometheus metrics of the node managers and datanodes of a real TLS cluster (separate processes on loopback): after
 * a file is written and a job run, each daemon's `/metrics` shows the bytes, heartbeats and containers, to a client
 * certificate under the cluster CA, and refuses a caller without one. A node manager in this process, whose primary
 * tenant steps up under a running task, counts the preemption and its yield latency.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DfsClient } from "../../client/dfs-client.js";
import { JobClient } from "../../client/job-client.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import type { DaemonRecord } from "../../localcluster/cluster.js";
import { parsePromText, sumSamples } from "../prom-text.js";
import { cpuVertex, requireBuild, startTestCluster } from "./harness.js";
import { httpsGet as get, httpUrlOf, scrape } from "./metrics-scrape.js";
import type { TestCluster } from "./harness.js";

const FILE_BYTES = 3 * 1024 * 1024 + 123;
const REPLICATION = 2;

describe("node manager and datanode metrics", () => {
  let c: TestCluster;
  let dfs: DfsClient;
  let work: string;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2 });
    dfs = c.dfs();
    work = c.work;
  });
  afterAll(() => c?.stop());

  it("counts the bytes written on the datanodes and the heartbeats and containers of the node managers", async () => {
    const local = join(work, "data.bin");
    writeFileSync(local, randomBytes(FILE_BYTES));
    // The file and the job at once: the test waits for the slower of the two.
    const [st, report] = await Promise.all([
      dfs.put(local, "/metrics/data.bin", { replication: REPLICATION, blockSizeBytes: 1024 * 1024 }),
      c.client
        .submit(JSON.stringify({ name: "metrics-job", vertices: [cpuVertex("work", 2)] }))
        .then((appId) => c.client.waitForCompletion(appId, undefined, 200)),
    ]);
    expect(st.length).toBe(FILE_BYTES);
    expect(report.state).toBe("FINISHED");
    expect(await dfs.get("/metrics/data.bin", join(work, "data.back"))).toBe(FILE_BYTES);

    const datanodes = c.desc.nodes.map((n) => n.datanode).filter((d): d is DaemonRecord => d !== undefined);
    expect(datanodes).toHaveLength(2);
    let written = 0;
    let read = 0;
    let blocks = 0;
    for (const dn of datanodes) {
      const m = await scrape(c, dn);
      written += sumSamples(m, "harvest_dn_bytes_written_total");
      read += sumSamples(m, "harvest_dn_bytes_read_total");
      blocks += sumSamples(m, "harvest_dn_blocks_written_total");
      expect(sumSamples(m, "harvest_dn_capacity_bytes")).toBeGreaterThan(0);
      expect(sumSamples(m, "harvest_dn_replicas")).toBeGreaterThanOrEqual(4);
      expect(m.get("harvest_dn_bytes_written_total")?.[0]?.labels).toMatchObject({ daemon: "datanode" });
      // The blocks came over the block transfer port, whose connections are counted in the same registry.
      expect(sumSamples(m, "harvest_dn_transfer_connections_total", { outcome: "write" })).toBeGreaterThan(0);
    }
    expect(written).toBeGreaterThanOrEqual(FILE_BYTES * REPLICATION);
    expect(blocks).toBeGreaterThanOrEqual(4 * REPLICATION);
    expect(read).toBeGreaterThanOrEqual(FILE_BYTES);

    let launched = 0;
    let completed = 0;
    for (const nm of c.desc.nodes) {
      const m = await scrape(c, nm);
      expect(sumSamples(m, "harvest_nm_heartbeats_total")).toBeGreaterThan(0);
      expect(sumSamples(m, "harvest_nm_capacity_millicores")).toBe(4000);
      expect(
        m
          .get("harvest_nm_containers_running")
          ?.map((s) => s.labels["kind"])
          .sort(),
      ).toEqual(["job_manager", "task"]);
      expect(m.get("harvest_nm_heartbeats_total")?.[0]?.labels).toMatchObject({ node: nm.nodeId });
      launched += sumSamples(m, "harvest_nm_containers_launched_total");
      completed += sumSamples(m, "harvest_nm_containers_completed_total", { cause: "succeeded" });
    }
    // The job managers' StartContainer calls, counted by the gRPC server in the node managers' registries.
    let startCalls = 0;
    for (const nm of c.desc.nodes)
      startCalls += sumSamples(await scrape(c, nm), "harvest_grpc_server_handled_total", {
        method: "StartContainer",
        code: "OK",
      });
    expect(startCalls).toBeGreaterThanOrEqual(2);
    // A job manager and two tasks at least.
    expect(launched).toBeGreaterThanOrEqual(3);
    expect(completed).toBeGreaterThanOrEqual(2);
  });

  it("refuses /metrics to a caller without a client certificate", async () => {
    const daemons = [c.desc.nodes[0]!, c.desc.nodes[0]!.datanode!];
    for (const d of daemons) {
      const url = httpUrlOf(c, d);
      expect(url.startsWith("https://")).toBe(true);
      const res = await get(c, `${url}/metrics`, true);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: "UNAUTHENTICATED" } });
    }
  });
});

/** GETs `url` over plain HTTP (a node manager started without TLS). */
function getPlain(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        const parts: Buffer[] = [];
        res.on("data", (b: Buffer) => parts.push(b));
        res.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
        res.on("error", reject);
      })
      .on("error", reject);
  });
}

describe("a node manager's metrics when its primary tenant takes the cores back", () => {
  const quiet = new Logger("test", "error");
  let dir: string;
  let rm: ResourceManager;
  let nm: NodeManager;
  let client: JobClient;
  const monitor = new StepPrimaryMonitor({ capacityMilli: 4000 });
  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-yield-metrics-"));
    // The containers run as an unprivileged account when the tests run as root: it must get in.
    chmodSync(dir, 0o755);
    rm = new ResourceManager({ dataDir: join(dir, "rm") }, { logger: quiet });
    await rm.start();
    nm = new NodeManager(
      { nodeId: "n1", rmAddress: rm.address, dataDir: join(dir, "n1"), cgroups: "none", yieldTickMs: 100 },
      { logger: quiet, monitor },
    );
    await nm.start();
    client = new JobClient(rm.address);
    await waitFor(async () => ((await client.nodes()).length > 0 ? true : undefined), { what: "the node" });
  });
  afterAll(async () => {
    client?.close();
    await nm?.stop();
    await rm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("counts the preemption by cause, its yield latency and the primary's cores", async () => {
    const appId = await client.submit(
      JSON.stringify({ name: "yield-metrics", vertices: [cpuVertex("hold", 1, { holdSeconds: 60 })] }),
    );
    await waitFor(
      async () => {
        const r = await client.status(appId);
        const task = r.containers.some((x) => !x.isAm && x.state === "RUNNING");
        const am = r.containers.some((x) => x.isAm && x.state === "RUNNING");
        return task && am ? true : undefined;
      },
      { what: "a running task beside its job manager" },
    );
    const before = await waitFor(
      async () => {
        const m = parsePromText(await getPlain(`${nm.httpUrl ?? "?"}/metrics`));
        return sumSamples(m, "harvest_nm_containers_running") === 2 ? m : undefined;
      },
      { what: "both containers in the metrics" },
    );
    // The task holds 1 core; the job manager the rest of what the node has handed out.
    const amMilli = sumSamples(before, "harvest_nm_harvested_millicores") - 1000;
    expect(amMilli).toBeGreaterThan(0);
    // The primary takes all but the reserve and the job manager's cores: the task must go, the job manager stays.
    const primaryMilli = 4000 - 400 - amMilli;
    monitor.set(primaryMilli);
    const m = await waitFor(
      async () => {
        const m = parsePromText(await getPlain(`${nm.httpUrl ?? "?"}/metrics`));
        return sumSamples(m, "harvest_nm_yield_seconds_count") >= 1 ? m : undefined;
      },
      { what: "the preemption to be counted" },
    );
    expect(nm.httpUrl?.startsWith("http://")).toBe(true);
    expect(sumSamples(m, "harvest_nm_container_kills_total", { cause: "preempted_by_primary" })).toBe(1);
    expect(sumSamples(m, "harvest_nm_containers_completed_total", { cause: "preempted_by_primary" })).toBe(1);
    expect(sumSamples(m, "harvest_nm_yield_seconds_sum")).toBeGreaterThan(0);
    expect(sumSamples(m, "harvest_nm_yield_seconds_bucket", { le: "+Inf" })).toBe(1);
    expect(sumSamples(m, "harvest_nm_primary_cpu_millicores")).toBe(primaryMilli);
    expect(sumSamples(m, "harvest_nm_containers_running", { kind: "job_manager" })).toBe(1);
    expect(sumSamples(m, "harvest_nm_power_capped")).toBe(0);
    await client.kill(appId);
  });
});
