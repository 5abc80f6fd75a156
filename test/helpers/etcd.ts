/**
 * A throwaway coordination service for tests: one etcd member (the Debian `etcd-server` binary) in a temp dir, with
 * client and peer TLS under a fresh cluster CA (member certificate CN harvest-etcd; the masters' certificate CN
 * harvest-master, role daemon), as docs/ha.md runs one but without auth (tests that check auth enable it themselves).
 * `haveEtcd` is false where /usr/bin/etcd is missing: suites skip then (`describe.skipIf(!haveEtcd)`).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { ETCD_KEEPALIVE_MIN_TIME } from "../../localcluster/etcd-ensemble.js";
import { stablePort } from "../../localcluster/ports.js";
import { Coordination } from "../../common/ha/coordination.js";
import { MasterElection } from "../../common/ha/election.js";
import { Logger } from "../../common/log.js";
import type { HaCoordination } from "../../common/ha/coordination.js";
import { waitFor } from "../wait-for.js";

/** The etcd binary the tests run. */
export const ETCD_BIN = "/usr/bin/etcd";
/** Whether this machine has etcd (tests that need one skip without it). */
export const haveEtcd = existsSync(ETCD_BIN);

/** A running single-member etcd. */
export interface TestEtcd {
  /** Its client URL (`https://127.0.0.1:<port>`). */
  endpoint: string;
  /** The temp dir: `ca/` (the CA and the certificates), `data/`, `etcd.log`. */
  dir: string;
  /** The CA directory (ca.pem, ca-key.pem): issue more certificates with localcluster/cluster-ca.ts. */
  caDir: string;
  /** A master's `haCoordination` option for this member (the harvest-master certificate). */
  coordination(extra?: Partial<HaCoordination>): HaCoordination;
  /** A connection as a master (close it after use). */
  connect(extra?: Partial<HaCoordination>): Coordination;
  /** Stops the member and removes the temp dir; idempotent. */
  stop(): Promise<void>;
}

/** A free loopback port below the kernel's ephemeral range, so a restarted server finds it free (ports.ts). */
export const freePort = (): Promise<number> => stablePort();

/** Starts a single-member TLS etcd in a temp dir; resolves once it answers a master. */
export async function startTestEtcd(): Promise<TestEtcd> {
  const dir = mkdtempSync(join(tmpdir(), "harvest-etcd-"));
  const caDir = join(dir, "ca");
  await createCa(caDir);
  for (const name of ["harvest-etcd", "harvest-master"])
    await issueCertificate(caDir, caDir, { name, role: "daemon", hosts: ["127.0.0.1", "localhost"] });
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const endpoint = `https://127.0.0.1:${clientPort}`;
  const peer = `https://127.0.0.1:${peerPort}`;
  const ca = join(caDir, "ca.pem");
  const cert = join(caDir, "harvest-etcd.pem");
  const key = join(caDir, "harvest-etcd-key.pem");
  const log = openSync(join(dir, "etcd.log"), "a");
  const child: ChildProcess = spawn(
    ETCD_BIN,
    [
      ["--name", "m1"],
      ["--data-dir", join(dir, "data")],
      ["--listen-client-urls", endpoint],
      ["--advertise-client-urls", endpoint],
      ["--listen-peer-urls", peer],
      ["--initial-advertise-peer-urls", peer],
      ["--initial-cluster", `m1=${peer}`],
      ["--initial-cluster-state", "new"],
      ["--client-cert-auth"],
      ["--trusted-ca-file", ca],
      ["--cert-file", cert],
      ["--key-file", key],
      ["--peer-client-cert-auth"],
      ["--peer-trusted-ca-file", ca],
      ["--peer-cert-file", cert],
      ["--peer-key-file", key],
      ["--peer-cert-allowed-cn", "harvest-etcd"],
      ["--auto-compaction-mode", "revision"],
      ["--auto-compaction-retention", "1000"],
      ["--quota-backend-bytes", String(256 * 1024 * 1024)],
      // As the ensembles Harvest starts: the masters ping every second (etcd's default closes such a connection).
      ["--grpc-keepalive-min-time", ETCD_KEEPALIVE_MIN_TIME],
      ["--logger", "zap"],
    ].flat(),
    { stdio: ["ignore", log, log] },
  );
  let exited = false;
  child.once("exit", () => (exited = true));
  const coordination = (extra: Partial<HaCoordination> = {}): HaCoordination => ({
    endpoints: [endpoint],
    ca,
    cert: join(caDir, "harvest-master.pem"),
    key: join(caDir, "harvest-master-key.pem"),
    ...extra,
  });
  const stop = async (): Promise<void> => {
    if (!exited) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5_000))]);
      if (!exited) child.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const probe = new Coordination(coordination());
  try {
    await waitFor(
      async () => {
        if (exited) throw new Error(`etcd exited at start (see ${join(dir, "etcd.log")})`);
        await probe.client.get("/probe").string();
        return true;
      },
      { what: "etcd to answer", timeoutMs: 30_000, retryOnError: true, intervalMs: 200 },
    );
  } catch (err) {
    await stop();
    throw err;
  } finally {
    probe.close();
  }
  return { endpoint, dir, caDir, coordination, connect: (extra) => new Coordination(coordination(extra)), stop };
}

/**
 * A master's candidacy of `id` in `service` on `c`, whose promote and demote only note the role (not started);
 * `active()` says whether it holds the term.
 */
export function testCandidate(
  c: Coordination,
  service: string,
  id: string,
): { election: MasterElection; active: () => boolean } {
  let active = false;
  const election = new MasterElection(
    c,
    service,
    { id, address: id, webUrl: "" },
    {
      promote: async () => {
        active = true;
      },
      demote: async () => {
        active = false;
      },
    },
    new Logger("test", "error"),
  );
  return { election, active: () => active && election.role === "active" };
}
