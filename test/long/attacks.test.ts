/**
 * Issue 42's proof: every attack that once got around a secure cluster, tried again on one (real daemons, TLS, a
 * namenode and datanodes), with a real second user and a real second local account. The victims are alice (a user)
 * and root (the cluster's admin, the DFS superuser): each runs a job that holds its containers while it is attacked
 * and keeps files in the DFS (mode 600 and 700). The attackers are a job of bob (another user), a second job of
 * alice's (same user, other job), and a process of uid 54321 (a local account of no one's, outside the cluster).
 *
 *  0. The premise: each application's containers run as an account of its own (a uid from the configured range, gid
 *     the same, with no entry in /etc/passwd), shared by its job manager and tasks (on one node manager) and by no
 *     other application.
 *  1. From another job's container: read /proc/<pid>/environ of the victims' job managers and tasks (refused), and
 *     their cmdline (no secret in it); no other application's environment is readable anywhere in /proc.
 *  2. From another job's container: read the victims' token files, list their work directories, read their logs.
 *  3. From another job's container: signal the victims' job managers and tasks (SIGTERM).
 *     Also: read or delete the files a victim's task left in its /tmp and /dev/shm (each container has its own).
 *  4. From bob's container, with his own DFS token (DfsClient.fromTaskEnv) and any token stolen in 2: read alice's
 *     and root's mode-600 files, create and delete files in alice's home, chmod her private directory.
 *  5. With the AM token of bob's job: FinishApplicationMaster and Allocate for alice's job, StartContainer with a
 *     made-up container on a node manager, StopContainer and GetContainerLogs on alice's task.
 *  6. From bob's container: list, read, write into and delete alice's job's staging directory
 *     (/user/alice/.staging/<appId>, where its DAG and its job manager's journal are).
 *  7. As uid 54321 outside the cluster: read the victims' environments and token files, signal them, and walk every
 *     data directory of the cluster (node managers, datanodes, namenode, resource manager) for what it can read.
 *  8. A getent (and node, sh, id) planted by uid 54321 in /tmp/node_modules/.bin, on the PATH of whoever starts the
 *     cluster from under /tmp (as npx makes it), is never run by a daemon or a container: both get a fixed PATH of
 *     root's folders, and every job still runs as its own account.
 *  9. ReportBadBlocks as bob on alice's blocks without a READ block token (test/long/bad-block-reports.test.ts covers
 *     the rest: a reader's report never removes the last replicas).
 * 10. fsck as alice under root's mode-700 directory, on gRPC, REST and the /blocks page.
 * 11. `/login?token=<valid>&next=/\evil.example` on the resource manager's and the namenode's web servers.
 * After all of it: the victims' files read back byte-identical, their /tmp files are intact, and their jobs succeed.
 *
 * Needs root (only root switches users). One cluster for the whole file.
 */
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import * as https from "node:https";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { JobClient } from "../../client/job-client.js";
import type { JobReport } from "../../client/job-client.js";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { formatContainerId } from "../../common/ids.js";
import { TOKEN_FILE_NAME } from "../../common/task-contract.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { codeOf } from "../error-code.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { startTestCluster, taskOutputs, waitForJob } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.log("skipping attacks.test.ts: node managers switch users only when they run as root");

/** The second local account: no entry in /etc/passwd, no certificate. */
const STRANGER = 54321;
/** The range node managers take applications' uids from by default. */
const UID_RANGE = [61184, 65519] as const;
/** Where a local account may plant programs that npx would put on the PATH of a cluster started under /tmp. */
const PLANT_DIR = "/tmp/node_modules/.bin";
const PLANTED = ["getent", "node", "sh", "id"];

/**
 * What every attacker runs (a job's task, or uid 54321's process): `node -e ATTACK <targets JSON>`. It tries each
 * attempt and records "ok..." or the error code; it never fails, so its job always succeeds. A task writes its findings
 * to $HARVEST_OUTPUT_DIR/findings.json, the stranger prints them.
 */
