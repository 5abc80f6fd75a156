/**
 * Container logs that outlive their server, on a secure cluster with storage: a finished container's stdout and stderr
 * are copied into the DFS as its submitter, so that after its server is reimaged mid-job (its node manager killed, its
 * disk wiped) `harvest job logs` still shows them, byte for byte, from the DFS. The node managers serve the logs over
 * HTTPS to the job's submitter and admins (a certificate, or the node web token the resource manager's job page links
 * with), never to a stranger or to nobody. A drained server's containers have their logs in the DFS when its drain
 * completes. A failed task's diagnostics name its container and the command that shows its log, and plain `harvest job
 * status` lists the containers. On a plaintext cluster the copies belong to the submitter the cluster was told.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import type { JobReport } from "../../client/job-client.js";
import { DfsClient } from "../../client/dfs-client.js";
import { appLogDir, containerLogPath, userLogRoot } from "../../common/container-logs.js";
import { isHarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { restartDaemon } from "../../localcluster/cluster.js";
import { runHarvest } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { cpuVertex, startTestCluster, traceSpec, waitForJob } from "./harness.js";
import type { TestCluster } from "./harness.js";

/** What each "say" task prints: its index, bytes that are not ASCII, and lines enough to span several packets. */
const SAY = [
  "const i = process.env.HARVEST_TASK_INDEX;",
  "const lines = Array.from({ length: 2000 }, (_, n) => `task ${i} line ${n} héllo ✓`).join('\\n');",
  "process.stdout.write(`out of ${i}\\n` + lines + '\\n');",
  "process.stderr.write(`err of ${i}: ` + '\\u00ff'.repeat(10) + '\\n');",
].join(" ");

/** The bytes a "say" task with index `i` wrote to stdout and stderr (what SAY prints). */
function said(i: number): { stdout: string; stderr: string } {
  const lines = Array.from({ length: 2000 }, (_, n) => `task ${i} line ${n} héllo ✓`).join("\n");
  return { stdout: `out of ${i}\n${lines}\n`, stderr: `err of ${i}: ${"\u00ff".repeat(10)}\n` };
}

/** Kills a node manager with SIGKILL (no chance to copy anything) and waits until it is gone. */
async function killNodeManager(node: { nodeId: string; pid: number }): Promise<void> {
  process.kill(node.pid, "SIGKILL");
  await waitFor(
    () => {
      try {
        process.kill(node.pid, 0);
        return undefined;
      } catch {
        return true;
      }
    },
    { what: `${node.nodeId}'s node manager to die` },
  );
}

/** A job of one task, `vertex[0]`, that runs `command` with half a core and `memoryMb`. */
function oneTaskJob(name: string, vertex: string, command: string[], memoryMb = 128): string {
  return JSON.stringify({
    name,
    vertices: [{ name: vertex, parallelism: 1, command, resources: { vcores: 0.5, memoryMb } }],
  });
}

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS GET as curl would send it (no redirects followed). */
function get(url: string, tls: { ca: string; cert?: string; key?: string }, headers: Record<string, string> = {}) {
  return new Promise<HttpAnswer>((resolve, reject) => {
    const req = https.get(
      url,
      {
        ca: readFileSync(tls.ca),
        ...(tls.cert ? { cert: readFileSync(tls.cert), key: readFileSync(tls.key!) } : {}),
        headers,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }),
        );
      },
    );
    req.on("error", reject);
  });
}

