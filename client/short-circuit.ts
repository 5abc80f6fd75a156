/**
 * Short-circuit local reads (HDFS's `dfs.client.read.shortcircuit`): a client on the same server as a replica's
 * datanode reads the replica's files itself instead of having the datanode send them over a socket.
 *
 * - The client asks the datanode's transfer port (LOCAL_READ, with the block token). The datanode answers only a peer
 *   on its own server, checks the token and its primary tenant's load as for any read, and says where the finalized
 *   replica's data and meta files are (LOCAL_GRANT).
 * - The client opens both files and reads the range with the datanode's own reader (common/replica-file.ts); the
 *   DfsReadStream verifies every chunk's CRC32C as it does for bytes from the network, and reports a bad replica.
 * - What HDFS does with a file descriptor passed over a Unix socket, this does with the operating system's file
 *   permissions: Node cannot receive a descriptor. A client that may not open the files (another account) falls back
 *   to the transfer port, as it does when the datanode does not serve short-circuit reads; it then stops asking that
 *   datanode.
 * - Once open, the files stay readable even if the replica is deleted meanwhile; a finalized replica never changes.
 */
import { EventEmitter } from "node:events";
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { connectTransfer, encodeBody, frame, FRAME, FrameReader } from "../common/block-transfer.js";
import type { BlockReadStream, TransferSecurity } from "../common/block-transfer.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { readReplicaRange } from "../common/replica-file.js";
import type { ReadBlockRequest } from "../proto/generated/harvest/v1/ReadBlockRequest.js";

/** Where a replica's files are, as the datanode answers. */
export interface LocalGrant {
  dataPath: string;
  metaPath: string;
  numBytes: number;
}

/** Pieces a short-circuit read yields: as large as the datanode sends on its transfer port. */
const LOCAL_PIECE_BYTES = 512 * 1024;

/** Refusals after which the client reads that replica over the network instead (and stops asking its datanode). */
const FALL_BACK = new Set(["DATANODE_SHORT_CIRCUIT_REFUSED", "DATANODE_PROTOCOL_ERROR"]);

function parseGrant(body: Buffer): LocalGrant {
  let g: Partial<LocalGrant>;
  try {
    g = JSON.parse(body.toString("utf8")) as Partial<LocalGrant>;
  } catch {
    throw new HarvestError("DATANODE_PROTOCOL_ERROR", "an unreadable short-circuit grant");
  }
  if (
    typeof g.dataPath !== "string" ||
    typeof g.metaPath !== "string" ||
    !isAbsolute(g.dataPath) ||
    !isAbsolute(g.metaPath) ||
    !(Number.isSafeInteger(g.numBytes) && (g.numBytes ?? -1) >= 0)
  )
    throw new HarvestError("DATANODE_PROTOCOL_ERROR", "a short-circuit grant without absolute paths and a length");
  return { dataPath: g.dataPath, metaPath: g.metaPath, numBytes: g.numBytes! };
}

/** Asks the datanode at `address` (on this server) where the replica `request` names is. */
export function askLocalRead(
  address: string,
  security: TransferSecurity,
  request: ReadBlockRequest,
): Promise<LocalGrant> {
  return new Promise((resolve, reject) => {
    const socket = connectTransfer(address, security);
    const reader = new FrameReader({ expectMagic: false });
    let settled = false;
    const settle = (err: Error | undefined, grant?: LocalGrant): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err) reject(err);
      else resolve(grant!);
    };
    socket.write(frame(FRAME.LOCAL_READ, encodeBody("request", request)));
    socket.on("data", (chunk: Buffer) => {
      try {
        const [f] = reader.push(chunk);
        if (!f) return;
        if (f.kind === FRAME.ERROR) settle(f.error);
        else if (f.kind === FRAME.LOCAL_GRANT) settle(undefined, parseGrant(f.body));
        else settle(new HarvestError("DATANODE_PROTOCOL_ERROR", `a frame of kind ${f.kind} for a short-circuit read`));
      } catch (err) {
        settle(err as Error);
      }
    });
    socket.on("error", (err: Error) =>
      settle(isHarvestError(err) ? err : new HarvestError("UNAVAILABLE", `datanode ${address}: ${err.message}`)),
    );
    socket.on("close", () => settle(new HarvestError("UNAVAILABLE", `datanode ${address} closed without an answer`)));
  });
}