const ATTACK = String.raw`
const fs = require("node:fs");
const path = require("node:path");
const t = JSON.parse(process.argv[1]);
const code = (e) => String((e && (e.code || e.message)) || e);
const attempt = (fn) => { try { const r = fn(); return r === undefined ? "ok" : "ok: " + r; } catch (e) { return code(e); } };
const myApp = process.env.HARVEST_APP_ID ?? "";
const out = { uid: process.getuid(), gid: process.getgid(), path: process.env.PATH ?? "", app: myApp,
  environ: {}, cmdline: {}, files: {}, signals: {}, tmp: {}, otherEnvirons: [], dfs: {}, staging: {}, stolen: 0,
  readable: [], listable: [] };
const stolen = [];
for (const c of t.containers) {
  out.environ[c.label] = attempt(() => fs.readFileSync("/proc/" + c.pid + "/environ", "utf8").split("\0").map((v) => v.split("=")[0]).join(" "));
  out.cmdline[c.label] = attempt(() => fs.readFileSync("/proc/" + c.pid + "/cmdline", "utf8").split("\0").join(" "));
  out.files[c.label + ": token file"] = attempt(() => {
    const text = fs.readFileSync(path.join(c.workDir, "${TOKEN_FILE_NAME}"), "utf8");
    const dfsToken = JSON.parse(text)["dfs-token"];
    if (dfsToken) stolen.push(dfsToken);
    return text.length + " bytes";
  });
  out.files[c.label + ": work directory"] = attempt(() => fs.readdirSync(c.workDir).join(" "));
  out.files[c.label + ": stderr"] = attempt(() => fs.readFileSync(path.join(c.workDir, "stderr")).length + " bytes");
  out.files[c.label + ": write into work directory"] = attempt(() => fs.writeFileSync(path.join(c.workDir, "planted"), "x"));
}
out.stolen = stolen.length;
// Every process whose environment this one can read and that is a container of another application.
for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
  let env;
  try { env = fs.readFileSync("/proc/" + pid + "/environ", "utf8"); } catch { continue; }
  const app = /\/containers\/([^/]+)\//.exec(env)?.[1];
  if (app && app !== myApp) out.otherEnvirons.push(pid + " of " + app);
}
for (const n of t.tmp) for (const dir of ["/tmp", "/dev/shm"]) {
  const f = dir + "/harvest-victim-" + n;
  out.tmp["read " + f] = attempt(() => fs.readFileSync(f, "utf8").length + " bytes");
  out.tmp["delete " + f] = attempt(() => fs.unlinkSync(f));
}
for (const c of t.containers) out.signals[c.label] = attempt(() => { process.kill(c.pid, "SIGTERM"); });
const walk = (dir) => {
  let entries;
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  out.listable.push(dir);
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.isFile()) { try { fs.closeSync(fs.openSync(p, "r")); out.readable.push(p); } catch {} }
  }
};
for (const d of t.walk) walk(d);
async function dfsAttacks() {
  if (!t.dfs) return;
  const { DfsClient } = await import(process.env.HARVEST_HOME + "/dist/client/dfs-client.js");
  const op = async (dfs, [kind, p]) => {
    if (kind === "read") { let n = 0; for await (const chunk of dfs.createReadStream(p)) n += chunk.length; return "ok: read " + n + " bytes"; }
    if (kind === "list") return "ok: " + (await dfs.list(p)).map((s) => s.path).join(" ");
    if (kind === "create") await new Promise((resolve, reject) => {
      const w = dfs.createWriteStream(p, { replication: 1, overwrite: true });
      w.on("finish", resolve); w.on("error", reject); w.end("planted by " + myApp);
    });
    if (kind === "delete") await dfs.delete(p, { recursive: true });
    if (kind === "chmod") await dfs.chmod(p, 0o777);
    return "ok";
  };
  const clients = [["own", DfsClient.fromTaskEnv()], ...stolen.map((token, i) => ["stolen " + i,
    new DfsClient(process.env.HARVEST_NN_ADDRESS, { security: { ca: process.env.HARVEST_CA }, dfsToken: token })])];
  for (const [who, dfs] of clients) {
    for (const a of t.dfs.files) out.dfs[who + ": " + a.join(" ")] = await op(dfs, a).catch(code);
    for (const a of t.dfs.staging) out.staging[who + ": " + a.join(" ")] = await op(dfs, a).catch(code);
    dfs.close();
  }
}
dfsAttacks().catch((e) => { out.dfs.error = code(e); }).finally(() => {
  const text = JSON.stringify(out);
  const dir = process.env.HARVEST_OUTPUT_DIR;
  if (!dir) return process.stdout.write(text);
  fs.writeFileSync(path.join(dir, ".findings"), text);
  fs.renameSync(path.join(dir, ".findings"), path.join(dir, "findings.json"));
  // The job stays up (its AM token current) until the test releases it.
  const end = Date.now() + 240000;
  const hold = setInterval(() => { if (fs.existsSync("release") || Date.now() > end) clearInterval(hold); }, 100);
});
`;

/** A victim's task: leaves a file in /tmp and in /dev/shm, holds its container until released, then checks them. */
const VICTIM = String.raw`
n="$1"
echo "$n" > "/tmp/harvest-victim-$n" && echo "$n" > "/dev/shm/harvest-victim-$n" && : > "$HARVEST_OUTPUT_DIR/wrote-tmp"
i=0
while [ ! -e release ] && [ "$i" -lt 2400 ]; do sleep 0.1; i=$((i + 1)); done
grep -qx "$n" "/tmp/harvest-victim-$n" && grep -qx "$n" "/dev/shm/harvest-victim-$n" && : > "$HARVEST_OUTPUT_DIR/tmp-intact"
exit 0
`;

/** The attempts of one attack: what each got ("ok..." or the error code), by what it tried. */
type Attempts = Record<string, string>;

