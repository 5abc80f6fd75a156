/**
 * A secure cluster (what `cluster up` starts by default) as strangers, users and admins meet it, through the real
 * daemons: a peer without a certificate, with one from another CA or an expired one is refused before anything runs;
 * a user certificate cannot call operator services or act as a daemon; a job is killed and its logs read only by its
 * submitter or an admin; files belong to the certificate's identity, whatever the client claims, and others are held
 * to their modes; a job's tasks act on the file system as its submitter (their delegation token); forged and misused
 * tokens are refused. After all of it the daemons still serve.
 */
import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { JobClient } from "../../client/job-client.js";
import { PowerAdminClient } from "../../client/power-admin-client.js";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { signAmToken } from "../../common/container-token.js";
import type { HarvestError } from "../../common/errors.js";
import { fromGrpcError, isHarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { cpuVertex, startTestCluster, traceSpec, waitForJob } from "./harness.js";
import type { TestCluster } from "./harness.js";

/** The code a promise fails with ("OK" when it does not). */
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (err) {
    return isHarvestError(err) ? err.code : fromGrpcError(err).code;
  }
}

/** The error a promise fails with. */
async function errorOf(p: Promise<unknown>): Promise<HarvestError> {
  try {
    await p;
  } catch (err) {
    return isHarvestError(err) ? err : fromGrpcError(err);
  }
  throw new Error("expected a failure");
}

