/**
 * The single-node cluster of the benchmarks that run a real node manager with real container processes (`yield`,
 * `capping`): a resource manager and one node manager in this process, in a temporary directory, with clients of
 * their services, and one single-vertex job whose job manager is an idle stand-in (the bench plays its part).
 */
import { chmod, mkdtemp, rm as removeDir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import type { PrimaryMonitor } from "../common/primary-monitor.js";
import type { Resources } from "../common/resource.js";
import { NodeManager } from "../nodemanager/index.js";
import type { NodeManagerOptions, PreemptionEvent } from "../nodemanager/index.js";
import { ResourceManager } from "../resourcemanager/index.js";
import type { ApplicationClientServiceClient } from "../proto/generated/harvest/v1/ApplicationClientService.js";
import type { ApplicationMasterServiceClient } from "../proto/generated/harvest/v1/ApplicationMasterService.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";
import { benchLogger, waitFor } from "./node-bench.js";

/** The share of the node kept for its primary, on both daemons. */
export const RESERVE_FRACTION = 0.1;
/** The cores of the job manager's container. */
export const AM_VCORES_MILLI = 500;
/** The job manager's container: the bench itself plays the job manager, so this process only holds the slot. */
const IDLE_JOB_MANAGER = "setInterval(() => {}, 1 << 30)";

/** How to start a single-node cluster. */
export interface SingleNodeOptions {
  /** The bench's name: the temporary directory is `harvest-bench-<name>-*`. */
  name: string;
  /** The node manager's options beyond the resource manager's address, its data directory and the reserve. */
  nm: Partial<NodeManagerOptions> & { nodeId: string };
  /** The memory of the job manager's container. */
  amMemoryMb: number;
  /** The primary tenant the node manager watches. */
  monitor: PrimaryMonitor;
  /** The node manager's logger name. */
  logName: string;
  /** Every log line of the node manager (after the cgroup line is read). */
  onLogLine?: (line: string) => void;
  onPreempt?: (e: PreemptionEvent) => void;
}

/** A started single-node cluster; `close` stops it and removes its directory. */
export interface SingleNode {
  dir: string;
  rm: ResourceManager;
  nm: NodeManager;
  clientRm: ApplicationClientServiceClient;
  amRm: ApplicationMasterServiceClient;
  nmClient: ContainerManagerClient;
  /** The node manager's cgroup mode and its detail, from its "cpu limits" log line ("unknown" if it was not seen). */
  cgroupMode: string;
  cgroupDetail: string;
  close(): Promise<void>;
}

/** Starts the cluster and waits for the node manager to register; on a failure, stops what started and throws. */
export async function startSingleNode(o: SingleNodeOptions): Promise<SingleNode> {
  const dir = await mkdtemp(join(tmpdir(), `harvest-bench-${o.name}-`));
  // Containers never run as root: the account they run as passes through to the staging and work directories.
  await chmod(dir, 0o711);
  const cgroups = { mode: "unknown", detail: "unknown" };
  const rm = new ResourceManager(
    {
      dataDir: join(dir, "rm"),
      // Grants arrive on node heartbeats; a short interval keeps steps short without changing what is measured.
      heartbeatIntervalMs: 100,
      reserveFraction: RESERVE_FRACTION,
      amResource: { vcoresMilli: AM_VCORES_MILLI, memoryMb: o.amMemoryMb },
      jobManagerCommand: ["node", "-e", IDLE_JOB_MANAGER],
    },
    { logger: new Logger("rm", "warn") },
  );
  let nm: NodeManager | undefined;
  const clients: { close(): void }[] = [];
  const close = async (): Promise<void> => {
    for (const c of clients) c.close();
    await nm?.stop();
    await rm.stop();
    await removeDir(dir, { recursive: true, force: true });
  };
  try {
    await rm.start();
    nm = new NodeManager(
      { ...o.nm, rmAddress: rm.address, dataDir: join(dir, "nm"), reserveFraction: RESERVE_FRACTION },
      {
        monitor: o.monitor,
        logger: benchLogger(o.logName, (line) => {
          const at = line.indexOf("] cpu limits ");
          if (at >= 0) {
            try {
              const fields = JSON.parse(line.slice(line.indexOf("{", at))) as { mode: string; detail: string };
              cgroups.mode = fields.mode;
              cgroups.detail = `${fields.mode}: ${fields.detail}`;
            } catch {
              cgroups.detail = line.slice(at + 2);
            }
          }
          o.onLogLine?.(line);
        }),
        ...(o.onPreempt ? { onPreempt: o.onPreempt } : {}),
      },
    );
    const node = nm;
    await node.start();
    await waitFor("the node manager to register", 10_000, () => node.isRegistered);
    const proto = loadHarvestProto();
    const clientRm = makeClient(proto.ApplicationClientService, rm.address);
    const amRm = makeClient(proto.ApplicationMasterService, rm.address);
    const nmClient = makeClient(proto.ContainerManager, node.address);
    clients.push(clientRm, amRm, nmClient);
    return {
      dir,
      rm,
      nm: node,
      clientRm,
      amRm,
      nmClient,
      cgroupMode: cgroups.mode,
      cgroupDetail: cgroups.detail,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The one vertex of a bench job: `parallelism` tasks of `command`, each of `resources`. */
export interface BenchVertex {
  parallelism: number;
  command: string[];
  resources: Resources;
}

/**
 * Submits a one-vertex job named `name`, waits for its job manager's container (`running`: until it runs, else until
 * the resource manager granted it) and registers attempt 1 in the job manager's place. Answers the job's id.
 */
export async function submitBenchJob(
  node: SingleNode,
  name: string,
  vertex: BenchVertex,
  running: boolean,
): Promise<string> {
  const dag = { name, vertices: [{ name: "burn", ...vertex }] };
  const crm = node.clientRm;
  const { appId } = await call(crm, crm.submitApplication, { dagJson: JSON.stringify(dag), user: "bench" });
  // The resource manager grants the job manager's container and launches the idle stand-in on the node.
  await waitFor("the job manager container", 10_000, async () => {
    const report = await call(crm, crm.getApplication, { appId });
    return report.containers.some((c) => c.isAm && (running ? c.state === "RUNNING" : node.nm.isRegistered));
  });
  const am = node.amRm;
  await call(am, am.registerApplicationMaster, { appId, attempt: 1, maxConcurrency: vertex.parallelism });
  return appId;
}