/**
 * What one attacker found (see ATTACK): its uid, gid and PATH, the attempts of each attack, the other applications'
 * processes whose environment it read, how many tokens it stole, the files it could read and the directories it could
 * list.
 */
type Findings = { uid: number; gid: number; path: string; app: string; stolen: number } & Record<
  "environ" | "cmdline" | "files" | "signals" | "tmp" | "dfs" | "staging",
  Attempts
> &
  Record<"otherEnvirons" | "readable" | "listable", string[]>;

/** A running container of a victim, as the test (root) finds it on its node. */
interface Target {
  label: string;
  containerId: string;
  nodeId: string;
  pid: number;
  workDir: string;
  /** Taken by the test (root) before any attack: the process's uid and environment, the tokens in its token file. */
  uid: number;
  env: Record<string, string>;
  tokens: string[];
}

/** A victim's job, holding its job manager and task. */
interface Victim {
  owner: string;
  appId: string;
  /** Names its files in /tmp and /dev/shm. */
  nonce: string;
  jm: Target;
  task: Target;
}

/** The attempts of a findings record that were not refused (those that start with "ok"). */
const succeeded = (record: Attempts): Attempts =>
  Object.fromEntries(Object.entries(record).filter(([, r]) => r.startsWith("ok")));

const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** The uid a process runs as (its real uid, from /proc). */
const uidOf = (pid: number): number =>
  Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);

/** The gid a process runs as (its real gid, from /proc). */
const gidOf = (pid: number): number =>
  Number(/^Gid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);

/** The environment of a process, read as root. */
const environOf = (pid: number): Record<string, string> =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .filter((v) => v.includes("="))
      .map((v) => [v.slice(0, v.indexOf("=")), v.slice(v.indexOf("=") + 1)]),
  );

/** Whether /etc/passwd (or another NSS source) names `uid`. */
const hasPasswdEntry = (uid: number): boolean =>
  spawnSync("/usr/bin/getent", ["passwd", String(uid)], { stdio: "ignore" }).status === 0;

