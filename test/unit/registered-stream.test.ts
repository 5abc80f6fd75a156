/**
 * A worker's registered stream (common/registered-stream.ts) against a master played by the test on a real gRPC server
 * on loopback (the resource tracker's NodeChannel): it registers, reconnects with a doubling backoff that starts over
 * once registered, drops a registration the master never answers, ignores a message its handler throws on, and stops
 * reconnecting once closed; given two masters, it follows the active one a standby's refusal names.
 */
import type * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { toServiceError } from "../../common/errors.js";
import { notActiveError } from "../../common/failover.js";
import { bindServer, createServer, loadHarvestProto, makeClient, shutdownServer } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { RegisteredStream } from "../../common/registered-stream.js";
import type { NodeToRm, NodeToRmOutput } from "../../proto/generated/harvest/v1/NodeToRm.js";
import type { ResourceTrackerClient } from "../../proto/generated/harvest/v1/ResourceTracker.js";
import type { RmToNode, RmToNodeOutput } from "../../proto/generated/harvest/v1/RmToNode.js";

type MasterStream = grpc.ServerDuplexStream<NodeToRmOutput, RmToNode>;

/** A master that hands each registration to `onRegister`, with the stream it came on and its number (from 1). */
async function fakeMaster(onRegister: (stream: MasterStream, n: number) => void) {
  const server = createServer();
  const streams: MasterStream[] = [];
  const received: NodeToRmOutput[] = [];
  server.addService(loadHarvestProto().ResourceTracker.service, {
    NodeChannel: (stream: MasterStream) => {
      streams.push(stream);
      const n = streams.length;
      stream.on("data", (msg: NodeToRmOutput) => {
        received.push(msg);
        if (msg.register) onRegister(stream, n);
      });
      stream.on("end", () => stream.end());
      stream.on("error", () => undefined);
    },
  });
  const port = await bindServer(server, "127.0.0.1", 0);
  return { address: `127.0.0.1:${port}`, streams, received, stop: () => shutdownServer(server, 0) };
}

const REGISTERED: RmToNode = { registered: { heartbeatIntervalMs: 1_000 } };

