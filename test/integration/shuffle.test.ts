/**
 * Intermediate data through the node managers' shuffle services: a task's outputs stay on its node and its job's
 * consumers fetch them over the network with the job's shuffle token. Another job's token, or none, fetches nothing;
 * a link a task leaves in its output directory is not followed; and a producer whose outputs are lost before its
 * consumer read them runs again, neither counted as a failure.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { TOKEN_METADATA } from "../../common/auth.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { fromGrpcError } from "../../common/errors.js";
import { parseOutputLocation } from "../../common/task-contract.js";
import type { ShuffleServiceClient } from "../../proto/generated/harvest/v1/ShuffleService.js";
import { waitFor } from "../wait-for.js";
import { taskOutputs, suiteCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";

/**
 * A producer that writes `part-0` and a copy of its own shuffle token (for the test to play a task of this job), and
 * leaves a link to a root-only file among its outputs.
 */
const PRODUCER = `
const fs = require("node:fs");
const path = require("node:path");
const out = process.env.HARVEST_OUTPUT_DIR;
fs.writeFileSync(path.join(out, "part-0"), "payload of " + process.env.HARVEST_APP_ID + "\\n");
const tokens = JSON.parse(fs.readFileSync(process.env.HARVEST_TOKEN_FILE, "utf8"));
fs.writeFileSync(path.join(out, "_token"), tokens["shuffle-token"] || "");
fs.symlinkSync(process.env.SECRET_FILE, path.join(out, "stolen"));
`;

/** A consumer that waits for the test's go-ahead, then fetches its input through harvest/task and copies it out. */
const CONSUMER = `
const fs = require("node:fs");
const path = require("node:path");
const go = process.env.GO_FILE;
(async () => {
  while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, 100));
  const t = await import(process.env.HARVEST_HOME + "/dist/task/index.js");
  t.runTask("consumer", async () => {
    const ctx = t.readTaskContext();
    const files = await t.inputFiles(ctx.inputs[0], ctx.taskIndex);
    fs.writeFileSync(path.join(ctx.outputDir, "got"), files.map((f) => fs.readFileSync(f, "utf8")).join(""));
  });
})();
`;

function dag(name: string, env: Record<string, string>, withConsumer: boolean): string {
  const res = { vcores: 0.5, memoryMb: 128 };
  return JSON.stringify({
    name,
    vertices: [
      { name: "p", parallelism: 1, command: ["node", "-e", PRODUCER], resources: res, env },
      ...(withConsumer ? [{ name: "c", parallelism: 1, command: ["node", "-e", CONSUMER], resources: res, env }] : []),
    ],
    edges: withConsumer ? [{ from: "p", to: "c", type: "scatter-gather" }] : [],
  });
}

/** Where job `appId`'s producer left its outputs, from the job's containers. */
async function producerLocation(c: TestCluster, appId: string): Promise<{ containerId: string; nmAddress: string }> {
  const token = taskOutputs(c.dir, appId, "_token")[0];
  if (!token) throw new Error(`${appId} left no _token`);
  const containerId = token.split("/").at(-3)!;
  const report = await c.client.status(appId);
  const ref = report.containers.find((x) => x.containerId === containerId);
  if (!ref) throw new Error(`${appId} has no container ${containerId}`);
  return { containerId, nmAddress: ref.nmAddress };
}

/** Waits until the job's producer has succeeded and its consumer runs (waiting for the go-ahead). */
async function producerDone(c: TestCluster, appId: string): Promise<void> {
  await waitFor(
    async () => {
      const r = await c.client.status(appId);
      const v = (name: string) => r.progress?.vertices.find((x) => x.name === name);
      return v("p")?.succeeded === 1 && (v("c")?.running ?? 0) === 1 ? r : undefined;
    },
    { what: `${appId}'s producer done and its consumer running`, timeoutMs: 60_000 },
  );
}

function shuffleClient(c: TestCluster, nmAddress: string, token: string | undefined): ShuffleServiceClient {
  const ca = c.desc.security!.ca;
  return makeClient(loadHarvestProto().ShuffleService, nmAddress, {
    ca,
    tokens: token === undefined ? {} : { [TOKEN_METADATA["shuffle-token"]]: token },
  });
}

async function fetchAll(client: ShuffleServiceClient, appId: string, containerId: string, name: string) {
  const chunks: Buffer[] = [];
  for await (const chunk of client.fetchOutput({ appId, containerId, name, offset: 0 }) as AsyncIterable<{
    data: Buffer;
  }>)
    chunks.push(chunk.data);
  return Buffer.concat(chunks).toString("utf8");
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return fromGrpcError(err).code;
  }
  return "not refused";
}

