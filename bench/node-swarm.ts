/**
 * The node swarm (a helper process of the scheduler benchmark): simulated node managers, each on its own
 * ResourceTracker.NodeChannel stream to a real server, registering under a distinct node id with a fake nm_address
 * and then heartbeating open-loop (on schedule, whether or not earlier heartbeats were answered), as node managers do.
 * It measures heartbeat -> ack latency by seq and reports counts and percentiles as JSON lines on stdout.
 *
 * Usage: node-swarm.js --target host:port --nodes N --rate R --seconds S [--per-connection C] [--prefix P]
 *                      [--ca F --cert F --key F]
 *   R is the total offered heartbeats/s: every node heartbeats every N/R seconds, phases spread evenly.
 *   C streams share one HTTP/2 connection (1 = one connection per node, as real node managers have).
 *   With --ca/--cert/--key every connection is mutual TLS: it trusts the CA and presents that certificate (a `daemon`
 *   one, as NodeChannel admits only daemons); without them, plaintext.
 * Protocol: -> {"type":"registered",...} once every node is registered; <- "go" starts the heartbeats;
 *   -> {"type":"result",...} after S seconds (plus a drain); <- "stop" (or stdin closing) ends the streams and exits.
 */
import type * as grpc from "@grpc/grpc-js";
import { CHANNEL_OPTIONS, loadHarvestProto } from "../common/grpc.js";
import { SeededRng } from "../common/rng.js";
import { channelCredentials } from "../common/tls.js";
import type { TlsFiles } from "../common/tls.js";
import type { NodeToRm } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { ResourceTrackerClient } from "../proto/generated/harvest/v1/ResourceTracker.js";
import type { RmToNodeOutput } from "../proto/generated/harvest/v1/RmToNode.js";
import { emit, onCommands } from "./line-channel.js";
import { summarize } from "./report.js";

/** Registrations in flight at once: a real cluster's node managers do not all connect in the same millisecond. */
const REGISTER_BATCH = 100;
/** How long after the window acks of heartbeats sent in it are still awaited. */
const DRAIN_MS = 3_000;
/** Heartbeats sent in the window's first second are also reported apart: JIT warm-up and the first burst land there. */
const WARMUP_MS = 1_000;

interface SwarmArgs {
  target: string;
  nodes: number;
  rate: number;
  seconds: number;
  perConnection: number;
  prefix: string;
  /** Mutual TLS; undefined: plaintext. */
  tls: TlsFiles | undefined;
}

interface SimNode {
  nodeId: string;
  stream: grpc.ClientDuplexStream<NodeToRm, RmToNodeOutput>;
  seq: number;
  /** Send time (performance.now()) by seq of heartbeats sent in the window and not yet answered. */
  sent: Map<number, number>;
  registered: boolean;
  dead: boolean;
}

