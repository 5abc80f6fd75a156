/**
 * Zero-copy reads (datanode/zero-copy.ts) on a plaintext cluster of real daemons: two datanodes send reads' data from
 * their block files with sendfile, a third (`zeroCopyReads: false`) reads and verifies every piece first. Every read
 * comes back byte-identical with its checksums from each of them; a bad replica is still found, by the reader, and
 * reported to the namenode; a replica file cut short is marked corrupt by its datanode; a busy primary still stops a
 * read; and the datanodes count the bytes they sent from files.
 */
import { randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, readSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flipByte } from "../flip-byte.js";
import { DfsClient } from "../../client/dfs-client.js";
import { BlockConnection, packetPieces } from "../../common/block-transfer.js";
import type { ReadPiece } from "../../common/block-transfer.js";
import { chunkChecksums } from "../../common/checksum.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import { DataNode } from "../../datanode/index.js";
import { zeroCopyAvailable } from "../../datanode/zero-copy.js";
import type { NameNode } from "../../namenode/index.js";
import { codeOf } from "../error-code.js";
import { parsePromText } from "../prom-text.js";
import { requireBuild, startTestNameNode } from "./harness.js";

const quiet = new Logger("test", "error");
const KiB = 1024;
const MiB = 1024 * KiB;
const BLOCK = 2 * MiB;

interface Block {
  blockId: number;
  genStamp: number;
  numBytes: number;
  /** The namenode's READ token for it. */
  token: string;
}

/** A whole read over a datanode's transfer port: its pieces' bytes and whether every chunk matched its checksum. */
function readRange(
  dn: DataNode,
  block: Block,
  offset = 0,
  length = 0,
): Promise<{ data: Buffer; checksumsMatch: boolean }> {
  return new Promise((resolve, reject) => {
    const conn = BlockConnection.read(dn.transferAddress, undefined, {
      block: { blockId: block.blockId, genStamp: block.genStamp },
      offset,
      length,
      clientName: "test",
      blockToken: block.token,
    });
    const parts: Buffer[] = [];
    let match = true;
    conn.on("data", (p: ReadPiece) => {
      const bytes = Buffer.concat(packetPieces(p));
      if (chunkChecksums(bytes).join() !== p.checksums.join()) match = false;
      parts.push(bytes);
    });
    conn.on("error", reject);
    conn.on("end", () => resolve({ data: Buffer.concat(parts), checksumsMatch: match }));
  });
}

/** A datanode's counter from its /metrics page. */
async function counter(dn: DataNode, name: string): Promise<number> {
  const text = await (await fetch(`${dn.httpUrl}/metrics`)).text();
  return (parsePromText(text).get(name) ?? []).reduce((sum, s) => sum + s.value, 0);
}

/** How the waits below poll. */
const POLL = { timeoutMs: 15_000, intervalMs: 50 };

