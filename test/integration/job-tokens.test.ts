/**
 * A job's file-system token is the job's own: the client reserves the job's application id, the namenode writes that
 * id into the delegation token, and the resource manager cancels the token when the job ends (finished or killed,
 * also before its job manager ran), so that nothing acts as the submitter with it afterwards, across a namenode
 * restart too; one it could not cancel (the namenode down) it cancels after its own restart. Another job's token is
 * untouched. Whoever holds a token may cancel it. Submissions may use only ids reserved by the same user and not yet
 * used.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { isHarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { formatAppId, parseAppId } from "../../common/ids.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { readCluster, restartDaemon } from "../../localcluster/cluster.js";
import type { ApplicationClientServiceClient } from "../../proto/generated/harvest/v1/ApplicationClientService.js";
import type { ClientNamenodeClient } from "../../proto/generated/harvest/v1/ClientNamenode.js";
import { codeOf } from "../error-code.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { cpuVertex, taskOutputs, startTestCluster, waitForJob } from "./harness.js";
import type { TestCluster } from "./harness.js";

/** A task that copies its token file into its output directory, for the test to read. */
const PROBE = `
const fs = require("node:fs");
const path = require("node:path");
fs.copyFileSync(process.env.HARVEST_TOKEN_FILE, path.join(process.env.HARVEST_OUTPUT_DIR, "tokens.json"));
`;
const probe = {
  name: "probe",
  parallelism: 1,
  command: ["node", "-e", PROBE],
  resources: { vcores: 0.5, memoryMb: 128 },
};
const TASKS = "${HARVEST_HOME}/dist/examples/tasks";

/** The job named in a delegation token (its payload is plain base64url JSON; the namenode checks its signature). */
function jobOf(token: string): unknown {
  const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { job?: unknown };
  return claims.job;
}

/**
 * A secure test cluster with the users alice and bob (certificates of its CA) and its admin, and clients of its
 * resource manager and namenode as each, all started and stopped with the enclosing describe.
 */
function clusterWithUsers(opts: Parameters<typeof startTestCluster>[0]) {
  let c: TestCluster | undefined;
  const who: Record<string, ClientSecurity> = {};
  const closers: { close(): void }[] = [];
  const cluster = (): TestCluster => {
    if (!c) throw new Error("the cluster did not start");
    return c;
  };
  beforeAll(async () => {
    c = await startTestCluster(opts);
    if (!c.desc.security) throw new Error("the test cluster should be secure");
    who["admin"] = c.desc.security;
    const ca = c.desc.security.ca;
    for (const name of ["alice", "bob"])
      who[name] = { ca, ...(await issueCertificate(dirname(ca), join(c.work, "certs"), { name, role: "user" })) };
  }, 120_000);
  afterAll(async () => {
    for (const x of closers) x.close();
    await c?.stop();
  });
  const rmAs = (name: string): ApplicationClientServiceClient => {
    const rm = makeClient(loadHarvestProto().ApplicationClientService, cluster().desc.rm.address, who[name]);
    closers.push(rm);
    return rm;
  };
  const nnAs = (name: string): ClientNamenodeClient => {
    const nn = makeClient(loadHarvestProto().ClientNamenode, cluster().desc.nn!.address, who[name]);
    closers.push(nn);
    return nn;
  };
  return { cluster, who, rmAs, nnAs };
}