describe("a secure cluster", () => {
  const work = mkdtempSync(join(tmpdir(), "harvest-sec-"));
  let c: TestCluster;
  let ca = "";
  const who: Record<string, ClientSecurity> = {};
  const clients: { close(): void }[] = [];
  const jobs = (name: string): JobClient => {
    const j = new JobClient(c.desc.rm.address, { security: who[name]!, nnAddress: c.desc.nn!.address });
    clients.push(j);
    return j;
  };
  const dfs = (name: string, options: { user?: string } = {}): DfsClient => {
    const d = new DfsClient(c.desc.nn!.address, { security: who[name]!, ...options });
    clients.push(d);
    return d;
  };
  const wordCount = (input: string, output: string): string =>
    JSON.stringify({
      name: "secure-wordcount",
      vertices: [
        {
          name: "map",
          parallelism: 2,
          command: ["node", "${HARVEST_HOME}/dist/examples/tasks/wordcount-map.js", `dfs:${input}`, "--splits", "2"],
          resources: { vcores: 1, memoryMb: 256 },
        },
        {
          name: "merge",
          parallelism: 1,
          command: ["node", "${HARVEST_HOME}/dist/examples/tasks/wordcount-merge.js", "--output", `dfs:${output}`],
          resources: { vcores: 0.5, memoryMb: 256 },
        },
      ],
      edges: [{ from: "map", to: "merge", type: "scatter-gather" }],
    });

  beforeAll(async () => {
    const quiet = traceSpec(work, "quiet", 60, new Array<number>(120).fill(5));
    c = await startTestCluster({ primaries: [quiet, quiet], offsetsMs: [0, 0], storage: true });
    if (!c.desc.security) throw new Error("startTestCluster should start a secure cluster");
    ca = c.desc.security.ca;
    const caDir = dirname(ca);
    const out = join(work, "certs");
    for (const [name, role] of [
      ["alice", "user"],
      ["bob", "user"],
    ] as const) {
      const f = await issueCertificate(caDir, out, { name, role });
      who[name] = { ca, ...f };
    }
    who["admin"] = c.desc.security;
    who["stranger"] = { ca };
    const old = await issueCertificate(caDir, join(out, "old"), {
      name: "alice",
      role: "user",
      validFromMs: Date.now() - 10 * 86_400_000,
      days: 2,
    });
    who["expired"] = { ca, ...old };
    const otherCa = join(work, "other-ca");
    await createCa(otherCa, { name: "Someone else's CA" });
    const mallory = await issueCertificate(otherCa, join(out, "other"), { name: "admin", role: "admin" });
    who["mallory"] = { ca, ...mallory };
  }, 120_000);

  afterAll(async () => {
    for (const x of clients) x.close();
    await c?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("refuses a peer with no certificate, another CA's or an expired one, before anything runs", async () => {
    const dag = JSON.stringify({ name: "stranger", vertices: [cpuVertex("v", 1)] });
    for (const name of ["stranger", "mallory", "expired"]) {
      expect(await codeOf(jobs(name).submit(dag)), name).toBe("UNAUTHENTICATED");
      expect(await codeOf(jobs(name).list()), name).toBe("UNAUTHENTICATED");
      expect(await codeOf(dfs(name).mkdir(`/by-${name}`)), name).toBe("UNAUTHENTICATED");
      expect(await codeOf(new TenantAdminClient(c.desc.rm.address, who[name]).list()), name).toBe("UNAUTHENTICATED");
    }
    // Nothing they sent was acted on.
    expect((await c.client.list()).filter((j) => j.name === "stranger")).toEqual([]);
    expect((await dfs("admin").list("/")).map((s) => s.path).filter((p) => p.startsWith("/by-"))).toEqual([]);
    // A plaintext client cannot even talk to a TLS port.
    const plain = new JobClient(c.desc.rm.address);
    clients.push(plain);
    expect(await codeOf(plain.list())).toBe("UNAVAILABLE");
  });

  it("lets only admins call operator services and only daemons act as daemons, naming who and what", async () => {
    const tenants = new TenantAdminClient(c.desc.rm.address, who["alice"]);
    const power = new PowerAdminClient(c.desc.rm.address, who["alice"]);
    clients.push(tenants, power);
    const refused = await errorOf(tenants.register({ name: "alices-tenant" }));
    expect(refused.code).toBe("PERMISSION_DENIED");
    expect(refused.message).toContain("alice");
    expect(refused.message).toContain("RegisterTenant");
    expect(await codeOf(tenants.assign("search", ["server-1"]))).toBe("PERMISSION_DENIED");
    expect(await codeOf(power.setBudget("/", 1))).toBe("PERMISSION_DENIED");
    // Reimaging a datanode (wiping its disk) is an admin's.
    const dn = makeClient(loadHarvestProto().DataTransfer, c.desc.nodes[0]!.datanode!.address, who["alice"]);
    clients.push(dn);
    expect(await codeOf(call(dn, dn.reimage, {}))).toBe("PERMISSION_DENIED");
    // Registering as a node manager takes a daemon certificate.
    const tracker = makeClient(loadHarvestProto().ResourceTracker, c.desc.rm.address, who["alice"]);
    clients.push(tracker);
    const streamCode = await new Promise<string>((resolve) => {
      const s = tracker.nodeChannel();
      s.on("data", () => resolve("OK"));
      s.on("error", (e) => resolve(fromGrpcError(e).code));
      s.write({
        register: { nodeId: "intruder", nmAddress: "127.0.0.1:1", capacity: { vcoresMilli: 64000, memoryMb: 1 } },
      });
    });
    expect(streamCode).toBe("PERMISSION_DENIED");
    expect((await c.client.nodes()).map((n) => n.nodeId)).not.toContain("intruder");
    // The admin may.
    const admin = new TenantAdminClient(c.desc.rm.address, who["admin"]);
    clients.push(admin);
    expect((await admin.register({ name: "search" })).name).toBe("search");
  });

  it("lets only a job's submitter or an admin kill it or read its logs; the submitter is the certificate", async () => {
    const alice = jobs("alice");
    const bob = jobs("bob");
    const dag = JSON.stringify({ name: "alices-job", vertices: [cpuVertex("hold", 1, { holdSeconds: 60 })] });
    // Alice claims to be bob: the certificate decides.
    const appId = await alice.submit(dag, "bob");
    const running = await waitForJob(alice, appId, (r) => r.containers.some((x) => x.isAm && x.state === "RUNNING"));
    expect(running.user).toBe("alice");
    const am = running.containers.find((x) => x.isAm)!;
    const killBy = await errorOf(bob.kill(appId));
    expect(killBy.code).toBe("PERMISSION_DENIED");
    expect(killBy.message).toContain("bob");
    expect(await codeOf(bob.containerLog(appId, am.containerId))).toBe("PERMISSION_DENIED");
    expect(
      await alice.containerLog(appId, am.containerId, "stderr").then(
        () => "OK",
        (e: Error) => e.message,
      ),
    ).toBe("OK");
    expect((await bob.status(appId)).state).not.toBe("KILLED");
    expect(await jobs("admin").kill(appId)).toBe("KILLED");
  });

  it("gives files to the certificate's identity and holds others to their modes", async () => {
    const alice = dfs("alice", { user: "bob" });
    const bob = dfs("bob");
    const home = await dfs("admin").mkdir("/home");
    expect(home.owner).not.toBe("");
    await dfs("admin").chmod("/home", 0o777);
    const dir = await alice.mkdir("/home/alice");
    expect(dir.owner).toBe("alice");
    const local = join(work, "secret.txt");
    writeFileSync(local, "alice's secret\n".repeat(1000));
    const put = await alice.put(local, "/home/alice/secret.txt");
    expect(put.owner).toBe("alice");
    await alice.chmod("/home/alice/secret.txt", 0o600);
    const back = join(work, "secret-back.txt");
    await alice.get("/home/alice/secret.txt", back);
    expect(readFileSync(back)).toEqual(readFileSync(local));
    expect(await codeOf(bob.get("/home/alice/secret.txt", join(work, "stolen.txt")))).toBe("DFS_PERMISSION_DENIED");
    expect(await codeOf(bob.delete("/home/alice/secret.txt"))).toBe("DFS_PERMISSION_DENIED");
    expect(await codeOf(bob.put(local, "/home/alice/secret.txt", { overwrite: true }))).toBe("DFS_PERMISSION_DENIED");
    expect(await codeOf(bob.rename("/home/alice/secret.txt", "/home/mine.txt"))).toBe("DFS_PERMISSION_DENIED");
    expect(await codeOf(bob.chmod("/home/alice/secret.txt", 0o666))).toBe("DFS_PERMISSION_DENIED");
    // Still alice's, unchanged.
    await alice.get("/home/alice/secret.txt", back, { overwrite: true });
    expect(readFileSync(back)).toEqual(readFileSync(local));
    // The admin is the superuser.
    expect((await dfs("admin").stat("/home/alice/secret.txt")).owner).toBe("alice");
  });

  it("runs a job's tasks on the file system as its submitter, and not as anyone else", async () => {
    const alice = dfs("alice");
    const local = join(work, "corpus.txt");
    writeFileSync(local, "the quick brown fox jumps over the lazy dog the end\n".repeat(200));
    await dfs("admin").mkdir("/jobs");
    await dfs("admin").chmod("/jobs", 0o777);
    await alice.mkdir("/jobs/alice");
    await alice.chmod("/jobs/alice", 0o700);
    await alice.put(local, "/jobs/alice/in.txt");
    const mine = await jobs("alice").submit(wordCount("/jobs/alice/in.txt", "/jobs/alice/out.tsv"));
    const done = await jobs("alice").waitForCompletion(mine, undefined, 300);
    expect(done.state, done.diagnostics).toBe("FINISHED");
    const out = await alice.stat("/jobs/alice/out.tsv");
    expect(out.owner).toBe("alice");
    const result = join(work, "out.tsv");
    await alice.get("/jobs/alice/out.tsv", result);
    expect(readFileSync(result, "utf8")).toMatch(/^the\t/m);
    // Bob's job reaches for alice's private input: its tasks act as bob and are refused.
    await dfs("bob").mkdir("/jobs/bob");
    const theirs = await jobs("bob").submit(wordCount("/jobs/alice/in.txt", "/jobs/bob/out.tsv"));
    const failed = await jobs("bob").waitForCompletion(theirs, undefined, 300);
    expect(failed.state).toBe("FAILED");
    expect(await codeOf(dfs("bob").stat("/jobs/bob/out.tsv"))).toBe("NAMENODE_FILE_NOT_FOUND");
  }, 180_000);

  it("refuses forged tokens and tokens used for another job", async () => {
    // A job manager's AM token, forged.
    const forged = makeClient(loadHarvestProto().ApplicationMasterService, c.desc.rm.address, {
      ca,
      tokens: { "harvest-am-token": `application_1_0001:1:${"ab".repeat(32)}` },
    });
    clients.push(forged);
    expect(
      await codeOf(call(forged, forged.allocate, { appId: "application_1_0001", attempt: 1, asks: [], releases: [] })),
    ).toBe("UNAUTHENTICATED");
    // A real AM token (signed with the cluster's secret, as the resource manager does) used for another job.
    const secret = (JSON.parse(readFileSync(join(c.dir, "run", "rm.json"), "utf8")) as { secret: string }).secret;
    const victim = await jobs("bob").submit(
      JSON.stringify({ name: "victim", vertices: [cpuVertex("hold", 1, { holdSeconds: 30 })] }),
    );
    const hourMs = 3_600_000;
    const amClient = (fields: { appId: string; attempt: number; expiresMs: number }) => {
      const client = makeClient(loadHarvestProto().ApplicationMasterService, c.desc.rm.address, {
        ca,
        tokens: { "harvest-am-token": signAmToken(secret, fields) },
      });
      clients.push(client);
      return client;
    };
    const other = amClient({ appId: "application_1_0001", attempt: 1, expiresMs: Date.now() + hourMs });
    expect(await codeOf(call(other, other.finishApplicationMaster, { appId: victim, attempt: 1 } as never))).toBe(
      "PERMISSION_DENIED",
    );
    // The victim's own application, but an attempt that is not its current one (1): refused whichever attempt the
    // request names.
    const notCurrent = amClient({ appId: victim, attempt: 2, expiresMs: Date.now() + hourMs });
    for (const attempt of [1, 2])
      expect(
        await codeOf(call(notCurrent, notCurrent.finishApplicationMaster, { appId: victim, attempt } as never)),
      ).toBe("PERMISSION_DENIED");
    // The victim's current attempt, but expired: refused as a forged token is.
    const expired = amClient({ appId: victim, attempt: 1, expiresMs: Date.now() - 1 });
    expect(await codeOf(call(expired, expired.finishApplicationMaster, { appId: victim, attempt: 1 } as never))).toBe(
      "UNAUTHENTICATED",
    );
    expect((await c.client.status(victim)).state).not.toMatch(/FINISHED|FAILED/);
    await c.client.kill(victim);
    // A forged delegation token at the namenode; a forged block token at a datanode.
    const nn = makeClient(loadHarvestProto().ClientNamenode, c.desc.nn!.address, {
      ca,
      tokens: {
        "harvest-dfs-token": `d1.${Buffer.from('{"owner":"admin","expiresMs":9e15}').toString("base64url")}.AAAA`,
      },
    });
    clients.push(nn);
    expect(await codeOf(call(nn, nn.list, { path: "/" }))).toBe("UNAUTHENTICATED");
    const fakeBlockToken = `v1.1.${Buffer.from("{}").toString("base64url")}.${createHmac("sha256", "guess").update("x").digest("base64url")}`;
    const dn = makeClient(loadHarvestProto().DataTransfer, c.desc.nodes[0]!.datanode!.address, {
      ca,
      tokens: { "harvest-block-token": fakeBlockToken },
    });
    clients.push(dn);
    const read = await new Promise<string>((resolve) => {
      const s = dn.readBlock({
        block: { blockId: 1, genStamp: 1, numBytes: 0 },
        offset: 0,
        length: 0,
        blockToken: fakeBlockToken,
      } as never);
      s.on("data", () => undefined);
      s.on("error", (e) => resolve(fromGrpcError(e).code));
      s.on("end", () => resolve("OK"));
    });
    expect(read).toBe("UNAUTHENTICATED");
  });

  it("keeps serving after all of it", async () => {
    const appId = await jobs("alice").submit(JSON.stringify({ name: "after", vertices: [cpuVertex("v", 2)] }));
    expect((await jobs("alice").waitForCompletion(appId, undefined, 300)).state).toBe("FINISHED");
    expect((await dfs("admin").fsck("/")).healthy).toBe(true);
  });
});
