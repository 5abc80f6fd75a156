/**
 * Honest capacity, as HDFS defines it: for a datanode and in total, configured capacity = DFS used + non-DFS used +
 * remaining. Capacity is what a datanode may fill (configured, or its file system's size), DFS used is its replicas,
 * remaining is what it may still write (bounded by its file system's free space), and non-DFS used is the rest:
 * whatever else fills the file system. Datanodes that share a file system (a local cluster's datanodes on one disk:
 * same machine id and file system id) are counted once in totals, so that one disk is never three disks.
 */

/** A datanode's space as it last reported it (register or heartbeat). */
export interface DatanodeSpace {
  datanodeId: string;
  capacityBytes: number;
  usedBytes: number;
  remainingBytes: number;
  /** Empty from a datanode that does not report them: then it is a file system of its own. */
  machineId: string;
  fsId: string;
  /** Its file system's size and free space (0: not reported). */
  fsCapacityBytes: number;
  fsAvailableBytes: number;
}

/** Capacity split into the four numbers that add up (capacity = dfsUsed + nonDfsUsed + remaining). */
export interface CapacityBreakdown {
  capacityBytes: number;
  dfsUsedBytes: number;
  nonDfsUsedBytes: number;
  remainingBytes: number;
}

/**
 * One datanode's four numbers. Non-DFS used is what capacity leaves once replicas and the remaining space are taken
 * out; when replicas exceed the capacity (it was lowered), non-DFS used is 0 and remaining 0, as in HDFS.
 */
export function datanodeCapacity(d: DatanodeSpace): CapacityBreakdown {
  const capacity = Math.max(0, d.capacityBytes);
  const dfsUsed = Math.max(0, d.usedBytes);
  const remaining = Math.max(0, Math.min(d.remainingBytes, capacity - dfsUsed));
  return {
    capacityBytes: capacity,
    dfsUsedBytes: dfsUsed,
    nonDfsUsedBytes: Math.max(0, capacity - dfsUsed - remaining),
    remainingBytes: remaining,
  };
}

/** The key that names a datanode's file system: (machine id, file system id), or the datanode when unknown. */
export function fileSystemKey(d: DatanodeSpace): string {
  return d.machineId && d.fsId ? `${d.machineId}\u0000${d.fsId}` : `datanode\u0000${d.datanodeId}`;
}

/** Totals over `datanodes`, each file system counted once. */
export interface CapacityTotals extends CapacityBreakdown {
  /** Distinct file systems the datanodes store on. */
  fileSystems: number;
}

/**
 * Sums the datanodes' space with each shared file system counted once: its capacity is the smaller of its datanodes'
 * capacities summed and its size, its replicas are all its datanodes' replicas, its remaining space is bounded by its
 * free space once (not once per datanode), and non-DFS used is what is left.
 */
export function capacityTotals(datanodes: Iterable<DatanodeSpace>): CapacityTotals {
  const groups = new Map<string, DatanodeSpace[]>();
  for (const d of datanodes) {
    const key = fileSystemKey(d);
    const g = groups.get(key);
    if (g) g.push(d);
    else groups.set(key, [d]);
  }
  const out: CapacityTotals = {
    capacityBytes: 0,
    dfsUsedBytes: 0,
    nonDfsUsedBytes: 0,
    remainingBytes: 0,
    fileSystems: groups.size,
  };
  for (const group of groups.values()) {
    const g = group.length === 1 ? datanodeCapacity(group[0]!) : sharedCapacity(group);
    out.capacityBytes += g.capacityBytes;
    out.dfsUsedBytes += g.dfsUsedBytes;
    out.nonDfsUsedBytes += g.nonDfsUsedBytes;
    out.remainingBytes += g.remainingBytes;
  }
  return out;
}

/** Several datanodes on one file system, as one. */
function sharedCapacity(group: readonly DatanodeSpace[]): CapacityBreakdown {
  let capacity = 0;
  let dfsUsed = 0;
  let remainingSum = 0;
  let fsSize = 0;
  let fsAvailable = Number.MAX_SAFE_INTEGER;
  for (const d of group) {
    const one = datanodeCapacity(d);
    capacity += one.capacityBytes;
    dfsUsed += one.dfsUsedBytes;
    remainingSum += one.remainingBytes;
    fsSize = Math.max(fsSize, d.fsCapacityBytes);
    // Reports come at different instants: the smallest free space is the latest truth or close to it.
    if (d.fsCapacityBytes > 0) fsAvailable = Math.min(fsAvailable, d.fsAvailableBytes);
  }
  if (fsSize > 0) capacity = Math.min(capacity, fsSize);
  const remaining = Math.max(0, Math.min(remainingSum, fsAvailable, capacity - dfsUsed));
  return {
    capacityBytes: capacity,
    dfsUsedBytes: dfsUsed,
    nonDfsUsedBytes: Math.max(0, capacity - dfsUsed - remaining),
    remainingBytes: remaining,
  };
}
