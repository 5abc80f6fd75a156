/**
 * The namenode's REST API: read-only JSON. WebHDFS's reads under `/webhdfs/v1/<path>?op=...` (LISTSTATUS,
 * GETFILESTATUS, GETCONTENTSUMMARY, GETFILEBLOCKLOCATIONS and Harvest's GET_BLOCK_LOCATIONS; webhdfs.ts routes them
 * here and serves the rest of WebHDFS), Harvest's own under `/ws/v1/nn/` (info, datanodes, fsck, placement). Every answer comes from the function the matching gRPC method calls
 * (web.ts), and file system reads are held to the caller's DFS permissions exactly as over gRPC. Paths come from the
 * URL and must be valid DFS paths (`..`, empty components and NUL are DFS_BAD_PATH, never resolved).
 */
import { ANY_CERTIFICATE } from "../common/auth.js";
import { baseName, normalizeDfsPath } from "../common/dfs-path.js";
import { HarvestError } from "../common/errors.js";
import type { WebRequest, WebServer } from "../common/web-server.js";
import { intParam, webHdfsPath } from "../common/webhdfs.js";
import { countPriority } from "./nn-metrics.js";
import type { UnderReplicatedByPriority } from "./nn-metrics.js";
import type { FileBlockLocations, NameNodeWebSource } from "./web.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";

export { intParam, WEBHDFS_PREFIX, webHdfsPath } from "../common/webhdfs.js";

/** The read-only WebHDFS operations answered here (`op=`, any case); webhdfs.ts routes every WebHDFS request. */
export const WEBHDFS_READ_OPS = [
  "LISTSTATUS",
  "GETFILESTATUS",
  "GETCONTENTSUMMARY",
  "GETFILEBLOCKLOCATIONS",
  "GET_BLOCK_LOCATIONS",
] as const;

/** A file or directory in WebHDFS's FileStatus shape, with Harvest's extra fields after HDFS's. */
export interface WebHdfsFileStatus {
  /** The name relative to the listed directory; "" for the path itself. */
  pathSuffix: string;
  type: "FILE" | "DIRECTORY";
  length: number;
  owner: string;
  group: string;
  /** The permission bits in octal, e.g. "755". */
  permission: string;
  replication: number;
  blockSize: number;
  /** ms since the epoch. */
  modificationTime: number;
  /** False while a writer holds the file open. */
  complete: boolean;
  /** Blocks of the file (0 for a directory). */
  blocks: number;
  /** When lease recovery closed the file (ms since the epoch); 0: never. */
  recoveredTime: number;
}

/** A file status as WebHDFS shows it. */
export function webHdfsFileStatus(s: FileStatusOutput, pathSuffix: string): WebHdfsFileStatus {
  return {
    pathSuffix,
    type: s.isDir ? "DIRECTORY" : "FILE",
    length: s.length,
    owner: s.owner,
    group: s.group,
    permission: s.mode.toString(8).padStart(3, "0"),
    replication: s.replication,
    blockSize: s.blockSize,
    modificationTime: s.mtimeMs,
    complete: s.complete,
    blocks: s.blocks,
    recoveredTime: s.recoveredMs,
  };
}

/** Under-replicated blocks of an fsck report by the replication monitor's priority levels (0..2). */
export function fsckPriorities(report: FsckReportOutput): UnderReplicatedByPriority {
  const out: UnderReplicatedByPriority = { highest: 0, veryUnderReplicated: 0, underReplicated: 0 };
  for (const b of report.underReplicated)
    countPriority(out, b.liveReplicas, b.expectedReplicas, b.decommissioningReplicas + b.decommissionedReplicas);
  return out;
}

