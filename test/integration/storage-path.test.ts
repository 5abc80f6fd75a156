/**
 * The storage path end to end with real processes on loopback: a namenode and four datanodes (with the node managers
 * and resource manager of `harvest cluster up`), real block files, real pipelines.
 */
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  createReadStream,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
  openSync,
  writeSync,
  closeSync,
  statSync,
  mkdtempSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flipByte } from "../flip-byte.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { fromGrpcError, isHarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { localDfsClient, restartDaemon } from "../../localcluster/cluster.js";
import { startTestCluster, traceSpec } from "./harness.js";
import type { TestCluster } from "./harness.js";

const MiB = 1024 * 1024;

function writeRandomFile(path: string, bytes: number): string {
  const hash = createHash("sha256");
  const fd = openSync(path, "w");
  for (let left = bytes; left > 0;) {
    const chunk = randomBytes(Math.min(left, 4 * MiB));
    hash.update(chunk);
    writeSync(fd, chunk);
    left -= chunk.length;
  }
  closeSync(fd);
  return hash.digest("hex");
}

async function sha256OfStream(stream: NodeJS.ReadableStream): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Every finalized replica file `blk_<id>` under a datanode's data directory. */
function replicaFiles(dir: string, blockId: number): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === `blk_${blockId}` && p.includes("/current/")) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** How the waits below poll the cluster (an answer may fail while a datanode restarts). */
const POLL = { timeoutMs: 30_000, intervalMs: 250, retryOnError: true };

