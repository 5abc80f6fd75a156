/**
 * A 1 GiB file through WebHDFS, over HTTPS with a bearer web token, the way `curl -L -T` and `curl -L` move it: the
 * namenode (in this process) redirects CREATE and OPEN to a datanode running as its own process, which streams the
 * bytes into the DFS and back out. What comes back is what went in, byte for byte (the sha256 of a generated stream),
 * and neither side held the file: the datanode's peak resident memory (VmHWM) and this process's resident growth stay
 * far below 1 GiB.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createHash, randomFillSync } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type * as http from "node:http";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { Logger } from "../../common/log.js";
import { distEntry } from "../../common/paths.js";
import { issueCertificate, issueClusterCertificates } from "../../localcluster/cluster-ca.js";
import { NameNode } from "../../namenode/index.js";
import { requireBuild } from "../integration/harness.js";
import { waitFor } from "../wait-for.js";

const GIB = 1 << 30;
const CHUNK = 1 << 20;
const MIB = 1 << 20;

/** Peak resident memory of a process, from /proc (bytes). */
function vmHwm(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) * 1024;
}

describe("WebHDFS with a 1 GiB file", () => {
  let dir: string;
  let ca: string;
  let nn: NameNode;
  let dn: ChildProcess | undefined;
  let token: string;

  function request(
    url: string,
    method: string,
    opts: { auth?: boolean; headers?: Record<string, string> } = {},
  ): Promise<{ req: http.ClientRequest; res: Promise<http.IncomingMessage> }> {
    const u = new URL(url);
    const req = https.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      method,
      ca: readFileSync(ca),
      agent: false,
      headers: { ...(opts.auth ? { authorization: `Bearer ${token}` } : {}), ...opts.headers },
    });
    const res = new Promise<http.IncomingMessage>((resolve, reject) => {
      req.on("response", resolve);
      req.on("error", reject);
    });
    return Promise.resolve({ req, res });
  }

  async function redirectOf(url: string, method: string): Promise<string> {
    const { req, res } = await request(url, method, { auth: true });
    req.end();
    const r = await res;
    r.resume();
    expect(r.statusCode).toBe(307);
    return r.headers.location!;
  }

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-webhdfs-1gib-"));
    const certs = await issueClusterCertificates(join(dir, "security"), {
      caName: "Harvest webhdfs 1 GiB CA",
      daemons: { nn: ["127.0.0.1"], dn1: ["127.0.0.1"] },
      admin: "ops",
      dirMode: 0o700,
    });
    ca = certs.admin.ca;
    const alice = await issueCertificate(join(dir, "security"), join(dir, "alice"), { name: "alice", role: "user" });
    nn = new NameNode(
      { dataDir: join(dir, "nn"), tls: certs.daemons["nn"]!, heartbeatIntervalMs: 500, defaultReplication: 1 },
      { logger: new Logger("nn", "error") },
    );
    await nn.start();
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n3600,0\n");
    const config = join(dir, "dn1.json");
    const ready = join(dir, "dn1.ready");
    writeFileSync(
      config,
      JSON.stringify({
        datanodeId: "dn1",
        namenodeAddress: nn.address,
        dataDir: join(dir, "dn1"),
        capacityBytes: 4 * GIB,
        primary: `trace:${trace}`,
        tls: certs.daemons["dn1"]!,
      }),
    );
    dn = spawn(process.execPath, [distEntry("datanode/main.js"), "--config", config, "--ready-file", ready], {
      stdio: "ignore",
    });
    await waitFor(() => existsSync(ready) || undefined, { what: "the datanode process to serve", timeoutMs: 30_000 });
    const client = new DfsClient(nn.address, { security: { ca, ...alice } });
    const admin = new DfsClient(nn.address, { security: certs.admin });
    try {
      await waitFor(async () => (await admin.datanodes()).some((d) => d.state === "LIVE") && !nn.inSafeMode, {
        what: "the datanode to register",
        timeoutMs: 30_000,
      });
      await admin.mkdir("/home/alice");
      await admin.chown("/home/alice", "alice");
      token = (await client.webToken(3_600_000)).token;
    } finally {
      client.close();
      admin.close();
    }
  }, 90_000);

  afterAll(async () => {
    dn?.kill("SIGKILL");
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("writes and reads it back byte for byte with the datanode's memory far below the file's size", async () => {
    const file = `${nn.httpUrl!}/webhdfs/v1/home/alice/big.bin`;
    const dnIdle = vmHwm(dn!.pid!);
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 100);
    try {
      // CREATE: the namenode's 307, then the bytes to the datanode, generated and hashed as they go.
      const put = await request(await redirectOf(`${file}?op=CREATE`, "PUT"), "PUT", {
        headers: { "content-length": String(GIB), "content-type": "application/octet-stream" },
      });
      const sent = createHash("sha256");
      const writeStart = Date.now();
      for (let off = 0; off < GIB; off += CHUNK) {
        const chunk = randomFillSync(Buffer.allocUnsafe(CHUNK));
        sent.update(chunk);
        if (!put.req.write(chunk)) await new Promise((r) => put.req.once("drain", r));
      }
      put.req.end();
      const created = await put.res;
      created.resume();
      expect(created.statusCode).toBe(201);
      const writeMs = Date.now() - writeStart;

      // OPEN: the namenode's 307, then the bytes from the datanode, hashed as they come.
      const get = await request(await redirectOf(`${file}?op=OPEN`, "GET"), "GET");
      get.req.end();
      const res = await get.res;
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-length"]).toBe(String(GIB));
      const got = createHash("sha256");
      let bytes = 0;
      const readStart = Date.now();
      for await (const c of res) {
        got.update(c as Buffer);
        bytes += (c as Buffer).length;
      }
      const readMs = Date.now() - readStart;
      expect(bytes).toBe(GIB);
      expect(got.digest("hex")).toBe(sent.digest("hex"));

      const dnPeak = vmHwm(dn!.pid!);
      const clientGrowth = rssPeak - rssBefore;
      console.log(
        `WebHDFS 1 GiB: write ${(GIB / MIB / (writeMs / 1000)).toFixed(0)} MiB/s, read ` +
          `${(GIB / MIB / (readMs / 1000)).toFixed(0)} MiB/s; datanode VmHWM ${(dnIdle / MIB).toFixed(0)} MiB idle, ` +
          `${(dnPeak / MIB).toFixed(0)} MiB after; ` +
          `client RSS growth ${(clientGrowth / MIB).toFixed(0)} MiB`,
      );
      // A writer keeps up to one block (128 MiB) for a pipeline failover's replay; nothing near the file's size.
      expect(dnPeak).toBeLessThan(512 * MIB);
      expect(clientGrowth).toBeLessThan(256 * MIB);
    } finally {
      clearInterval(sampler);
    }
  });
});
