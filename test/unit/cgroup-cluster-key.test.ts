/** Two clusters on one host never share a container cgroup (nodemanager/cgroups.ts, `cgroupCluster`). */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { clusterCgroupKey, containerCgroupName, detectCgroups } from "../../nodemanager/cgroups.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { thrown } from "../error-code.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-cgroup-key-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * A fake cgroup v2 hierarchy: the unified root with the cpu controller, and the subtree_control files the kernel
 * would show in every group down to `groups`.
 */
function fakeV2(name: string, groups: readonly string[]): string {
  const root = join(tmp, name);
  for (const group of groups) {
    let level = root;
    for (const part of ["", ...group.split("/")]) {
      level = part ? join(level, part) : level;
      mkdirSync(level, { recursive: true });
      writeFileSync(join(level, "cgroup.subtree_control"), "");
    }
  }
  writeFileSync(join(root, "cgroup.controllers"), "cpu\n");
  return root;
}

/** A fake cgroup v1 hierarchy: a cpu controller mount. */
function fakeV1(name: string, _groups: readonly string[]): string {
  const root = join(tmp, name);
  mkdirSync(join(root, "cpu"), { recursive: true });
  writeFileSync(join(root, "cpu", "cpu.cfs_quota_us"), "-1\n");
  return root;
}

describe("container cgroups of two clusters on one host", () => {
  const a = clusterCgroupKey(join(tmp, "cluster-a"));
  const b = clusterCgroupKey(join(tmp, "cluster-b"));

  it("are keyed by each cluster's directory, a key the node manager accepts", () => {
    expect(a).not.toBe(b);
    expect(clusterCgroupKey(join(tmp, "cluster-a") + "/")).toBe(a);
    expect(containerCgroupName({ nodeId: "server-1", cgroupCluster: a })).toBe(`harvest/${a}/server-1`);
    // A deployed server (one cluster per host) keeps the plain group.
    expect(containerCgroupName({ nodeId: "server-1", cgroupCluster: "" })).toBe("harvest/server-1");
    const base = { nodeId: "server-1", rmAddress: "127.0.0.1:1", dataDir: join(tmp, "nm") };
    expect(resolveNodeManagerOptions({ ...base, cgroupCluster: a }).cgroupCluster).toBe(a);
    expect(thrown(() => resolveNodeManagerOptions({ ...base, cgroupCluster: "../x" })).details).toMatchObject({
      field: "cgroupCluster",
    });
  });

  for (const [mode, fake, cpuFile] of [
    ["v2", fakeV2, (root: string, group: string, id: string) => join(root, group, id, "cpu.max")],
    ["v1", fakeV1, (root: string, group: string, id: string) => join(root, "cpu", group, id, "cpu.cfs_quota_us")],
  ] as const) {
    it(`under cgroup ${mode}, get distinct groups for servers of the same name, and one stopping leaves the other's`, () => {
      const groupA = containerCgroupName({ nodeId: "server-1", cgroupCluster: a });
      const groupB = containerCgroupName({ nodeId: "server-1", cgroupCluster: b });
      const root = fake(`${mode}-root`, [groupA, groupB]);
      const nmA = detectCgroups(groupA, mode, root);
      const nmB = detectCgroups(groupB, mode, root);
      expect([nmA.mode, nmB.mode]).toEqual([mode, mode]);
      // The same container id in both clusters (ids restart at 1 per cluster's RM): two groups, two limits.
      const id = "container_1_0001_01_000001";
      nmA.create(id, 1000, 128);
      nmB.create(id, 2000, 128);
      const quota = (group: string): number =>
        Number(
          readFileSync(cpuFile(root, group, id), "utf8")
            .trim()
            .split(" ")[0],
        );
      expect(quota(groupB)).toBe(2 * quota(groupA));
      // Cluster A's node manager stopping removes its own groups only (a fake hierarchy keeps the files the kernel
      // would drop with them): B's container keeps its group and limit.
      nmA.remove(id);
      nmA.close();
      expect(quota(groupB)).toBe(2 * quota(groupA));
      nmB.setLimit(id, 500);
      expect(quota(groupB)).toBe(quota(groupA) / 2);
    });
  }

  // The machine's own hierarchy, where a test may write it (root, cgroup v1 or v2 with the cpu controller).
  const probeKey = `test-${randomBytes(6).toString("hex")}`;
  const probe = detectCgroups(containerCgroupName({ nodeId: "probe", cgroupCluster: probeKey }), "auto");
  probe.close();
  it.runIf(probe.mode !== "none")(
    "on this machine's cgroups, removes a stopping node manager's groups and no other's",
    () => {
      const keys = [`test-${randomBytes(6).toString("hex")}`, `test-${randomBytes(6).toString("hex")}`];
      const [a1, a2, b1] = [
        detectCgroups(containerCgroupName({ nodeId: "server-1", cgroupCluster: keys[0] }), "auto"),
        detectCgroups(containerCgroupName({ nodeId: "server-2", cgroupCluster: keys[0] }), "auto"),
        detectCgroups(containerCgroupName({ nodeId: "server-1", cgroupCluster: keys[1] }), "auto"),
      ];
      const id = `container_${randomBytes(4).toString("hex")}`;
      const procs = [a1!.create(id, 500, 64), b1!.create(id, 500, 64)];
      // Each cluster's server-1 has a group of its own for the same container id.
      expect(new Set(procs.flat()).size).toBe(procs.flat().length);
      for (const file of procs.flat()) expect(existsSync(file), file).toBe(true);
      a1!.remove(id);
      a1!.close();
      for (const file of procs[0]!) expect(existsSync(dirname(file)), file).toBe(false);
      for (const file of procs[1]!) expect(existsSync(file), file).toBe(true);
      // The cluster's level stays while another of its servers uses it, and goes with the last.
      const clusterLevel = (file: string): string => dirname(dirname(dirname(file)));
      expect(existsSync(clusterLevel(procs[0]![0]!))).toBe(true);
      a2!.close();
      expect(existsSync(clusterLevel(procs[0]![0]!))).toBe(false);
      b1!.remove(id);
      b1!.close();
      expect(existsSync(clusterLevel(procs[1]![0]!))).toBe(false);
    },
  );
});
