/**
 * A secure file system in the test's own process, as the web tests need it: a namenode and two datanodes ("dn1",
 * "dn2") over mutual TLS under a CA of their own, certificates for the users alice and bob and the admin "ops",
 * both datanodes live, safe mode over, and `/home/alice` alice's. Plus one HTTP(S) request sent as curl sends it.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DfsClient } from "../../client/dfs-client.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import { issueCertificate, issueClusterCertificates } from "../../localcluster/cluster-ca.js";
import type { ClusterCertificates } from "../../localcluster/cluster-ca.js";
import { NameNode } from "../../namenode/index.js";
import type { NameNodeOptions } from "../../namenode/index.js";
import { startTestDataNode } from "../integration/harness.js";
import { waitFor } from "../wait-for.js";

/** The running file system and what its tests act as. */
export interface SecureDfs {
  dir: string;
  certs: ClusterCertificates;
  /** The CA's certificate file. */
  ca: string;
  /** alice's and bob's certificate files (user role). */
  users: Record<string, ClientSecurity & { cert: string; key: string }>;
  nn: NameNode;
  dns: DataNode[];
  /** A client with the admin certificate. */
  admin: DfsClient;
  /** Stops the namenode first (datanodes leaving before it would have it report their blocks missing), then the rest. */
  stop(): Promise<void>;
}

/** Starts it in a new `harvest-<name>-` directory; `nnOptions` adds to (or overrides) the namenode's test options. */
export async function startSecureDfs(name: string, nnOptions: Partial<NameNodeOptions> = {}): Promise<SecureDfs> {
  const dir = mkdtempSync(join(tmpdir(), `harvest-${name}-`));
  const certs = await issueClusterCertificates(join(dir, "security"), {
    caName: `Harvest ${name} test CA`,
    daemons: Object.fromEntries(["nn", "dn1", "dn2"].map((n) => [n, ["127.0.0.1", "localhost"]])),
    admin: "ops",
    dirMode: 0o700,
  });
  const ca = certs.admin.ca;
  const users: SecureDfs["users"] = {};
  for (const user of ["alice", "bob"])
    users[user] = {
      ca,
      ...(await issueCertificate(join(dir, "security"), join(dir, user), { name: user, role: "user" })),
    };
  const nn = new NameNode(
    {
      dataDir: join(dir, "nn"),
      tls: certs.daemons["nn"]!,
      heartbeatIntervalMs: 200,
      datanodeExpiryMs: 1_500,
      monitorIntervalMs: 200,
      ...nnOptions,
    },
    { logger: new Logger("test", "error") },
  );
  await nn.start();
  const dns: DataNode[] = [];
  for (const id of ["dn1", "dn2"])
    dns.push(await startTestDataNode(dir, id, nn.address, { heartbeatIntervalMs: 200, tls: certs.daemons[id]! }));
  const admin = new DfsClient(nn.address, { security: certs.admin });
  await waitFor(async () => (await admin.datanodes()).filter((d) => d.state === "LIVE").length === 2, {
    what: "two live datanodes",
    timeoutMs: 15_000,
  });
  await waitFor(async () => !nn.inSafeMode, { what: "safe mode to end", timeoutMs: 15_000 });
  await admin.mkdir("/home/alice");
  await admin.chown("/home/alice", "alice");
  return {
    dir,
    certs,
    ca,
    users,
    nn,
    dns,
    admin,
    async stop() {
      admin.close();
      await nn.stop();
      for (const dn of dns) await dn.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Who asks: a certificate, a bearer token, or nobody (the CA is always trusted). */
export type Who = { cert: string; key: string } | { token: string } | "nobody";

/** An answer: its status, headers, body and the body as JSON when it is JSON. */
export interface WebAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  json: unknown;
}

/**
 * One request as curl sends it: the URL's path as is (no client-side normalisation), an optional body, no redirect
 * followed; `ca` undefined for plain HTTP.
 */
export function send(
  url: string,
  method: string,
  ca: string | undefined,
  who: Who,
  opts: { body?: Buffer | undefined; accept?: string } = {},
): Promise<WebAnswer> {
  const u = new URL(url);
  const headers: Record<string, string> = { accept: opts.accept ?? "*/*" };
  if (who !== "nobody" && "token" in who) headers["authorization"] = `Bearer ${who.token}`;
  if (opts.body) headers["content-length"] = String(opts.body.length);
  const options: https.RequestOptions = {
    host: u.hostname,
    port: u.port,
    path: url.slice(url.indexOf("/", `${u.protocol}//`.length)),
    method,
    headers,
    agent: false,
    ...(ca ? { ca: readFileSync(ca) } : {}),
  };
  if (who !== "nobody" && "cert" in who) {
    options.cert = readFileSync(who.cert);
    options.key = readFileSync(who.key);
  }
  return new Promise((resolve, reject) => {
    const req = (u.protocol === "https:" ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const all = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(all.toString("utf8"));
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: all, json });
      });
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}