describe("a job's delegation token", () => {
  // Two jobs at once on one server: job managers unlimited (the default 0.1 of the harvestable cores runs one).
  const { cluster, rmAs, nnAs } = clusterWithUsers({
    idleServers: 1,
    // Cancelled at once: these tests watch the cancellation, not the logs copied meanwhile.
    rm: { maxAmShare: 1, jobTokenCancelDelayMs: 0 },
  });
  let c: TestCluster;
  beforeAll(() => {
    c = cluster();
  });
  /** What a call to the namenode with only `token` (and the CA) gets: "OK" or the error code. */
  const withToken = async (token: string): Promise<string> => {
    const dfs = new DfsClient(c.desc.nn!.address, { security: { ca: c.desc.security!.ca }, dfsToken: token });
    try {
      return await codeOf(dfs.list("/"));
    } finally {
      dfs.close();
    }
  };
  /** The job's DFS token, from the token file its probe task copied. */
  const tokenOfJob = (appId: string): Promise<string> =>
    waitFor(
      () => {
        const files = taskOutputs(c.dir, appId, "tokens.json");
        if (files.length === 0) return undefined;
        return (JSON.parse(readFileSync(files[0]!, "utf8")) as Record<string, string>)["dfs-token"];
      },
      { what: `the token file of ${appId}'s probe`, timeoutMs: 60_000, intervalMs: 200 },
    );
  /** Kills a daemon of the cluster (as it is recorded now: restarts change pids) and waits until it is gone. */
  const killDaemon = async (name: "rm" | "nn"): Promise<void> => {
    const pid = name === "rm" ? readCluster(c.dir).rm.pid : readCluster(c.dir).nn!.pid;
    process.kill(pid, "SIGKILL");
    await waitFor(
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      { what: `the killed ${name} to be gone` },
    );
  };
  const refusedSoon = (token: string, what: string): Promise<string> =>
    waitFor(async () => ((await withToken(token)) === "UNAUTHENTICATED" ? "UNAUTHENTICATED" : undefined), {
      what,
      timeoutMs: 30_000,
      intervalMs: 200,
    });

  let finishedToken = "";

  it("names its job, works while the job runs, and is refused once the job ends; another job's is not", async () => {
    const dfs = c.dfs();
    const local = join(c.work, "words.txt");
    writeFileSync(local, "b a b\n");
    await dfs.put(local, "/jobtokens/in.txt");
    const holder = await c.client.submit(
      JSON.stringify({ name: "holder", vertices: [probe, cpuVertex("hold", 1, { holdSeconds: 120, vcores: 0.5 })] }),
    );
    const holderToken = await tokenOfJob(holder);
    expect(jobOf(holderToken)).toBe(holder);

    const appId = await c.client.submit(
      JSON.stringify({
        name: "writer",
        vertices: [
          probe,
          {
            name: "map",
            parallelism: 1,
            command: ["node", `${TASKS}/wordcount-map.js`, "dfs:/jobtokens/in.txt", "--splits", "1"],
            resources: { vcores: 0.5, memoryMb: 256 },
          },
          {
            name: "merge",
            parallelism: 1,
            command: ["node", `${TASKS}/wordcount-merge.js`, "--output", "dfs:/jobtokens/out.tsv"],
            resources: { vcores: 0.5, memoryMb: 256 },
          },
        ],
        edges: [{ from: "map", to: "merge", type: "scatter-gather" }],
      }),
    );
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    // Its tasks wrote as the submitter with the token.
    expect((await readAll(dfs, "/jobtokens/out.tsv")).toString("utf8").trim().split("\n")).toEqual(["b\t2", "a\t1"]);
    const token = await tokenOfJob(appId);
    expect(jobOf(token)).toBe(appId);

    expect(await refusedSoon(token, `${appId}'s token to be refused after the job ended`)).toBe("UNAUTHENTICATED");
    expect(await withToken(holderToken), "the running job's token").toBe("OK");
    finishedToken = token;

    // A killed job's token goes the same way.
    await c.client.kill(holder);
    expect(await refusedSoon(holderToken, `${holder}'s token to be refused after the kill`)).toBe("UNAUTHENTICATED");
  });

  it("is refused when the job is killed before its job manager ran", async () => {
    // A job holding the server's schedulable cores (3.6 of 4: its job manager and six tasks of 0.5), so that the next
    // job waits for a container for its job manager.
    const filler = await c.client.submit(
      JSON.stringify({ name: "filler", vertices: [cpuVertex("fill", 6, { holdSeconds: 120, vcores: 0.5 })] }),
    );
    await waitForJob(c.client, filler, (r) => (r.taskContainers?.allocated ?? 0) >= 6, { stopOnEnd: false });
    const rm = rmAs("alice");
    const nn = nnAs("alice");
    const { appId } = await call(rm, rm.getNewApplication, {});
    const { token } = await call(nn, nn.getDelegationToken, { lifetimeMs: 0, job: appId });
    expect(jobOf(token)).toBe(appId);
    expect(await withToken(token)).toBe("OK");
    const dag = JSON.stringify({ name: "never-runs", vertices: [cpuVertex("v", 1)] });
    await call(rm, rm.submitApplication, { dagJson: dag, user: "", dfsToken: token, appId });
    const waiting = await call(rm, rm.getApplication, { appId });
    expect(waiting.state).toBe("ACCEPTED");
    expect(waiting.amContainers?.allocated ?? 0).toBe(0);
    await call(rm, rm.killApplication, { appId });
    expect((await c.client.status(appId)).state).toBe("KILLED");
    expect(await refusedSoon(token, `${appId}'s token to be refused after the kill`)).toBe("UNAUTHENTICATED");
    await c.client.kill(filler);
  });

  it("stays refused after the namenode restarts, while a new token works", async () => {
    expect(finishedToken, "the first test ran").not.toBe("");
    await killDaemon("nn");
    await restartDaemon(c.dir, "nn");
    const admin = nnAs("admin");
    const fresh = (await call(admin, admin.getDelegationToken, { lifetimeMs: 0, job: formatAppId(1, 1) })).token;
    expect(
      await waitFor(async () => ((await withToken(fresh)) === "OK" ? "OK" : undefined), {
        what: "the restarted namenode to serve a new token",
        timeoutMs: 30_000,
        retryOnError: true,
      }),
    ).toBe("OK");
    expect(await withToken(finishedToken)).toBe("UNAUTHENTICATED");
  });

  it("is cancelled by whoever holds it, once or twice; what is not a live token of this namenode cannot be", async () => {
    const alice = nnAs("alice");
    const { token } = await call(alice, alice.getDelegationToken, { lifetimeMs: 0, job: formatAppId(1, 2) });
    // Bob holds it: he may cancel it, and cancelling it again is no error.
    const bob = nnAs("bob");
    expect(await codeOf(call(bob, bob.cancelDelegationToken, { token }))).toBe("OK");
    expect(await codeOf(call(bob, bob.cancelDelegationToken, { token }))).toBe("OK");
    expect(await withToken(token)).toBe("UNAUTHENTICATED");
    const [v, body] = token.split(".");
    for (const bad of ["", "not-a-token", `${v}.${body}.AAAA`])
      expect(await codeOf(call(alice, alice.cancelDelegationToken, { token: bad })), bad).toBe(
        "DELEGATION_TOKEN_INVALID",
      );
    const expired = (await call(alice, alice.getDelegationToken, { lifetimeMs: 1, job: "" })).token;
    await waitFor(async () => (await withToken(expired)) === "UNAUTHENTICATED", { what: "a 1 ms token to expire" });
    expect(await codeOf(call(alice, alice.cancelDelegationToken, { token: expired }))).toBe("DELEGATION_TOKEN_INVALID");
    // A token names an application id or nothing.
    expect(await codeOf(call(alice, alice.getDelegationToken, { lifetimeMs: 0, job: "../etc" }))).toBe(
      "INVALID_ARGUMENT",
    );
  });
  it("is cancelled by the restarted resource manager when the job ended while the namenode was down", async () => {
    const rm = rmAs("alice");
    const nn = nnAs("alice");
    const { appId } = await call(rm, rm.getNewApplication, {});
    const { token } = await call(nn, nn.getDelegationToken, { lifetimeMs: 0, job: appId });
    const dag = JSON.stringify({ name: "ends-unseen", vertices: [cpuVertex("v", 1, { holdSeconds: 60 })] });
    await call(rm, rm.submitApplication, { dagJson: dag, user: "", dfsToken: token, appId });
    await killDaemon("nn");
    // The kill is answered once the job's end, and the token to cancel with it, are stored; the resource manager's
    // first try fails at once (no namenode), and it is gone before its next.
    await call(rm, rm.killApplication, { appId });
    await killDaemon("rm");
    await restartDaemon(c.dir, "nn");
    expect(await withToken(token), "nothing cancelled it yet").toBe("OK");
    await restartDaemon(c.dir, "rm");
    expect(await refusedSoon(token, `${appId}'s token to be refused after the restarts`)).toBe("UNAUTHENTICATED");
    expect((await c.client.status(appId)).state).toBe("KILLED");
  });
});