describe.skipIf(!zeroCopyAvailable())("zero-copy reads on a plaintext cluster", () => {
  let dir: string;
  let nn: NameNode;
  let dfs: DfsClient;
  const dns: DataNode[] = [];
  const monitors: StepPrimaryMonitor[] = [];
  const content = randomBytes(5 * MiB + 333);
  let blocks: Block[];

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-zero-copy-it-"));
    nn = await startTestNameNode(dir);
    for (const [i, zeroCopyReads] of [true, true, false].entries()) {
      const monitor = new StepPrimaryMonitor({ capacityMilli: 1000 });
      const dn = new DataNode(
        {
          datanodeId: `dn${i}`,
          namenodeAddress: nn.address,
          dataDir: join(dir, `dn${i}`),
          zeroCopyReads,
          heartbeatIntervalMs: 200,
          monitorTickMs: 50,
        },
        { logger: quiet, monitor },
      );
      await dn.start();
      dns.push(dn);
      monitors.push(monitor);
    }
    dfs = new DfsClient(nn.address, { maxReadRounds: 1 });
    await waitFor(async () => (await dfs.datanodes()).length === 3, {
      what: "three live datanodes",
      ...POLL,
    });
    writeFileSync(join(dir, "content.bin"), content);
    await dfs.put(join(dir, "content.bin"), "/all.bin", { replication: 3, blockSizeBytes: BLOCK });
    blocks = (await dfs.blockLocations("/all.bin")).blocks.map((b) => ({ ...b.block!, token: b.blockToken }));
    await waitFor(() => blocks.every((b) => dns.every((dn) => dn.store.get(b.blockId) !== undefined)), {
      what: "every replica on every datanode",
      ...POLL,
    });
  });

  afterAll(async () => {
    dfs?.close();
    for (const dn of dns) await dn.stop();
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("sends whole blocks and ranges byte-identical with their checksums, from files or from memory as configured", async () => {
    expect(dns.map((dn) => dn.zeroCopyReadsState)).toEqual(["on", "on", "off"]);
    const before = await Promise.all(dns.map((dn) => counter(dn, "harvest_dn_bytes_read_zero_copy_total")));
    let perNode = 0;
    for (const [i, b] of blocks.entries()) {
      const start = i * BLOCK;
      for (const dn of dns) {
        const whole = await readRange(dn, b);
        expect(whole.checksumsMatch).toBe(true);
        expect(whole.data.equals(content.subarray(start, start + b.numBytes))).toBe(true);
        // A range from the middle of a chunk comes from the chunk that holds it, to the chunk that ends it.
        const part = await readRange(dn, b, 1000, 700_000);
        const from = Math.floor(1000 / 512) * 512;
        const to = Math.min(b.numBytes, Math.ceil((1000 + 700_000) / 512) * 512);
        expect(part.checksumsMatch).toBe(true);
        expect(part.data.equals(content.subarray(start + from, start + to))).toBe(true);
      }
      perNode += b.numBytes + Math.min(b.numBytes, Math.ceil((1000 + 700_000) / 512) * 512) - 512;
    }
    const after = await Promise.all(dns.map((dn) => counter(dn, "harvest_dn_bytes_read_zero_copy_total")));
    expect(after.map((a, i) => a - before[i]!)).toEqual([perNode, perNode, 0]);
    // And end to end through DfsClient.
    const back = join(dir, "back.bin");
    await dfs.get("/all.bin", back, { overwrite: true });
    const copy = Buffer.alloc(content.length);
    const fd = openSync(back, "r");
    readSync(fd, copy, 0, copy.length, 0);
    closeSync(fd);
    expect(copy.equals(content)).toBe(true);
  });

  it("leaves a flipped byte to the reader, who finds it and reports the replica to the namenode", async () => {
    // A file whose one replica is on a datanode that sends from files.
    let path = "";
    let block: Block | undefined;
    for (let i = 0; i < 30 && !block; i++) {
      path = `/one-${i}.bin`;
      await dfs.put(join(dir, "content.bin"), path, { replication: 1, blockSizeBytes: 8 * MiB });
      // The datanode reports the replica a moment after the put returns.
      await waitFor(async () => (await dfs.blockLocations(path)).blocks[0]!.locations.length > 0, {
        what: "the replica's report",
        ...POLL,
      });
      const located = (await dfs.blockLocations(path)).blocks[0]!;
      if (located.locations[0]!.datanodeId !== "dn2") block = { ...located.block!, token: located.blockToken };
    }
    expect(block).toBeDefined();
    const holder = dns.find((dn) => dn.store.get(block!.blockId))!;
    const file = holder.store.localFiles(block!).dataPath;
    flipByte(file, 4321, 0x40);
    // The datanode sends the bytes as they are; their checksums give them away.
    expect((await readRange(holder, block!)).checksumsMatch).toBe(false);
    const read = codeOf(dfs.get(path, join(dir, "never.bin")));
    expect(await read).toBe("DFS_READ_FAILED");
    await waitFor(
      async () =>
        (await dfs.fsck("/")).corrupt.some(
          (c) => c.block?.blockId === block!.blockId && c.datanodes.includes(holder.options.datanodeId),
        ),
      { what: "the namenode to hold the replica corrupt", ...POLL },
    );
  });

  it("marks a replica whose file was cut short corrupt and refuses to send it", async () => {
    const b = blocks[0]!;
    const victim = dns[0]!;
    truncateSync(victim.store.localFiles(b).dataPath, 100_000);
    expect(await codeOf(readRange(victim, b))).toBe("DATANODE_CORRUPT_BLOCK");
    await waitFor(
      async () => (await dfs.fsck("/all.bin")).corrupt.some((c) => c.datanodes.includes(victim.options.datanodeId)),
      { what: "the namenode to hold the replica corrupt", ...POLL },
    );
    // Its other replicas are still served, from their files.
    const other = blocks[1]!;
    expect((await readRange(victim, other)).data.equals(content.subarray(BLOCK, BLOCK + other.numBytes))).toBe(true);
  });

  it("refuses a read while the primary tenant is busy, and serves it once it calms", async () => {
    const dn = dns[1]!;
    const b = blocks[2]!;
    monitors[1]!.set(1000);
    await waitFor(() => dn.primarySample.utilization >= 0.9, {
      what: "the datanode to see its primary busy",
      ...POLL,
    });
    expect(await codeOf(readRange(dn, b))).toBe("DATANODE_PRIMARY_BUSY");
    monitors[1]!.set(0);
    await waitFor(() => dn.primarySample.utilization < 0.9, {
      what: "the datanode to see its primary calm",
      ...POLL,
    });
    expect((await readRange(dn, b)).data.equals(content.subarray(2 * BLOCK))).toBe(true);
  });
});
