/**
 * WebHDFS on real daemons in-process over HTTPS with client certificates under a cluster CA: a namenode and two
 * datanodes. Requests are shaped as curl sends them (and, where curl is installed, sent by curl -L itself): the
 * namenode answers OPEN and CREATE with a 307 to a datanode carrying a sealed ticket; the datanode streams the data as
 * the caller, held to the DFS permissions `harvest fs` is. Files come back byte for byte (whole, and by offset and
 * length); MKDIRS, RENAME, DELETE, LISTSTATUS and GETFILESTATUS answer in WebHDFS's shapes; a stranger, a forged, an
 * expired or a misused ticket, and `..` are refused with WebHDFS's RemoteException and the right status, never a crash.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import type { ClusterCertificates } from "../../localcluster/cluster-ca.js";
import { NameNode } from "../../namenode/index.js";
import { waitFor } from "../wait-for.js";
import { send, startSecureDfs } from "../helpers/secure-dfs.js";
import { startTestDataNode } from "./harness.js";
import type { SecureDfs, WebAnswer, Who } from "../helpers/secure-dfs.js";

const quiet = new Logger("test", "error");
const TICKET_LIFETIME_MS = 4_000;

function remote(a: WebAnswer): { exception?: string; javaClassName?: string } | undefined {
  return (a.json as { RemoteException?: { exception?: string; javaClassName?: string } } | undefined)?.RemoteException;
}

describe("WebHDFS", () => {
  let dir: string;
  let certs: ClusterCertificates;
  let ca: string;
  const users: Record<string, ClientSecurity & { cert: string; key: string }> = {};
  let nn: NameNode;
  const dns: DataNode[] = [];
  let alice: DfsClient;
  let admin: DfsClient;
  let aliceToken: string;
  const as = (name: string): Who => ({ cert: users[name]!.cert, key: users[name]!.key });
  const nnUrl = (path: string): string => `${nn.httpUrl!}/webhdfs/v1${path}`;

  /** Sends to the namenode, then (a 307) the same method and body to where it points, as `curl -L` does. */
  async function follow(method: string, path: string, who: Who, body?: Buffer): Promise<[WebAnswer, WebAnswer?]> {
    const first = await send(nnUrl(path), method, ca, who);
    if (first.status !== 307) return [first];
    const location = first.headers["location"] as string;
    // curl drops the Authorization header for another host or port: the ticket is all the datanode gets.
    return [first, await send(location, method, ca, "nobody", { body })];
  }

  let dfs: SecureDfs;

  beforeAll(async () => {
    dfs = await startSecureDfs("webhdfs", { defaultReplication: 2, webHdfsTicketLifetimeMs: TICKET_LIFETIME_MS });
    ({ dir, certs, ca, nn, admin } = dfs);
    Object.assign(users, dfs.users);
    dns.push(...dfs.dns);
    alice = new DfsClient(nn.address, { security: users["alice"]! });
    aliceToken = (await alice.webToken(600_000)).token;
  }, 60_000);

  afterAll(async () => {
    alice?.close();
    await dfs?.stop();
  });

  it("creates a file in two steps (307 to a datanode, then 201) and reads it back byte for byte", async () => {
    const data = randomBytes(3 * 1024 * 1024 + 123);
    const [redirect, created] = await follow(
      "PUT",
      "/home/alice/data.bin?op=CREATE&permission=640",
      {
        token: aliceToken,
      },
      data,
    );
    expect(redirect.status).toBe(307);
    const location = new URL(redirect.headers["location"] as string);
    expect(dns.map((d) => d.httpUrl)).toContain(location.origin);
    expect(location.pathname).toBe("/webhdfs/v1/home/alice/data.bin");
    expect(location.searchParams.get("op")).toBe("CREATE");
    expect(location.searchParams.get("delegation")).toMatch(/^wh1\./);
    // Sealed: neither the user's name nor the delegation token inside shows.
    expect(location.searchParams.get("delegation")).not.toContain("alice");
    // HDFS's noredirect=true: the same URL as JSON, for clients that would rather not follow a 307.
    const asked = await send(
      nnUrl("/home/alice/data.bin?op=CREATE&overwrite=true&noredirect=true"),
      "PUT",
      ca,
      as("alice"),
    );
    expect(asked.status).toBe(200);
    expect((asked.json as { Location: string }).Location).toMatch(/\/webhdfs\/v1\/home\/alice\/data\.bin\?op=CREATE&/);
    expect(created?.status).toBe(201);
    expect(created?.headers["location"]).toBe(`${nn.httpUrl!}/webhdfs/v1/home/alice/data.bin`);

    const stat = await send(nnUrl("/home/alice/data.bin?op=GETFILESTATUS"), "GET", ca, { token: aliceToken });
    expect(stat.json).toMatchObject({
      FileStatus: { type: "FILE", length: data.length, owner: "alice", permission: "640", replication: 2 },
    });
    const [toDn, read] = await follow("GET", "/home/alice/data.bin?op=OPEN", as("alice"));
    expect(toDn.status).toBe(307);
    expect(read?.status).toBe(200);
    expect(read?.headers["content-length"]).toBe(String(data.length));
    expect(read?.body.equals(data)).toBe(true);

    const [, part] = await follow("GET", "/home/alice/data.bin?op=OPEN&offset=1048570&length=70000", as("alice"));
    expect(part?.body.equals(data.subarray(1_048_570, 1_048_570 + 70_000))).toBe(true);
    const [, tail] = await follow("GET", `/home/alice/data.bin?op=OPEN&offset=${data.length - 5}`, as("alice"));
    expect(tail?.body.equals(data.subarray(data.length - 5))).toBe(true);
    const [, none] = await follow("GET", `/home/alice/data.bin?op=OPEN&offset=${data.length}`, as("alice"));
    expect([none?.status, none?.body.length]).toEqual([200, 0]);
    // What `harvest fs get` reads is the same file.
    const viaClient: Buffer[] = [];
    for await (const c of alice.createReadStream("/home/alice/data.bin")) viaClient.push(c as Buffer);
    expect(Buffer.concat(viaClient).equals(data)).toBe(true);
  });

  it("serves names with spaces and characters outside ASCII, percent-encoded in every URL", async () => {
    const name = "/home/alice/r\u00e9sum\u00e9 2026 #1.txt";
    const url = encodeURI(name).replaceAll("#", "%23");
    const [redirect, created] = await follow("PUT", `${url}?op=CREATE`, as("alice"), Buffer.from("\u00e9t\u00e9"));
    expect(new URL(redirect.headers["location"] as string).pathname).toBe(`/webhdfs/v1${url}`);
    expect(created?.status).toBe(201);
    expect(created?.headers["location"]).toBe(`${nn.httpUrl!}/webhdfs/v1${url}`);
    const [, read] = await follow("GET", `${url}?op=OPEN`, as("alice"));
    expect(read?.body.toString()).toBe("\u00e9t\u00e9");
    expect((await alice.stat(name)).length).toBe(Buffer.byteLength("\u00e9t\u00e9"));
  });

  it("refuses to replace a file without overwrite=true, and replaces it with", async () => {
    const [first] = await follow("PUT", "/home/alice/once.txt?op=CREATE", as("alice"), Buffer.from("one"));
    expect(first.status).toBe(307);
    const [refused] = await follow("PUT", "/home/alice/once.txt?op=CREATE", as("alice"), Buffer.from("two"));
    expect([refused.status, remote(refused)?.exception]).toEqual([403, "FileAlreadyExistsException"]);
    const [, replaced] = await follow(
      "PUT",
      "/home/alice/once.txt?op=CREATE&overwrite=true",
      as("alice"),
      Buffer.from("two"),
    );
    expect(replaced?.status).toBe(201);
    const [, read] = await follow("GET", "/home/alice/once.txt?op=OPEN", as("alice"));
    expect(read?.body.toString()).toBe("two");
  });

  it("makes directories, renames, lists, stats and deletes in WebHDFS's shapes", async () => {
    const put = (path: string): Promise<WebAnswer> => send(nnUrl(path), "PUT", ca, as("alice"));
    expect((await put("/home/alice/a/b?op=MKDIRS&permission=750")).json).toEqual({ boolean: true });
    const b = await send(nnUrl("/home/alice/a/b?op=GETFILESTATUS"), "GET", ca, as("alice"));
    expect(b.json).toMatchObject({
      FileStatus: { type: "DIRECTORY", owner: "alice", permission: "750", pathSuffix: "" },
    });
    await follow("PUT", "/home/alice/a/b/f.txt?op=CREATE", as("alice"), Buffer.from("f"));
    expect((await put("/home/alice/a/b/f.txt?op=RENAME&destination=/home/alice/a/g.txt")).json).toEqual({
      boolean: true,
    });
    // As HDFS answers: a missing source is false, not an error.
    expect((await put("/home/alice/a/nothing?op=RENAME&destination=/home/alice/a/x")).json).toEqual({
      boolean: false,
    });
    expect((await send(nnUrl("/?op=GETHOMEDIRECTORY"), "GET", ca, { token: aliceToken })).json).toEqual({
      Path: "/user/alice",
    });
    const list = await send(nnUrl("/home/alice/a?op=LISTSTATUS"), "GET", ca, as("alice"));
    const statuses = (list.json as { FileStatuses: { FileStatus: { pathSuffix: string; type: string }[] } })
      .FileStatuses.FileStatus;
    expect(statuses.map((s) => [s.pathSuffix, s.type]).sort()).toEqual([
      ["b", "DIRECTORY"],
      ["g.txt", "FILE"],
    ]);
    const notEmpty = await send(nnUrl("/home/alice/a?op=DELETE"), "DELETE", ca, as("alice"));
    expect([notEmpty.status, remote(notEmpty)?.exception]).toEqual([403, "PathIsNotEmptyDirectoryException"]);
    expect((await send(nnUrl("/home/alice/a?op=DELETE&recursive=true"), "DELETE", ca, as("alice"))).json).toEqual({
      boolean: true,
    });
    expect((await send(nnUrl("/home/alice/a?op=DELETE&recursive=true"), "DELETE", ca, as("alice"))).json).toEqual({
      boolean: false,
    });
    const dirOpen = await send(nnUrl("/home/alice?op=OPEN"), "GET", ca, as("alice"));
    expect([dirOpen.status, remote(dirOpen)?.exception]).toEqual([404, "FileNotFoundException"]);
    const dirCreate = await send(nnUrl("/home/alice?op=CREATE&overwrite=true"), "PUT", ca, as("alice"));
    expect([dirCreate.status, remote(dirCreate)?.exception]).toEqual([403, "FileAlreadyExistsException"]);
    const gone = await send(nnUrl("/home/alice/a?op=GETFILESTATUS"), "GET", ca, as("alice"));
    expect([gone.status, remote(gone)]).toEqual([
      404,
      expect.objectContaining({ exception: "FileNotFoundException", javaClassName: "java.io.FileNotFoundException" }),
    ]);
  });

  it("holds a stranger to the DFS permissions on the namenode and on the datanode", async () => {
    await follow("PUT", "/home/alice/private.txt?op=CREATE&permission=600", as("alice"), Buffer.from("secret"));
    const [read] = await follow("GET", "/home/alice/private.txt?op=OPEN", as("bob"));
    expect([read.status, remote(read)?.exception]).toEqual([403, "AccessControlException"]);
    // Bob may look into alice's home (755) but not write there: the datanode's create, as bob, is refused.
    const [toDn, write] = await follow("PUT", "/home/alice/bobs.txt?op=CREATE", as("bob"), Buffer.from("x"));
    expect(toDn.status).toBe(307);
    expect([write?.status, remote(write!)?.exception]).toEqual([403, "AccessControlException"]);
    expect((await send(nnUrl("/home/alice/bobs.txt?op=GETFILESTATUS"), "GET", ca, as("alice"))).status).toBe(404);
    for (const [method, path] of [
      ["PUT", "/home/alice/x?op=MKDIRS"],
      ["DELETE", "/home/alice/private.txt?op=DELETE"],
      ["PUT", "/home/alice/private.txt?op=RENAME&destination=/tmp-bob"],
    ] as const) {
      const a = await send(nnUrl(path), method, ca, as("bob"));
      expect([path, a.status, remote(a)?.exception]).toEqual([path, 403, "AccessControlException"]);
    }
    const nobody = await send(nnUrl("/home/alice?op=LISTSTATUS"), "GET", ca, "nobody");
    expect([nobody.status, remote(nobody)?.exception]).toEqual([401, "SecurityException"]);
  });

  it("refuses a missing, forged, misused or expired ticket at the datanode", async () => {
    await follow("PUT", "/home/alice/t.txt?op=CREATE", as("alice"), Buffer.from("ticketed"));
    await follow("PUT", "/home/alice/u.txt?op=CREATE", as("alice"), Buffer.from("other"));
    const redirect = await send(nnUrl("/home/alice/t.txt?op=OPEN"), "GET", ca, as("alice"));
    const location = new URL(redirect.headers["location"] as string);
    const ticket = location.searchParams.get("delegation")!;
    const at = (path: string, op: string, t: string | undefined): string =>
      `${location.origin}/webhdfs/v1${path}?op=${op}` + (t === undefined ? "" : `&delegation=${encodeURIComponent(t)}`);

    const missing = await send(at("/home/alice/t.txt", "OPEN", undefined), "GET", ca, "nobody");
    expect([missing.status, remote(missing)?.exception]).toEqual([401, "SecurityException"]);
    const flipped = ticket.slice(0, -3) + (ticket.endsWith("AAA") ? "BBB" : "AAA");
    for (const forged of [
      flipped,
      "wh1.1.AAAAAAAAAAAAAAAA.AAAA",
      "wh0." + Buffer.from("{}").toString("base64url"),
      "x",
    ]) {
      const a = await send(at("/home/alice/t.txt", "OPEN", forged), "GET", ca, "nobody");
      expect([a.status, remote(a)?.exception]).toEqual([403, "InvalidToken"]);
    }
    // A ticket is for one path and one operation.
    const otherPath = await send(at("/home/alice/u.txt", "OPEN", ticket), "GET", ca, "nobody");
    expect([otherPath.status, remote(otherPath)?.exception]).toEqual([403, "InvalidToken"]);
    const otherOp = await send(at("/home/alice/t.txt", "CREATE", ticket), "PUT", ca, "nobody", {
      body: Buffer.from("!"),
    });
    expect([otherOp.status, remote(otherOp)?.exception]).toEqual([403, "InvalidToken"]);
    const good = await send(location.toString(), "GET", ca, "nobody");
    expect(good.body.toString()).toBe("ticketed");
    // One transfer per ticket: once it is done the datanode cancels the delegation token inside.
    await waitFor(async () => (await send(location.toString(), "GET", ca, "nobody")).status === 401, {
      what: "a used ticket to be refused",
      timeoutMs: 10_000,
    });
    // Followed too late.
    const late = await send(nnUrl("/home/alice/t.txt?op=OPEN"), "GET", ca, as("alice"));
    await new Promise((r) => setTimeout(r, TICKET_LIFETIME_MS + 200));
    const expired = await send(late.headers["location"] as string, "GET", ca, "nobody");
    expect([expired.status, remote(expired)?.exception]).toEqual([403, "InvalidToken"]);
    expect((expired.json as { error: { message: string } }).error.message).toContain("expired");
  });

  it("refuses `..`, bad numbers and unknown operations with IllegalArgumentException, and keeps serving", async () => {
    for (const [method, path] of [
      ["GET", "/home/alice/../../etc?op=OPEN"],
      ["GET", "/home/%2e%2e/etc?op=LISTSTATUS"],
      ["PUT", "/home/alice/../x?op=CREATE"],
      ["PUT", "/home/alice/a?op=RENAME&destination=/home/../etc"],
      ["PUT", "/home/alice/a?op=RENAME"],
      ["GET", "/home/alice/data.bin?op=OPEN&offset=-1"],
      ["GET", "/home/alice/data.bin?op=OPEN&length=1e3"],
      ["PUT", "/home/alice/n?op=CREATE&overwrite=maybe"],
      ["PUT", "/home/alice/n?op=CREATE&permission=999"],
      ["PUT", "/home/alice/n?op=MKDIRS&permission=rwx"],
      ["GET", "/home/alice?op=NOSUCHOP"],
      ["PUT", "/home/alice?op=OPEN"],
      ["DELETE", "/home/alice?op=RENAME"],
      ["DELETE", "/home/alice?op=DELETE&recursive=yes"],
    ] as const) {
      const a = await send(nnUrl(path), method, ca, as("alice"));
      expect([method, path, a.status, remote(a)?.exception]).toEqual([method, path, 400, "IllegalArgumentException"]);
    }
    const post = await send(nnUrl("/home/alice/data.bin?op=APPEND"), "POST", ca, as("alice"));
    expect(post.status).toBe(405);
    const putInfo = await send(`${nn.httpUrl!}/ws/v1/nn/info`, "PUT", ca, as("alice"));
    expect([putInfo.status, putInfo.headers["allow"]]).toEqual([405, "GET, HEAD"]);
    // `..` at the datanode too, whatever the ticket.
    const redirect = await send(nnUrl("/home/alice/data.bin?op=OPEN"), "GET", ca, as("alice"));
    const location = new URL(redirect.headers["location"] as string);
    const dotted = await send(
      `${location.origin}/webhdfs/v1/home/alice/../alice/data.bin?${location.searchParams.toString()}`,
      "GET",
      ca,
      "nobody",
    );
    expect([dotted.status, remote(dotted)?.exception]).toEqual([400, "IllegalArgumentException"]);
    expect((await send(nnUrl("/home/alice?op=GETFILESTATUS"), "GET", ca, as("alice"))).status).toBe(200);
  });

  it("leaves no half-written file when the upload stops midway, so that a retry goes through", async () => {
    const redirect = await send(nnUrl("/home/alice/cut.bin?op=CREATE"), "PUT", ca, as("alice"));
    const location = new URL(redirect.headers["location"] as string);
    const req = https.request({
      host: location.hostname,
      port: location.port,
      path: location.pathname + location.search,
      method: "PUT",
      headers: { "content-length": String(8 << 20) },
      ca: readFileSync(ca),
      agent: false,
    });
    req.on("error", () => undefined);
    req.write(randomBytes(2 << 20));
    // The file is there, open, while the upload runs; then the client goes away.
    await waitFor(
      async () => {
        const stat = await send(nnUrl("/home/alice/cut.bin?op=GETFILESTATUS"), "GET", ca, as("alice"));
        return (stat.json as { FileStatus?: { complete: boolean } }).FileStatus?.complete === false || undefined;
      },
      { what: "the upload's file to be open", timeoutMs: 15_000 },
    );
    req.destroy();
    await waitFor(
      async () => (await send(nnUrl("/home/alice/cut.bin?op=GETFILESTATUS"), "GET", ca, as("alice"))).status === 404,
      { what: "the cut upload's file to be removed", timeoutMs: 15_000 },
    );
    const [, retried] = await follow("PUT", "/home/alice/cut.bin?op=CREATE", as("alice"), Buffer.from("whole"));
    expect(retried?.status).toBe(201);
  });

  it("refuses a datanode registration whose web URL is not an http(s) origin: no redirect can point elsewhere", async () => {
    for (const webUrl of [
      "javascript:alert(1)",
      "https://evil.example/steal?x=",
      "https://u:p@127.0.0.1:1",
      "file:///",
    ]) {
      const client = makeClient(loadHarvestProto().DatanodeProtocol, nn.address, certs.daemons["dn2"]!);
      const stream = client.datanodeChannel();
      const refused = await new Promise<string>((resolve) => {
        stream.on("error", (err: Error) => resolve(err.message));
        stream.on("data", () => resolve("answered"));
        stream.write({
          register: { datanodeId: "rogue", address: "127.0.0.1:1", rack: "", capacityBytes: 1, webUrl },
        });
      });
      stream.cancel();
      client.close();
      expect([webUrl, refused]).toEqual([webUrl, expect.stringContaining("is not http(s)://host:port")]);
    }
    expect((await admin.datanodes()).map((d) => d.datanodeId).sort()).toEqual(["dn1", "dn2"]);
  });

  it.skipIf(!existsSync("/usr/bin/curl"))("works end to end with curl -L and a bearer web token", async () => {
    const run = promisify(execFile);
    const file = join(dir, "curl-in.bin");
    const data = randomBytes(2 * 1024 * 1024 + 7);
    writeFileSync(file, data);
    const auth = ["--cacert", ca, "-H", `Authorization: Bearer ${aliceToken}`, "-sS", "-L", "--fail-with-body"];
    const put = await run("curl", [...auth, "-T", file, "-w", "%{http_code}", nnUrl("/home/alice/curl.bin?op=CREATE")]);
    expect(put.stdout.trim()).toBe("201");
    const out = join(dir, "curl-out.bin");
    await run("curl", [...auth, "-o", out, nnUrl("/home/alice/curl.bin?op=OPEN")]);
    expect(readFileSync(out).equals(data)).toBe(true);
    const list = await run("curl", [...auth, nnUrl("/home/alice?op=LISTSTATUS")]);
    expect(JSON.parse(list.stdout)).toMatchObject({
      FileStatuses: { FileStatus: expect.arrayContaining([expect.objectContaining({ pathSuffix: "curl.bin" })]) },
    });
    // A client certificate instead of a token works as well.
    const viaCert = await run(
      "curl",
      [
        "--cacert",
        ca,
        "--cert",
        users["alice"]!.cert,
        "--key",
        users["alice"]!.key,
        "-sS",
        "-L",
        nnUrl("/home/alice/curl.bin?op=OPEN&offset=5&length=10"),
      ],
      { encoding: "buffer" },
    );
    expect(Buffer.from(viaCert.stdout).equals(data.subarray(5, 15))).toBe(true);
  });
});

