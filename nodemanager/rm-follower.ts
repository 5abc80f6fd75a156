/**
 * How a node manager follows the active one of highly available resource managers: `rmAddress` may list them all
 * (comma-separated). The channel dials one; a stream refused with NOT_ACTIVE moves to the active it names, any other
 * loss to the next address. It keeps the highest term (epoch) the resource managers announced (in
 * `<dataDir>/rm-epoch`, so a restart keeps it) and refuses what carries a lower one: a registration answer (the stream
 * is dropped and the next address tried), a heartbeat answer with its kill commands (ignored), a container token
 * (STALE_EPOCH). An old active cut off from the others cannot start or kill anything once a node heard the new one.
 */
import type { ClientDuplexStream } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../common/atomic-file.js";
import { fromGrpcError, isHarvestError } from "../common/errors.js";
import { loadHarvestProto, makeClient } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import type { NodeToRm } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { ResourceTrackerClient } from "../proto/generated/harvest/v1/ResourceTracker.js";
import type { RmToNodeOutput } from "../proto/generated/harvest/v1/RmToNode.js";

/** A node manager's channel to the resource managers (see the file comment); the registered stream reuses it. */
export class RmChannel {
  private readonly list: string[];
  private index = 0;
  private client: ResourceTrackerClient | undefined;
  private stream: ClientDuplexStream<NodeToRm, RmToNodeOutput> | undefined;
  private highest: number;
  private readonly epochFile: string;

  constructor(
    rmAddress: string,
    private readonly security: Parameters<typeof makeClient>[2],
    dataDir: string,
    private readonly log: Logger,
  ) {
    this.list = rmAddress
      .split(",")
      .map((a) => a.trim())
      .filter((a) => a !== "");
    this.epochFile = join(dataDir, "rm-epoch");
    let kept = 0;
    try {
      kept = Number(readFileSync(this.epochFile, "utf8").trim()) || 0;
    } catch {
      // none seen yet
    }
    this.highest = kept;
  }

  /** The resource manager dialled now. */
  get address(): string {
    return this.list[this.index] ?? "";
  }

  /** The highest resource-manager term heard of (0: none, or not HA). */
  get epoch(): number {
    return this.highest;
  }

  /** Opens a registered stream to the current address (the stream's failure picks the next one). */
  open(): ClientDuplexStream<NodeToRm, RmToNodeOutput> {
    this.client ??= makeClient(loadHarvestProto().ResourceTracker, this.address, this.security);
    const stream = this.client.nodeChannel();
    this.stream = stream;
    // A stream ends once: an error (and grpc-js may emit "end" after it) or a plain end.
    let ended = false;
    const lost = (err: Error | undefined): void => {
      if (ended || this.stream !== stream) return;
      ended = true;
      this.lost(err);
    };
    stream.on("error", (err: Error) => lost(err));
    stream.on("end", () => lost(undefined));
    return stream;
  }

  /** Closes the client (the next stream dials again). */
  close(): void {
    this.client?.close();
    this.client = undefined;
  }

  /**
   * Whether a message from the resource manager may be acted on: not when it carries a lower term than one already
   * heard (a registration answer of one drops the stream, so that the next address is tried). Raises the term kept.
   */
  accept(msg: RmToNodeOutput): boolean {
    const epoch = Number(msg.registered?.epoch ?? msg.ack?.epoch ?? 0);
    // 0: a resource manager that is not highly available (no terms to fence; a cluster may be set up without HA).
    if (epoch !== 0 && epoch < this.highest) {
      this.log.warn("ignoring a resource manager of an older term (STALE_EPOCH)", {
        rm: this.address,
        epoch,
        seen: this.highest,
      });
      if (msg.registered) this.stream?.cancel();
      return false;
    }
    if (epoch > this.highest) {
      this.highest = epoch;
      try {
        writeFileAtomic(this.epochFile, `${epoch}\n`, 0o600);
      } catch (err) {
        this.log.warn("cannot keep the resource manager's term on disk", { error: String(err) });
      }
    }
    return true;
  }

  private lost(err: Error | undefined): void {
    if (this.list.length < 2) return;
    const herr = err ? fromGrpcError(err) : undefined;
    const active = isHarvestError(herr, "NOT_ACTIVE") ? herr.details.active?.trim() : undefined;
    const named = active ? this.list.indexOf(active) : -1;
    const next = named >= 0 ? named : (this.index + 1) % this.list.length;
    if (next === this.index) return;
    this.index = next;
    this.close();
    this.log.info("following another resource manager", { rm: this.address, ...(active ? { active } : {}) });
  }
}