describe("container logs", () => {
  const work = mkdtempSync(join(tmpdir(), "harvest-logs-"));
  let c: TestCluster;
  const who: Record<string, ClientSecurity> = {};
  const clients: { close(): void }[] = [];
  const jobs = (name: string): JobClient => {
    const j = new JobClient(c.desc.rm.address, { security: who[name]!, nnAddress: c.desc.nn!.address });
    clients.push(j);
    return j;
  };
  let sayApp = "";
  let sayReport: JobReport;

  beforeAll(async () => {
    c = await startTestCluster({
      primaries: [1, 2].map((n) => traceSpec(work, `quiet${n}`, 60, Array<number>(120).fill(5))),
      storage: true,
      // Kept logs expire 36 s after their application's last write here, looked for every second: the first test's
      // go during the last one, though alice runs no job after it.
      rm: { jobTokenCancelDelayMs: 2_000, logRetentionHours: 0.01, logRetentionCheckMs: 1_000 },
    });
    const ca = c.desc.security!.ca;
    for (const name of ["alice", "bob"]) {
      const f = await issueCertificate(dirname(ca), join(c.work, "certs"), { name, role: "user" });
      who[name] = { ca, ...f };
    }
    who["admin"] = c.desc.security!;
  }, 120_000);

  afterAll(async () => {
    for (const x of clients) x.close();
    await c?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("shows a finished container's log from the DFS, byte for byte, after its server was reimaged mid-job", async () => {
    const alice = jobs("alice");
    sayApp = await alice.submit(
      JSON.stringify({
        name: "say-and-hold",
        vertices: [
          { name: "say", parallelism: 2, command: ["node", "-e", SAY], resources: { vcores: 0.5, memoryMb: 128 } },
          cpuVertex("hold", 1, { holdSeconds: 300, vcores: 0.5 }),
        ],
      }),
    );
    sayReport = await waitForJob(
      alice,
      sayApp,
      (r) => r.containers.filter((x) => x.vertex === "say" && x.cause === "SUCCEEDED").length === 2,
      { timeoutMs: 90_000 },
    );
    expect(sayReport.state, sayReport.diagnostics).toBe("RUNNING");
    const says = sayReport.containers.filter((x) => x.vertex === "say" && x.cause === "SUCCEEDED");
    // While their node managers live, the logs come from them.
    const live = await alice.containerLogFrom(sayApp, says[0]!.containerId, "stdout", 1 << 20);
    expect(live.from).toMatch(/^the node manager of /);
    expect(live.text).toBe(said(says[0]!.taskIndex).stdout);

    // Reimage every server that ran a "say" task: its node manager dies and its disk is wiped.
    for (const nodeId of new Set(says.map((x) => x.nodeId))) {
      const node = c.desc.nodes.find((n) => n.nodeId === nodeId)!;
      await killNodeManager(node);
      rmSync(join(node.dataDir, "containers"), { recursive: true, force: true });
    }
    expect((await alice.status(sayApp)).state).toBe("RUNNING");
    for (const x of says) {
      const want = said(x.taskIndex);
      for (const stream of ["stdout", "stderr"] as const) {
        const got = await alice.containerLogFrom(sayApp, x.containerId, stream, 1 << 20);
        expect(got.from).toBe(`dfs:${containerLogPath("alice", sayApp, x.containerId, stream)}`);
        expect(
          Buffer.from(got.text, "utf8").equals(Buffer.from(want[stream], "utf8")),
          `${x.containerId} ${stream}`,
        ).toBe(true);
      }
    }
    // The CLI says where it read the log from; an admin reads it too.
    const cli = runHarvest(["job", "logs", sayApp, "--container", says[1]!.containerId, "--stream", "stderr"], {
      env: { HARVEST_CLUSTER_DIR: c.dir },
    });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toBe(said(says[1]!.taskIndex).stderr.trimEnd() + "\n");
    expect(cli.stderr).toContain(`from dfs:/user/alice/.logs/${sayApp}/${says[1]!.containerId}/stderr`);
    // Only alice (and admins) may read the copies: bob's certificate is refused by the namenode.
    const bob = new DfsClient(c.desc.nn!.address, { security: who["bob"]! });
    clients.push(bob);
    const refused = await bob.stat(containerLogPath("alice", sayApp, says[0]!.containerId, "stdout")).then(
      () => "OK",
      (e: unknown) => (isHarvestError(e) ? e.code : String(e)),
    );
    expect(refused).toBe("DFS_PERMISSION_DENIED");
    const aliceDfs = new DfsClient(c.desc.nn!.address, { security: who["alice"]! });
    clients.push(aliceDfs);
    // The directories are the log group's (the resource managers read them), closed to everyone else.
    for (const dir of [
      userLogRoot("alice"),
      appLogDir("alice", sayApp),
      `${appLogDir("alice", sayApp)}/${says[0]!.containerId}`,
    ]) {
      const st = await aliceDfs.stat(dir);
      expect([st.owner, st.group, st.mode], dir).toEqual(["alice", "harvest-logs", 0o770]);
    }

    // The resource manager serves the copies too, over HTTPS, to the submitter and admins only.
    const ca = who["admin"]!.ca!;
    const as = (name: string) => ({ ca, cert: who[name]!.cert!, key: who[name]!.key! });
    const copyUrl = (containerId: string, stream: string) =>
      `${c.desc.rm.httpUrl}/jobs/${sayApp}/logs/${containerId}/${stream}`;
    for (const x of says)
      for (const stream of ["stdout", "stderr"] as const) {
        const got = await get(copyUrl(x.containerId, stream), as("alice"));
        expect(got.status, got.body).toBe(200);
        expect(got.headers["content-type"]).toMatch(/^text\/plain/);
        expect(Buffer.from(got.body, "utf8").equals(Buffer.from(said(x.taskIndex)[stream], "utf8"))).toBe(true);
      }
    const first = copyUrl(says[0]!.containerId, "stdout");
    const tail = await get(first + "?start=-20", as("admin"));
    expect(tail.body).toBe(Buffer.from(said(says[0]!.taskIndex).stdout).subarray(-20).toString("utf8"));
    expect((await get(first, { ca })).status).toBe(401);
    const asBob = await get(first, as("bob"));
    expect(asBob.status).toBe(403);
    expect(asBob.body).not.toContain("line 1");
    const html = await get(first, as("alice"), { accept: "text/html" });
    expect(html.body).toContain(`task ${says[0]!.taskIndex} line 1999 héllo ✓`);
    expect(html.body).toContain('id="whole-log"');
    const hold = sayReport.containers.find((x) => x.vertex === "hold")!;
    const codeOf = (res: HttpAnswer) => [res.status, (JSON.parse(res.body) as { error: { code: string } }).error.code];
    for (const [path, status, code] of [
      [`/jobs/${sayApp}/logs/..%20x/stdout`, 400, "INVALID_ARGUMENT"],
      [`/jobs/${sayApp}/logs/${says[0]!.containerId}/pid`, 400, "INVALID_ARGUMENT"],
      [`/jobs/${sayApp}/logs/container_1_0001_01_999999/stdout`, 404, "CONTAINER_NOT_FOUND"],
      [`/jobs/${sayApp}/logs/${hold.containerId}/stdout`, 404, "CONTAINER_NOT_FOUND"],
      [`/jobs/application_1_9999/logs/${says[0]!.containerId}/stdout`, 404, "APP_NOT_FOUND"],
      [`/jobs/${sayApp}/logs/${says[0]!.containerId}/stdout?start=x`, 400, "INVALID_ARGUMENT"],
    ] as const)
      expect(codeOf(await get(c.desc.rm.httpUrl + path, as("alice"))), path).toEqual([status, code]);
    // The hold task still runs: its log was not copied yet.
    expect((await get(copyUrl(hold.containerId, "stdout"), as("alice"))).body).toContain("not copied");
    // The job page links each reimaged server's container to its copy; the REST answer gives its address.
    const { token } = await alice.webToken(600_000);
    const page = await get(
      `${c.desc.rm.httpUrl}/jobs/${sayApp}`,
      { ca },
      {
        authorization: `Bearer ${token}`,
        accept: "text/html",
      },
    );
    const copies = [...page.body.matchAll(/class="log-copy" href="([^"]+)"/g)].map((m) => m[1]!);
    for (const x of says) expect(copies).toContain(`/jobs/${sayApp}/logs/${x.containerId}/stdout`);
    expect(copies.some((h) => h.includes(hold.containerId))).toBe(false);
    const rest = await get(`${c.desc.rm.httpUrl}/ws/v1/cluster/apps/${sayApp}`, as("alice"));
    const logs = (JSON.parse(rest.body) as { app: { logs: { containerId: string; copyUrl: string }[] } }).app.logs;
    expect(logs.find((l) => l.containerId === says[0]!.containerId)?.copyUrl).toBe(
      `/jobs/${sayApp}/logs/${says[0]!.containerId}/stderr`,
    );
    await alice.kill(sayApp);
    // The job ended and its token is cancelled: the resource manager reads the copies with its own certificate (a
    // member of the log group at the namenode), so its page still serves them.
    await waitFor(
      () =>
        readFileSync(c.desc.rm.log, "utf8")
          .split("\n")
          .some((l) => l.includes("delegation token cancelled") && l.includes(sayApp)) || undefined,
      { what: `the resource manager to cancel ${sayApp}'s delegation token` },
    );
    const after = await get(first, as("alice"));
    expect(after.status, after.body).toBe(200);
    expect(Buffer.from(after.body, "utf8").equals(Buffer.from(said(says[0]!.taskIndex).stdout, "utf8"))).toBe(true);
    // Once the reimaged servers are lost, their containers' rows link only to the copies: no node manager answers.
    for (const nodeId of new Set(says.map((x) => x.nodeId)))
      await waitFor(
        async () => {
          const res = await get(`${c.desc.rm.httpUrl}/ws/v1/cluster/nodes/${nodeId}`, as("admin"));
          return (JSON.parse(res.body) as { node: { serviceState: string } }).node.serviceState === "LOST" || undefined;
        },
        { what: `${nodeId} to be lost`, timeoutMs: 30_000 },
      );
    const lostPage = await get(`${c.desc.rm.httpUrl}/jobs/${sayApp}`, as("alice"), { accept: "text/html" });
    for (const x of says) {
      const row = new RegExp(`data-container="${x.containerId}"[^]*?</tr>`).exec(lostPage.body)?.[0] ?? "";
      expect(row).toContain(`class="log-copy" href="/jobs/${sayApp}/logs/${x.containerId}/stderr"`);
      expect(row).not.toContain('class="log-link"');
    }
  }, 180_000);

  it("sends a whole log however long, streamed, from its node manager and from the kept copy alike", async () => {
    // 70 MiB: longer than the most a page reads into memory (64 MiB), ending with a line to look for.
    const big = 70 * 1024 * 1024;
    const alice = jobs("alice");
    const appId = await alice.submit(
      oneTaskJob(
        "long-log",
        "talk",
        ["node", "-e", `process.stdout.write(Buffer.alloc(${big}, 97)); process.stdout.write("END\\n");`],
        256,
      ),
    );
    const r = await alice.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    const task = r.containers.find((x) => x.vertex === "talk")!;
    const node = c.desc.nodes.find((n) => n.nodeId === task.nodeId)!;
    const tls = { ca: who["admin"]!.ca!, cert: who["alice"]!.cert!, key: who["alice"]!.key! };
    for (const url of [
      `${node.httpUrl}/node/containerlogs/${task.containerId}/stdout?format=text`,
      `${c.desc.rm.httpUrl}/jobs/${appId}/logs/${task.containerId}/stdout?format=text`,
    ]) {
      const got = await get(url, tls);
      expect(got.status, url).toBe(200);
      expect(got.headers["content-length"], url).toBe(String(big + 4));
      expect(got.headers["x-harvest-log-length"], url).toBe(String(big + 4));
      expect(got.body.length, url).toBe(big + 4);
      expect(got.body.endsWith("aaaaEND\n"), url).toBe(true);
      // From an offset: the rest, however long.
      const rest = await get(url + "&start=1000", tls);
      expect([rest.body.length, rest.headers["x-harvest-log-offset"]], url).toEqual([big + 4 - 1000, "1000"]);
    }
  }, 120_000);

  it("serves a container's log over HTTPS to its submitter and admins only; the job page links to it", async () => {
    const alice = jobs("alice");
    const appId = await alice.submit(
      JSON.stringify({
        name: "say-once",
        vertices: [
          { name: "say", parallelism: 1, command: ["node", "-e", SAY], resources: { vcores: 0.5, memoryMb: 128 } },
        ],
      }),
    );
    const r = await alice.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    const task = r.containers.find((x) => x.vertex === "say")!;
    const node = c.desc.nodes.find((n) => n.nodeId === task.nodeId)!;
    expect(node.httpUrl).toMatch(/^https:/);
    const url = `${node.httpUrl}/node/containerlogs/${task.containerId}/stdout`;
    const ca = who["admin"]!.ca!;
    const want = said(task.taskIndex).stdout;

    // Nobody: 401. A stranger's certificate: 403. The submitter and an admin: the whole log as text.
    expect((await get(url, { ca })).status).toBe(401);
    const asBob = await get(url, { ca, cert: who["bob"]!.cert!, key: who["bob"]!.key! });
    expect(asBob.status).toBe(403);
    expect(asBob.body).not.toContain("line 1");
    const asAlice = await get(url, { ca, cert: who["alice"]!.cert!, key: who["alice"]!.key! });
    expect(asAlice.status).toBe(200);
    expect(asAlice.headers["content-type"]).toMatch(/^text\/plain/);
    expect(asAlice.body).toBe(want);
    const admin = await get(url + "?start=-20", { ca, cert: who["admin"]!.cert!, key: who["admin"]!.key! });
    expect(admin.body).toBe(Buffer.from(want).subarray(-20).toString("utf8"));
    // Bad input is a coded error, never a crash.
    for (const [bad, status, code] of [
      ["/node/containerlogs/..%2F..%2Fetc/stdout", 404, "WEB_NOT_FOUND"],
      ["/node/containerlogs/..%20x/stdout", 400, "INVALID_ARGUMENT"],
      [`/node/containerlogs/${task.containerId}/pid`, 400, "INVALID_ARGUMENT"],
      ["/node/containerlogs/container_1_0001_01_999999/stdout", 404, "CONTAINER_NOT_FOUND"],
    ] as const) {
      const res = await get(node.httpUrl + bad, { ca, cert: who["admin"]!.cert!, key: who["admin"]!.key! });
      expect([res.status, (JSON.parse(res.body) as { error: { code: string } }).error.code], bad).toEqual([
        status,
        code,
      ]);
    }
    const badStart = await get(url + "?start=x", { ca, cert: who["alice"]!.cert!, key: who["alice"]!.key! });
    expect(badStart.status).toBe(400);

    // The resource manager's job page, seen by alice with her web token, links to the log through the node manager's
    // login; the cookie it sets opens the log page in a browser.
    const { token } = await alice.webToken(600_000);
    const page = await get(
      `${c.desc.rm.httpUrl}/jobs/${appId}`,
      { ca },
      {
        authorization: `Bearer ${token}`,
        accept: "text/html",
      },
    );
    expect(page.status).toBe(200);
    expect(page.body).not.toContain("serve no logs");
    const hrefs = [...page.body.matchAll(/class="log-link" href="([^"]+)"/g)].map((m) =>
      m[1]!.replaceAll("&amp;", "&"),
    );
    const link = hrefs.find((h) => h.includes(encodeURIComponent(`/node/containerlogs/${task.containerId}/stdout`)));
    expect(link, hrefs.join("\n")).toMatch(new RegExp(`^${node.httpUrl}/login\\?token=`));
    const login = await get(link!, { ca }, { accept: "text/html" });
    expect(login.status).toBe(303);
    expect(login.headers["location"]).toBe(`/node/containerlogs/${task.containerId}/stdout`);
    const cookie = String(login.headers["set-cookie"]).split(";")[0]!;
    const html = await get(url, { ca }, { cookie, accept: "text/html" });
    expect(html.status).toBe(200);
    expect(html.body).toContain(`task ${task.taskIndex} line 1999 héllo ✓`);
    expect(html.body).toContain('id="whole-log"');
    // Bob's link (the job page is open to every identity) carries his name: the node manager refuses him.
    const bobToken = (await jobs("bob").webToken(600_000)).token;
    const bobPage = await get(
      `${c.desc.rm.httpUrl}/jobs/${appId}`,
      { ca },
      {
        authorization: `Bearer ${bobToken}`,
        accept: "text/html",
      },
    );
    const bobLink = [...bobPage.body.matchAll(/class="log-link" href="([^"]+)"/g)]
      .map((m) => m[1]!.replaceAll("&amp;", "&"))
      .find((h) => h.includes(encodeURIComponent(`/node/containerlogs/${task.containerId}/stdout`)))!;
    const bobCookie = String((await get(bobLink, { ca })).headers["set-cookie"]).split(";")[0]!;
    const bobHtml = await get(url, { ca }, { cookie: bobCookie, accept: "text/html" });
    expect(bobHtml.status).toBe(403);
    // The node's container list shows alice her container and bob nothing.
    const list = await get(`${node.httpUrl}/node/containers`, {
      ca,
      cert: who["alice"]!.cert!,
      key: who["alice"]!.key!,
    });
    expect(
      (JSON.parse(list.body) as { containers: { containerId: string }[] }).containers.map((x) => x.containerId),
    ).toContain(task.containerId);
    const bobList = await get(`${node.httpUrl}/node/containers`, {
      ca,
      cert: who["bob"]!.cert!,
      key: who["bob"]!.key!,
    });
    expect((JSON.parse(bobList.body) as { containers: unknown[] }).containers).toEqual([]);
  }, 120_000);

  it("copies the logs of a drained server's containers before its drain completes", async () => {
    const alice = jobs("alice");
    const PRINT_AND_WAIT =
      "console.log(`before the drain ${process.env.HARVEST_TASK_INDEX}`); setInterval(() => {}, 1000);";
    const appId = await alice.submit(
      JSON.stringify({
        name: "drained",
        vertices: [
          {
            name: "w",
            parallelism: 2,
            command: ["node", "-e", PRINT_AND_WAIT],
            resources: { vcores: 0.5, memoryMb: 128 },
          },
        ],
      }),
    );
    const running = await waitForJob(
      alice,
      appId,
      (r) => r.containers.filter((x) => x.vertex === "w" && x.state === "RUNNING").length === 2,
      { timeoutMs: 60_000 },
    );
    const amNode = running.containers.find((x) => x.isAm)!.nodeId;
    const victim =
      running.containers.find((x) => x.vertex === "w" && x.nodeId !== amNode) ??
      running.containers.find((x) => x.vertex === "w")!;
    const server = victim.nodeId;
    // The task has printed its line (its node manager serves it) before the drain starts.
    await waitFor(
      async () => ((await alice.containerLog(appId, victim.containerId, "stdout")) !== "" ? true : undefined),
      {
        what: "the task's line",
      },
    );
    const nodeAdmin = makeClient(loadHarvestProto().NodeAdmin, c.desc.rm.address, c.desc.security);
    clients.push(nodeAdmin);
    await call(nodeAdmin, nodeAdmin.drain, { nodeIds: [server], deadlineMs: Date.now() + 1_000 });
    await waitFor(
      async () =>
        (await call(nodeAdmin, nodeAdmin.getDrainStatus, {})).drains.find((d) => d.nodeId === server)?.state ===
        "DRAINED"
          ? true
          : undefined,
      { what: `${server} drained`, timeoutMs: 30_000, intervalMs: 100 },
    );
    // The moment it is drained, every container that ran there has its logs in the DFS.
    const admin = new DfsClient(c.desc.nn!.address, { security: who["admin"]! });
    clients.push(admin);
    const onServer = (await alice.status(appId)).containers.filter(
      (x) => x.nodeId === server && x.state === "COMPLETE",
    );
    expect(onServer.length).toBeGreaterThan(0);
    for (const x of onServer) {
      const path = containerLogPath("alice", appId, x.containerId, "stdout");
      expect((await admin.stat(path)).complete, path).toBe(true);
    }
    const copied = await admin.stat(containerLogPath("alice", appId, victim.containerId, "stdout"));
    expect(Number(copied.length)).toBe(`before the drain ${victim.taskIndex}\n`.length);
    await call(nodeAdmin, nodeAdmin.undrain, { nodeIds: [server] });
    await alice.kill(appId);
  }, 120_000);

  it("names a failed task's container and the command that shows its log; job status lists the containers", async () => {
    const alice = jobs("alice");
    const appId = await alice.submit(oneTaskJob("no-binary", "a", ["/no/such/binary"]));
    const r = await alice.waitForCompletion(appId, undefined, 200);
    expect(r.outcome).toBe("JOB_FAILED");
    const last = r.containers.filter((x) => x.vertex === "a").at(-1)!;
    expect(r.diagnostics).toContain(
      `a[0] failed 4 times; last: exit code ${last.exitCode} in ${last.containerId} on ${last.nodeId} ` +
        `(harvest job logs ${appId} --container ${last.containerId})`,
    );
    const log = await alice.containerLog(appId, last.containerId, "stderr");
    expect(log).toMatch(/no\/such\/binary/);
    const status = runHarvest(["job", "status", appId], { env: { HARVEST_CLUSTER_DIR: c.dir } });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/CONTAINER\s+RUNS\s+SERVER\s+STATE\s+ENDED BY\s+EXIT/);
    const row = status.stdout.split("\n").find((l) => l.trimStart().startsWith(last.containerId));
    expect(row).toMatch(
      new RegExp(`${last.containerId}\\s+a\\[0\\]\\s+${last.nodeId}\\s+COMPLETE\\s+FAILED\\s+${last.exitCode}`),
    );
    expect(status.stdout).toContain(`harvest job logs ${appId} --container <id>`);
    // The first test's kept logs go past their retention: the resource manager's sweep removes them.
    const admin = new DfsClient(c.desc.nn!.address, { security: who["admin"]! });
    clients.push(admin);
    await waitFor(
      () =>
        admin.stat(appLogDir("alice", sayApp)).then(
          () => undefined,
          (e: unknown) => (isHarvestError(e, "NAMENODE_FILE_NOT_FOUND") ? true : Promise.reject(e)),
        ),
      { what: `${sayApp}'s kept logs to expire`, timeoutMs: 90_000 },
    );
  }, 180_000);

  it("copies at its restart the logs of the containers its node manager died with (kill -9) before copying them", async () => {
    const alice = jobs("alice");
    const words = Array.from({ length: 500 }, (_, n) => `said before the crash ${n}`).join("\n") + "\n";
    const appId = await alice.submit(
      oneTaskJob("crash", "talk", [
        "node",
        "-e",
        `process.stdout.write(${JSON.stringify(words)}); setTimeout(() => {}, 300000);`,
      ]),
    );
    const r = await waitForJob(alice, appId, (x) =>
      x.containers.some((k) => k.vertex === "talk" && k.state === "RUNNING"),
    );
    const talk = r.containers.find((k) => k.vertex === "talk" && k.state === "RUNNING")!;
    const node = c.desc.nodes.find((n) => n.nodeId === talk.nodeId)!;
    const local = join(node.dataDir, "containers", appId, talk.containerId, "stdout");
    await waitFor(() => (existsSync(local) && readFileSync(local, "utf8") === words) || undefined, {
      what: `${talk.containerId} to write its words`,
    });
    // Its node manager dies with no chance to copy anything; its watchdog kills the container.
    await killNodeManager(node);
    const path = containerLogPath("alice", appId, talk.containerId, "stdout");
    const admin = new DfsClient(c.desc.nn!.address, { security: who["admin"]! });
    clients.push(admin);
    expect(
      await admin.stat(path).then(
        () => "copied",
        () => "none",
      ),
    ).toBe("none");
    await restartDaemon(c.dir, `${node.nodeId}-nm`);
    // The restarted node manager copies it, with the job's token, byte for byte.
    await waitFor(
      () =>
        admin.stat(path).then(
          () => true,
          () => undefined,
        ),
      {
        what: `the restarted ${node.nodeId} to copy ${talk.containerId}'s log`,
        timeoutMs: 30_000,
      },
    );
    const copy = await alice.containerLogFrom(appId, talk.containerId, "stdout", 1 << 20);
    expect(copy.text).toBe(words);
    await alice.kill(appId);
  }, 120_000);
});

