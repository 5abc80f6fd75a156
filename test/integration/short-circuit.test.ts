/**
 * Short-circuit local reads (client/short-circuit.ts) on a secure cluster whose datanodes serve them: a client on the
 * datanodes' server reads replicas from their files and gets every byte back, whole or in ranges; the datanode tells
 * where the files are only to a holder of the block's token; a replica corrupted on disk is found by the client,
 * reported, and read from another replica.
 */
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import { readAll } from "../dfs-read.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { askLocalRead } from "../../client/short-circuit.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { startTestCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";

describe("short-circuit local reads", () => {
  let c: TestCluster;
  let admin: ClientSecurity;

  // Three blocks and a short tail, not chunk-aligned.
  const data = randomBytes(3 * 1024 * 1024 + 777);

  const dfs = (opts: { shortCircuit?: boolean } = {}): DfsClient => c.dfs({ security: admin, ...opts });

  beforeAll(async () => {
    c = await startTestCluster({
      idleServers: 3,
      storage: true,
      dn: { shortCircuitReads: true, dataDirMode: "750" },
    });
    admin = c.desc.security!;
    const local = join(c.work, "in.bin");
    writeFileSync(local, data);
    const d = dfs();
    await d.mkdir("/sc");
    await d.put(local, "/sc/a.bin", { replication: 3, blockSizeBytes: 1024 * 1024 });
    await d.put(local, "/sc/b.bin", { replication: 3, blockSizeBytes: 1024 * 1024 });
  }, 120_000);

  afterAll(() => c?.stop());

  it("reads every block from its files, byte-identical, whole and in ranges", async () => {
    const d = dfs();
    expect((await readAll(d, "/sc/a.bin")).equals(data)).toBe(true);
    expect(d.readStats.shortCircuitReads).toBe(4);
    expect(d.readStats.failovers).toBe(0);
    // Ranges that start and end mid-chunk and cross block boundaries.
    for (const [offset, length] of [
      [1, 100],
      [1_048_000, 2_000],
      [513, 2 * 1024 * 1024],
      [data.length - 300, 0],
    ] as const)
      expect(
        (await readAll(d, "/sc/a.bin", { offset, length })).equals(
          data.subarray(offset, length ? offset + length : undefined),
        ),
      ).toBe(true);
    await d.get("/sc/a.bin", join(c.work, "out.bin"));
    expect(readFileSync(join(c.work, "out.bin")).equals(data)).toBe(true);
    // A client told not to reads the same bytes over the network.
    const remote = dfs({ shortCircuit: false });
    expect((await readAll(remote, "/sc/a.bin")).equals(data)).toBe(true);
    expect(remote.readStats.shortCircuitReads).toBe(0);
  });

  it("opens the datanodes' data directories to their group, as configured, and to no one else", () => {
    for (const n of c.desc.nodes) expect(statSync(n.datanode!.dataDir).mode & 0o777).toBe(0o750);
  });

  it("tells where a replica's files are only to a holder of that block's token", async () => {
    const d = dfs();
    const [first, second] = (await d.blockLocations("/sc/a.bin")).blocks;
    const at = first!.locations[0]!.transferAddress;
    const request = (blockToken: string): object => ({
      block: first!.block,
      offset: 0,
      length: 0,
      clientName: "test",
      blockToken,
    });
    const granted = await askLocalRead(at, { ca: admin.ca }, request(first!.blockToken) as never);
    expect(granted.numBytes).toBe(1024 * 1024);
    expect(readFileSync(granted.dataPath).equals(data.subarray(0, 1024 * 1024))).toBe(true);
    // No certificate and no token; a token for another block; a forged token; plaintext.
    expect(await codeOf(askLocalRead(at, { ca: admin.ca }, request("") as never))).toBe("UNAUTHENTICATED");
    expect(await codeOf(askLocalRead(at, { ca: admin.ca }, request(second!.blockToken) as never))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    const forged = `${Buffer.from(JSON.stringify({ keyId: 1, blockId: first!.block!.blockId, mode: "READ" })).toString("base64url")}.AAAA`;
    expect(await codeOf(askLocalRead(at, { ca: admin.ca }, request(forged) as never))).toBe("UNAUTHENTICATED");
    expect(await codeOf(askLocalRead(at, undefined, request(first!.blockToken) as never))).toBe("UNAVAILABLE");
  });

  it("finds a replica corrupted on disk, reports it, and reads the block from another replica", async () => {
    const blocks = (await dfs().blockLocations("/sc/b.bin")).blocks;
    const second = blocks[1]!;
    // Two of the three replicas get one byte in the middle of their data file flipped. Readers try replicas in a
    // shuffled order: each read may hit a bad one first or the good one.
    const at = 300_000;
    for (const loc of second.locations.slice(0, 2)) {
      const grant = await askLocalRead(loc.transferAddress, { ca: admin.ca }, {
        block: second.block,
        offset: 0,
        length: 0,
        clientName: "test",
        blockToken: second.blockToken,
      } as never);
      const fd = openSync(grant.dataPath, "r+");
      writeSync(fd, Buffer.from([data[1024 * 1024 + at]! ^ 0xff]), 0, 1, at);
      closeSync(fd);
    }
    let found = 0;
    for (let i = 0; i < 10 && found === 0; i++) {
      const d = dfs();
      expect((await readAll(d, "/sc/b.bin")).equals(data)).toBe(true);
      expect(d.readStats.shortCircuitReads).toBeGreaterThanOrEqual(4);
      found += d.readStats.corruptReplicas;
    }
    expect(found).toBeGreaterThan(0);
  });
});
