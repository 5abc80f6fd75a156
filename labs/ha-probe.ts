#!/usr/bin/env node
/**
 * What the HA scenario (multihost-ha.ts) does from inside a host's network namespace, one request per run:
 * `node dist/labs/ha-probe.js '<json>'` prints one JSON answer. It runs inside a namespace because only the lab's
 * bridge reaches the hosts' addresses.
 *
 * - `start-ensemble`: the etcd ensemble, each member in its host's namespace (the members are spawned through
 *   `nsenter` into the scenario's mount namespace, then `ip netns exec`), set up as `harvest cluster up --ha` sets up its
 *   own: TLS under the lab's CA, auth on.
 * - `ha-status`: each master's HaAdmin status (role, epoch, the active it knows), or the error code it answered.
 * - `capture-write-token`: a file created and a first block allocated at the active namenode, as a writer does; the
 *   WRITE block token it issued (of its term) comes back, the block never written.
 * - `write-blocks`: a block written to each datanode with a given token: each answers OK or an error code.
 * - `start-containers`: a job manager's container asked of each node manager with a grant signed as a resource manager
 *   of term `epoch` signs it (the cluster secret): each answers started or an error code. Acting as an old active.
 */
import { randomBytes } from "node:crypto";
import { chunkChecksums } from "../common/checksum.js";
import { signContainer } from "../common/container-token.js";
import { errorMessage, fromGrpcError } from "../common/errors.js";
import { loadHaAdminProto } from "../common/ha-admin.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { formatContainerId, parseAppId } from "../common/ids.js";
import { masterClient, readEnsemble, startEnsemble } from "../localcluster/etcd-ensemble.js";
import type { EnsembleDescriptor } from "../localcluster/etcd-ensemble.js";
import type { DataTransferClient } from "../proto/generated/harvest/v1/DataTransfer.js";
import type { WriteAckOutput } from "../proto/generated/harvest/v1/WriteAck.js";

/** The requests, by op. */
export type ProbeRequest =
  | {
      op: "start-ensemble";
      dir: string;
      caDir: string;
      /** Per member: its host's address and its network namespace. */
      members: { ip: string; ns: string }[];
      masterHosts: string[];
      /** A process in the machine's mount namespace (the scenario's own): members start in its view of the files. */
      mountOf: number;
      /** Raft timing (etcd's `--heartbeat-interval`, `--election-timeout`). */
      heartbeatMs: number;
      electionTimeoutMs: number;
    }
  | { op: "ha-status"; addresses: string[]; security: ClientSecurity }
  | { op: "ensemble-status"; dir: string }
  | { op: "capture-write-token"; nnAddress: string; security: ClientSecurity; path: string }
  | {
      op: "write-blocks";
      datanodes: string[];
      security: ClientSecurity;
      block: { blockId: number; genStamp: number };
      token: string;
    }
  | {
      op: "start-containers";
      nodes: { nodeId: string; address: string }[];
      security: ClientSecurity;
      secret: string;
      epoch: number;
      appId: string;
      user: string;
    };

/** One master's status as HaAdmin gives it, or the code of its error. */
export interface MasterStatus {
  address: string;
  role?: string;
  epoch?: number;
  activeAddress?: string;
  error?: string;
}

export async function probe(req: ProbeRequest): Promise<unknown> {
  switch (req.op) {
    case "start-ensemble":
      return startLabEnsemble(req);
    case "ha-status":
      return Promise.all(req.addresses.map((a) => masterStatus(a, req.security)));
    case "ensemble-status":
      return ensembleStatus(req.dir);
    case "capture-write-token":
      return captureWriteToken(req);
    case "write-blocks":
      return Promise.all(req.datanodes.map(async (d) => ({ address: d, answer: await writeBlock(d, req) })));
    case "start-containers":
      return Promise.all(req.nodes.map(async (n) => ({ nodeId: n.nodeId, answer: await startAmContainer(n, req) })));
  }
}

async function startLabEnsemble(req: Extract<ProbeRequest, { op: "start-ensemble" }>): Promise<EnsembleDescriptor> {
  const nsOf = new Map(req.members.map((m, i) => [`etcd-${i + 1}`, m.ns]));
  return startEnsemble({
    dir: req.dir,
    caDir: req.caDir,
    hosts: req.members.map((m) => m.ip),
    // Each member on its host's own address: etcd's usual ports.
    ports: { client: 2379, peer: 2380 },
    masterHosts: req.masterHosts,
    heartbeatMs: req.heartbeatMs,
    electionTimeoutMs: req.electionTimeoutMs,
    // This process sees its host's masked files: a member starts from the machine's mount namespace, in its host's
    // network namespace (ip netns exec makes it a mount namespace of its own).
    wrap: (member) => [
      "nsenter",
      `--mount=/proc/${req.mountOf}/ns/mnt`,
      "--",
      "ip",
      "netns",
      "exec",
      nsOf.get(member) ?? "?",
    ],
  });
}

