/**
 * The block transfer port (common/block-transfer.ts, datanode/block-server.ts) on a secure cluster: files written and
 * read through it come back byte-identical, the gRPC baseline still works beside it, and the port holds the cluster's
 * security as the gRPC port does: no certificate and no token, a forged token, another CA's certificate, a token for
 * another block, plaintext, and garbage are all refused with a coded error, and the datanode keeps serving.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as net from "node:net";
import * as tls from "node:tls";
import { codeOf } from "../error-code.js";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DfsClient } from "../../client/dfs-client.js";
import { askLocalRead } from "../../client/short-circuit.js";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { BlockConnection, FRAME, FrameReader, packetPieces, TRANSFER_MAGIC } from "../../common/block-transfer.js";
import type { ReadPiece } from "../../common/block-transfer.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { startTestCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";

/** Reads a whole range over the transfer port; resolves with the bytes or rejects with the datanode's error. */
function readRange(address: string, security: ClientSecurity | undefined, request: object): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const conn = BlockConnection.read(address, security, request);
    const parts: Buffer[] = [];
    conn.on("data", (c: ReadPiece) => parts.push(...packetPieces(c).map((p) => Buffer.from(p))));
    conn.on("error", reject);
    conn.on("end", () => resolve(Buffer.concat(parts)));
  });
}

/** Sends raw bytes on a TLS connection with a valid certificate; resolves with the first frame's kind and body. */
function rawExchange(host: string, port: number, security: ClientSecurity, bytes: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port,
      ca: readFileSync(security.ca),
      cert: readFileSync(security.cert!),
      key: readFileSync(security.key!),
    });
    const reader = new FrameReader({ expectMagic: false });
    socket.on("secureConnect", () => socket.write(bytes));
    socket.on("data", (chunk: Buffer) => {
      const [f] = reader.push(chunk);
      if (f?.kind === FRAME.ERROR) resolve(f.error.code);
      else if (f) resolve(`frame ${f.kind}`);
    });
    socket.on("error", () => resolve("connection error"));
    socket.on("close", () => resolve("closed without an answer"));
  });
}

