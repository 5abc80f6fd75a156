import { describe, expect, it } from "vitest";
import { capacityTotals, datanodeCapacity } from "../../namenode/capacity.js";
import type { DatanodeSpace } from "../../namenode/capacity.js";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** A datanode on a 100 GiB disk with 30 GiB free (70 % full), whose capacity is the whole disk. */
function onDisk(id: string, usedBytes: number, over: Partial<DatanodeSpace> = {}): DatanodeSpace {
  const fsAvailableBytes = over.fsAvailableBytes ?? 30 * GiB;
  const capacityBytes = over.capacityBytes ?? 100 * GiB;
  return {
    datanodeId: id,
    capacityBytes,
    usedBytes,
    remainingBytes: Math.min(capacityBytes - usedBytes, fsAvailableBytes),
    machineId: "m1",
    fsId: "dev:2049",
    fsCapacityBytes: 100 * GiB,
    fsAvailableBytes,
    ...over,
  };
}

function sum(c: { dfsUsedBytes: number; nonDfsUsedBytes: number; remainingBytes: number }): number {
  return c.dfsUsedBytes + c.nonDfsUsedBytes + c.remainingBytes;
}

describe("honest capacity", () => {
  it("splits a datanode's capacity into DFS used, non-DFS used and remaining, which add up", () => {
    const c = datanodeCapacity(onDisk("dn1", 100 * MiB));
    expect(c).toEqual({
      capacityBytes: 100 * GiB,
      dfsUsedBytes: 100 * MiB,
      nonDfsUsedBytes: 70 * GiB - 100 * MiB,
      remainingBytes: 30 * GiB,
    });
    expect(sum(c)).toBe(c.capacityBytes);
  });

  it("has no non-DFS use when a configured capacity fits in the free space", () => {
    const c = datanodeCapacity(onDisk("dn1", 100 * MiB, { capacityBytes: GiB }));
    expect(c.nonDfsUsedBytes).toBe(0);
    expect(c.remainingBytes).toBe(GiB - 100 * MiB);
  });

  it("counts three datanodes on one disk once: the disk's size, their replicas, its free space once", () => {
    const t = capacityTotals([onDisk("dn1", 100 * MiB), onDisk("dn2", 200 * MiB), onDisk("dn3", 300 * MiB)]);
    expect(t.fileSystems).toBe(1);
    expect(t.capacityBytes).toBe(100 * GiB);
    expect(t.dfsUsedBytes).toBe(600 * MiB);
    expect(t.remainingBytes).toBe(30 * GiB);
    expect(t.nonDfsUsedBytes).toBe(70 * GiB - 600 * MiB);
    expect(sum(t)).toBe(t.capacityBytes);
  });

  it("sums datanodes on different machines or file systems, and those that name none", () => {
    const t = capacityTotals([
      onDisk("dn1", 100 * MiB),
      onDisk("dn2", 100 * MiB, { machineId: "m2" }),
      onDisk("dn3", 100 * MiB, { fsId: "dev:2050" }),
      onDisk("dn4", 100 * MiB, { machineId: "", fsId: "" }),
      onDisk("dn5", 100 * MiB, { machineId: "", fsId: "" }),
    ]);
    expect(t.fileSystems).toBe(5);
    expect(t.capacityBytes).toBe(500 * GiB);
    expect(t.remainingBytes).toBe(150 * GiB);
    expect(sum(t)).toBe(t.capacityBytes);
  });

  it("bounds datanodes with configured capacities on one disk by their sum, then by the disk", () => {
    const small = capacityTotals([
      onDisk("dn1", 0, { capacityBytes: GiB }),
      onDisk("dn2", 0, { capacityBytes: 2 * GiB }),
    ]);
    expect(small).toMatchObject({ capacityBytes: 3 * GiB, remainingBytes: 3 * GiB, nonDfsUsedBytes: 0 });
    // Two datanodes each allowed 40 GiB of a disk with 30 GiB free: together they can write 30 GiB, not 60.
    const big = capacityTotals([
      onDisk("dn1", 0, { capacityBytes: 40 * GiB }),
      onDisk("dn2", 0, { capacityBytes: 40 * GiB }),
    ]);
    expect(big).toMatchObject({ capacityBytes: 80 * GiB, remainingBytes: 30 * GiB, nonDfsUsedBytes: 50 * GiB });
  });

  it("never reports negative space when replicas exceed a lowered capacity", () => {
    const c = datanodeCapacity(onDisk("dn1", 2 * GiB, { capacityBytes: GiB, remainingBytes: 0 }));
    expect(c).toMatchObject({ nonDfsUsedBytes: 0, remainingBytes: 0 });
  });
});