describe("the file system on four servers", () => {
  let c: TestCluster;
  let dfs: DfsClient;
  let work: string;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 4, nn: { datanodeExpiryMs: 3_000, replicationIntervalMs: 300 } });
    dfs = c.dfs();
    work = c.work;
  });
  afterAll(() => c?.stop());

  it("reads a 50 MiB file with replication 3 back byte-identical", async () => {
    const local = join(work, "fifty.bin");
    const hash = writeRandomFile(local, 50 * MiB);
    const st = await dfs.put(local, "/data/fifty.bin", { replication: 3, blockSizeBytes: 16 * MiB });
    expect(st.length).toBe(50 * MiB);
    expect(st.blocks).toBe(4);
    expect(st.replication).toBe(3);
    expect(await sha256OfStream(dfs.createReadStream("/data/fifty.bin"))).toBe(hash);
    const back = join(work, "fifty.back");
    expect(await dfs.get("/data/fifty.bin", back)).toBe(50 * MiB);
    expect(await sha256OfStream(createReadStream(back))).toBe(hash);
    // Every block has three replicas on three distinct servers.
    const fsck = await waitFor(
      async () => {
        const r = await dfs.fsck("/data");
        return r.underReplicated.length === 0 && r.healthy ? r : undefined;
      },
      { what: "full replication", ...POLL },
    );
    expect(fsck.blocks).toBe(4);
  });

  it("puts from a named pipe, whose reads come short, and the file reads back byte-identical", async () => {
    // `put` reads into buffers it reuses; reads shorter than its 1 MiB must not leave the write stream's queue
    // pointing into a buffer that is being read into again.
    const local = join(work, "pipe-source.bin");
    const hash = writeRandomFile(local, 3 * MiB + 12_345);
    const fifo = join(work, "pipe");
    execFileSync("mkfifo", [fifo]);
    // 20,000 bytes at a time with a pause: every read gets one piece, far under a packet.
    const feed = `const fs = require("fs"); const src = fs.readFileSync(process.argv[1]); const fd = fs.openSync(process.argv[2], "w");
      let at = 0; const next = () => { if (at >= src.length) return fs.closeSync(fd);
        at += fs.writeSync(fd, src, at, Math.min(20000, src.length - at)); setTimeout(next, 1); }; next();`;
    const feeder = spawn(process.execPath, ["-e", feed, local, fifo], { stdio: "ignore" });
    try {
      await dfs.put(fifo, "/from-pipe.bin", { replication: 3, blockSizeBytes: 2 * MiB });
    } finally {
      feeder.kill();
    }
    expect((await dfs.stat("/from-pipe.bin")).length).toBe(3 * MiB + 12_345);
    expect(await sha256OfStream(dfs.createReadStream("/from-pipe.bin"))).toBe(hash);
    // Gone again: the later tests kill a datanode and count on every remaining block for the namenode's safe mode.
    await dfs.delete("/from-pipe.bin");
  });

  it("rejects bad paths and missing files with coded errors", async () => {
    // A relative path is below the caller's home, and may not step out of it either.
    for (const bad of ["relative/../../x", "/a/../b", "/a//b", "/a\0b", "/a/./b"]) {
      const err = await dfs.stat(bad).catch((e: unknown) => e);
      expect(isHarvestError(err) ? err.code : err, bad).toBe("DFS_BAD_PATH");
    }
    const missing = await dfs.stat("/no/such/file").catch((e: unknown) => e);
    expect(isHarvestError(missing) ? missing.code : missing).toBe("NAMENODE_FILE_NOT_FOUND");
    const local = join(work, "small.txt");
    writeFileSync(local, "hello");
    await dfs.put(local, "/small.txt");
    const exists = await dfs.put(local, "/small.txt").catch((e: unknown) => e);
    expect(isHarvestError(exists) ? exists.code : exists).toBe("NAMENODE_FILE_EXISTS");
    const getOver = await dfs.get("/small.txt", local).catch((e: unknown) => e);
    expect(isHarvestError(getOver) ? getOver.code : getOver).toBe("LOCAL_FILE_EXISTS");
  });

  it("detects a flipped byte in a block file, reads from a good replica, and repairs the bad one", async () => {
    const local = join(work, "flip.bin");
    const hash = writeRandomFile(local, 3 * MiB);
    await dfs.put(local, "/flip.bin", { replication: 3 });
    await waitFor(async () => ((await dfs.fsck("/flip.bin")).underReplicated.length === 0 ? true : undefined), {
      what: "replicas",
      ...POLL,
    });
    const located = (await dfs.blockLocations("/flip.bin")).blocks[0]!;
    const block = located.block!;
    const blockId = block.blockId;
    const files = c.desc.nodes.flatMap((n) => replicaFiles(n.datanode!.dataDir, blockId));
    expect(files).toHaveLength(3);
    const victim = files[0]!;
    const victimNode = c.desc.nodes.find((n) => victim.startsWith(n.datanode!.dataDir + "/"))!;
    flipByte(victim, 1000);
    // The datanode holding the flipped byte refuses to serve it (and reports it to the namenode).
    const dt = makeClient(loadHarvestProto().DataTransfer, victimNode.datanode!.address, c.desc.security);
    const err = await new Promise<unknown>((resolve) => {
      const s = dt.readBlock({ block, offset: 0, length: 0, blockToken: located.blockToken });
      s.on("data", () => undefined);
      s.on("error", resolve);
      s.on("end", () => resolve(undefined));
    });
    dt.close();
    expect(isHarvestError(err) ? err.code : fromGrpcError(err).code).toBe("DATANODE_CORRUPT_BLOCK");
    // Clients still read the right bytes, from good replicas.
    for (let i = 0; i < 3; i++) expect(await sha256OfStream(dfs.createReadStream("/flip.bin"))).toBe(hash);
    // The bad replica is reported and replaced: eventually every replica file holds the original bytes.
    await waitFor(
      async () => {
        const now = c.desc.nodes.flatMap((n) => replicaFiles(n.datanode!.dataDir, blockId));
        if (now.length !== 3) return undefined;
        const hashes = now.map((f) => createHash("sha256").update(readFileSync(f)).digest("hex"));
        return new Set(hashes).size === 1 ? true : undefined;
      },
      { what: "repair", ...POLL },
    );
  });

  it("serves a block only with the namenode's token for that block and mode, and keeps serving", async () => {
    const local = join(work, "token.bin");
    const hash = writeRandomFile(local, 1 * MiB);
    await dfs.put(local, "/token.bin", { replication: 3 });
    // The datanodes report what they received a moment after the put returns.
    await waitFor(
      async () => {
        const r = await dfs.fsck("/token.bin");
        return r.underReplicated.length === 0 && r.healthy ? true : undefined;
      },
      { what: "replicas", ...POLL },
    );
    const [mine] = (await dfs.blockLocations("/token.bin")).blocks;
    const [theirs] = (await dfs.blockLocations("/small.txt")).blocks;
    const dt = makeClient(loadHarvestProto().DataTransfer, mine!.locations[0]!.address, c.desc.security);
    const read = (block: unknown, blockToken: string): Promise<string> =>
      new Promise((resolve) => {
        const s = dt.readBlock({ block: block as never, offset: 0, length: 0, blockToken });
        s.on("data", () => undefined);
        s.on("error", (e) => resolve(fromGrpcError(e).code));
        s.on("end", () => resolve("OK"));
      });
    try {
      // A stranger guessing block ids, with no token, or with a token for another block or a forged one.
      expect(await read(mine!.block, "")).toBe("DATANODE_BAD_TOKEN");
      expect(await read({ ...mine!.block!, blockId: mine!.block!.blockId + 1 }, mine!.blockToken)).toBe(
        "DATANODE_BAD_TOKEN",
      );
      expect(await read(mine!.block, theirs!.blockToken)).toBe("DATANODE_BAD_TOKEN");
      const [v, id, payload] = mine!.blockToken.split(".");
      expect(await read(mine!.block, `${v}.${id}.${payload}.${"A".repeat(43)}`)).toBe("DATANODE_BAD_TOKEN");
      // A write needs a WRITE token: the READ token the namenode handed out does not overwrite anything.
      const w = dt.writeBlock();
      const ack = await new Promise<string>((resolve) => {
        w.on("data", (a: { ok: boolean; errorCode: string }) => resolve(a.ok ? "OK" : a.errorCode));
        w.on("error", (e) => resolve(fromGrpcError(e).code));
        w.write({ header: { block: mine!.block, downstream: [], clientName: "x", blockToken: mine!.blockToken } });
      });
      w.end();
      expect(ack).toBe("DATANODE_BAD_TOKEN");
      expect(await read(mine!.block, mine!.blockToken)).toBe("OK");
    } finally {
      dt.close();
    }
    expect(await sha256OfStream(dfs.createReadStream("/token.bin"))).toBe(hash);
  });

  it("brings a reimaged datanode's blocks back to full replication", async () => {
    const local = join(work, "reimage.bin");
    const hash = writeRandomFile(local, 4 * MiB);
    await dfs.put(local, "/reimage.bin", { replication: 3, blockSizeBytes: 1 * MiB });
    await waitFor(async () => ((await dfs.fsck("/reimage.bin")).underReplicated.length === 0 ? true : undefined), {
      what: "replicated",
      ...POLL,
    });
    const holder = c.desc.nodes.find(
      (n) =>
        statSync(n.datanode!.dataDir).isDirectory() &&
        readdirSync(join(n.datanode!.dataDir)).length > 0 &&
        countReplicas(n.datanode!.dataDir) > 0,
    )!;
    const dt = makeClient(loadHarvestProto().DataTransfer, holder.datanode!.address, c.desc.security);
    const res = await call(dt, dt.reimage, {});
    dt.close();
    expect(res.blocksWiped).toBeGreaterThan(0);
    const healed = await waitFor(
      async () => {
        const r = await dfs.fsck("/reimage.bin");
        return r.underReplicated.length === 0 && r.missing.length === 0 && r.healthy ? r : undefined;
      },
      { what: "full replication after the reimage", ...POLL },
    );
    expect(healed.blocks).toBe(4);
    expect(await sha256OfStream(dfs.createReadStream("/reimage.bin"))).toBe(hash);
  });

  it("writes a block again when its pipeline fails at the block's end, after every data packet was acknowledged", async () => {
    // Server-3's finalize of the file's second block fails (the place its data file is moved to is taken by a
    // directory), so that block's last ack comes back not ok after every data packet was acknowledged: the client
    // abandons the block and writes it again on a pipeline without server-3.
    const local = join(work, "tail.bin");
    const hash = writeRandomFile(local, 14 * MiB);
    const writer = localDfsClient(c.desc, { writerDatanodeId: "server-3" });
    await dfs.put(local, "/tail-probe.bin", { replication: 1, blockSizeBytes: 4 * MiB });
    const probe = await dfs.blockLocations("/tail-probe.bin");
    const lastId = Math.max(...probe.blocks.map((b) => b.block!.blockId));
    await dfs.delete("/tail-probe.bin");
    // Nothing else allocates blocks meanwhile: the file's blocks get the next ids.
    const secondId = lastId + 2;
    const dn3 = c.desc.nodes.find((n) => n.nodeId === "server-3")!.datanode!;
    const trap = join(dn3.dataDir, "current", `subdir${secondId % 64}`, `blk_${secondId}`);
    mkdirSync(join(trap, "occupied"), { recursive: true });
    try {
      await writer.put(local, "/tail.bin", { replication: 3, blockSizeBytes: 4 * MiB });
      expect(writer.writeStats.pipelineFailures).toBeGreaterThan(0);
    } finally {
      writer.close();
      rmSync(trap, { recursive: true, force: true });
    }
    expect((await dfs.stat("/tail.bin")).length).toBe(14 * MiB);
    expect(await sha256OfStream(dfs.createReadStream("/tail.bin"))).toBe(hash);
    const blocks = (await dfs.blockLocations("/tail.bin")).blocks;
    expect(blocks.map((b) => b.block!.numBytes)).toEqual([4 * MiB, 4 * MiB, 4 * MiB, 2 * MiB]);
    // The abandoned block is no block of the file, and every block has its three replicas.
    expect(blocks.some((b) => b.block!.blockId === secondId)).toBe(false);
    await waitFor(
      async () => {
        const now = (await dfs.blockLocations("/tail.bin")).blocks;
        return now.every((b) => b.locations.length === 3) ? true : undefined;
      },
      { what: "three replicas of every block", ...POLL },
    );
  });

  it("survives a datanode killed in the middle of a write: the file completes and reads back byte-identical", async () => {
    const local = join(work, "killed.bin");
    const hash = writeRandomFile(local, 24 * MiB);
    // The writer claims to run on server-2, so server-2 holds the first replica of every block: killing it is sure
    // to break the pipeline in use.
    const writer = localDfsClient(c.desc, { writerDatanodeId: "server-2" });
    const victim = c.desc.nodes.find((n) => n.nodeId === "server-2")!.datanode!;
    let killed = false;
    // Through `put`, whose read buffers are read into again while the block is in flight: the replay to the new
    // pipeline must send the block's own bytes, not what the buffers hold by then.
    await writer.put(local, "/killed.bin", {
      replication: 3,
      blockSizeBytes: 4 * MiB,
      onProgress: (bytes) => {
        if (!killed && bytes >= 8 * MiB + 1) {
          killed = true;
          process.kill(victim.pid, "SIGKILL");
        }
      },
    });
    expect(writer.writeStats.pipelineFailures).toBeGreaterThan(0);
    writer.close();
    expect(killed).toBe(true);
    expect((await dfs.stat("/killed.bin")).length).toBe(24 * MiB);
    expect(await sha256OfStream(dfs.createReadStream("/killed.bin"))).toBe(hash);
  });

  it("keeps every completed file across a namenode killed and restarted", async () => {
    const before = new Map<string, string>();
    for (const p of ["/data/fifty.bin", "/flip.bin", "/reimage.bin", "/small.txt"])
      before.set(p, await sha256OfStream(dfs.createReadStream(p)));
    const nn = c.desc.nn!;
    process.kill(nn.pid, "SIGKILL");
    // As an operator would: the same daemon, data directory and config, started again (dead datanodes found sooner).
    const config = JSON.parse(readFileSync(nn.config!, "utf8")) as Record<string, unknown>;
    writeFileSync(nn.config!, JSON.stringify({ ...config, datanodeExpiryMs: 3_000 }));
    const { restarted } = await restartDaemon(c.dir, "nn");
    expect(restarted.map((d) => d.address)).toEqual([nn.address]);
    // Safe mode ends once the datanodes have reported; then every file reads back as it was.
    await waitFor(async () => ((await dfs.fsck("/")).safeMode ? undefined : true), {
      what: "safe mode off",
      timeoutMs: 60_000,
      intervalMs: 250,
      retryOnError: true,
    });
    for (const [p, h] of before) expect(await sha256OfStream(dfs.createReadStream(p)), p).toBe(h);
    expect((await dfs.list("/data")).map((s) => s.path)).toEqual(["/data/fifty.bin"]);
  });
});

