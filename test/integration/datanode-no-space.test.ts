/**
 * A full disk under a datanode, for real: its data directory is a 2 MiB tmpfs (mounted by the test, which needs root;
 * skipped otherwise) filled up after the datanode registered, so the namenode still places blocks on it and the
 * write meets ENOSPC. The user sees DATANODE_NO_SPACE, from DfsClient and from `harvest fs put`, never INTERNAL.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { isHarvestError } from "../../common/errors.js";
import { distEntry } from "../../common/paths.js";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import { requireBuild, startTestDataNode, startTestNameNode } from "./harness.js";

const KiB = 1024;

/** Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN). */
function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = mkdtempSync(join(tmpdir(), "harvest-mount-probe-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], { stdio: "ignore" });
    execFileSync("umount", [probe], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** Writes until the file system says ENOSPC. */
function fillUp(path: string): void {
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(64 * KiB, 7);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

describe.skipIf(!canMount())("a datanode whose disk is full", () => {
  let dir: string;
  let disk: string;
  let nn: NameNode;
  let dn: DataNode;
  let dfs: DfsClient;

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-nospace-"));
    disk = join(dir, "disk");
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk]);
    // Heartbeats are slow here, so the namenode keeps believing the disk has room once it is filled.
    nn = await startTestNameNode(dir, { heartbeatIntervalMs: 20_000, datanodeExpiryMs: 120_000 });
    // The capacity option allows far more than the disk has: only the file system can say no.
    dn = await startTestDataNode(disk, "full-dn", nn.address, { dataDir: join(disk, "dn") });
    dfs = new DfsClient(nn.address);
    await waitFor(async () => (await dfs.datanodes()).some((d) => d.remainingBytes > 0), {
      what: "the datanode to report free space",
      intervalMs: 25,
    });
    fillUp(join(disk, "primary-tenant-files"));
  });

  afterAll(async () => {
    dfs?.close();
    await dn?.stop();
    await nn?.stop();
    if (disk) spawnSync("umount", [disk]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("fails a DfsClient write with DATANODE_NO_SPACE", async () => {
    const out = dfs.createWriteStream("/full/a.bin", { replication: 1, blockSizeBytes: 512 * KiB });
    const done = new Promise<void>((resolve, reject) => {
      out.on("error", reject);
      out.on("finish", resolve);
    });
    out.end(randomBytes(300 * KiB));
    const err = await done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isHarvestError(err) ? err.code : err).toBe("DATANODE_NO_SPACE");
  });

  it("makes `harvest fs put` exit 1 naming DATANODE_NO_SPACE", async () => {
    const config = join(dir, "client.json");
    writeFileSync(config, JSON.stringify({ nnAddress: nn.address }));
    const local = join(dir, "b.bin");
    writeFileSync(local, randomBytes(300 * KiB));
    // Not spawnSync: the daemons serve from this very process.
    const cli = spawn(
      process.execPath,
      [
        distEntry("cli/harvest.js"),
        "fs",
        "put",
        local,
        "/full/b.bin",
        "--replication",
        "1",
        "--block-size-mb",
        "1",
      ].concat(["--config", config]),
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    cli.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const status = await new Promise<number | null>((resolve) => cli.on("exit", resolve));
    expect(stderr).toContain("[DATANODE_NO_SPACE]");
    expect(status).toBe(1);
  });
});