describe("WebHDFS on a plaintext cluster", () => {
  it("acts as the user.name it is told, with a clear ticket, under the same permissions", async () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-webhdfs-plain-"));
    const nn = new NameNode(
      { dataDir: join(dir, "nn"), insecure: true, blockTokens: false, defaultReplication: 1, heartbeatIntervalMs: 200 },
      { logger: quiet },
    );
    let dn: DataNode | undefined;
    try {
      await nn.start();
      dn = await startTestDataNode(dir, "dn1", nn.address, { heartbeatIntervalMs: 200, insecure: true });
      const su = new DfsClient(nn.address, { user: nn.options.superuser });
      try {
        await waitFor(async () => (await su.datanodes()).some((d) => d.state === "LIVE") && !nn.inSafeMode, {
          what: "a live datanode",
          timeoutMs: 15_000,
        });
        await su.mkdir("/carol");
        await su.chown("/carol", "carol");
        await su.chmod("/carol", 0o700);
      } finally {
        su.close();
      }
      const url = (path: string): string => `${nn.httpUrl!}/webhdfs/v1${path}`;
      const first = await send(url("/carol/f.txt?op=CREATE&user.name=carol"), "PUT", undefined, "nobody");
      expect(first.status).toBe(307);
      const location = new URL(first.headers["location"] as string);
      expect(location.origin).toBe(dn.httpUrl);
      expect(location.searchParams.get("delegation")).toMatch(/^wh0\./);
      const created = await send(location.toString(), "PUT", undefined, "nobody", { body: Buffer.from("carol's") });
      expect(created.status).toBe(201);
      const stat = await send(url("/carol/f.txt?op=GETFILESTATUS&user.name=carol"), "GET", undefined, "nobody");
      expect(stat.json).toMatchObject({ FileStatus: { owner: "carol", length: 7 } });
      const open = await send(url("/carol/f.txt?op=OPEN&user.name=carol"), "GET", undefined, "nobody");
      const read = await send(open.headers["location"] as string, "GET", undefined, "nobody");
      expect(read.body.toString()).toBe("carol's");
      const dave = await send(url("/carol/f.txt?op=OPEN&user.name=dave"), "GET", undefined, "nobody");
      expect([dave.status, remote(dave)?.exception]).toEqual([403, "AccessControlException"]);
      const badName = await send(url("/carol?op=LISTSTATUS&user.name=a%2Fb"), "GET", undefined, "nobody");
      expect([badName.status, remote(badName)?.exception]).toEqual([400, "IllegalArgumentException"]);
    } finally {
      await dn?.stop();
      await nn.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
