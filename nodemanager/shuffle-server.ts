/**
 * The node manager's shuffle service over gRPC: a finished task's outputs (shuffle-service.ts reads them) to the other
 * tasks of its job (their shuffle token) and to its job manager (AM token); never to another job.
 */
import type * as grpc from "@grpc/grpc-js";
import { requireAccess } from "../common/auth.js";
import type { Gate, Principal } from "../common/auth.js";
import { toServiceError } from "../common/errors.js";
import { unary } from "../common/grpc.js";
import type { loadHarvestProto } from "../common/grpc.js";
import { ShuffleOutputs } from "./shuffle-service.js";
import type { ShuffleHost } from "./shuffle-service.js";
import type { FetchOutputRequestOutput } from "../proto/generated/harvest/v1/FetchOutputRequest.js";
import type { OutputChunk } from "../proto/generated/harvest/v1/OutputChunk.js";

/** Adds the ShuffleService to `server`, behind `gate`; `served` counts the bytes of each completed fetch. */
export function addShuffleService(
  server: grpc.Server,
  parentGate: Gate,
  proto: ReturnType<typeof loadHarvestProto>,
  host: ShuffleHost & { served: (bytes: number) => void },
): void {
  const gate = parentGate.allow(proto.ShuffleService.service, {
    ListOutputs: ["daemon", "am-token", "shuffle-token"],
    FetchOutput: ["daemon", "am-token", "shuffle-token"],
  });
  const outputs = new ShuffleOutputs(host);
  const checkJob = (who: Principal, appId: string): void => {
    if (gate.secure && (who.role === "am" || who.role === "task"))
      requireAccess(who.appId === appId, who, `fetch the outputs of ${appId || "?"}`);
  };
  server.addService(proto.ShuffleService.service, {
    ListOutputs: unary(async (req: { appId: string; containerId: string }, c) => {
      checkJob(gate.principal(c), req.appId);
      return { files: await outputs.list(req.appId, req.containerId) };
    }),
    FetchOutput: (call: grpc.ServerWritableStream<FetchOutputRequestOutput, OutputChunk>) => {
      const cancelled = new AbortController();
      call.on("cancelled", () => cancelled.abort());
      const req = call.request;
      const write = (chunk: Buffer): Promise<void> =>
        new Promise((resolve) => {
          if (call.write({ data: chunk })) resolve();
          else call.once("drain", () => resolve());
        });
      Promise.resolve()
        .then(() => {
          checkJob(gate.principal(call), req.appId);
          return outputs.send(req.appId, req.containerId, req.name, Number(req.offset), write, cancelled.signal);
        })
        .then(
          (bytes) => {
            host.served(bytes);
            if (!cancelled.signal.aborted) call.end();
          },
          (err: unknown) => {
            if (!cancelled.signal.aborted) call.emit("error", toServiceError(err));
          },
        );
    },
  });
}
