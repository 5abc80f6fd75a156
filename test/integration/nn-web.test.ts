/**
 * The namenode's web side on real daemons in-process, over HTTPS with client certificates under a cluster CA: a
 * namenode and two datanodes. Without a certificate or web token nothing is served; a user lists what DfsClient just
 * wrote, through WebHDFS, with the DFS permissions the gRPC service applies (another user's private directory is
 * refused) and only valid DFS paths; a web token from GetWebToken stands in for the certificate; fsck is run as its
 * caller on gRPC, REST and the /blocks page (a private directory is refused, with no counts); fsck and datanodes
 * answer exactly what gRPC answers; /metrics is well-formed Prometheus text whose operation counter moves with a
 * write; the pages carry their stable ids and escape what users named; a dead datanode's blocks show as
 * under-replicated on every surface. (test/e2e/web-ui.test.ts opens these pages in a real browser.)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { waitFor } from "../wait-for.js";
import { send, startSecureDfs } from "../helpers/secure-dfs.js";
import type { SecureDfs, Who } from "../helpers/secure-dfs.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import type { ClusterCertificates } from "../../localcluster/cluster-ca.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import { NameNode } from "../../namenode/index.js";
import { parsePromText, sumSamples } from "../prom-text.js";

const quiet = new Logger("test", "error");
const CONTENT = Buffer.from("alice's notes, served over WebHDFS\n".repeat(300));

/** Who asks: a certificate, a bearer token, or nobody (the CA is always trusted). */
interface Answer {
  status: number;
  body: string;
  json: unknown;
}

/** A GET of `path` at `baseUrl`, its body as text. */
async function get(
  baseUrl: string,
  path: string,
  ca: string | undefined,
  who: Who,
  accept = "application/json",
): Promise<Answer> {
  const a = await send(baseUrl + path, "GET", ca, who, { accept });
  return { status: a.status, body: a.body.toString("utf8"), json: a.json };
}

async function write(dfs: DfsClient, path: string, data: Buffer): Promise<void> {
  await pipeline(Readable.from([data]), dfs.createWriteStream(path, { replication: 2 }));
}

function errorCode(a: Answer): string | undefined {
  return (a.json as { error?: { code?: string } } | undefined)?.error?.code;
}