function countReplicas(dir: string): number {
  let n = 0;
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/^blk_\d+$/.test(e.name) && p.includes("/current/")) n++;
    }
  };
  walk(dir);
  return n;
}

describe("a read while every replica's primary tenant is busy", () => {
  let c: TestCluster;
  let work: string;
  afterAll(async () => {
    await c?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("is refused by each busy datanode, moves on through the replicas, and completes once the primaries calm", async () => {
    work = mkdtempSync(join(tmpdir(), "harvest-busy-"));
    // One step per second: idle for 12 s (time to start and write), busy for 4 s, then idle.
    const spike = traceSpec(work, "spike", 1, [
      ...Array<number>(12).fill(5),
      ...Array<number>(4).fill(100),
      ...Array<number>(300).fill(5),
    ]);
    c = await startTestCluster({ primaries: [spike, spike, spike], offsetsMs: [0, 0, 0] });
    const dfs = localDfsClient(c.desc);
    try {
      const local = join(work, "busy.bin");
      const hash = writeRandomFile(local, 2 * MiB);
      await dfs.put(local, "/busy.bin", { replication: 3 });
      await waitFor(
        async () => {
          const dns = await dfs.datanodes();
          return dns.length === 3 && dns.every((d) => d.primaryBusy) ? true : undefined;
        },
        { what: "every primary busy", ...POLL },
      );
      expect(await sha256OfStream(dfs.createReadStream("/busy.bin"))).toBe(hash);
      // Every replica refused at least once before the read went through.
      expect(dfs.readStats.busyRefusals).toBeGreaterThanOrEqual(3);
    } finally {
      dfs.close();
    }
  });
});
