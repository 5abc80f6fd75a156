/**
 * The coordination service's ensemble, secured (issue 43): a real three-member etcd ensemble under a fresh cluster CA,
 * as `cluster up --ha` starts it. Only the masters' certificate (CN harvest-master) reads or writes Harvest's keys; a
 * user's certificate from the same CA is refused, a client without a certificate is refused at the handshake, a
 * container's account reaches neither a key nor the data; the CA never issues the powerful names to a person. Losing a
 * member leaves a working majority, and the member is replaced on a fresh data directory; the keys survive a restart.
 * `harvest cluster up --ha` starts such an ensemble beside the daemons (an admin's certificate refused there too),
 * `cluster restart etcd-N` brings a dead member back, and `cluster down` stops it.
 * In test/long: the two ensembles and the cluster take about a minute. Skipped where etcd is not installed
 * (Debian's etcd-server; .ci/run installs it).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3, EtcdPermissionDeniedError, GRPCUnavailableError, Range } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import {
  ensembleHealth,
  etcdBinary,
  etcdEndpoints,
  isMemberRunning,
  masterClient,
  readEnsemble,
  replaceEtcdMember,
  startEnsemble,
  stopEnsemble,
  withRootCertificate,
} from "../../localcluster/etcd-ensemble.js";
import type { EnsembleDescriptor } from "../../localcluster/etcd-ensemble.js";
import { isHarvestError } from "../../common/errors.js";
import { runHarvest } from "../processes.js";
import { waitFor } from "../wait-for.js";

const etcd = etcdBinary();
if (!etcd)
  console.warn(
    "etcd-ensemble.test.ts skipped: no etcd at /usr/bin/etcd (apt-get install etcd-server etcd-client, or set $HARVEST_ETCD)",
  );

/** A uid no account on the machine has, as a container's leased account (nodemanager/uid-leases.ts's range). */
const CONTAINER_UID = 61184;

/** A client of the ensemble presenting `tls` (a certificate the cluster CA issued to someone). */
function clientAs(e: EnsembleDescriptor, tls: { ca: string; cert?: string; key?: string }): Etcd3 {
  return new Etcd3({
    hosts: etcdEndpoints(e),
    credentials: {
      rootCertificate: readFileSync(tls.ca),
      ...(tls.key ? { privateKey: readFileSync(tls.key) } : {}),
      ...(tls.cert ? { certChain: readFileSync(tls.cert) } : {}),
    },
    dialTimeout: 3_000,
    defaultCallOptions: () => ({ deadline: Date.now() + 5_000 }),
  });
}

/** What a promise fails with (undefined when it does not). */
async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err;
  }
}