describe("a submission with an application id", () => {
  const { rmAs } = clusterWithUsers({ idleServers: 1, storage: false });
  const dagJson = JSON.stringify({ name: "reserved", vertices: [cpuVertex("v", 1)] });

  /** The code and reason a submission as `name` with `appId` fails with ("OK" when it does not). */
  async function submitAs(name: string, appId: string): Promise<string> {
    const rm = rmAs(name);
    try {
      await call(rm, rm.submitApplication, { dagJson, user: "", dfsToken: "", appId });
      return "OK";
    } catch (err) {
      return isHarvestError(err, "APP_ID_INVALID") ? `APP_ID_INVALID ${err.details.reason}` : String(err);
    }
  }

  it("is accepted only with an id reserved by the same user and not used yet", async () => {
    const alice = rmAs("alice");
    const { appId } = await call(alice, alice.getNewApplication, {});
    const { clusterTs, seq } = parseAppId(appId);
    expect(await submitAs("bob", appId)).toBe("APP_ID_INVALID reserved-by-another-user");
    expect(await submitAs("alice", formatAppId(clusterTs, seq + 1000))).toBe("APP_ID_INVALID not-reserved");
    expect(await submitAs("alice", "application_x")).toBe("APP_ID_INVALID malformed");
    expect(await submitAs("alice", appId)).toBe("OK");
    expect((await call(alice, alice.getApplication, { appId })).user).toBe("alice");
    expect(await submitAs("alice", appId)).toBe("APP_ID_INVALID used");
  });

  it("never collides with the ids the resource manager picks itself", async () => {
    const alice = rmAs("alice");
    const reserved = (await call(alice, alice.getNewApplication, {})).appId;
    const picked = (await call(alice, alice.submitApplication, { dagJson, user: "", dfsToken: "", appId: "" })).appId;
    expect(picked).not.toBe(reserved);
    expect(await submitAs("alice", reserved)).toBe("OK");
  });
});
