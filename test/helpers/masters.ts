/** Test helpers for highly available masters: what a resource manager answers, asked directly at one address. */
import { loadHaAdminProto } from "../../common/ha-admin.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { HaStatusOutput } from "../../proto/generated/harvest/v1/HaStatus.js";

/** The node ids the resource manager at `address` lists (rejects with its error, e.g. NOT_ACTIVE on a standby). */
export async function nodesAt(address: string): Promise<string[]> {
  const c = makeClient(loadHarvestProto().ApplicationClientService, address);
  try {
    return (await call(c, c.getClusterNodes, {}, 3_000)).nodes.map((n) => n.nodeId);
  } finally {
    c.close();
  }
}

/** HaAdmin at `address`: its status, or (with `failover`) the hand-over. */
export async function haCall(
  address: string,
  method: "getHaStatus" | "failover" = "getHaStatus",
): Promise<HaStatusOutput> {
  const c = makeClient(loadHaAdminProto().HaAdmin, address);
  try {
    return await call(c, c[method], {}, 5_000);
  } finally {
    c.close();
  }
}