describe("the shuffle", () => {
  // Finished jobs' outputs go 3 s after their node managers hear of the end.
  // Two jobs at once on four cores: job managers unlimited (the default 0.1 of the harvestable cores runs one).
  const cluster = suiteCluster({
    idleServers: 2,
    vcores: 2,
    rm: { maxAmShare: 1 },
    nm: { finishedAppRetentionMs: 3_000 },
  });
  const secret = join(tmpdir(), `harvest-secret-${randomBytes(4).toString("hex")}`);
  writeFileSync(secret, "root's secret\n", { mode: 0o600 });

  it("serves a job's outputs to its own tasks only, never what a link points at, and removes them at the job's end", async () => {
    const c = cluster();
    // In the cluster's directory: the tasks, each job's own account with a private /tmp, look for it there.
    const go = join(c.work, `harvest-go-${randomBytes(4).toString("hex")}`);
    const env = { SECRET_FILE: secret, GO_FILE: go };
    // Each job's consumer waits for the go-ahead, so the jobs run while their producers' outputs are fetched.
    const a = await c.client.submit(dag("a", env, true));
    const b = await c.client.submit(dag("b", env, true));
    for (const id of [a, b]) await producerDone(c, id);
    const at = await producerLocation(c, a);
    const tokenA = readFileSync(taskOutputs(c.dir, a, "_token")[0]!, "utf8");
    const tokenB = readFileSync(taskOutputs(c.dir, b, "_token")[0]!, "utf8");
    expect(tokenA).not.toBe(tokenB);

    const mine = shuffleClient(c, at.nmAddress, tokenA);
    const theirs = shuffleClient(c, at.nmAddress, tokenB);
    const none = shuffleClient(c, at.nmAddress, undefined);
    try {
      expect(await fetchAll(mine, a, at.containerId, "part-0")).toBe(`payload of ${a}\n`);
      const listed = await call(mine, mine.listOutputs, { appId: a, containerId: at.containerId });
      expect(listed.files.map((f) => f.name)).toEqual(["_token", "part-0"]);
      // The link to root's file is neither listed nor served.
      expect(await refusal(fetchAll(mine, a, at.containerId, "stolen"))).toBe("SHUFFLE_OUTPUT_NOT_FOUND");
      // Another job's token, asking for this job's outputs, or passing them off as its own job's.
      expect(await refusal(fetchAll(theirs, a, at.containerId, "part-0"))).toBe("PERMISSION_DENIED");
      expect(await refusal(call(theirs, theirs.listOutputs, { appId: a, containerId: at.containerId }))).toBe(
        "PERMISSION_DENIED",
      );
      expect(await refusal(fetchAll(theirs, b, at.containerId, "part-0"))).toBe("SHUFFLE_OUTPUT_NOT_FOUND");
      // No token at all.
      expect(await refusal(call(none, none.listOutputs, { appId: a, containerId: at.containerId }))).toBe(
        "UNAUTHENTICATED",
      );
    } finally {
      for (const x of [mine, theirs, none]) x.close();
      writeFileSync(go, "");
    }
    for (const id of [a, b]) {
      const r = await c.client.waitForCompletion(id, undefined, 200);
      expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    }
    // Once the job has ended, its node managers remove its tasks' outputs; the containers' logs stay.
    const outputs = dirname(taskOutputs(c.dir, a, "part-0")[0]!);
    await waitFor(() => !existsSync(outputs), { what: "the finished job's outputs removed", timeoutMs: 15_000 });
    expect(existsSync(join(dirname(outputs), "stderr"))).toBe(true);
    rmSync(go, { force: true });
  });

  it("runs a producer again when its outputs are lost before the consumer fetched them, counting no failure", async () => {
    const c = cluster();
    // In the cluster's directory: the tasks, each job's own account with a private /tmp, look for it there.
    const go = join(c.work, `harvest-go-${randomBytes(4).toString("hex")}`);
    const appId = await c.client.submit(dag("lost", { SECRET_FILE: secret, GO_FILE: go }, true));
    // The producer has succeeded and the consumer waits: the producer's node loses its outputs (a reimaged disk).
    await producerDone(c, appId);
    const first = await producerLocation(c, appId);
    const outputDir = dirname(taskOutputs(c.dir, appId, "part-0")[0]!);
    rmSync(outputDir, { recursive: true, force: true });
    writeFileSync(go, "");
    try {
      const r = await c.client.waitForCompletion(appId, undefined, 200);
      expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
      expect(r.progress).toMatchObject({ taskFailures: 0 });
      expect(r.progress!.tasksLost).toBeGreaterThanOrEqual(1);
      // The consumer got the re-run producer's output, from another container.
      const got = taskOutputs(c.dir, appId, "got");
      expect(got).toHaveLength(1);
      expect(readFileSync(got[0]!, "utf8")).toBe(`payload of ${appId}\n`);
      const second = await producerLocation(c, appId);
      expect(second.containerId).not.toBe(first.containerId);
      expect(parseOutputLocation(`${second.containerId}@${second.nmAddress}`)).toBeDefined();
    } finally {
      if (existsSync(go)) rmSync(go);
    }
  });
});
