/**
 * The heartbeat-ingest baseline (a helper process of the scheduler benchmark): a gRPC server with the same
 * ResourceTracker.NodeChannel service and Harvest's server options that only answers, registration with a
 * RegisterAck and each heartbeat with an ack of its seq, keeping each node's stream by id. It is the transport floor
 * (grpc-js, HTTP/2, protobuf) the resource manager's own work is measured against. It runs in its own fresh process
 * so its memory figures are not mixed with the resource manager's. With `--ca F --cert F --key F` it serves mutual TLS
 * as the daemons do (any peer certificate signed by the CA passes; no per-method rules), else plaintext.
 *
 * Protocol (JSON lines on stdout, commands on stdin): -> {"type":"listening","address"}; "mem" -> {"type":"mem",...}
 * after full collections; "load" -> {"type":"load",...} cumulative CPU and event-loop figures; "stop" or EOF exits.
 */
import type * as grpc from "@grpc/grpc-js";
import { bindServer, createServer, loadHarvestProto, shutdownServer } from "../common/grpc.js";
import { serverCredentials } from "../common/tls.js";
import type { TlsFiles } from "../common/tls.js";
import type { NodeToRmOutput } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { RmToNode } from "../proto/generated/harvest/v1/RmToNode.js";
import { emit, onCommands } from "./line-channel.js";
import { settledMemory } from "./report.js";

type NodeStream = grpc.ServerDuplexStream<NodeToRmOutput, RmToNode>;

/** The TLS files named by --ca, --cert and --key (all three or none). */
function tlsArgs(argv: string[]): TlsFiles | undefined {
  const get = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const [ca, cert, key] = [get("ca"), get("cert"), get("key")];
  if (!ca && !cert && !key) return undefined;
  if (!(ca && cert && key)) throw new Error("--ca, --cert and --key go together");
  return { ca, cert, key };
}

async function main(): Promise<void> {
  const tls = tlsArgs(process.argv.slice(2));
  const server = createServer();
  const nodes = new Map<string, NodeStream>();
  server.addService(loadHarvestProto().ResourceTracker.service, {
    NodeChannel: (stream: NodeStream) => {
      stream.on("data", (msg: NodeToRmOutput) => {
        if (msg.register) {
          nodes.set(msg.register.nodeId, stream);
          stream.write({ registered: { nodeId: msg.register.nodeId, heartbeatIntervalMs: 1_000, rmEpoch: 1 } });
        } else if (msg.heartbeat) {
          stream.write({ ack: { seq: msg.heartbeat.seq, containersToKill: [], completedRecorded: [] } });
        }
      });
      stream.on("end", () => stream.end());
      stream.on("error", () => undefined);
    },
  });
  const port = await bindServer(server, "127.0.0.1", 0, serverCredentials(tls));
  emit({ type: "listening", address: `127.0.0.1:${port}` });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    for (const s of nodes.values()) s.end();
    shutdownServer(server, 1_000).then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  onCommands((command) => {
    if (command === "mem") {
      settledMemory().then(
        (m) => emit({ type: "mem", ...m, nodes: nodes.size }),
        (err: unknown) => emit({ type: "error", message: String(err) }),
      );
    } else if (command === "load") {
      const cpu = process.cpuUsage();
      const m = process.memoryUsage();
      emit({
        type: "load",
        cpuMs: (cpu.user + cpu.system) / 1000,
        elu: performance.eventLoopUtilization(),
        rssBytes: m.rss,
        heapUsedBytes: m.heapUsed,
      });
    } else if (command === "stop") {
      stop();
    }
  }, stop);
}

main().catch((err: unknown) => {
  emit({ type: "error", message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