describe("the block transfer port of a secure cluster", () => {
  let c: TestCluster;
  let work: string;
  let admin: ClientSecurity;
  let alice: ClientSecurity;
  let mallory: ClientSecurity;
  let ca: string;
  const data = randomBytes(3 * 1024 * 1024 + 777);

  const dfs = (security: ClientSecurity, transferProtocol = true): DfsClient => c.dfs({ security, transferProtocol });

  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 3, storage: true });
    work = c.work;
    if (!c.desc.security) throw new Error("startTestCluster should start a secure cluster");
    ca = c.desc.security.ca;
    admin = c.desc.security;
    alice = { ca, ...(await issueCertificate(dirname(ca), join(work, "certs"), { name: "alice", role: "user" })) };
    const otherCa = join(work, "other-ca");
    await createCa(otherCa, { name: "Someone else's CA" });
    mallory = { ca, ...(await issueCertificate(otherCa, join(work, "other"), { name: "admin", role: "admin" })) };
  }, 120_000);

  afterAll(() => c?.stop());

  it("writes and reads a file through every datanode's transfer port, byte-identical, and over gRPC too", async () => {
    const local = join(work, "in.bin");
    writeFileSync(local, data);
    const d = dfs(admin);
    await d.mkdir("/bt");
    await d.put(local, "/bt/a.bin", { replication: 3, blockSizeBytes: 1024 * 1024 });
    // The datanodes report the replicas they finalized a few milliseconds after the pipeline's last ack (as HDFS's
    // incremental block reports do): the namenode may name two of the last block's three for a moment after the put.
    const blocks = await waitFor(
      async () => {
        const b = await d.blockLocations("/bt/a.bin");
        return b.blocks.every((x) => x.locations.length >= 3) ? b : undefined;
      },
      { what: "three replicas of every block", timeoutMs: 5_000 },
    );
    expect(blocks.blocks.length).toBe(4);
    for (const b of blocks.blocks) {
      expect(b.locations).toHaveLength(3);
      // Every replica advertises its transfer port: the client wrote and reads through it.
      for (const l of b.locations) expect(l.transferAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    }
    const out = join(work, "out.bin");
    await d.get("/bt/a.bin", out);
    expect(readFileSync(out).equals(data)).toBe(true);
    // The gRPC DataTransfer service still serves the same blocks (the baseline), and writes through it too.
    const viaGrpc = dfs(admin, false);
    const out2 = join(work, "out-grpc.bin");
    await viaGrpc.get("/bt/a.bin", out2);
    expect(readFileSync(out2).equals(data)).toBe(true);
    await viaGrpc.put(local, "/bt/b.bin", { replication: 2 });
    await d.get("/bt/b.bin", join(work, "b.bin"));
    expect(readFileSync(join(work, "b.bin")).equals(data)).toBe(true);
  });

  it("reuses one client's replay slabs from write to write, and every file reads back byte-identical", async () => {
    const d = dfs(admin);
    const files = Array.from({ length: 5 }, (_, i) => randomBytes(2 * 1024 * 1024 + 1000 * i));
    files.forEach((f, i) => writeFileSync(join(work, `pool-${i}.bin`), f));
    const put = (i: number): Promise<unknown> =>
      d.put(join(work, `pool-${i}.bin`), `/bt/pool-${i}.bin`, { replication: 2, blockSizeBytes: 1024 * 1024 });
    await put(0);
    // The first write left its slabs to the client; the next ones take them, one after another and two at once.
    expect(d.slabPool.freeSlabBytes).toBeGreaterThan(0);
    await put(1);
    await put(2);
    await Promise.all([put(3), put(4)]);
    for (const [i, f] of files.entries()) {
      await d.get(`/bt/pool-${i}.bin`, join(work, `pool-out-${i}.bin`));
      expect(readFileSync(join(work, `pool-out-${i}.bin`)).equals(f)).toBe(true);
    }
  });

  it("refuses a peer without a certificate or token, a forged token, another CA, a token for another block", async () => {
    const d = dfs(admin);
    const [first, second] = (await d.blockLocations("/bt/a.bin")).blocks;
    const at = first!.locations[0]!.transferAddress;
    const request = (block: object, blockToken: string): object => ({
      block,
      offset: 0,
      length: 4096,
      clientName: "test",
      blockToken,
    });
    // With the namenode's token, even without a certificate (a job's task): served.
    const served = await readRange(at, { ca }, request(first!.block!, first!.blockToken));
    expect(served.equals(data.subarray(0, 4096))).toBe(true);
    expect(await codeOf(readRange(at, { ca }, request(first!.block!, "")))).toBe("UNAUTHENTICATED");
    const forged = Buffer.from(JSON.stringify({ keyId: 1, blockId: first!.block!.blockId, mode: "READ" })).toString(
      "base64url",
    );
    expect(await codeOf(readRange(at, { ca }, request(first!.block!, `${forged}.AAAA`)))).toBe("UNAUTHENTICATED");
    expect(await codeOf(readRange(at, mallory, request(first!.block!, "")))).toBe("UNAUTHENTICATED");
    // A certificate under the CA still needs the block's own token for the block it asks for.
    expect(await codeOf(readRange(at, alice, request(first!.block!, second!.blockToken)))).toBe("DATANODE_BAD_TOKEN");
    // A plaintext client cannot talk to the TLS port.
    expect(await codeOf(readRange(at, undefined, request(first!.block!, first!.blockToken)))).toBe("UNAVAILABLE");
  });

  it("a client on the datanodes' server reads over the port when they do not serve short-circuit reads", async () => {
    const d = dfs(admin);
    const [first] = (await d.blockLocations("/bt/a.bin")).blocks;
    const request = { block: first!.block, offset: 0, length: 0, clientName: "test", blockToken: first!.blockToken };
    expect(await codeOf(askLocalRead(first!.locations[0]!.transferAddress, admin, request as never))).toBe(
      "DATANODE_SHORT_CIRCUIT_REFUSED",
    );
    // The client asks (it is on their server), is refused, and reads every block over the transfer port.
    const out = join(work, "fallback.bin");
    await d.get("/bt/a.bin", out);
    expect(readFileSync(out).equals(data)).toBe(true);
    expect(d.readStats.shortCircuitReads).toBe(0);
    expect(d.readStats.failovers).toBe(0);
  });

  it("encrypts block data with TLS 1.3's AES-128-GCM, and still serves a TLS 1.2 client", async () => {
    const d = dfs(admin);
    const [first] = (await d.blockLocations("/bt/a.bin")).blocks;
    const [host, port] = first!.locations[0]!.transferAddress.split(":") as [string, string];
    const handshake = (maxVersion: tls.SecureVersion): Promise<{ protocol: string | null; cipher: string }> =>
      new Promise((resolve, reject) => {
        const socket = tls.connect({
          host,
          port: Number(port),
          ca: readFileSync(admin.ca),
          cert: readFileSync(admin.cert!),
          key: readFileSync(admin.key!),
          maxVersion,
        });
        socket.on("secureConnect", () => {
          resolve({ protocol: socket.getProtocol(), cipher: socket.getCipher().name });
          socket.destroy();
        });
        socket.on("error", reject);
      });
    // The client offers Node's default order (AES-256 first); the datanode's order wins.
    expect(await handshake("TLSv1.3")).toEqual({ protocol: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256" });
    const old = await handshake("TLSv1.2");
    expect(old.protocol).toBe("TLSv1.2");
    expect(old.cipher).toMatch(/GCM|CHACHA20/);
  });

  it("answers garbage with a coded error and keeps serving", async () => {
    const d = dfs(admin);
    const [first] = (await d.blockLocations("/bt/a.bin")).blocks;
    const [host, port] = first!.locations[0]!.transferAddress.split(":") as [string, string];
    expect(await rawExchange(host, Number(port), admin, Buffer.from("GET / HTTP/1.1\r\n\r\n"))).toBe(
      "DATANODE_PROTOCOL_ERROR",
    );
    const huge = Buffer.alloc(9);
    huge.writeUInt32BE(0xffffffff, 0);
    expect(await rawExchange(host, Number(port), admin, Buffer.concat([TRANSFER_MAGIC, huge]))).toBe(
      "DATANODE_PROTOCOL_ERROR",
    );
    const unknownKind = Buffer.from([0, 0, 0, 1, 99]);
    expect(await rawExchange(host, Number(port), admin, Buffer.concat([TRANSFER_MAGIC, unknownKind]))).toBe(
      "DATANODE_PROTOCOL_ERROR",
    );
    // A read request whose body is not a ReadBlockRequest.
    const junk = Buffer.concat([Buffer.from([0, 0, 0, 5, FRAME.READ_REQUEST]), Buffer.from([0xff, 0xff, 0xff, 0xff])]);
    expect(await rawExchange(host, Number(port), admin, Buffer.concat([TRANSFER_MAGIC, junk]))).not.toBe(
      "closed without an answer",
    );
    // A plain TCP connection that never finishes its TLS handshake only closes itself.
    await new Promise<void>((resolve) => {
      const s = net.connect(Number(port), host, () => s.end("HBT1garbage"));
      s.on("close", () => resolve());
      s.on("error", () => resolve());
    });
    const out = join(work, "after.bin");
    await d.get("/bt/a.bin", out);
    expect(readFileSync(out).equals(data)).toBe(true);
  });
});