/** Each member's view: the leader it follows and its Raft index (or the error it answered). */
async function ensembleStatus(
  dir: string,
): Promise<{ name: string; leader?: string; raftIndex?: number; error?: string }[]> {
  const e = readEnsemble(dir);
  if (!e) throw new Error(`no ensemble in ${dir}`);
  return Promise.all(
    e.members.map(async (m) => {
      const client = await masterClient({ ...e, members: [m] }, 2_000);
      try {
        const s = await client.maintenance.status();
        return { name: m.name, leader: s.leader, raftIndex: Number(s.raftIndex) };
      } catch (err) {
        return { name: m.name, error: errorMessage(err) };
      } finally {
        client.close();
      }
    }),
  );
}

async function masterStatus(address: string, security: ClientSecurity): Promise<MasterStatus> {
  const c = makeClient(loadHaAdminProto().HaAdmin, address, security);
  try {
    const s = await call(c, c.getHaStatus, {}, 2_000);
    return { address, role: s.role, epoch: Number(s.epoch), activeAddress: s.activeAddress };
  } catch (err) {
    return { address, error: fromGrpcError(err as Error).code };
  } finally {
    c.close();
  }
}

async function captureWriteToken(
  req: Extract<ProbeRequest, { op: "capture-write-token" }>,
): Promise<{ block: { blockId: number; genStamp: number }; token: string; pipeline: string[] }> {
  const nn = makeClient(loadHarvestProto().ClientNamenode, req.nnAddress, req.security);
  try {
    const clientName = `ha-probe-${randomBytes(4).toString("hex")}`;
    await call(nn, nn.create, { path: req.path, replication: 3, clientName, overwrite: true });
    const located = await call(nn, nn.addBlock, { path: req.path, clientName });
    const b = located.block;
    if (!b || !located.blockToken) throw new Error(`the namenode gave no block or no token for ${req.path}`);
    return {
      block: { blockId: Number(b.blockId), genStamp: Number(b.genStamp) },
      token: located.blockToken,
      pipeline: located.locations.map((l) => l.address),
    };
  } finally {
    nn.close();
  }
}

/** Writes one small packet as the only one of `block`: "OK" once acknowledged, else the error code. */
function writeBlock(address: string, req: Extract<ProbeRequest, { op: "write-blocks" }>): Promise<string> {
  const client: DataTransferClient = makeClient(loadHarvestProto().DataTransfer, address, req.security);
  const data = randomBytes(4096);
  return new Promise<string>((resolve) => {
    const stream = client.writeBlock();
    const timer = setTimeout(() => resolve("NO_ANSWER"), 10_000);
    const done = (answer: string): void => {
      clearTimeout(timer);
      resolve(answer);
    };
    stream.on("data", (a: WriteAckOutput) => done(a.ok ? "OK" : a.errorCode || "REFUSED"));
    stream.on("error", (err: Error) => done(fromGrpcError(err).code));
    stream.on("end", () => done("ENDED_WITHOUT_ANSWER"));
    stream.write({ header: { block: req.block, downstream: [], clientName: "ha-probe", blockToken: req.token } });
    stream.write({ data: { seq: 1, offsetInBlock: 0, data, checksums: chunkChecksums(data), last: true } });
    stream.end();
  }).finally(() => client.close());
}

/** Asks `node` to start a job manager's container granted in term `epoch`: "STARTED" or the error code. */
async function startAmContainer(
  node: { nodeId: string; address: string },
  req: Extract<ProbeRequest, { op: "start-containers" }>,
): Promise<string> {
  const { clusterTs, seq } = parseAppId(req.appId);
  // An attempt no job manager of the job had: a fresh launch, as an old active would make to restart a job manager.
  const id = formatContainerId(clusterTs, seq, 99, 1);
  const resource = { vcoresMilli: 500, memoryMb: 128 };
  const token = signContainer(req.secret, {
    containerId: id,
    appId: req.appId,
    nodeId: node.nodeId,
    resource,
    jobPriority: 0,
    user: req.user,
    epoch: req.epoch,
  });
  const nm = makeClient(loadHarvestProto().ContainerManager, node.address, req.security);
  try {
    await call(nm, nm.startContainer, {
      container: {
        id,
        nodeId: node.nodeId,
        nmAddress: node.address,
        resource,
        token,
        user: req.user,
        epoch: req.epoch,
      },
      appId: req.appId,
      argv: ["/bin/true"],
      isAm: true,
    });
    return "STARTED";
  } catch (err) {
    return fromGrpcError(err as Error).code;
  } finally {
    nm.close();
  }
}

const isMain = process.argv[1]?.endsWith("/ha-probe.js") === true;
if (isMain) {
  probe(JSON.parse(process.argv[2] ?? "{}") as ProbeRequest).then(
    (answer) => {
      process.stdout.write(JSON.stringify({ ok: true, answer }) + "\n");
      process.exit(0);
    },
    (err: unknown) => {
      process.stdout.write(JSON.stringify({ ok: false, error: errorMessage(err) }) + "\n");
      process.exit(1);
    },
  );
}
