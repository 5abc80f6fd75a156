/**
 * The names that carry power in the coordination service (etcd takes a certificate's CN as its user): the cluster CA
 * issues root, harvest-master and harvest-etcd to daemons only, never to a person, whatever the path, and no server
 * takes one as its node id (its daemon certificate is issued under that name). The etcd side (a user's certificate
 * refused by a real ensemble) is test/long/etcd-ensemble.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import { RESERVED_IDENTITY_NAMES } from "../../common/tls.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { createCa, issueCertificate, issueClusterCertificates } from "../../localcluster/cluster-ca.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { thrown } from "../error-code.js";

describe("reserved identity names", () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-reserved-"));
    await createCa(join(dir, "ca"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("are refused to users and admins with a coded error naming the field, and nothing is written", async () => {
    expect([...RESERVED_IDENTITY_NAMES].sort()).toEqual(["harvest-etcd", "harvest-master", "root"]);
    for (const name of RESERVED_IDENTITY_NAMES)
      for (const role of ["user", "admin"] as const) {
        const out = join(dir, `${name}-${role}`);
        const err = await issueCertificate(join(dir, "ca"), out, { name, role }).catch((e: unknown) => e);
        expect(isHarvestError(err, "INVALID_ARGUMENT"), `${name} as ${role}`).toBe(true);
        expect(detailsOf(err, "INVALID_ARGUMENT")?.field).toBe("name");
        expect((err as Error).message).toContain("coordination service");
        expect(existsSync(join(out, `${name}.pem`))).toBe(false);
      }
  });

  it("are issued to daemons (the ensemble's members and the masters)", async () => {
    for (const name of ["harvest-etcd", "harvest-master"]) {
      const files = await issueCertificate(join(dir, "ca"), join(dir, "daemons"), {
        name,
        role: "daemon",
        hosts: ["127.0.0.1"],
      });
      expect(existsSync(files.cert)).toBe(true);
    }
  });

  it("are refused as node managers' and datanodes' ids with CONFIG_INVALID naming the field", () => {
    for (const name of RESERVED_IDENTITY_NAMES) {
      const nm = thrown(() => resolveNodeManagerOptions({ nodeId: name, rmAddress: "rm:8032", dataDir: "/d" }));
      expect(nm.code, name).toBe("CONFIG_INVALID");
      expect(detailsOf(nm, "CONFIG_INVALID")?.field).toBe("nodeId");
      expect(nm.message).toContain("coordination service");
      const dn = thrown(() => resolveDataNodeOptions({ datanodeId: name, namenodeAddress: "nn:8020", dataDir: "/d" }));
      expect(dn.code, name).toBe("CONFIG_INVALID");
      expect(detailsOf(dn, "CONFIG_INVALID")?.field).toBe("datanodeId");
    }
    // Names that only look alike are servers' names like any other.
    expect(resolveNodeManagerOptions({ nodeId: "harvest-master-1", rmAddress: "rm:8032", dataDir: "/d" }).nodeId).toBe(
      "harvest-master-1",
    );
    expect(resolveDataNodeOptions({ datanodeId: "root2", namenodeAddress: "nn:8020", dataDir: "/d" }).datanodeId).toBe(
      "root2",
    );
  });

  it("leave a local cluster started by root its admin named root (the CA's own holder)", async () => {
    const certs = await issueClusterCertificates(join(dir, "local"), {
      caName: "test",
      daemons: { rm: ["127.0.0.1"] },
      admin: "root",
      dirMode: 0o755,
    });
    expect(existsSync(certs.admin.cert)).toBe(true);
  });
});
