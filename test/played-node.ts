/**
 * A node manager played by a test over the real ResourceTracker NodeChannel stream: it registers and heartbeats when
 * the test says, with what the test says, and resolves each heartbeat at the resource manager's ack.
 */
import type * as grpc from "@grpc/grpc-js";
import { fromGrpcError } from "../common/errors.js";
import type { HarvestError } from "../common/errors.js";
import { loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { HeartbeatAckOutput } from "../proto/generated/harvest/v1/HeartbeatAck.js";
import type { NodeToRm } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { RmToNodeOutput } from "../proto/generated/harvest/v1/RmToNode.js";
import type { ResourceTrackerClient } from "../proto/generated/harvest/v1/ResourceTracker.js";

export class PlayedNode {
  private readonly tracker: ResourceTrackerClient;
  private stream: grpc.ClientDuplexStream<NodeToRm, RmToNodeOutput> | undefined;
  private seq = 0;
  private readonly waiters = new Map<number, (ack: HeartbeatAckOutput) => void>();
  private failure: ((err: HarvestError) => void) | undefined;

  constructor(
    rmAddress: string,
    readonly nodeId: string,
    security?: ClientSecurity,
  ) {
    this.tracker = makeClient(loadHarvestProto().ResourceTracker, rmAddress, security);
  }

  /** Opens the stream and registers; resolves once the resource manager acknowledged, rejects with its error. */
  register(extra: { chassis?: string; powerProfile?: string; containersRunAs?: string } = {}): Promise<void> {
    const stream = this.tracker.nodeChannel();
    this.stream = stream;
    return new Promise((resolve, reject) => {
      this.failure = reject;
      stream.on("error", (err) => this.failure?.(fromGrpcError(err)));
      stream.on("data", (msg: RmToNodeOutput) => {
        if (msg.registered) resolve();
        if (msg.ack) {
          this.waiters.get(msg.ack.seq)?.(msg.ack);
          this.waiters.delete(msg.ack.seq);
        }
      });
      stream.write({
        register: {
          nodeId: this.nodeId,
          nmAddress: "127.0.0.1:1",
          rack: "/rack-a",
          capacity: { vcoresMilli: 4000, memoryMb: 4096 },
          primarySource: "played by the test",
          containers: [],
          ...extra,
        },
      });
    });
  }

  /**
   * Sends a heartbeat (an idle primary, no containers, no power reading, uncapped, unless `fields` say otherwise) and
   * resolves to the resource manager's ack; rejects with the stream's error.
   */
  heartbeat(fields: Record<string, unknown> = {}): Promise<HeartbeatAckOutput> {
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      this.failure = reject;
      this.waiters.set(seq, resolve);
      this.stream?.write({
        heartbeat: {
          seq,
          timeMs: Date.now(),
          primaryUsage: { vcoresMilli: 0, memoryMb: 0 },
          containers: [],
          powerWatts: 0,
          powerMeter: "trace: played.csv",
          powerCapped: false,
          cappingState: "uncapped",
          ...fields,
        },
      });
    });
  }

  close(): void {
    this.stream?.end();
    this.tracker.close();
  }
}
