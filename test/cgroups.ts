/**
 * The cgroups a test creates: a group of its own under the shared `harvest-test` parent (so that parallel runs never
 * share or remove each other's groups), and its removal afterwards under every hierarchy it may have used.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";

/** The parent group every test run's group sits under. */
export const TEST_GROUP_PARENT = "harvest-test";

/** The hierarchies a test's group may have been created under (v2, hybrid, and the v1 controllers). */
export const TEST_CGROUP_ROOTS = [
  "/sys/fs/cgroup",
  "/sys/fs/cgroup/unified",
  "/sys/fs/cgroup/cpu",
  "/sys/fs/cgroup/cpuacct",
  "/sys/fs/cgroup/cpu,cpuacct",
  "/sys/fs/cgroup/memory",
];

/** A group name of this run's own: `harvest-test/<label><random hex>`. */
export function testGroupName(label = ""): string {
  return `${TEST_GROUP_PARENT}/${label}${randomBytes(6).toString("hex")}`;
}

/**
 * Removes `groupName` and the groups in it, deepest first, under each hierarchy, and the shared parent when no other
 * run uses it. A group still busy (a process still exiting) is left.
 */
export function removeTestCgroups(groupName: string): void {
  for (const root of TEST_CGROUP_ROOTS) {
    const dir = join(root, groupName);
    if (existsSync(dir)) {
      for (const entry of readdirSync(dir, { withFileTypes: true }))
        if (entry.isDirectory()) rmdirQuietly(join(dir, entry.name));
      rmdirQuietly(dir);
    }
    if (existsSync(join(root, TEST_GROUP_PARENT))) rmdirQuietly(join(root, TEST_GROUP_PARENT));
  }
}

/** Removes an empty directory (a cgroup), leaving one that is busy or already gone. */
export function rmdirQuietly(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Busy (another run's groups, or a process still exiting) or already gone.
  }
}
