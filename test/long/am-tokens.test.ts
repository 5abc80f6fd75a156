/**
 * AM tokens expire (YARN's AMRMToken, in Harvest's terms): a job manager's token is valid `amTokenLifetimeMs`, the
 * resource manager answers an Allocate whose token is past half its life with a fresh one, and the job manager uses
 * that one for every later call, to the resource manager and to the node managers. Here the lifetime is ten seconds
 * (longer than a job manager's start and its pauses between calls under load): a job lasting a few lifetimes
 * finishes, with containers started on node managers after its first token expired, and that first token (read from
 * the job manager's own token file) is then refused.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import { TOKEN_METADATA } from "../../common/auth.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { TOKEN_FILE_NAME } from "../../common/task-contract.js";
import { cpuVertex, startTestCluster, waitForJob } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const LIFETIME_MS = 10_000;

describe("a cluster whose AM tokens live ten seconds", () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2, rm: { amTokenLifetimeMs: LIFETIME_MS } });
  });
  afterAll(() => c?.stop());

  it("runs a job outliving its first token to the end, and refuses that token once expired", async () => {
    expect(c.desc.security, "the test cluster is secure").toBeDefined();
    const appId = await c.client.submit(
      JSON.stringify({
        name: "outlives-its-token",
        vertices: [
          cpuVertex("a", 2, { holdSeconds: 4 }),
          cpuVertex("b", 2, { holdSeconds: 6 }),
          cpuVertex("c", 1, { holdSeconds: 4 }),
        ],
        edges: [
          { from: "a", to: "b", type: "scatter-gather" },
          { from: "b", to: "c", type: "scatter-gather" },
        ],
      }),
    );
    // The job manager's token file, as its node manager wrote it at launch: the token it started with.
    const running = await waitForJob(c.client, appId, (r) => r.containers.some((x) => x.isAm && x.state === "RUNNING"));
    const am = running.containers.find((x) => x.isAm)!;
    const node = c.desc.nodes.find((n) => n.nodeId === am.nodeId)!;
    const tokenFile = join(node.dataDir, "containers", appId, am.containerId, TOKEN_FILE_NAME);
    const first = (JSON.parse(readFileSync(tokenFile, "utf8")) as Record<string, string>)["am-token"]!;
    const firstExpiresMs = Number(first.split(":")[2]);
    expect(firstExpiresMs).toBeGreaterThan(Date.now() - LIFETIME_MS);
    expect(firstExpiresMs).toBeLessThanOrEqual(Date.now() + LIFETIME_MS);

    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.progress?.vertices.map((v) => v.succeeded)).toEqual([2, 2, 1]);
    expect(r.amContainers?.failed).toBe(0);
    // The last stage's containers were started by the job manager on node managers after its first token expired:
    // they took a renewed one.
    const late = r.containers.filter((x) => !x.isAm && x.startedMs > firstExpiresMs);
    expect(late.length).toBeGreaterThanOrEqual(1);
    expect(Date.now()).toBeGreaterThan(firstExpiresMs);

    // The first token, expired: the resource manager and the node managers refuse it as they refuse a forged one.
    const proto = loadHarvestProto();
    const security = { ca: c.desc.security!.ca, tokens: { [TOKEN_METADATA["am-token"]]: first } };
    const rm = makeClient(proto.ApplicationMasterService, c.desc.rm.address, security);
    const nm = makeClient(proto.ContainerManager, node.address, security);
    try {
      expect(
        await codeOf(call(rm, rm.allocate, { appId, attempt: Number(first.split(":")[1]), asks: [], releases: [] })),
      ).toBe("UNAUTHENTICATED");
      expect(await codeOf(call(nm, nm.getContainerStatus, { containerId: am.containerId }))).toBe("UNAUTHENTICATED");
    } finally {
      rm.close();
      nm.close();
    }
  }, 120_000);
});