function parseArgs(argv: string[]): SwarmArgs {
  const get = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, dflt: number): number => {
    const raw = get(name);
    const n = raw === undefined ? dflt : Number(raw);
    if (!(Number.isFinite(n) && n > 0)) throw new Error(`--${name} must be a positive number (got ${raw})`);
    return n;
  };
  const target = get("target");
  if (!target) throw new Error("--target host:port is required");
  const [ca, cert, key] = [get("ca"), get("cert"), get("key")];
  if ((ca || cert || key) && !(ca && cert && key)) throw new Error("--ca, --cert and --key go together");
  return {
    target,
    nodes: Math.floor(num("nodes", 2000)),
    rate: num("rate", 10_000),
    seconds: num("seconds", 10),
    perConnection: Math.floor(num("per-connection", 1)),
    prefix: get("prefix") ?? "swarm",
    tls: ca && cert && key ? { ca, cert, key } : undefined,
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const proto = loadHarvestProto();
  const rng = new SeededRng(7);
  // One credentials object (the PEM files read once); each client still makes its own connection and handshake.
  const credentials = channelCredentials(args.tls);
  const clients: ResourceTrackerClient[] = [];
  const nodes: SimNode[] = [];
  const latenciesMs: number[] = [];
  const steadyLatenciesMs: number[] = [];
  let inWindow = false;
  let windowStart = 0;
  let windowEnd = Number.POSITIVE_INFINITY;
  let acksInWindow = 0;
  let acksLate = 0;
  let streamErrors = 0;
  let lastError = "";

  const registerLatenciesMs: number[] = [];
  const registerAll = async (): Promise<void> => {
    for (let base = 0; base < args.nodes; base += REGISTER_BATCH) {
      const batch: Promise<void>[] = [];
      for (let i = base; i < Math.min(args.nodes, base + REGISTER_BATCH); i++) {
        const group = Math.floor(i / args.perConnection);
        // A local subchannel pool per client gives each one its own connection, as separate node managers have.
        const client = (clients[group] ??= new proto.ResourceTracker(args.target, credentials, {
          ...CHANNEL_OPTIONS,
          "grpc.use_local_subchannel_pool": 1,
        }));
        batch.push(openNode(client, i));
      }
      await Promise.all(batch);
    }
  };

  const openNode = (client: ResourceTrackerClient, i: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const node: SimNode = {
        nodeId: `${args.prefix}-${String(i).padStart(5, "0")}`,
        stream: client.nodeChannel(),
        seq: 0,
        sent: new Map(),
        registered: false,
        dead: false,
      };
      nodes.push(node);
      const started = performance.now();
      node.stream.on("data", (msg: RmToNodeOutput) => {
        if (msg.registered) {
          node.registered = true;
          registerLatenciesMs.push(performance.now() - started);
          resolve();
        } else if (msg.ack) {
          const now = performance.now();
          const seq = Number(msg.ack.seq);
          const sentAt = node.sent.get(seq);
          if (sentAt !== undefined) {
            node.sent.delete(seq);
            latenciesMs.push(now - sentAt);
            if (sentAt >= windowStart + WARMUP_MS) steadyLatenciesMs.push(now - sentAt);
          }
          if (inWindow && now <= windowEnd) acksInWindow++;
          else if (now > windowEnd) acksLate++;
        }
      });
      const fail = (why: string): void => {
        if (node.dead) return;
        node.dead = true;
        streamErrors++;
        lastError = why;
        if (!node.registered) reject(new Error(`${node.nodeId}: stream closed before registration: ${why}`));
      };
      node.stream.on("error", (err: Error) => fail(err.message));
      node.stream.on("end", () => fail("ended by the server"));
      node.stream.write({
        register: {
          nodeId: node.nodeId,
          // Never dialled: these nodes run no containers.
          nmAddress: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8042`,
          rack: `/rack-${String(i % 50).padStart(2, "0")}`,
          capacity: { vcoresMilli: 16_000, memoryMb: 65_536 },
          primarySource: "model:swarm",
          containers: [],
        },
      });
    });

  const registerStart = performance.now();
  await registerAll();
  emit({
    type: "registered",
    nodes: nodes.length,
    connections: clients.length,
    registerWallMs: performance.now() - registerStart,
    registerLatencyMs: summarize(registerLatenciesMs),
  });

  const intervalMs = (args.nodes / args.rate) * 1000;
  const heartbeatPhase = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const start = performance.now();
      windowStart = start;
      windowEnd = start + args.seconds * 1000;
      inWindow = true;
      // Node i first heartbeats at i/N of an interval, then every interval: an even spread, sent in index order.
      const nextDue = Float64Array.from(nodes, (_, i) => start + (i / nodes.length) * intervalMs);
      let cursor = 0;
      let sent = 0;
      let maxLagMs = 0;
      const cpu0 = process.cpuUsage();
      const elu0 = performance.eventLoopUtilization();
      const tick = (): void => {
        const now = performance.now();
        const stopAt = Math.min(now, windowEnd);
        while ((nextDue[cursor] ?? Infinity) <= stopAt) {
          const node = nodes[cursor]!;
          const due = nextDue[cursor]!;
          maxLagMs = Math.max(maxLagMs, now - due);
          nextDue[cursor] = due + intervalMs;
          cursor = (cursor + 1) % nodes.length;
          if (node.dead) continue;
          const seq = ++node.seq;
          node.sent.set(seq, performance.now());
          node.stream.write({
            heartbeat: {
              seq,
              timeMs: Date.now(),
              primaryUsage: { vcoresMilli: rng.int(16_000), memoryMb: rng.int(65_536) },
              containers: [],
            },
          });
          sent++;
        }
        if (now < windowEnd) return;
        clearInterval(timer);
        const cpu = process.cpuUsage(cpu0);
        const elu = performance.eventLoopUtilization(elu0);
        const windowMs = now - windowStart;
        // Let the answers to the window's last heartbeats arrive before reporting.
        setTimeout(() => {
          let unanswered = 0;
          for (const n of nodes) unanswered += n.sent.size;
          emit({
            type: "result",
            nodes: nodes.length,
            connections: clients.length,
            intervalMs,
            windowMs,
            sent,
            acksInWindow,
            acksAfterWindow: acksLate,
            unanswered,
            streamErrors,
            lastError,
            maxSendLagMs: maxLagMs,
            latencyMs: summarize(latenciesMs),
            steadyLatencyMs: summarize(steadyLatenciesMs),
            clientCpuMs: (cpu.user + cpu.system) / 1000,
            clientEventLoopUtilization: elu.utilization,
          });
          resolve();
        }, DRAIN_MS);
      };
      const timer = setInterval(tick, 2);
    });

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    for (const n of nodes) n.stream.end();
    for (const c of clients) c.close();
    setTimeout(() => process.exit(0), 500).unref();
  };
  onCommands((command) => {
    if (command === "go") heartbeatPhase().catch((err: unknown) => emit({ type: "error", message: String(err) }));
    else if (command === "stop") stop();
  }, stop);
}

main().catch((err: unknown) => {
  emit({ type: "error", message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