describe("RegisteredStream", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  /** A worker's stream to `address`, recording what its callbacks see; `onMessage` may throw to test that. */
  function worker(
    address: string,
    opts: { registerTimeoutMs?: number; onMessage?: (msg: RmToNodeOutput) => void } = {},
  ) {
    const seen = {
      opened: 0,
      dialed: [] as string[],
      lostWaitsMs: [] as number[],
      messages: [] as RmToNodeOutput[],
    };
    let running = true;
    const lines: string[] = [];
    const rs: RegisteredStream<NodeToRm, RmToNodeOutput, ResourceTrackerClient> = new RegisteredStream<
      NodeToRm,
      RmToNodeOutput,
      ResourceTrackerClient
    >({
      master: "resource manager",
      timing: { reconnectMinMs: 20, reconnectMaxMs: 50, registerTimeoutMs: opts.registerTimeoutMs ?? 5_000 },
      log: new Logger("test", "warn", (line) => lines.push(line)),
      address,
      dial: (one) => {
        seen.dialed.push(one);
        return makeClient(loadHarvestProto().ResourceTracker, one);
      },
      openStream: (client) => {
        seen.opened++;
        return client.nodeChannel();
      },
      registration: () => ({ register: { nodeId: "n1", nmAddress: "127.0.0.1:1" } }),
      onMessage: (msg) => {
        seen.messages.push(msg);
        opts.onMessage?.(msg);
        if (msg.registered) rs.markRegistered();
      },
      onLost: () => seen.lostWaitsMs.push(rs.reconnectDelayMs),
      isRunning: () => running,
    });
    cleanup.push(() => {
      running = false;
      rs.close();
    });
    return { rs, seen, lines };
  }

  it("sends the registration first and messages after it once the master answers", async () => {
    const master = await fakeMaster((stream) => stream.write(REGISTERED));
    cleanup.push(master.stop);
    const { rs } = worker(master.address);
    rs.connect();
    await vi.waitFor(() => expect(rs.registered).toBe(true));
    rs.send({ heartbeat: { seq: 1, timeMs: 0 } });
    await vi.waitFor(() => expect(master.received).toHaveLength(2));
    expect(master.received[0]?.register?.nodeId).toBe("n1");
    expect(master.received[1]?.heartbeat?.seq).toBe(1);
  });

  it("reconnects with a backoff doubling to its maximum while the master ends the stream, and starts over once registered", async () => {
    // The first three streams are ended unanswered; the fourth is answered.
    const master = await fakeMaster((stream, n) => (n <= 3 ? stream.end() : stream.write(REGISTERED)));
    cleanup.push(master.stop);
    const { rs, seen } = worker(master.address);
    rs.connect();
    await vi.waitFor(() => expect(rs.registered).toBe(true));
    expect(seen.opened).toBe(4);
    expect(seen.dialed).toHaveLength(1);
    expect(seen.lostWaitsMs).toEqual([20, 40, 50]);
    expect(rs.reconnectDelayMs).toBe(20);
  });

  it("drops the stream and its channel when the master never answers the registration, and tries again", async () => {
    const master = await fakeMaster(() => undefined);
    cleanup.push(master.stop);
    const { rs, seen } = worker(master.address, { registerTimeoutMs: 100 });
    rs.connect();
    await vi.waitFor(() => expect(master.streams.length).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    // The first channel was dropped: the next stream dialed a fresh one.
    expect(seen.dialed.length).toBeGreaterThanOrEqual(2);
    expect(seen.lostWaitsMs[0]).toBe(20);
    expect(rs.registered).toBe(false);
  });

  it("logs and ignores a message its handler throws on, keeping the stream (the node manager's too)", async () => {
    const master = await fakeMaster((stream) => {
      stream.write({ ack: { completedRecorded: ["c1"] } });
      stream.write(REGISTERED);
    });
    cleanup.push(master.stop);
    const { rs, seen, lines } = worker(master.address, {
      onMessage: (msg) => {
        if (msg.ack) throw new Error("bad ack");
      },
    });
    rs.connect();
    await vi.waitFor(() => expect(rs.registered).toBe(true));
    expect(seen.messages).toHaveLength(2);
    expect(seen.opened).toBe(1);
    expect(lines.some((l) => l.includes("bad message from the resource manager; ignored"))).toBe(true);
  });

  it("dials the active master a standby names when it refuses the stream, and the other master when one is down", async () => {
    const active = await fakeMaster((stream) => stream.write(REGISTERED));
    cleanup.push(active.stop);
    // A standby refuses every stream with NOT_ACTIVE, naming the active.
    const server = createServer();
    let refused = 0;
    server.addService(loadHarvestProto().ResourceTracker.service, {
      NodeChannel: (stream: MasterStream) => {
        refused++;
        stream.on("error", () => undefined);
        stream.emit("error", toServiceError(notActiveError("resource manager", active.address, 3)));
      },
    });
    const standby = `127.0.0.1:${await bindServer(server, "127.0.0.1", 0)}`;
    cleanup.push(() => shutdownServer(server, 0));
    const { rs, seen } = worker(`${standby},${active.address}`);
    rs.connect();
    await vi.waitFor(() => expect(rs.registered).toBe(true));
    expect(refused).toBe(1);
    expect(seen.dialed).toEqual([standby, active.address]);
    expect(rs.masterAddress).toBe(active.address);
    // Going to a master the refusal named does not wait for the backoff to grow.
    expect(seen.lostWaitsMs).toEqual([20]);

    // The active goes down: the stream tries the other master, which names the active, until it is back.
    await active.stop();
    await vi.waitFor(() => expect(refused).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    expect(rs.registered).toBe(false);
  });

  it("stops reconnecting once closed", async () => {
    const master = await fakeMaster((stream) => stream.end());
    cleanup.push(master.stop);
    const { rs, seen } = worker(master.address);
    rs.connect();
    await vi.waitFor(() => expect(seen.lostWaitsMs.length).toBeGreaterThanOrEqual(1));
    rs.close();
    const opened = seen.opened;
    // Absence of a reconnection: wait well past the longest backoff (50 ms).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(seen.opened).toBe(opened);
    expect(rs.open).toBe(false);
  });
});