/** Serves Harvest's REST API on `server` (WebHDFS is webhdfs.ts'); any certificate role (or its web token) may read it. */
export function registerNameNodeApi(server: WebServer, source: NameNodeWebSource): void {
  const access = ANY_CERTIFICATE;
  server
    .get("/ws/v1/nn/info", access, () => ({ json: { nameNodeInfo: source.summary() } }))
    .get("/ws/v1/nn/datanodes", access, () => ({ json: { datanodes: source.datanodes() } }))
    .get("/ws/v1/nn/fsck", access, (req) => {
      const path = normalizeDfsPath(req.query.get("path") ?? "/");
      const fsck = source.fsck(path, source.callerOf(req.principal));
      return { json: { fsck, underReplicatedByPriority: fsckPriorities(fsck) } };
    })
    .get("/ws/v1/nn/placement", access, () => ({ json: { placement: source.placement() } }));
}

/** One read-only WebHDFS request: the path's operation, as the caller may see it (webhdfs.ts routes it here). */
export function webHdfsRead(req: WebRequest, source: NameNodeWebSource): unknown {
  const path = webHdfsPath(req.path);
  const op = (req.query.get("op") ?? "").toUpperCase();
  const caller = source.callerOf(req.principal);
  switch (op) {
    case "LISTSTATUS": {
      const entries = source.list(path, caller);
      // Listing a file gives the file itself, named "" as WebHDFS does.
      const statuses = entries.map((e) => webHdfsFileStatus(e, e.path === path ? "" : baseName(e.path)));
      return { FileStatuses: { FileStatus: statuses } };
    }
    case "GETFILESTATUS":
      return { FileStatus: webHdfsFileStatus(source.stat(path, caller), "") };
    case "GETCONTENTSUMMARY": {
      const s = source.contentSummary(path, caller);
      return {
        ContentSummary: {
          directoryCount: s.directories,
          fileCount: s.files,
          length: s.length,
          spaceConsumed: s.spaceConsumed,
          // Harvest has no quotas: -1 is HDFS's "none".
          quota: -1,
          spaceQuota: -1,
        },
      };
    }
    case "GET_BLOCK_LOCATIONS":
      return { LocatedBlocks: locatedBlocks(source.blockLocations(path, ...range(req), caller)) };
    case "GETFILEBLOCKLOCATIONS":
      return { BlockLocations: { BlockLocation: blockLocations(source.blockLocations(path, ...range(req), caller)) } };
    default:
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `${op ? `op=${op} is not served` : "op is missing"}: the read-only WebHDFS operations are ${WEBHDFS_READ_OPS.join(", ")}`,
        { details: { field: "op" } },
      );
  }
}

function range(req: WebRequest): [offset: number, length: number] {
  return [intParam(req.query, "offset", 0), intParam(req.query, "length", 0)];
}

/** Harvest's GET_BLOCK_LOCATIONS: HDFS's LocatedBlocks, with Harvest's datanode identities. */
function locatedBlocks(l: FileBlockLocations): unknown {
  return {
    fileLength: l.fileLength,
    isUnderConstruction: !l.complete,
    locatedBlocks: l.blocks.map((b) => ({
      block: { blockId: b.block.blockId, generationStamp: b.block.genStamp, numBytes: b.block.numBytes },
      startOffset: b.offset,
      locations: b.locations.map((d) => ({ datanodeId: d.datanodeId, address: d.address, rack: d.rack })),
    })),
  };
}

/** GETFILEBLOCKLOCATIONS: Hadoop's BlockLocation per block (hosts, host:port names, rack/host:port topology). */
function blockLocations(l: FileBlockLocations): unknown[] {
  return l.blocks.map((b) => ({
    offset: b.offset,
    length: b.block.numBytes,
    hosts: b.locations.map((d) => hostOf(d.address)),
    names: b.locations.map((d) => d.address),
    topologyPaths: b.locations.map((d) => `${d.rack}/${d.address}`),
    corrupt: false,
  }));
}

function hostOf(address: string): string {
  const colon = address.lastIndexOf(":");
  const host = colon > 0 ? address.slice(0, colon) : address;
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}