describe.skipIf(!etcd)("an etcd ensemble under the cluster CA", () => {
  let work: string;
  let caDir: string;
  let e: EnsembleDescriptor;
  /** The master's view of a key. */
  const read = async (key: string): Promise<string | null> => {
    const c = await masterClient(e);
    try {
      return await c.get(key).string();
    } finally {
      c.close();
    }
  };
  const write = async (key: string, value: string): Promise<void> => {
    const c = await masterClient(e);
    try {
      await c.put(key).value(value);
    } finally {
      c.close();
    }
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "harvest-etcd-"));
    // Searchable by every account, as a cluster directory is: the container's account must reach the CA certificate.
    chmodSync(work, 0o755);
    caDir = join(work, "security");
    await createCa(caDir);
    chmodSync(caDir, 0o755);
    e = await startEnsemble({ dir: join(work, "etcd"), caDir });
  }, 90_000);

  afterAll(async () => {
    if (e) await stopEnsemble(readEnsemble(e.dir) ?? e);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("lets the masters' certificate write and read Harvest's keys, and nothing outside /harvest/", async () => {
    await write("/harvest/test/leader", "rm-1");
    expect(await read("/harvest/test/leader")).toBe("rm-1");
    const c = await masterClient(e);
    try {
      expect(await failure(c.put("/elsewhere").value("x").exec())).toBeInstanceOf(EtcdPermissionDeniedError);
      expect(await failure(c.get("/elsewhere").string())).toBeInstanceOf(EtcdPermissionDeniedError);
    } finally {
      c.close();
    }
  });

  it("keeps every master write while an operator changes etcd's roles (no 'revision of auth store is old')", async () => {
    // Each role change moves etcd's auth revision; a request checked before one and applied after it is refused, not
    // applied. Without sending such calls again, 47 to 77 of these 1,200 writes failed here.
    const master = await masterClient(e);
    let failed: unknown[] = [];
    await withRootCertificate(caDir, async (rootTls) => {
      const root = clientAs(e, rootTls);
      let changing = true;
      try {
        await root.role("operator-churn").create();
        const changes = (async () => {
          for (let i = 0; changing; i++) {
            await root.role("operator-churn").grant({ permission: "Read", range: Range.prefix(`/churn-${i % 5}/`) });
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })();
        const writers = Array.from({ length: 8 }, async (_, w) => {
          for (let i = 0; i < 150; i++)
            await master
              .put(`/harvest/test/churn/${w}/${i}`)
              .value(String(i))
              .catch((err: unknown) => failed.push(err));
        });
        await Promise.all(writers);
        changing = false;
        await changes;
        await root.role("operator-churn").delete();
      } finally {
        changing = false;
        root.close();
      }
    });
    try {
      failed = failed.map((err) => (err instanceof Error ? err.message : String(err)));
      expect(failed).toEqual([]);
      expect(await master.getAll().prefix("/harvest/test/churn/").count()).toBe(8 * 150);
    } finally {
      master.close();
    }
  });

  it("refuses a user's certificate from the same CA (made by `harvest security issue`) for reads and writes", async () => {
    await write("/harvest/test/user-target", "master's");
    const home = join(work, "operator");
    const r = runHarvest(["security", "issue", "--dir", caDir, "--role", "user", "--name", "alice"], {
      env: { HOME: home, HARVEST_CONF: "", HARVEST_CLUSTER_DIR: join(work, "no-cluster") },
    });
    expect(r.code, r.stderr).toBe(0);
    const bundle = join(caDir, "users", "alice");
    const alice = clientAs(e, {
      ca: join(caDir, "ca.pem"),
      cert: join(bundle, "alice.pem"),
      key: join(bundle, "alice-key.pem"),
    });
    try {
      expect(await failure(alice.get("/harvest/test/user-target").string())).toBeInstanceOf(EtcdPermissionDeniedError);
      expect(await failure(alice.put("/harvest/test/user-target").value("alice's").exec())).toBeInstanceOf(
        EtcdPermissionDeniedError,
      );
      expect(await failure(alice.getAll().prefix("/harvest/").keys())).toBeInstanceOf(EtcdPermissionDeniedError);
    } finally {
      alice.close();
    }
    expect(await read("/harvest/test/user-target")).toBe("master's");
  });

  it("refuses a client without a certificate before any request", async () => {
    await write("/harvest/test/anon-target", "master's");
    const anon = clientAs(e, { ca: join(caDir, "ca.pem") });
    try {
      const put = await failure(anon.put("/harvest/test/anon-target").value("anon").exec());
      const get = await failure(anon.get("/harvest/test/anon-target").string());
      // Refused by TLS (the members demand a client certificate: "alert bad certificate"), not by etcd's auth,
      // which a request would reach: no connection is ever established.
      for (const err of [put, get]) expect(err).toBeInstanceOf(GRPCUnavailableError);
    } finally {
      anon.close();
    }
    expect(await read("/harvest/test/anon-target")).toBe("master's");
  });

  it.skipIf(process.getuid?.() !== 0)(
    "keeps a container's account (another uid, no readable key) from the keys and the members' data",
    async () => {
      await write("/harvest/test/container-target", "master's");
      // The container's program: read the masters' key, the members' key and a member's database; call etcd with
      // only the CA's certificate (all it can read).
      const probe = join(work, "probe.mjs");
      const etcd3Entry = createRequire(import.meta.url).resolve("etcd3");
      writeFileSync(
        probe,
        `import { readFileSync } from "node:fs";
const [etcd3, ca, endpoints, ...files] = process.argv.slice(2);
const { Etcd3 } = await import(etcd3);
const out = { files: {} };
for (const f of files) {
  try { readFileSync(f); out.files[f] = "read"; } catch (err) { out.files[f] = err.code; }
}
const c = new Etcd3({ hosts: endpoints.split(","), credentials: { rootCertificate: readFileSync(ca) }, dialTimeout: 3000 });
try { await c.put("/harvest/test/container-target").value("container's"); out.put = "ok"; } catch (err) { out.put = err.constructor.name; }
try { out.get = await c.get("/harvest/test/container-target").string(); } catch (err) { out.get = err.constructor.name; }
c.close();
console.log(JSON.stringify(out));
`,
        { mode: 0o644 },
      );
      const secrets = [e.masterTls.key, e.memberTls.key, join(e.members[0]!.dataDir, "member", "snap", "db")];
      const r = spawnSync(
        process.execPath,
        [probe, etcd3Entry, join(caDir, "ca.pem"), etcdEndpoints(e).join(","), ...secrets],
        { uid: CONTAINER_UID, gid: CONTAINER_UID, encoding: "utf8", timeout: 60_000, cwd: work },
      );
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { files: Record<string, string>; put: string; get: string };
      for (const f of secrets) expect(out.files[f], f).toBe("EACCES");
      // Without a key it can read, it has no certificate to present: the handshake fails.
      expect(out.put).toBe("GRPCUnavailableError");
      expect(out.get).toBe("GRPCUnavailableError");
      expect(await read("/harvest/test/container-target")).toBe("master's");
    },
  );

  it("never issues root, harvest-master or harvest-etcd to a user or an admin", async () => {
    for (const name of ["root", "harvest-master", "harvest-etcd"])
      for (const role of ["user", "admin"] as const) {
        const err = await failure(issueCertificate(caDir, join(work, "refused"), { name, role }));
        expect(isHarvestError(err, "INVALID_ARGUMENT"), `${name} as ${role}`).toBe(true);
        expect(existsSync(join(work, "refused", `${name}.pem`))).toBe(false);
      }
    const r = runHarvest(["security", "issue", "--dir", caDir, "--role", "user", "--name", "harvest-master"], {
      env: { HOME: join(work, "operator"), HARVEST_CONF: "", HARVEST_CLUSTER_DIR: join(work, "no-cluster") },
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("coordination service");
    expect(existsSync(join(caDir, "users", "harvest-master"))).toBe(false);
  });

  it("keeps writing with two members after one is killed, and has three healthy ones again once it is replaced", async () => {
    await write("/harvest/test/before-loss", "kept");
    const lost = e.members[1]!;
    process.kill(lost.pid, "SIGKILL");
    // Two of three are a majority: a write succeeds (after a new election, if the lost one led).
    await waitFor(
      async () => {
        await write("/harvest/test/with-two", "yes");
        return true;
      },
      { what: "a write with two members", retryOnError: true, timeoutMs: 30_000 },
    );
    e = await replaceEtcdMember(e, lost.name);
    const health = await ensembleHealth(e);
    expect(health.map((h) => h.name)).not.toContain(lost.name);
    expect(health.filter((h) => h.healthy)).toHaveLength(3);
    expect(new Set(health.map((h) => h.leader)).size).toBe(1);
    await write("/harvest/test/after-replace", "yes");
    // The new member (on a fresh data directory) holds what was written before it joined.
    const fresh = e.members.find((m) => !["etcd-1", "etcd-2", "etcd-3"].includes(m.name))!;
    const alone = clientAs({ members: [fresh] } as EnsembleDescriptor, e.masterTls);
    try {
      await waitFor(async () => (await alone.get("/harvest/test/before-loss").string()) === "kept", {
        what: "the replacement member to hold the ensemble's keys",
        retryOnError: true,
      });
    } finally {
      alone.close();
    }
  });

  it("keeps a put through a restart of the whole ensemble", async () => {
    await write("/harvest/test/durable", "through a restart");
    const { stopped } = await stopEnsemble(e);
    expect(stopped).toBe(3);
    expect(await ensembleHealth(e)).toEqual(expect.arrayContaining([expect.objectContaining({ running: false })]));
    e = await startEnsemble({ dir: e.dir, caDir });
    expect(await read("/harvest/test/durable")).toBe("through a restart");
    expect(await read("/harvest/test/after-replace")).toBe("yes");
  });
});

describe.skipIf(!etcd)("harvest cluster up --ha", () => {
  let work: string;
  const harvest = (...args: string[]): ReturnType<typeof runHarvest> =>
    runHarvest([...args, "--dir", join(work, "cluster")], { env: { HOME: work, HARVEST_CONF: "" } });
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "harvest-ha-up-"));
    chmodSync(work, 0o755);
  });
  afterAll(() => {
    if (existsSync(join(work, "cluster", "cluster.json"))) harvest("cluster", "down");
    rmSync(work, { recursive: true, force: true });
  });

  it("refuses --ha without TLS, before starting anything", () => {
    const r = harvest("cluster", "up", "--ha", "--insecure", "--servers", "1");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("CONFIG_INVALID");
    expect(existsSync(join(work, "cluster", "etcd"))).toBe(false);
  });

  it("starts a secured ensemble beside the daemons, restarts a dead member, and stops it with the cluster", async () => {
    const up = harvest("cluster", "up", "--ha", "--servers", "1", "--primary", "trace", "--json");
    expect(up.code, up.stderr).toBe(0);
    const c = JSON.parse(up.stdout) as { etcd: EnsembleDescriptor };
    expect(c.etcd.members.map((m) => m.name)).toEqual(["etcd-1", "etcd-2", "etcd-3"]);
    expect(c.etcd.masterTls.cert).toBe(join(work, "cluster", "security", "harvest-master.pem"));
    const e = c.etcd;
    const master = await masterClient(e);
    try {
      await master.put("/harvest/local/probe").value("up");
      // An admin's certificate from the cluster's CA is not the masters': refused. (The local admin's own is too,
      // unless root started the cluster: its CN is then root, etcd's superuser, as the CA's holder; docs/ha.md.)
      const caDir = join(work, "cluster", "security");
      const ops = runHarvest(
        ["security", "issue", "--dir", caDir, "--role", "admin", "--name", "ops", "--out", join(work, "ops")],
        { env: { HOME: work, HARVEST_CONF: "" } },
      );
      expect(ops.code, ops.stderr).toBe(0);
      const ca = join(caDir, "ca.pem");
      const admin = clientAs(e, { ca, cert: join(work, "ops", "ops.pem"), key: join(work, "ops", "ops-key.pem") });
      try {
        expect(await failure(admin.get("/harvest/local/probe").string())).toBeInstanceOf(EtcdPermissionDeniedError);
        expect(await failure(admin.put("/harvest/local/probe").value("ops").exec())).toBeInstanceOf(
          EtcdPermissionDeniedError,
        );
      } finally {
        admin.close();
      }
    } finally {
      master.close();
    }

    process.kill(e.members[1]!.pid, "SIGKILL");
    await waitFor(() => harvest("cluster", "status").code === 1, { what: "status to report the dead member" });
    const restart = harvest("cluster", "restart", "etcd-2");
    expect(restart.code, restart.stderr).toBe(0);
    const status = harvest("cluster", "status", "--json");
    expect(status.code, status.stderr).toBe(0);
    const daemons = (JSON.parse(status.stdout) as { daemons: { name: string; kind: string; state: string }[] }).daemons;
    expect(daemons.filter((d) => d.kind === "etcd").map((d) => `${d.name} ${d.state}`)).toEqual([
      "etcd-1 running",
      "etcd-2 running",
      "etcd-3 running",
    ]);

    const down = harvest("cluster", "down");
    expect(down.code, down.stderr).toBe(0);
    const after = readEnsemble(e.dir)!;
    expect(after.members.filter((m) => isMemberRunning(m))).toEqual([]);
    expect(existsSync(join(after.members[0]!.dataDir, "member"))).toBe(true);
  });
});
