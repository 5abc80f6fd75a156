/**
 * Highly available namenodes of a whole local cluster (`harvest cluster up --ha`: a three-member etcd ensemble, two
 * resource managers, two namenodes, three servers), as real processes over mutual TLS:
 *
 * - kill -9 the active namenode while files are being written: the standby becomes active (the time is printed; the
 *   issue's goal is 10 s), every acknowledged file reads back byte-identical through a client given both addresses,
 *   and each write in flight either completed or failed with a coded error;
 * - the killed namenode, started again, is a standby following the new active;
 * - replacing a lost master: the standby's store is wiped, `bootstrapStandby` copies the active's checkpoint into it,
 *   it starts again as a standby, and after a graceful hand-over it is the active one and serves every file: the
 *   cluster can lose a master again.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { isHarvestError } from "../../common/errors.js";
import { loadHaAdminProto } from "../../common/ha-admin.js";
import { call, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import {
  clusterDaemons,
  nnAddressesOf,
  readCluster,
  restartDaemon,
  stopCluster,
  stopProcess,
} from "../../localcluster/cluster.js";
import type { DaemonRecord } from "../../localcluster/cluster.js";
import { bootstrapStandby } from "../../namenode/index.js";
import { Coordination } from "../../common/ha/coordination.js";
import type { HaCoordination } from "../../common/ha/coordination.js";
import { SharedLog } from "../../common/ha/shared-log.js";
import { Logger } from "../../common/log.js";
import type { HaStatusOutput } from "../../proto/generated/harvest/v1/HaStatus.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";
import { haveEtcd } from "../helpers/etcd.js";
import { waitFor } from "../wait-for.js";

/** HaAdmin of the master at `address`, as the cluster's admin. */
async function status(address: string, security: ClientSecurity | undefined): Promise<HaStatusOutput> {
  const c = makeClient(loadHaAdminProto().HaAdmin, address, security);
  try {
    return await call(c, c.getHaStatus, {}, 3_000);
  } finally {
    c.close();
  }
}