describe("the namenode's web UI, REST API and metrics", () => {
  let certs: ClusterCertificates;
  let ca: string;
  const users: Record<string, ClientSecurity & { cert: string; key: string }> = {};
  let nn: NameNode;
  const dns: DataNode[] = [];
  let alice: DfsClient;
  let bob: DfsClient;
  let admin: DfsClient;
  let url: string;
  const as = (name: string): Who => ({ cert: users[name]!.cert, key: users[name]!.key });
  const api = (path: string, who: Who = as("alice"), accept?: string): Promise<Answer> =>
    get(url, path, ca, who, accept);

  let dfs: SecureDfs;

  beforeAll(async () => {
    dfs = await startSecureDfs("nn-web", { replicationIntervalMs: 200 });
    ({ certs, ca, nn, admin } = dfs);
    Object.assign(users, dfs.users, { ops: { ...certs.admin } });
    dns.push(...dfs.dns);
    url = nn.httpUrl!;
    alice = new DfsClient(nn.address, { security: users["alice"]! });
    bob = new DfsClient(nn.address, { security: users["bob"]! });
    await write(alice, "/home/alice/notes.txt", CONTENT);
  }, 60_000);

  afterAll(async () => {
    for (const c of [alice, bob]) c?.close();
    await dfs?.stop();
  });

  it("serves HTTPS at the URL it reports, and refuses a caller without a certificate or token", async () => {
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    for (const path of ["/webhdfs/v1/?op=LISTSTATUS", "/ws/v1/nn/info", "/ws/v1/nn/fsck", "/"]) {
      const a = await api(path, "nobody");
      expect([path, a.status, errorCode(a)]).toEqual([path, 401, "UNAUTHENTICATED"]);
    }
    const forged = await api("/ws/v1/nn/info", { token: "w1.not-a-token" });
    expect(errorCode(forged)).toBe("UNAUTHENTICATED");
  });

  it("lists a file just written through DfsClient, with its length, owner and mode, in WebHDFS's shape", async () => {
    const a = await api("/webhdfs/v1/home/alice?op=LISTSTATUS");
    expect(a.status).toBe(200);
    expect(a.json).toEqual({
      FileStatuses: {
        FileStatus: [
          expect.objectContaining({
            pathSuffix: "notes.txt",
            type: "FILE",
            length: CONTENT.length,
            owner: "alice",
            group: "harvest",
            permission: "644",
            replication: 2,
            complete: true,
          }),
        ],
      },
    });
    const stat = await api("/webhdfs/v1/home/alice/notes.txt?op=GETFILESTATUS");
    expect(stat.json).toMatchObject({ FileStatus: { pathSuffix: "", type: "FILE", length: CONTENT.length } });
    const root = await api("/webhdfs/v1?op=LISTSTATUS");
    expect(root.json).toMatchObject({ FileStatuses: { FileStatus: [{ pathSuffix: "home", type: "DIRECTORY" }] } });
    const summary = await api("/webhdfs/v1/home?op=GETCONTENTSUMMARY");
    expect(summary.json).toEqual({
      ContentSummary: {
        directoryCount: 2,
        fileCount: 1,
        length: CONTENT.length,
        spaceConsumed: 2 * CONTENT.length,
        quota: -1,
        spaceQuota: -1,
      },
    });
  });

  it("gives block locations on both datanodes, without block tokens", async () => {
    const a = await api("/webhdfs/v1/home/alice/notes.txt?op=GET_BLOCK_LOCATIONS");
    const located = (
      a.json as { LocatedBlocks: { fileLength: number; locatedBlocks: { locations: { datanodeId: string }[] }[] } }
    ).LocatedBlocks;
    expect(located.fileLength).toBe(CONTENT.length);
    expect(located.locatedBlocks).toHaveLength(1);
    expect(located.locatedBlocks[0]!.locations.map((l) => l.datanodeId).sort()).toEqual(["dn1", "dn2"]);
    expect(a.body).not.toContain("blockToken");
    const hadoop = await api("/webhdfs/v1/home/alice/notes.txt?op=GETFILEBLOCKLOCATIONS");
    expect(hadoop.json).toMatchObject({ BlockLocations: { BlockLocation: [{ offset: 0, length: CONTENT.length }] } });
  });

  it("holds web callers to DFS permissions: another user cannot list a private directory", async () => {
    await alice.chmod("/home/alice", 0o700);
    try {
      const refused = await api("/webhdfs/v1/home/alice?op=LISTSTATUS", as("bob"));
      expect([refused.status, errorCode(refused)]).toEqual([403, "DFS_PERMISSION_DENIED"]);
      // Nor learn what is below it, nor sum it up.
      expect(errorCode(await api("/webhdfs/v1/home/alice/nothing?op=GETFILESTATUS", as("bob")))).toBe(
        "DFS_PERMISSION_DENIED",
      );
      expect(errorCode(await api("/webhdfs/v1/home?op=GETCONTENTSUMMARY", as("bob")))).toBe("DFS_PERMISSION_DENIED");
      // The same refusal as over gRPC; the owner and the superuser (an admin certificate) still list it.
      await expect(bob.list("/home/alice")).rejects.toMatchObject({ code: "DFS_PERMISSION_DENIED" });
      expect((await api("/webhdfs/v1/home/alice?op=LISTSTATUS")).status).toBe(200);
      expect((await api("/webhdfs/v1/home/alice?op=LISTSTATUS", as("ops"))).status).toBe(200);
      // The explorer page says so in its frame.
      const page = await api("/explorer?path=/home/alice", as("bob"), "text/html");
      expect(page.status).toBe(403);
      expect(page.body).toContain('id="explorer-error"');
    } finally {
      await alice.chmod("/home/alice", 0o755);
    }
  });

  it("refuses paths that are not valid DFS paths, unknown operations and missing files with coded errors", async () => {
    for (const path of [
      "/webhdfs/v1/home/..%2Falice?op=LISTSTATUS",
      // As sent on the wire: the server must not resolve the dot segments itself and list /etc.
      "/webhdfs/v1/home/alice/../../etc?op=LISTSTATUS",
      "/webhdfs/v1/home/%2e%2e/etc?op=LISTSTATUS",
      "/webhdfs/v1/home//alice?op=LISTSTATUS",
      "/webhdfs/v1/home/a%00b?op=GETFILESTATUS",
      "/ws/v1/nn/fsck?path=/home/../etc",
      "/ws/v1/nn/fsck?path=relative",
    ]) {
      const a = await api(path);
      expect([path, a.status, errorCode(a)]).toEqual([path, 400, "DFS_BAD_PATH"]);
    }
    const unknown = await api("/webhdfs/v1/home?op=DELETE");
    expect([unknown.status, errorCode(unknown)]).toEqual([400, "INVALID_ARGUMENT"]);
    expect((await api("/webhdfs/v1/home")).status).toBe(400);
    const missing = await api("/webhdfs/v1/home/nobody?op=GETFILESTATUS");
    expect([missing.status, errorCode(missing)]).toEqual([404, "NAMENODE_FILE_NOT_FOUND"]);
    expect(errorCode(await api("/webhdfs/v1/home/alice/notes.txt?op=GET_BLOCK_LOCATIONS&offset=-1"))).toBe(
      "INVALID_ARGUMENT",
    );
  });

  it("accepts a web token from GetWebToken as a bearer token for its holder, and only for its holder", async () => {
    const issued = await alice.webToken(60_000);
    expect(issued).toMatchObject({ owner: "alice", role: "user" });
    expect(issued.token).not.toBe("");
    await alice.chmod("/home/alice", 0o700);
    try {
      const mine = await api("/webhdfs/v1/home/alice?op=LISTSTATUS", { token: issued.token });
      expect(mine.status).toBe(200);
      const bobs = await bob.webToken(60_000);
      expect(errorCode(await api("/webhdfs/v1/home/alice?op=LISTSTATUS", { token: bobs.token }))).toBe(
        "DFS_PERMISSION_DENIED",
      );
    } finally {
      await alice.chmod("/home/alice", 0o755);
    }
  });

  it("runs fsck as its caller on gRPC, REST and the page: another user's private directory is refused, no counts", async () => {
    await admin.mkdir("/private");
    await admin.chmod("/private", 0o700);
    await write(admin, "/private/secret.bin", CONTENT);
    const token = (await alice.webToken(60_000)).token;
    try {
      await expect(alice.fsck("/")).rejects.toMatchObject({
        code: "DFS_PERMISSION_DENIED",
        details: { path: "/private" },
      });
      for (const who of [as("alice"), { token }])
        for (const path of ["/ws/v1/nn/fsck?path=/private", "/ws/v1/nn/fsck?path=/", "/ws/v1/nn/fsck"]) {
          const a = await api(path, who);
          expect([path, a.status, errorCode(a)]).toEqual([path, 403, "DFS_PERMISSION_DENIED"]);
          expect(a.body).not.toMatch(/"files"|"totalBytes"/);
        }
      const page = await api("/blocks", as("alice"), "text/html");
      expect(page.status).toBe(403);
      expect(page.body).toContain('id="blocks-error"');
      expect(page.body).toContain("inode=&quot;/private&quot;");
      expect(page.body).not.toContain('id="health-summary"');
      // Her own directory on every surface; everything for the admin.
      expect((await alice.fsck("/home/alice")).files).toBe(1);
      const mine = (await api("/ws/v1/nn/fsck?path=/home/alice")).json as { fsck: { files: number } };
      expect(mine.fsck.files).toBe(1);
      const minePage = await api("/blocks?path=/home/alice", as("alice"), "text/html");
      expect(minePage.status).toBe(200);
      expect(minePage.body).toMatch(
        /<p id="health-summary"><span class="state \w+">\w+<\/span> 1 files, 1 directories/,
      );
      const all = (await api("/ws/v1/nn/fsck", as("ops"))).json as { fsck: { files: number } };
      expect(all.fsck.files).toBe((await admin.fsck("/")).files);
      expect((await admin.fsck("/private")).files).toBe(1);
      const opsPage = await api("/blocks?path=/private", as("ops"), "text/html");
      expect(opsPage.body).toMatch(/<p id="health-summary"><span class="state \w+">\w+<\/span> 1 files, 1 directories/);
    } finally {
      await admin.delete("/private", { recursive: true });
    }
  });

  it("answers fsck, datanodes and info with exactly what the gRPC service answers", async () => {
    const grpcFsck = await admin.fsck("/");
    const web = (await api("/ws/v1/nn/fsck?path=/")).json as { fsck: unknown; underReplicatedByPriority: unknown };
    expect(web.fsck).toEqual(grpcFsck);
    expect(web.underReplicatedByPriority).toEqual({ highest: 0, veryUnderReplicated: 0, underReplicated: 0 });
    const scoped = (await api("/ws/v1/nn/fsck?path=/home/alice")).json as { fsck: unknown };
    expect(scoped.fsck).toEqual(await admin.fsck("/home/alice"));

    const grpcDatanodes = await admin.datanodes();
    const webDatanodes = ((await api("/ws/v1/nn/datanodes")).json as { datanodes: Record<string, unknown>[] })
      .datanodes;
    const stable = (d: Record<string, unknown>): Record<string, unknown> => {
      const { lastHeartbeatMs: _t, usedBytes: _u, remainingBytes: _r, ...rest } = d;
      return rest;
    };
    expect(webDatanodes.map(stable)).toEqual(grpcDatanodes.map((d) => stable({ ...d })));

    const info = ((await api("/ws/v1/nn/info")).json as { nameNodeInfo: Record<string, unknown> }).nameNodeInfo;
    expect(info).toMatchObject({
      address: nn.address,
      httpUrl: url,
      placementPolicy: "stock",
      files: grpcFsck.files,
      directories: grpcFsck.directories,
      blocks: grpcFsck.blocks,
      safeMode: { on: false },
      blockHealth: { underReplicated: 0, missing: 0, corrupt: 0 },
      datanodes: { live: 2, stale: 0, dead: 0 },
    });

    const placement = ((await api("/ws/v1/nn/placement")).json as { placement: Record<string, unknown> }).placement;
    expect(placement).toMatchObject({ policy: "stock", tenants: 0, blocks: 1, replicas: 2, replicasOutsideGrid: 2 });
    expect((placement["rows"] as unknown[]).length).toBe(3);
  });

  it("serves /metrics as Prometheus text whose operation counter moves with a write", async () => {
    const scrape = async (): Promise<ReturnType<typeof parsePromText>> => {
      const a = await api("/metrics", as("ops"), "text/plain");
      expect(a.status).toBe(200);
      return parsePromText(a.body);
    };
    const before = await scrape();
    await write(alice, "/home/alice/more.txt", CONTENT);
    // The gauges settle once the datanodes have reported the new replicas (until then the block has none).
    const after = await waitFor(
      async () => {
        const now = await scrape();
        const settled =
          sumSamples(now, "harvest_nn_files") === sumSamples(before, "harvest_nn_files") + 1 &&
          sumSamples(now, "harvest_nn_missing_blocks") === 0;
        return settled ? now : undefined;
      },
      { what: "the gauges to count the new file with no missing block", timeoutMs: 5_000 },
    );
    for (const op of ["create", "addBlock", "complete"])
      expect(sumSamples(after, "harvest_nn_ops_total", { op, outcome: "ok" }), op).toBe(
        sumSamples(before, "harvest_nn_ops_total", { op, outcome: "ok" }) + 1,
      );
    expect(sumSamples(after, "harvest_nn_op_duration_seconds_count", { op: "create" })).toBeGreaterThan(0);
    // DfsClient sent them on its NamespaceCalls stream, not as unary calls.
    for (const method of ["Create", "AddBlock", "Complete"])
      expect(sumSamples(after, "harvest_grpc_server_handled_total", { method }), method).toBe(0);
    expect(sumSamples(after, "harvest_nn_files")).toBe(sumSamples(before, "harvest_nn_files") + 1);
    expect(sumSamples(after, "harvest_nn_datanodes", { state: "live" })).toBe(2);
    expect(sumSamples(after, "harvest_nn_capacity_bytes")).toBeGreaterThan(0);
    expect(sumSamples(after, "harvest_nn_safe_mode")).toBe(0);
    expect(sumSamples(after, "harvest_nn_missing_blocks")).toBe(0);
    expect(
      after
        .get("harvest_nn_under_replicated_blocks")
        ?.map((s) => s.labels["priority"])
        .sort(),
    ).toEqual(["highest", "under_replicated", "very_under_replicated"]);
    // A refused operation is counted with its code, and the gRPC layer counts the call.
    await expect(bob.delete("/home/alice/more.txt")).rejects.toMatchObject({ code: "DFS_PERMISSION_DENIED" });
    const refused = await scrape();
    expect(sumSamples(refused, "harvest_nn_ops_total", { op: "delete", outcome: "DFS_PERMISSION_DENIED" })).toBe(1);
    expect(sumSamples(refused, "harvest_grpc_server_handled_total", { method: "Delete" })).toBeGreaterThan(0);
  });

  it("renders the pages with their stable ids and escapes the names users gave", async () => {
    await alice.mkdir('/home/alice/<img src=x onerror="alert(1)">');
    await waitFor(async () => (await admin.fsck("/")).underReplicated.length === 0, {
      what: "every block fully replicated",
      timeoutMs: 15_000,
    });
    const html = (path: string): Promise<Answer> => api(path, as("alice"), "text/html");
    const explorer = await html("/explorer?path=%2Fhome%2Falice");
    expect(explorer.status).toBe(200);
    expect(explorer.body).toContain('<tr data-path="/home/alice/notes.txt">');
    expect(explorer.body).toContain("-rw-r--r--");
    expect(explorer.body).not.toContain("<img src=x");
    expect(explorer.body).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
    const file = await html("/explorer?path=/home/alice/notes.txt");
    expect(file.body).toContain('id="blocks"');
    const datanodes = await html("/datanodes");
    expect(datanodes.body).toMatch(/<tr data-datanode="dn1">.*class="dn-state"><span class="state live">LIVE</);
    expect(datanodes.body).toContain('<tr data-datanode="dn2">');
    const blocks = await html("/blocks");
    expect(blocks.body).toMatch(/<p id="health-summary"><span class="state HEALTHY">HEALTHY<\/span>/);
    expect(blocks.body).toContain('<p class="empty" id="under-replicated">');
    const placement = await html("/placement");
    expect(placement.body).toContain('<table id="placement-grid"');
    const overview = await html("/");
    expect(overview.body).toContain('id="summary"');
    expect(overview.body).toContain("alice (user)");
  });

  it("shows a dead datanode's blocks as under-replicated at the highest priority, on every surface", async () => {
    await dns[1]!.stop();
    await waitFor(async () => (await admin.fsck("/")).underReplicated.length === 2, {
      what: "dn2 dead",
      timeoutMs: 15_000,
    });
    const fsck = (await api("/ws/v1/nn/fsck")).json as { underReplicatedByPriority: unknown };
    expect(fsck.underReplicatedByPriority).toEqual({ highest: 2, veryUnderReplicated: 0, underReplicated: 0 });
    const blocks = (await api("/blocks", as("alice"), "text/html")).body;
    expect(blocks).toMatch(/<p id="health-summary"><span class="state DRAINING">UNHEALTHY<\/span>/);
    expect(blocks).toMatch(/<table id="under-replicated">.*<tr data-path="\/home\/alice\/notes.txt"/s);
    const datanodes = (await api("/datanodes", as("alice"), "text/html")).body;
    expect(datanodes).toMatch(/<tr data-datanode="dn2">.*?class="dn-state"><span class="state dead">DEAD</);
    const m = parsePromText((await api("/metrics", as("ops"), "text/plain")).body);
    expect(sumSamples(m, "harvest_nn_under_replicated_blocks", { priority: "highest" })).toBe(2);
    expect(sumSamples(m, "harvest_nn_datanodes", { state: "dead" })).toBe(1);
    expect(sumSamples(m, "harvest_nn_datanodes", { state: "live" })).toBe(1);
  });
});