describe("container logs on a plaintext cluster", () => {
  it("are copied as the submitter the cluster was told, into a home made for them", async () => {
    // Kept logs expire 7.2 s after their last write, looked for every half second.
    const rm = { logRetentionHours: 0.002, logRetentionCheckMs: 500 };
    const c = await startTestCluster({ idleServers: 1, storage: true, insecure: true, rm });
    const rmOnly = new JobClient(c.desc.rm.address);
    try {
      // Submitted without the namenode: nothing staged, so carol has no home yet.
      const appId = await rmOnly.submit(
        JSON.stringify({
          name: "plain",
          vertices: [
            { name: "say", parallelism: 1, command: ["node", "-e", SAY], resources: { vcores: 0.5, memoryMb: 128 } },
          ],
        }),
        "carol",
      );
      const r = await rmOnly.waitForCompletion(appId, undefined, 200);
      expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
      const task = r.containers.find((x) => x.vertex === "say")!;
      const carol = c.dfs({ user: "carol" });
      const path = containerLogPath("carol", appId, task.containerId, "stdout");
      const copy = await carol.stat(path);
      expect(Number(copy.length)).toBe(Buffer.byteLength(said(task.taskIndex).stdout));
      expect(copy.owner).toBe("carol");
      // The resource manager's sweep removes them as carol (a plaintext namenode trusts the claim) past their retention.
      await waitFor(
        () =>
          carol.stat(appLogDir("carol", appId)).then(
            () => undefined,
            (e: unknown) => (isHarvestError(e, "NAMENODE_FILE_NOT_FOUND") ? true : Promise.reject(e)),
          ),
        { what: `${appId}'s kept logs to expire`, timeoutMs: 30_000 },
      );
    } finally {
      rmOnly.close();
      await c.stop();
    }
  }, 120_000);
});
