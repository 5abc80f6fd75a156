/**
 * WebHDFS on highly available namenodes (`harvest cluster up --ha`, real processes over mutual TLS): a client with a
 * certificate that knows only the standby's URL is sent on to the active (307), which sends it on to a datanode (307)
 * that takes and serves the file, as `curl -L` follows them; after a graceful hand-over the new active serves the same
 * file to a web token of its own, its tickets opened by the datanodes with its block keys. A bearer token does not
 * survive the standby's redirect (curl sends it to the first origin only).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as https from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadHaAdminProto } from "../../common/ha-admin.js";
import { call, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { readCluster } from "../../localcluster/cluster.js";
import type { DaemonRecord } from "../../localcluster/cluster.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";
import { haveEtcd } from "../helpers/etcd.js";
import { waitFor } from "../wait-for.js";

interface Hop {
  status: number;
  location: string | undefined;
  body: Buffer;
}

/** Who asks: a bearer token, or a certificate (which curl presents on every connection it makes). */
type Who = { token: string } | { cert: Buffer; key: Buffer } | undefined;

/** One request, no redirect followed. */
function send(url: string, method: string, ca: Buffer, who: Who, body?: Buffer): Promise<Hop> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method,
        ca,
        ...(who && "cert" in who ? { cert: who.cert, key: who.key } : {}),
        agent: false,
        headers: {
          ...(who && "token" in who ? { authorization: `Bearer ${who.token}` } : {}),
          ...(body ? { "content-length": String(body.length) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, location: res.headers.location, body: Buffer.concat(chunks) }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Follows 307s as `curl -L` does: a certificate goes to every host, a bearer token only to the first origin. Every
 * hop's status and location, and the last one's body.
 */
async function follow(url: string, method: string, ca: Buffer, who: Who, body?: Buffer): Promise<Hop[]> {
  const hops: Hop[] = [];
  let at = url;
  for (let i = 0; i < 5; i++) {
    const sameOrigin = new URL(at).origin === new URL(url).origin;
    const hop = await send(at, method, ca, who && "token" in who && !sameOrigin ? undefined : who, body);
    hops.push(hop);
    if (hop.status !== 307 || !hop.location) return hops;
    at = hop.location;
  }
  throw new Error(`too many redirects from ${url}: ${hops.map((h) => `${h.status} -> ${h.location}`).join(", ")}`);
}

describe.skipIf(!haveEtcd)("WebHDFS on HA namenodes", () => {
  let c: TestCluster;
  let security: ClientSecurity | undefined;
  let ca: Buffer;
  let dfs: DfsClient;

  /** The active and the standby, once the standby names the active (it redirects there only then). */
  async function roles(): Promise<{ active: DaemonRecord; standby: DaemonRecord }> {
    const d = readCluster(c.dir);
    const both = [d.nn!, d.nn2!];
    const got = await Promise.all(
      both.map(async (m) => {
        const admin = makeClient(loadHaAdminProto().HaAdmin, m.address, security);
        try {
          return await call(admin, admin.getHaStatus, {}, 3_000);
        } catch {
          return { role: "down", activeAddress: "" };
        } finally {
          admin.close();
        }
      }),
    );
    const i = got.findIndex((x) => x.role === "active");
    const standby = got[1 - i];
    if (i < 0 || standby?.role !== "standby" || standby.activeAddress !== both[i]!.address)
      throw new Error(
        `namenodes are ${got.map((x) => `${x.role} (active ${x.activeAddress || "unknown"})`).join(", ")}`,
      );
    return { active: both[i]!, standby: both[1 - i]! };
  }

  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2, ha: true, nn: { defaultReplication: 2 } });
    security = c.desc.security;
    ca = readFileSync(security!.ca);
    dfs = c.dfs();
    await waitFor(async () => (await dfs.datanodes()).filter((d) => d.state === "LIVE").length === 2, {
      what: "two live datanodes",
      timeoutMs: 60_000,
    });
    await dfs.mkdir("/ha");
  }, 180_000);

  afterAll(async () => {
    await c?.stop();
  });

  it("goes from the standby to the active to a datanode, and serves the file after a hand-over", async () => {
    const { active, standby } = await waitFor(() => roles(), {
      what: "an active and a standby",
      timeoutMs: 60_000,
      retryOnError: true,
    });
    // Through the standby with a certificate, which curl presents to every host it is sent to.
    const cert = { cert: readFileSync(security!.cert!), key: readFileSync(security!.key!) };
    const data = randomBytes(3 * 1024 * 1024 + 5);
    const put = await follow(`${standby.httpUrl!}/webhdfs/v1/ha/f.bin?op=CREATE`, "PUT", ca, cert, data);
    expect(put.map((h) => h.status)).toEqual([307, 307, 201]);
    expect(put[0]!.location!.startsWith(active.httpUrl!)).toBe(true);
    const get = await follow(`${standby.httpUrl!}/webhdfs/v1/ha/f.bin?op=OPEN`, "GET", ca, cert);
    expect(get.map((h) => h.status)).toEqual([307, 307, 200]);
    expect(get[2]!.body.equals(data)).toBe(true);

    const admin = makeClient(loadHaAdminProto().HaAdmin, active.address, security);
    try {
      await call(admin, admin.failover, {}, 10_000);
    } finally {
      admin.close();
    }
    const after = await waitFor(
      async () => {
        const r = await roles();
        return r.active.address === standby.address ? r : undefined;
      },
      { what: "the standby to become active", timeoutMs: 60_000, retryOnError: true },
    );
    // A web token is the namenode's own (each signs its own): the new active's, sent to it.
    const token = { token: (await dfs.webToken(600_000)).token };
    const again = await follow(`${after.active.httpUrl!}/webhdfs/v1/ha/f.bin?op=OPEN`, "GET", ca, token);
    expect(again.map((h) => h.status)).toEqual([307, 200]);
    expect(again[1]!.body.equals(data)).toBe(true);
    const write = await follow(`${after.active.httpUrl!}/webhdfs/v1/ha/g.bin?op=CREATE`, "PUT", ca, token, data);
    expect(write.map((h) => h.status)).toEqual([307, 201]);
    // curl drops the token at the standby's redirect to another port: the active asks for one.
    const dropped = await follow(`${after.standby.httpUrl!}/webhdfs/v1/ha/g.bin?op=OPEN`, "GET", ca, token);
    expect(dropped.map((h) => h.status)).toEqual([307, 401]);
  }, 240_000);
});