describe("the namenode's web side on an insecure namenode", () => {
  it("serves plain HTTP to anyone, as the superuser, as the gRPC side trusts whoever calls", async () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-nn-web-insecure-"));
    const nn = new NameNode({ dataDir: join(dir, "nn"), superuser: "hdfs" }, { logger: quiet });
    try {
      await nn.start();
      const hdfs = new DfsClient(nn.address, { user: "hdfs" });
      const carol = new DfsClient(nn.address, { user: "carol" });
      try {
        await hdfs.mkdir("/carol");
        await hdfs.chown("/carol", "carol");
        await carol.chmod("/carol", 0o700);
        await carol.mkdir("/carol/inside");
      } finally {
        hdfs.close();
        carol.close();
      }
      expect(nn.httpUrl).toMatch(/^http:\/\//);
      const a = await get(nn.httpUrl!, "/webhdfs/v1/carol?op=LISTSTATUS", undefined, "nobody");
      expect(a.status).toBe(200);
      expect(a.json).toMatchObject({ FileStatuses: { FileStatus: [{ pathSuffix: "inside", owner: "carol" }] } });
      expect((await get(nn.httpUrl!, "/", undefined, "nobody", "text/html")).body).toContain("insecure cluster");
      // fsck too, as listing: the web caller is the superuser, and carol's private directory is counted.
      const fsck = await get(nn.httpUrl!, "/ws/v1/nn/fsck?path=/carol", undefined, "nobody");
      expect(fsck.json).toMatchObject({ fsck: { files: 0, directories: 2 } });
    } finally {
      await nn.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