/** Whether process `pid` exists (a zombie of ours counts as gone: it no longer runs). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function readAll(dfs: DfsClient, path: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of dfs.createReadStream(path)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function writeAll(dfs: DfsClient, path: string, data: Buffer): Promise<void> {
  const w = dfs.createWriteStream(path, { replication: 2 });
  await new Promise<void>((resolve, reject) => {
    w.on("error", reject);
    w.on("finish", resolve);
    w.end(data);
  });
}

describe.skipIf(!haveEtcd)(
  "HA namenodes: kill -9 the active while files are written, then replace a lost master",
  () => {
    let c: TestCluster;
    let security: ClientSecurity | undefined;
    let dfs: DfsClient;
    /** What was acknowledged, by path. */
    const acked = new Map<string, Buffer>();

    /** The namenode records of the cluster, active first. */
    async function masters(): Promise<{
      active: DaemonRecord & { name: string };
      standby: DaemonRecord & { name: string };
    }> {
      const d = readCluster(c.dir);
      const both = [
        { ...d.nn!, name: "nn" },
        { ...d.nn2!, name: "nn2" },
      ];
      const roles = await Promise.all(
        both.map((m) =>
          status(m.address, security).then(
            (s) => s.role,
            () => "down",
          ),
        ),
      );
      const i = roles.indexOf("active");
      if (i < 0) throw new Error(`no active namenode: ${roles.join(", ")}`);
      return { active: both[i]!, standby: both[1 - i]! };
    }

    beforeAll(async () => {
      c = await startTestCluster({ idleServers: 3, ha: true });
      security = c.desc.security;
      dfs = new DfsClient(nnAddressesOf(c.desc), security ? { security } : {});
    }, 180_000);

    afterAll(async () => {
      dfs?.close();
      await c?.stop();
    });

    it("the standby takes over within seconds and every acknowledged file reads back byte-identical", async () => {
      for (let i = 0; i < 8; i++) {
        const data = randomBytes(200_000 + i * 50_000);
        await writeAll(dfs, `/before-${i}`, data);
        acked.set(`/before-${i}`, data);
      }
      const { active, standby } = await masters();
      const before = await status(active.address, security);

      // A writer keeps going through the kill: each write is acknowledged or fails with a coded error.
      let writing = true;
      const failures: string[] = [];
      const writer = (async () => {
        for (let i = 0; writing; i++) {
          const data = randomBytes(100_000);
          try {
            await writeAll(dfs, `/during-${i}`, data);
            acked.set(`/during-${i}`, data);
          } catch (err) {
            failures.push(isHarvestError(err) ? err.code : `uncoded: ${String(err)}`);
          }
        }
      })();
      await new Promise((r) => setTimeout(r, 500));
      const killedMs = Date.now();
      process.kill(active.pid, "SIGKILL");
      await waitFor(async () => (await status(standby.address, security).catch(() => undefined))?.role === "active", {
        what: "the standby namenode to become active",
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      const takeoverMs = Date.now() - killedMs;
      const after = await status(standby.address, security);
      expect(after.epoch).toBeGreaterThan(before.epoch);
      // Writes go on at the new active.
      const ackedAtKill = acked.size;
      await waitFor(() => acked.size >= ackedAtKill + 3, {
        what: "writes to succeed at the new active",
        timeoutMs: 60_000,
      });
      writing = false;
      await writer;
      console.log(
        `namenode failover: new active ${takeoverMs} ms after kill -9; ${acked.size} files acknowledged, ` +
          `${failures.length} writes failed (${[...new Set(failures)].join(", ") || "none"})`,
      );
      expect(failures.filter((f) => f.startsWith("uncoded"))).toEqual([]);
      expect(takeoverMs).toBeLessThan(30_000);

      for (const [path, data] of acked) expect((await readAll(dfs, path)).equals(data), path).toBe(true);

      // The killed namenode comes back as a standby of the new active.
      await restartDaemon(c.dir, active.name);
      await waitFor(
        async () => (await status(active.address, security).catch(() => undefined))?.activeAddress === standby.address,
        { what: "the restarted namenode to follow the new active", timeoutMs: 30_000 },
      );
      expect((await status(active.address, security)).role).toBe("standby");
    }, 240_000);

    it("a lost master is replaced from the active's checkpoint, and the replacement can take over", async () => {
      const { active, standby } = await masters();
      // The standby's host is lost: its store with it.
      await stopProcess(standby, 5_000);
      const dataDir = join(c.dir, standby.name);
      rmSync(join(dataDir, "namespace"), { recursive: true, force: true });
      // More files while only one namenode runs.
      for (let i = 0; i < 3; i++) {
        const data = randomBytes(150_000);
        await writeAll(dfs, `/alone-${i}`, data);
        acked.set(`/alone-${i}`, data);
      }
      // A namenode lost for good under another haId left its mark on the shared log: the bootstrap forgets it.
      const haCoordination = (
        JSON.parse(readFileSync(join(c.dir, "run", `${standby.name}.json`), "utf8")) as {
          haCoordination: HaCoordination;
        }
      ).haCoordination;
      const coordination = new Coordination(haCoordination);
      const log = new SharedLog(coordination, "nn", new Logger("test"));
      try {
        await log.setApplied("nn-lost", 1);
        const copied = await bootstrapStandby({
          dataDir,
          haId: standby.name,
          from: active.address,
          replaces: { haId: "nn-lost", coordination: haCoordination },
          ...(security ? { security } : {}),
        });
        expect(copied.keys).toBeGreaterThan(acked.size);
        const marks = await log.appliedMarks();
        expect(Object.keys(marks)).not.toContain("nn-lost");
        expect(Object.keys(marks)).toContain(standby.name);
      } finally {
        coordination.close();
      }
      await restartDaemon(c.dir, standby.name);
      await waitFor(
        async () => (await status(standby.address, security).catch(() => undefined))?.activeAddress === active.address,
        { what: "the replacement to follow the active", timeoutMs: 30_000 },
      );
      // A graceful hand-over: the replacement becomes the active one.
      const admin = makeClient(loadHaAdminProto().HaAdmin, active.address, security);
      try {
        await call(admin, admin.failover, {}, 10_000);
      } finally {
        admin.close();
      }
      await waitFor(async () => (await status(standby.address, security).catch(() => undefined))?.role === "active", {
        what: "the replacement to become active",
        timeoutMs: 30_000,
      });
      for (const [path, data] of acked) expect((await readAll(dfs, path)).equals(data), path).toBe(true);
      const data = randomBytes(120_000);
      await writeAll(dfs, "/after-replacement", data);
      expect((await readAll(dfs, "/after-replacement")).equals(data)).toBe(true);
    }, 240_000);

    it("cluster down stops every master, restarted ones too, and the ensemble", async () => {
      const daemons = clusterDaemons(c.dir);
      expect(daemons.map((d) => d.name)).toEqual(expect.arrayContaining(["rm", "rm2", "nn", "nn2", "etcd-1"]));
      expect(daemons.filter((d) => !d.running).map((d) => d.name)).toEqual([]);
      await stopCluster(c.dir);
      const pids = daemons.map((d) => d.pid);
      await waitFor(async () => pids.every((pid) => !alive(pid)), { what: "every daemon to exit", timeoutMs: 15_000 });
    }, 60_000);
  },
);
