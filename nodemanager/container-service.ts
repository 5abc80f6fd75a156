/**
 * The node manager's ContainerManager gRPC service: who may call what, and the calls. The resource manager (a daemon
 * certificate) starts job managers; a job manager (its AM token) starts and stops its own job's tasks; a job's
 * submitter (or an admin) reads its containers' state and logs (container-records.ts `checkAccess`).
 */
import type * as grpc from "@grpc/grpc-js";
import { requireAccess } from "../common/auth.js";
import type { Gate } from "../common/auth.js";
import { unary } from "../common/grpc.js";
import type { loadHarvestProto } from "../common/grpc.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { StartContainerRequestOutput } from "../proto/generated/harvest/v1/StartContainerRequest.js";
import { amMayStart } from "./container-launch.js";
import type { ContainerRecords } from "./container-records.js";

/** What the service's calls do, on the node manager. */
export interface ContainerServiceHandlers {
  records: ContainerRecords;
  /** The cluster CA's path, given to containers (HARVEST_CA); undefined on a plaintext cluster. */
  caPath: string | undefined;
  start(req: StartContainerRequestOutput): Promise<{ pid: number }>;
  stop(containerId: string): { wasRunning: boolean };
  status(containerId: string): ContainerStatus;
}

/** Adds ContainerManager to `server`; returns its gate (whether callers are authenticated, the credentials). */
export function addContainerService(
  server: grpc.Server,
  gates: Gate,
  proto: ReturnType<typeof loadHarvestProto>,
  h: ContainerServiceHandlers,
): ReturnType<Gate["allow"]> {
  const gate = gates.allow(proto.ContainerManager.service, {
    StartContainer: ["daemon", "am-token"],
    StopContainer: ["daemon", "am-token"],
    GetContainerStatus: ["daemon", "am-token", "user", "admin"],
    GetContainerLogs: ["daemon", "am-token", "user", "admin"],
  });
  server.addService(proto.ContainerManager.service, {
    StartContainer: unary(async (req: StartContainerRequestOutput, c) => {
      const who = gate.principal(c);
      if (gate.secure && who.role === "am")
        requireAccess(amMayStart(who, req), who, `start a container of ${req.appId || "?"}`);
      // Containers hold no certificate: they trust the cluster CA and authenticate by their tokens.
      if (h.caPath) req.env = { ...req.env, HARVEST_CA: h.caPath };
      const started = await h.start(req);
      h.records.recordOwner(req.appId, req.container?.user ?? "");
      return started;
    }),
    StopContainer: unary((req: { containerId: string }, c) => {
      h.records.checkAccess(gate.secure, gate.principal(c), req.containerId, "stop");
      return h.stop(req.containerId);
    }),
    GetContainerStatus: unary((req: { containerId: string }, c) => {
      h.records.checkAccess(gate.secure, gate.principal(c), req.containerId, "read the status of");
      return h.status(req.containerId);
    }),
    GetContainerLogs: unary((req: { containerId: string; stream: string; tailBytes: number }, c) => {
      h.records.checkAccess(gate.secure, gate.principal(c), req.containerId, "read the logs of");
      return h.records.readLog(req);
    }),
  });
  return gate;
}