/** What a short-circuit read needs from its client. */
export interface ShortCircuitTarget {
  /** The datanode's transfer address (on this server). */
  address: string;
  security: TransferSecurity;
  request: ReadBlockRequest;
  /** The replica's length as the namenode knows it: a grant for another length is not used. */
  numBytes: number;
  /** The same range over the network, when this client cannot read the files. */
  fallback: () => BlockReadStream;
  /** Told when the datanode refuses short-circuit reads or its files cannot be opened (once per fall-back). */
  onFallback: (reason: string) => void;
  /** Told when the files are open and the read begins. */
  onLocal: () => void;
}

/**
 * One replica range read from its files, with the stream interface of a network read ('data' delivers pieces with
 * their checksums, then 'end' or 'error'; pause, resume, cancel). Falls back to the network as `ShortCircuitTarget`
 * says, before it has delivered anything.
 */
export class ShortCircuitRead extends EventEmitter {
  private paused = false;
  private cancelled = false;
  private wake: (() => void) | undefined;
  private inner: BlockReadStream | undefined;

  constructor(private readonly target: ShortCircuitTarget) {
    super();
    void this.run();
  }

  pause(): this {
    this.paused = true;
    this.inner?.pause();
    return this;
  }

  resume(): this {
    this.paused = false;
    this.inner?.resume();
    this.wake?.();
    return this;
  }

  cancel(): void {
    this.cancelled = true;
    this.inner?.cancel();
    this.wake?.();
  }

  private fallBack(reason: string): void {
    this.target.onFallback(reason);
    if (this.cancelled) return;
    const inner = this.target.fallback();
    this.inner = inner;
    for (const event of ["data", "error", "end"]) inner.on(event, (...args: unknown[]) => this.emit(event, ...args));
    if (this.paused) inner.pause();
  }

  private async run(): Promise<void> {
    const { target } = this;
    let data: FileHandle | undefined;
    let meta: FileHandle | undefined;
    try {
      let grant: LocalGrant;
      try {
        grant = await askLocalRead(target.address, target.security, target.request);
      } catch (err) {
        if (isHarvestError(err) && FALL_BACK.has(err.code)) return this.fallBack(err.message);
        throw err;
      }
      if (grant.numBytes !== target.numBytes)
        return this.fallBack(`the datanode's replica has ${grant.numBytes} bytes, the namenode's ${target.numBytes}`);
      try {
        data = await open(grant.dataPath, "r");
        meta = await open(grant.metaPath, "r");
      } catch (err) {
        // Another account's files, or a replica deleted since the grant: the datanode may still serve it.
        return this.fallBack(`cannot open the replica's files: ${errorMessage(err)}`);
      }
      target.onLocal();
      const blockId = String(target.request.block?.blockId ?? "");
      const pieces = readReplicaRange({
        data,
        meta,
        numBytes: grant.numBytes,
        offset: Number(target.request.offset ?? 0),
        length: Number(target.request.length ?? 0),
        pieceBytes: LOCAL_PIECE_BYTES,
        // The reader verifies every piece, whichever way it came.
        verify: false,
        corrupt: (reason) =>
          new HarvestError("DATANODE_CORRUPT_BLOCK", `local replica of block ${blockId} is corrupt: ${reason}`, {
            details: { blockId },
          }),
      });
      for await (const piece of pieces) {
        while (this.paused && !this.cancelled) await new Promise<void>((r) => (this.wake = r));
        if (this.cancelled) return;
        this.emit("data", piece);
      }
      if (!this.cancelled) this.emit("end");
    } catch (err) {
      if (!this.cancelled) this.emit("error", err);
    } finally {
      await data?.close().catch(() => undefined);
      await meta?.close().catch(() => undefined);
    }
  }
}