/** A GET over HTTPS with `path` sent as it is (not normalised) and the TLS files of `who`. */
function httpsGet(
  base: string,
  path: string,
  who: ClientSecurity,
  accept = "application/json",
): Promise<{ status: number; location: string; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        ca: readFileSync(who.ca),
        ...(who.cert && who.key ? { cert: readFileSync(who.cert), key: readFileSync(who.key) } : {}),
        headers: { accept },
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            location: String(res.headers.location ?? ""),
            body: Buffer.concat(parts).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe.skipIf(!asRoot)("every attack of issue 42, on a secure cluster whose node managers run as root", () => {
  let c: TestCluster;
  const who: Record<string, ClientSecurity> = {};
  const closers: { close(): void }[] = [];
  const jobsAs = (name: string): JobClient => {
    const j = new JobClient(c.desc.rm.address, { security: who[name]!, nnAddress: c.desc.nn!.address });
    closers.push(j);
    return j;
  };
  const dfsAs = (name: string): DfsClient => {
    const d = new DfsClient(c.desc.nn!.address, { security: who[name]! });
    closers.push(d);
    return d;
  };
  let plantedHere = false;
  const savedPath = process.env["PATH"];

  // The victims' files in the DFS and their contents' hashes, and their jobs.
  const files: { path: string; owner: string; hash: string }[] = [];
  let aliceHome = "";
  let rootHome = "";
  let victims: Victim[] = [];
  // The attackers' jobs and what they found.
  let bobJob = "";
  let aliceJob2 = "";
  let bobAmToken = "";
  const found: Record<"bob" | "alice2" | "stranger", Findings> = {} as never;

  const nodeDir = (nodeId: string): string => c.desc.nodes.find((n) => n.nodeId === nodeId)!.dataDir;
  const workDirOf = (appId: string, ref: { nodeId: string; containerId: string }): string =>
    join(nodeDir(ref.nodeId), "containers", appId, ref.containerId);
  const targetOf = (label: string, appId: string, ref: { nodeId: string; containerId: string }): Target => {
    const workDir = workDirOf(appId, ref);
    const { pid } = JSON.parse(readFileSync(containerProcessFile(workDir), "utf8")) as { pid: number };
    const tokens = JSON.parse(readFileSync(join(workDir, TOKEN_FILE_NAME), "utf8")) as Record<string, string>;
    const { containerId, nodeId } = ref;
    const snapshot = { uid: uidOf(pid), env: environOf(pid), tokens: Object.values(tokens) };
    return { label, containerId, nodeId, pid, workDir, ...snapshot };
  };
  const targets = (): Target[] => victims.flatMap((v) => [v.jm, v.task]);
  /** Submits a victim job as `owner` and waits until its task holds its container with its /tmp files written. */
  async function startVictim(owner: string): Promise<Victim> {
    const nonce = randomBytes(6).toString("hex");
    const appId = await jobsAs(owner).submit(
      JSON.stringify({
        name: `victim-of-${owner}`,
        vertices: [
          {
            name: "hold",
            parallelism: 1,
            command: ["/bin/sh", "-c", VICTIM, "victim", nonce],
            resources: { vcores: 0.5, memoryMb: 128 },
          },
        ],
      }),
    );
    const holding = (x: JobReport): boolean => x.containers.filter((k) => k.state === "RUNNING").length === 2;
    const r = await waitForJob(c.client, appId, holding, { timeoutMs: 120_000 });
    const jm = r.containers.find((k) => k.isAm && k.state === "RUNNING");
    const task = r.containers.find((k) => !k.isAm && k.state === "RUNNING");
    if (!jm || !task) throw new Error(`${owner}'s victim job ${r.state}: ${r.diagnostics}`);
    await waitFor(() => existsSync(join(workDirOf(appId, task), "output", "wrote-tmp")), {
      what: `${owner}'s victim task to write its /tmp files`,
      timeoutMs: 30_000,
    });
    return {
      owner,
      appId,
      nonce,
      jm: targetOf(`${owner}'s job manager`, appId, jm),
      task: targetOf(`${owner}'s task`, appId, task),
    };
  }

  /** Submits an attacker job as `user` with `targets`, and returns its id once it is submitted. */
  const submitAttacker = (user: string, t: object): Promise<string> =>
    jobsAs(user).submit(
      JSON.stringify({
        name: `attack-by-${user}`,
        vertices: [
          {
            name: "attack",
            parallelism: 1,
            command: ["node", "-e", ATTACK, JSON.stringify(t)],
            resources: { vcores: 0.5, memoryMb: 256 },
          },
        ],
      }),
    );

  /** What the attacker job `appId` found, once its task has written it (the job then holds until released). */
  const findingsOf = async (appId: string): Promise<Findings> => {
    let last: JobReport | undefined;
    const file = await waitFor(
      async () => {
        const [f] = taskOutputs(c.dir, appId, "findings.json");
        if (f) return f;
        last = await c.client.status(appId);
        if (["FINISHED", "FAILED", "KILLED"].includes(last.state))
          throw new Error(`${appId} ended without findings: ${last.diagnostics}`);
        return undefined;
      },
      { what: () => `the findings of ${appId} (state ${last?.state})`, timeoutMs: 150_000, intervalMs: 250 },
    );
    return JSON.parse(readFileSync(file, "utf8")) as Findings;
  };

  /** Runs ATTACK as uid 54321 (no certificate, no token), outside the cluster. */
  function runStranger(t: object): Findings {
    const r = spawnSync(process.execPath, ["-e", ATTACK, JSON.stringify(t)], {
      uid: STRANGER,
      gid: STRANGER,
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      encoding: "utf8",
      timeout: 30_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    if (r.status !== 0) throw new Error(`uid ${STRANGER}'s attack did not run: ${r.stderr}`);
    return JSON.parse(r.stdout) as Findings;
  }

  /** As uid 54321: plants programs in /tmp/node_modules/.bin that log who ran them, then run the real one. */
  function plantTraps(): void {
    if (existsSync("/tmp/node_modules")) throw new Error("/tmp/node_modules exists: remove it to run this test");
    const asStranger = (script: string, input = "", ...args: string[]): void => {
      const r = spawnSync("/bin/sh", ["-c", script, "sh", ...args], {
        uid: STRANGER,
        gid: STRANGER,
        cwd: "/",
        input,
        encoding: "utf8",
      });
      if (r.status !== 0) throw new Error(`uid ${STRANGER} could not plant in ${PLANT_DIR}: ${r.stderr}`);
    };
    asStranger('mkdir -p "$1" && : > "$1/ran" && chmod 666 "$1/ran"', "", PLANT_DIR);
    plantedHere = true;
    for (const name of PLANTED) {
      const real = name === "node" ? process.execPath : `/usr/bin/${name}`;
      const trap = `#!/bin/sh\necho "$(/usr/bin/id -u) $0 $*" >> ${PLANT_DIR}/ran\nexec ${real} "$@"\n`;
      asStranger('cat > "$1" && chmod 755 "$1"', trap, join(PLANT_DIR, name));
    }
  }

  beforeAll(async () => {
    plantTraps();
    // As npx leaves it for a clone under /tmp: the node_modules/.bin of every parent folder first.
    process.env["PATH"] = `${PLANT_DIR}:${savedPath ?? ""}`;
    try {
      c = await startTestCluster({ idleServers: 2, vcores: 4, rm: { amExpiryMs: 90_000 } });
    } finally {
      process.env["PATH"] = savedPath;
    }
    if (!c.desc.security || !c.desc.nn) throw new Error("startTestCluster should start a secure cluster with storage");
    const ca = c.desc.security.ca;
    who["root"] = c.desc.security;
    for (const name of ["alice", "bob"])
      who[name] = { ca, ...(await issueCertificate(dirname(ca), join(c.work, "certs"), { name, role: "user" })) };

    // The victims' files: private ones (600, in a 700 directory), one to delete, and root's secret.
    const alice = dfsAs("alice");
    const root = dfsAs("root");
    aliceHome = await alice.homeDirectory();
    rootHome = await root.homeDirectory();
    const put = async (dfs: DfsClient, owner: string, path: string, mode: number): Promise<void> => {
      const data = randomBytes(100_000);
      const local = join(c.work, path.replaceAll("/", "_"));
      writeFileSync(local, data, { mode: 0o600 });
      await dfs.put(local, path, { replication: 2 });
      await dfs.chmod(path, mode);
      files.push({ path, owner, hash: sha256(data) });
    };
    await put(alice, "alice", `${aliceHome}/private.bin`, 0o600);
    await put(alice, "alice", `${aliceHome}/delete-me.bin`, 0o644);
    await alice.mkdir(`${aliceHome}/closed`);
    await put(alice, "alice", `${aliceHome}/closed/inner.bin`, 0o644);
    await alice.chmod(`${aliceHome}/closed`, 0o700);
    await put(root, "root", `${rootHome}/secret.bin`, 0o600);
    await root.mkdir("/private");
    await put(root, "root", "/private/payroll.bin", 0o644);
    await root.chmod("/private", 0o700);

    victims = await Promise.all([startVictim("alice"), startVictim("root")]);
    const alicesJob = victims[0]!;
    // What an attacker is told: where the victims' processes and files are (never what the test read as root).
    const where = (t: Target): object => ({ label: t.label, pid: t.pid, workDir: t.workDir });
    const localTargets = { containers: targets().map(where), tmp: victims.map((v) => v.nonce), walk: [] };
    // The stranger first: the jobs' attempts (SIGTERM) may end the victims' processes if they get through.
    found.stranger = runStranger({
      ...localTargets,
      walk: [
        ...c.desc.nodes.flatMap((n) => [n.dataDir, n.datanode!.dataDir]),
        c.desc.nn.dataDir,
        c.desc.rm.dataDir,
        join(c.dir, "run"),
        join(c.dir, "security"),
        join(c.work, "certs"),
      ],
    });
    // Bob's job: every local attempt, then the DFS with his own token and any it stole.
    bobJob = await submitAttacker("bob", {
      ...localTargets,
      dfs: {
        files: [
          ["read", `${aliceHome}/private.bin`],
          ["read", `${aliceHome}/closed/inner.bin`],
          ["read", `${rootHome}/secret.bin`],
          ["create", `${aliceHome}/planted.bin`],
          ["create", `${rootHome}/planted.bin`],
          ["delete", `${aliceHome}/delete-me.bin`],
          ["chmod", `${aliceHome}/closed`],
          ["chmod", `${rootHome}/secret.bin`],
        ],
        staging: [
          ["list", `${aliceHome}/.staging/${alicesJob.appId}`],
          ["read", `${aliceHome}/.staging/${alicesJob.appId}/dag.json`],
          ["create", `${aliceHome}/.staging/${alicesJob.appId}/planted.json`],
          ["delete", `${aliceHome}/.staging/${alicesJob.appId}`],
        ],
      },
    });
    // A second job of alice's: her own files are hers, but not her other job's processes and local files.
    aliceJob2 = await submitAttacker("alice", {
      ...localTargets,
      containers: [alicesJob.jm, alicesJob.task].map(where),
    });
    // The AM token of bob's job, as its job manager holds it (read as root), for attack 5.
    const bobAm = (
      await waitForJob(c.client, bobJob, (x) => x.containers.some((k) => k.isAm && k.state === "RUNNING"))
    ).containers.find((k) => k.isAm)!;
    bobAmToken = await waitFor(
      () => {
        const file = join(workDirOf(bobJob, bobAm), TOKEN_FILE_NAME);
        return existsSync(file)
          ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, string>)["am-token"]
          : undefined;
      },
      { what: "the token file of bob's job manager" },
    );
    found.bob = await findingsOf(bobJob);
    found.alice2 = await findingsOf(aliceJob2);
  }, 240_000);

  afterAll(async () => {
    for (const x of closers) x.close();
    await c?.stop();
    for (const v of victims)
      for (const d of ["/tmp", "/dev/shm"]) rmSync(`${d}/harvest-victim-${v.nonce}`, { force: true });
    if (plantedHere) rmSync("/tmp/node_modules", { recursive: true, force: true });
  });

  it("0. runs each application's containers as an account of its own, shared by its job manager and tasks", async () => {
    // Every container of the four applications (two of them alice's), all running: by application, node and uid.
    const seen: { appId: string; nodeId: string; uid: number; gid: number }[] = [];
    for (const appId of [...victims.map((v) => v.appId), bobJob, aliceJob2])
      for (const k of (await c.client.status(appId)).containers.filter((x) => x.state === "RUNNING")) {
        const pid = targetOf(k.containerId, appId, k).pid;
        seen.push({ appId, nodeId: k.nodeId, uid: uidOf(pid), gid: gidOf(pid) });
      }
    expect(seen).toHaveLength(8);
    for (const { uid, gid } of seen) {
      expect(gid, `uid ${uid}`).toBe(uid);
      expect(uid).toBeGreaterThanOrEqual(UID_RANGE[0]);
      expect(uid).toBeLessThanOrEqual(UID_RANGE[1]);
      expect(hasPasswdEntry(uid), `uid ${uid} has a passwd entry`).toBe(false);
    }
    // One uid per application on a node manager (its leases are the node manager's: an application's containers on
    // two node managers of one host get one uid from each), and no uid of one application is another's.
    const uidsOf = (appId: string, nodeId?: string): Set<number> =>
      new Set(seen.filter((x) => x.appId === appId && (nodeId ?? x.nodeId) === x.nodeId).map((x) => x.uid));
    for (const { appId, nodeId } of seen) expect(uidsOf(appId, nodeId).size, `${appId} on ${nodeId}`).toBe(1);
    const apps = [...new Set(seen.map((x) => x.appId))];
    for (const a of apps)
      for (const b of apps.filter((x) => x !== a))
        expect(
          [...uidsOf(a)].filter((u) => uidsOf(b).has(u)),
          `${a} and ${b}`,
        ).toEqual([]);
  });

  it("1. refuses another job /proc/<pid>/environ of the victims' processes, and their cmdline holds no secret", () => {
    for (const [name, f] of [
      ["bob's job", found.bob],
      ["alice's other job", found.alice2],
    ] as const) {
      expect(succeeded(f.environ), name).toEqual({});
      expect(f.otherEnvirons, `${name} read these containers' environments`).toEqual([]);
    }
    // cmdline is world-readable by design: it must hold no secret. Neither may the environments (read as root).
    const secrets = targets().flatMap((t) => t.tokens);
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    for (const f of [found.bob, found.alice2, found.stranger])
      for (const [label, cmdline] of Object.entries(f.cmdline))
        for (const s of secrets) expect(cmdline.includes(s), `${label}'s cmdline holds a token`).toBe(false);
    for (const t of targets()) {
      const env = JSON.stringify(t.env);
      for (const s of secrets) expect(env.includes(s), `${t.label}'s environment holds a token`).toBe(false);
    }
  });

  it("2. refuses another job the victims' token files, work directories and logs", () => {
    expect(succeeded(found.bob.files)).toEqual({});
    expect(succeeded(found.alice2.files)).toEqual({});
    expect(found.bob.stolen + found.alice2.stolen).toBe(0);
    for (const t of targets()) expect(existsSync(join(t.workDir, "planted")), t.workDir).toBe(false);
  });

  it("3. refuses another job signals to the victims' processes, and their /tmp and /dev/shm files", () => {
    for (const f of [found.bob, found.alice2]) {
      expect(Object.keys(f.signals).length).toBeGreaterThanOrEqual(2);
      expect(f.signals).toEqual(Object.fromEntries(Object.keys(f.signals).map((k) => [k, "EPERM"])));
      // Another container has its own /tmp and /dev/shm: the victims' files are not there at all.
      expect(succeeded(f.tmp)).toEqual({});
    }
    for (const t of targets()) expect(() => process.kill(t.pid, 0), `${t.label} is alive`).not.toThrow();
  });

  it("4. refuses bob's job alice's and root's files with his own DFS token, and it stole none", () => {
    // With any token: what got through (with a stolen token, "stolen <n>: ...").
    expect(succeeded(found.bob.dfs)).toEqual({});
    expect(found.bob.stolen).toBe(0);
    const own = Object.entries(found.bob.dfs).filter(([attempt]) => attempt.startsWith("own: "));
    expect(own).toHaveLength(8);
    for (const [attempt, result] of own) expect(result, attempt).toBe("DFS_PERMISSION_DENIED");
  });

  it("5. refuses bob's AM token for alice's job at the resource manager and at the node managers", async () => {
    const alicesJob = victims[0]!;
    // Bob's job still runs: its AM token is valid and current, only for another application.
    expect((await c.client.status(bobJob)).state).toBe("RUNNING");
    const ca = c.desc.security!.ca;
    const tokens = { "harvest-am-token": bobAmToken };
    const proto = loadHarvestProto();
    const rm = makeClient(proto.ApplicationMasterService, c.desc.rm.address, { ca, tokens });
    closers.push(rm);
    const appId = alicesJob.appId;
    expect(await codeOf(call(rm, rm.allocate, { appId, attempt: 1, asks: [], releases: [] }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(
      await codeOf(call(rm, rm.finishApplicationMaster, { appId, attempt: 1, outcome: "JOB_FAILED" } as never)),
    ).toBe("PERMISSION_DENIED");
    const task = alicesJob.task;
    const node = c.desc.nodes.find((n) => n.nodeId === task.nodeId)!;
    const nm = makeClient(proto.ContainerManager, node.address, { ca, tokens });
    closers.push(nm);
    const madeUp = (forApp: string) => ({
      container: {
        id: formatContainerId(1, Number(forApp.split("_")[2]), 1, 999_999),
        nodeId: node.nodeId,
        nmAddress: node.address,
        resource: { vcoresMilli: 500, memoryMb: 128 },
        token: "ab".repeat(32),
        user: "root",
      },
      appId: forApp,
      argv: ["/bin/sh", "-c", `id > ${join(c.work, "pwned")}`],
      env: {},
      tokens: {},
      isAm: false,
      resources: [],
    });
    expect(await codeOf(call(nm, nm.startContainer, madeUp(appId) as never))).toBe("PERMISSION_DENIED");
    // Bob's job's own application, with a container the resource manager never granted.
    expect(await codeOf(call(nm, nm.startContainer, madeUp(bobJob) as never))).toMatch(
      /^(CONTAINER_TOKEN_INVALID|UNAUTHENTICATED|PERMISSION_DENIED)$/,
    );
    expect(existsSync(join(c.work, "pwned"))).toBe(false);
    expect(await codeOf(call(nm, nm.stopContainer, { containerId: task.containerId }))).toBe("PERMISSION_DENIED");
    expect(
      await codeOf(call(nm, nm.getContainerLogs, { containerId: task.containerId, stream: "stdout", tailBytes: 0 })),
    ).toBe("PERMISSION_DENIED");
    expect((await c.client.status(appId)).state).toBe("RUNNING");
  });

  it("6. refuses bob's job alice's job's staging directory", async () => {
    expect(succeeded(found.bob.staging)).toEqual({});
    const own = Object.entries(found.bob.staging).filter(([attempt]) => attempt.startsWith("own: "));
    expect(own).toHaveLength(4);
    for (const [attempt, result] of own) expect(result, attempt).toBe("DFS_PERMISSION_DENIED");
    const staging = `${aliceHome}/.staging/${victims[0]!.appId}`;
    const alice = dfsAs("alice");
    expect((await alice.list(staging)).map((s) => s.path.slice(staging.length + 1))).not.toContain("planted.json");
  });

  it("7. gives uid 54321 outside the cluster no environment, token, signal, block or data file of it", () => {
    const f = found.stranger;
    expect(f.uid).toBe(STRANGER);
    expect(succeeded(f.environ)).toEqual({});
    expect(f.otherEnvirons).toEqual([]);
    expect(succeeded(f.files)).toEqual({});
    expect(f.signals).toEqual(Object.fromEntries(targets().map((t) => [t.label, "EPERM"])));
    expect(succeeded(f.tmp)).toEqual({});
    // What it may read in the data directories: nothing of the daemons' state, the jobs' containers or the blocks.
    const dataDirs = [
      ...c.desc.nodes.flatMap((n) => [n.dataDir, n.datanode!.dataDir]),
      c.desc.nn!.dataDir,
      c.desc.rm.dataDir,
      join(c.dir, "run"),
    ];
    const readableData = f.readable.filter((p) => dataDirs.some((d) => p.startsWith(d + "/")));
    expect(readableData).toEqual([]);
    // Keys: only the CA's certificate and the certificates (public) may be readable.
    expect(f.readable.filter((p) => /key|secret|token/i.test(p))).toEqual([]);
    expect(f.listable.filter((p) => p.includes("/containers/"))).toEqual([]);
  });

  it("8. never runs what uid 54321 planted on the PATH: daemons and containers get a fixed PATH of root's folders", () => {
    const fixed = (path: string, what: string): void => {
      for (const dir of path.split(":")) {
        expect(dir, `${what}'s PATH`).not.toMatch(/node_modules/);
        if (!existsSync(dir)) continue;
        const st = statSync(dir);
        expect([dir, st.uid, st.mode & 0o022], `${what}'s PATH`).toEqual([dir, 0, 0]);
      }
    };
    for (const d of [c.desc.rm, c.desc.nn!, ...c.desc.nodes, ...c.desc.nodes.map((n) => n.datanode!)])
      fixed(environOf(d.pid)["PATH"] ?? "", d.name ?? d.address);
    for (const t of targets()) fixed(t.env["PATH"] ?? "", t.label);
    fixed(found.bob.path, "bob's task");
    fixed(found.alice2.path, "alice's other task");
    // Every launch above looked up accounts and started programs: none of the planted ones ran.
    expect(readFileSync(join(PLANT_DIR, "ran"), "utf8")).toBe("");
    expect(lstatSync(join(PLANT_DIR, "getent")).uid).toBe(STRANGER);
    // And the jobs ran as their own accounts, never as the account that planted.
    for (const uid of [found.bob.uid, found.alice2.uid, ...targets().map((t) => t.uid)])
      expect([uid === STRANGER, uid === 0]).toEqual([false, false]);
  });

  it("9. refuses bob's report of alice's blocks as bad without a READ token (see bad-block-reports.test.ts)", async () => {
    const bob = dfsAs("bob");
    const alice = dfsAs("alice");
    const path = `${aliceHome}/private.bin`;
    const lb = (await alice.blockLocations(path)).blocks[0]!;
    expect(lb.locations.length).toBeGreaterThan(0);
    const blocks = lb.locations.map((dn) => ({ block: lb.block, datanodeId: dn.datanodeId, reason: "attack 9" }));
    expect(
      await codeOf(bob.nnCall(bob.namenode.reportBadBlocks, { blocks: blocks.map((b) => ({ ...b, blockToken: "" })) })),
    ).toBe("PERMISSION_DENIED");
    const report = await alice.fsck(path);
    expect([report.corrupt, report.missing]).toEqual([[], []]);
  });

  it("10. refuses alice's fsck under root's mode-700 directory on gRPC, REST and the /blocks page", async () => {
    const alice = dfsAs("alice");
    for (const path of ["/private", "/"])
      expect(await codeOf(alice.fsck(path)), `fsck ${path}`).toBe("DFS_PERMISSION_DENIED");
    const web = c.desc.nn!.httpUrl!;
    for (const path of ["/ws/v1/nn/fsck?path=/private", "/ws/v1/nn/fsck?path=/"]) {
      const r = await httpsGet(web, path, who["alice"]!);
      expect([path, r.status], r.body).toEqual([path, 403]);
      expect(r.body).toContain("DFS_PERMISSION_DENIED");
      expect(r.body).not.toMatch(/"files"|"totalBytes"/);
    }
    const page = await httpsGet(web, "/blocks?path=/private", who["alice"]!, "text/html");
    expect(page.status).toBe(403);
    expect(page.body).not.toContain('id="health-summary"');
  });

  it("11. keeps a login redirect on its daemon, whatever `next` says", async () => {
    const token = (await dfsAs("alice").webToken(60_000)).token;
    const jobToken = (await jobsAs("alice").webToken(60_000)).token;
    for (const [base, t] of [
      [c.desc.nn!.httpUrl!, token],
      [c.desc.rm.httpUrl!, jobToken],
    ] as const) {
      for (const next of ["/\\evil.example", encodeURIComponent("/\\evil.example"), "//evil.example"]) {
        const r = await httpsGet(base, `/login?token=${encodeURIComponent(t)}&next=${next}`, { ca: who["root"]!.ca });
        expect(r.status, `${base} next=${next}`).toBe(303);
        expect(new URL(r.location, base).origin, `${base} next=${next} went to ${r.location}`).toBe(
          new URL(base).origin,
        );
        expect(r.location).not.toMatch(/^\/[\\/]/);
      }
    }
  });

  it("leaves the victims' files byte-identical and their /tmp intact, and their jobs succeed", async () => {
    // Release the victims' tasks (every container of theirs, in case one was started again).
    const release = (): void => {
      for (const appId of [...victims.map((v) => v.appId), bobJob, aliceJob2])
        for (const n of c.desc.nodes) {
          const appDir = join(n.dataDir, "containers", appId);
          if (!existsSync(appDir)) continue;
          for (const e of readdirSync(appDir, { withFileTypes: true }))
            if (e.isDirectory()) writeFileSync(join(appDir, e.name, "release"), "");
        }
    };
    for (const v of victims) {
      const r = await waitFor(
        async () => {
          release();
          const s = await c.client.status(v.appId);
          return ["FINISHED", "FAILED", "KILLED"].includes(s.state) ? s : undefined;
        },
        { what: `${v.owner}'s job to end`, timeoutMs: 120_000, intervalMs: 500 },
      );
      expect(r.outcome, `${v.owner}'s job: ${r.diagnostics}`).toBe("JOB_SUCCEEDED");
      expect(r.attempts, `${v.owner}'s job`).toBe(1);
      expect(r.taskContainers?.failed ?? 0, `${v.owner}'s job`).toBe(0);
      expect(taskOutputs(c.dir, v.appId, "tmp-intact"), `${v.owner}'s /tmp files`).toHaveLength(1);
    }
    // The attackers' jobs, refused everything, end as they would have anyway.
    for (const appId of [bobJob, aliceJob2])
      expect((await c.client.waitForCompletion(appId, undefined, 200)).outcome, appId).toBe("JOB_SUCCEEDED");
    for (const f of files) {
      const dfs = dfsAs(f.owner);
      expect(sha256(await readAll(dfs, f.path)), f.path).toBe(f.hash);
    }
    const alice = dfsAs("alice");
    expect((await alice.stat(`${aliceHome}/closed`)).mode).toBe(0o700);
    expect((await dfsAs("root").stat(`${rootHome}/secret.bin`)).mode).toBe(0o600);
    const names = (await alice.list(aliceHome)).map((s) => s.path.slice(aliceHome.length + 1));
    expect(names).not.toContain("planted.bin");
    expect(await codeOf(dfsAs("root").stat(`${rootHome}/planted.bin`))).toBe("NAMENODE_FILE_NOT_FOUND");
  });
});
