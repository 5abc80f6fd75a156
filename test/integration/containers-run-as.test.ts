/**
 * What a submitter learns of the account the job's containers run as: the running node managers say it when they
 * register (RegisterNode.containers_run_as), the resource manager keeps it per node and answers SubmitApplication with
 * the distinct descriptions; an older node manager that says nothing shows as "unknown".
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { Logger } from "../../common/log.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { codeOf } from "../error-code.js";
import { PlayedNode } from "../played-node.js";
import { cpuVertex } from "./harness.js";

const OWN = "an account of the application's own on each server (uids 70000-79999)";
const dag = JSON.stringify({ name: "run-as", vertices: [cpuVertex("v", 1)], edges: [] });

describe("the accounts a job's containers run as", () => {
  let dir: string;
  let rm: ResourceManager;
  let client: JobClient;
  const nodes: PlayedNode[] = [];
  const node = (id: string): PlayedNode => {
    const n = new PlayedNode(rm.address, id);
    nodes.push(n);
    return n;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-run-as-"));
    // The played nodes heartbeat never: keep them from being lost while the test runs.
    rm = new ResourceManager({ dataDir: join(dir, "rm"), nodeExpiryMs: 120_000 }, { logger: new Logger("t", "error") });
    await rm.start();
    client = new JobClient(rm.address);
  });
  afterAll(async () => {
    for (const n of nodes) n.close();
    client?.close();
    await rm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers a submission with each running node's description once, and 'unknown' for a node that gave none", async () => {
    await node("n1").register({ containersRunAs: OWN });
    await node("n2").register({ containersRunAs: OWN });
    const first = await client.submitJob(dag, "alice");
    expect(first.appId).toMatch(/^application_/);
    expect(first.containersRunAs).toEqual([OWN]);
    await node("old").register();
    const second = await client.submitJob(dag, "alice");
    expect(second.containersRunAs).toEqual([OWN, "unknown"].sort());
  });

  it("refuses a registration whose description is not one printable line", async () => {
    expect(await codeOf(node("bad").register({ containersRunAs: "nobody\n\u001b[2Jroot" }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(node("long").register({ containersRunAs: "x".repeat(600) }))).toBe("INVALID_ARGUMENT");
    const after = await client.submitJob(dag, "alice");
    expect(after.containersRunAs).toEqual([OWN, "unknown"].sort());
  });
});
