/**
 * A datanode's links to its namenodes. Without HA there is one; with HA (`namenodeAddress` a comma-separated list)
 * there is one per namenode, active and standby alike, each its own registered stream with its own timers and its
 * own queue of incremental reports. Every namenode gets the registration, the full block reports (the first after each
 * registration, and the periodic ones), the heartbeats and every received or deleted replica, so a standby's block map
 * is current when it takes over; a namenode that is down or cut off delays no report to another (what it missed, the
 * full report after it registers again covers).
 *
 * Fencing (docs: ha-design): a namenode says its term (epoch; 0 without HA) and whether it is active in its answer to
 * a registration; the active stamps its commands with its term, a standby's (empty) answers carry 0. The datanode
 * keeps the highest epoch it has seen (from either) and carries out replicate, delete and recovery commands only when
 * they carry that epoch, and with HA only when they carry one at all: commands of an older term (an old active back
 * from a partition) are refused, logged once per epoch and counted. Block tokens name their issuer's term, and a WRITE
 * token of an older term is refused (STALE_EPOCH), so an old active cannot get a write acknowledged. Each namenode has
 * its own block keys, kept per link and taken from it whatever its term (a key only verifies tokens, and a standby's
 * must be current when it takes over); a token is checked against every link's key of its id.
 */
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BlockKey } from "../common/block-token.js";
import { HarvestError } from "../common/errors.js";
import { splitAddressList } from "./options.js";
import type { Logger } from "../common/log.js";
import { RegisteredStream } from "../common/registered-stream.js";
import type { RegisteredStreamTiming } from "../common/registered-stream.js";
import type { Block } from "../proto/generated/harvest/v1/Block.js";
import type { DatanodeCommandsOutput } from "../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeProtocolClient } from "../proto/generated/harvest/v1/DatanodeProtocol.js";
import type { DatanodeRegisteredOutput } from "../proto/generated/harvest/v1/DatanodeRegistered.js";
import type { DatanodeToNamenode } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { DatanodeHeartbeat } from "../proto/generated/harvest/v1/DatanodeHeartbeat.js";
import type { NamenodeToDatanodeOutput } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { RegisterDatanode } from "../proto/generated/harvest/v1/RegisterDatanode.js";

/** Incremental reports are coalesced this long, so that a burst of deletions is one message. */
const RECEIVED_COALESCE_MS = 10;

/** In the data directory: a namenode has required block tokens of this datanode. */
const BLOCK_TOKENS_MARKER = "block-tokens-required";

/** An epoch from the wire: a positive safe integer, anything else (absent, 0, garbage) counts as 0 (not HA). */
export function wireEpoch(epoch: unknown): number {
  return typeof epoch === "number" && Number.isSafeInteger(epoch) && epoch > 0 ? epoch : 0;
}

/** The highest namenode term a datanode has seen, and the rule that refuses anything older. */
export class EpochFence {
  private seenValue = 0;

  /** The highest epoch seen (0: none, not HA). */
  get seen(): number {
    return this.seenValue;
  }

  /** Takes note of an epoch a namenode stated; true when it is a newer term than any seen before. */
  observe(epoch: number): boolean {
    if (epoch <= this.seenValue) return false;
    this.seenValue = epoch;
    return true;
  }

  /** Whether something of `epoch` comes from an older term than one already seen. */
  isStale(epoch: number): boolean {
    return epoch < this.seenValue;
  }

  /** Throws STALE_EPOCH when `epoch` (a block token's, 0 when it names none) is older than one already seen. */
  check(epoch: number, what: string): void {
    if (!this.isStale(epoch)) return;
    throw new HarvestError(
      "STALE_EPOCH",
      `${what} comes from namenode term ${epoch}, older than term ${this.seenValue}: its namenode is no longer the active one`,
      { details: { epoch: String(epoch), seen: String(this.seenValue) } },
    );
  }
}

/** What a namenode's commands get: carried out, or refused (an older term, or with HA a namenode not active). */
export type CommandVerdict = "execute" | "stale" | "standby";

/**
 * The fencing rule for one commands message: notes its epoch, then carries it out only if that is the highest epoch
 * seen. With HA (`ha`: several namenodes) it must also name a term: only the active stamps its commands with its term,
 * so a message that carries none comes from a standby (or a namenode not configured for HA).
 */
export function commandVerdict(fence: EpochFence, ha: boolean, commandsEpoch: number): CommandVerdict {
  fence.observe(commandsEpoch);
  if (fence.isStale(commandsEpoch)) return "stale";
  return ha && commandsEpoch === 0 ? "standby" : "execute";
}

/** Whether a commands message asks the datanode to act on its replicas (beyond keys and registering again). */
function hasWork(c: DatanodeCommandsOutput): boolean {
  return c.replicate.length + c.delete.length + c.recover.length + c.commitRecovery.length > 0;
}

/** One namenode's block keys by id. */
function keyMap(keys: readonly { keyId: number; secret: Buffer; expiresMs: number }[]): Map<number, BlockKey> {
  return new Map(keys.map((k) => [k.keyId, { keyId: k.keyId, secret: Buffer.from(k.secret), expiresMs: k.expiresMs }]));
}

/** What the links need from their datanode. */
export interface NamenodeLinksHost {
  log: Logger;
  datanodeId: string;
  dataDir: string;
  /** Reconnection waits, and the heartbeat and block report intervals a namenode does not override. */
  timing: RegisteredStreamTiming & { heartbeatIntervalMs: number; blockReportIntervalMs: number };
  isRunning(): boolean;
  /** A DatanodeProtocol client to one namenode. */
  dial(address: string): DatanodeProtocolClient;
  registration(): RegisterDatanode;
  /** The replicas of a full block report; undefined while the store is not open. */
  blockReport(): Block[] | undefined;
  /** A heartbeat's body (without its sequence number); undefined while the store is not open. */
  heartbeat(): Omit<DatanodeHeartbeat, "seq"> | undefined;
  /** After each heartbeat of the first registered link: the datanode's periodic chores. */
  afterHeartbeat(): void;
  /** Commands the fence let through; `reply` answers on the link they came from (lease recovery). */
  execute(commands: DatanodeCommandsOutput, reply: (msg: DatanodeToNamenode) => void): void;
  /** Counts a commands message refused for its older epoch. */
  staleCommands(): void;
}

/** One namenode: its stream, what it said of itself, its keys, its timers and its queue of incremental reports. */
class NamenodeLink {
  readonly stream: RegisteredStream<DatanodeToNamenode, NamenodeToDatanodeOutput, DatanodeProtocolClient>;
  /** Block tokens: "unknown" until it answers a registration, then "off" (it issues none) or its keys. */
  tokens: "unknown" | "off" | Map<number, BlockKey> = "unknown";
  heartbeatIntervalMs: number;
  seq = 0;
  heartbeatTimer: NodeJS.Timeout | undefined;
  blockReportTimer: NodeJS.Timeout | undefined;
  receivedTimer: NodeJS.Timeout | undefined;
  readonly received: Block[] = [];
  readonly deleted: Block[] = [];
  /** A reimage to report once it answers the next registration. */
  pendingReimageAtMs: number | undefined;

  constructor(
    readonly address: string,
    host: NamenodeLinksHost,
    onMessage: (link: NamenodeLink, msg: NamenodeToDatanodeOutput) => void,
    many: boolean,
  ) {
    this.heartbeatIntervalMs = host.timing.heartbeatIntervalMs;
    // Each link stays with its one namenode (`address`): following the active one is for workers of a single master.
    const options = {
      master: many ? `namenode ${address}` : "namenode",
      timing: host.timing,
      log: host.log,
      address,
      dial: () => host.dial(address),
      openStream: (channel: DatanodeProtocolClient) => channel.datanodeChannel(),
      registration: (): DatanodeToNamenode => ({ register: host.registration() }),
      onMessage: (msg: NamenodeToDatanodeOutput) => onMessage(this, msg),
      onLost: () => this.stopTimers(),
      isRunning: () => host.isRunning(),
    };
    this.stream = new RegisteredStream<DatanodeToNamenode, NamenodeToDatanodeOutput, DatanodeProtocolClient>(options);
  }

  stopTimers(): void {
    for (const t of [this.heartbeatTimer, this.blockReportTimer, this.receivedTimer]) if (t) clearTimeout(t);
    this.heartbeatTimer = this.blockReportTimer = this.receivedTimer = undefined;
  }
}

/** A datanode's links to every namenode it names (see the file comment). */
export class NamenodeLinks {
  readonly fence = new EpochFence();
  private readonly links: NamenodeLink[];
  /** Block tokens were required before this start (the marker file): required until a namenode says otherwise. */
  private readonly requiredAtStart: boolean;
  /** Stale epochs already logged (each is logged once). */
  private readonly warnedEpochs = new Set<number>();
  private warnedStandby = false;
  private urgentTimer: NodeJS.Timeout | undefined;

  constructor(
    namenodeAddress: string,
    private readonly host: NamenodeLinksHost,
  ) {
    const addresses = splitAddressList(namenodeAddress);
    this.links = addresses.map(
      (a) => new NamenodeLink(a, host, (link, msg) => this.onMessage(link, msg), addresses.length > 1),
    );
    this.requiredAtStart = existsSync(this.markerFile);
  }

  private get markerFile(): string {
    return join(this.host.dataDir, BLOCK_TOKENS_MARKER);
  }

  /** The namenodes' addresses, one per link. */
  get addresses(): string[] {
    return this.links.map((l) => l.address);
  }

  /** Whether some namenode has acknowledged this datanode's registration on its current stream. */
  get registered(): boolean {
    return this.links.some((l) => l.stream.registered);
  }

  /** The namenodes whose registration answer holds on their current stream. */
  registeredWith(): string[] {
    return this.links.filter((l) => l.stream.registered).map((l) => l.address);
  }

  /** Opens every link's stream (each registers and reconnects on its own from here on). */
  connect(): void {
    for (const l of this.links) l.stream.connect();
  }

  /** Stops every link: its timers, its stream and its channel. */
  close(): void {
    if (this.urgentTimer) clearTimeout(this.urgentTimer);
    for (const l of this.links) {
      l.stopTimers();
      l.stream.close();
    }
  }

  /** After a reimage: every namenode gets a new registration, then the reimage report and the (empty) full report. */
  reregisterAfterReimage(atMs: number): void {
    for (const l of this.links) {
      l.received.length = 0;
      l.deleted.length = 0;
      l.pendingReimageAtMs = atMs;
      l.stream.register();
    }
  }

  /**
   * The keys that verify block tokens: every namenode's that requires tokens, or "off" when tokens are not required.
   * Required as soon as one namenode says so; waived when the namenodes that answered all said they issue none; before
   * any answered, required if a namenode required them before this start (so a datanode restarted while its namenodes
   * are away refuses every block, having no keys yet, rather than serve without tokens).
   */
  blockKeys(): Map<number, BlockKey>[] | "off" {
    const sets = this.links.flatMap((l) => (l.tokens instanceof Map ? [l.tokens] : []));
    if (sets.length > 0) return sets;
    if (this.links.some((l) => l.tokens === "off")) return "off";
    return this.requiredAtStart ? [] : "off";
  }

  /** Queues a finalized or deleted replica for every registered namenode's next incremental report. */
  queueReceived(replica: Block, kind: "received" | "deleted"): void {
    for (const l of this.links) {
      if (!l.stream.registered) continue;
      (kind === "received" ? l.received : l.deleted).push({ ...replica });
      l.receivedTimer ??= setTimeout(() => {
        l.receivedTimer = undefined;
        if (!l.stream.registered || (l.received.length === 0 && l.deleted.length === 0)) return;
        l.stream.send({ received: { received: l.received.splice(0), deleted: l.deleted.splice(0) } });
      }, RECEIVED_COALESCE_MS);
    }
  }

  /** Sends every registered namenode a heartbeat soon (coalescing bursts), e.g. when the primary turns busy. */
  heartbeatSoon(): void {
    if (this.urgentTimer || !this.registered) return;
    this.urgentTimer = setTimeout(() => {
      this.urgentTimer = undefined;
      for (const l of this.links) this.heartbeat(l);
    }, 20);
  }

  // ---------------------------------------------------------------------------------------------- one link

  private onMessage(link: NamenodeLink, msg: NamenodeToDatanodeOutput): void {
    if (msg.registered) this.onRegistered(link, msg.registered);
    else if (msg.commands) this.onCommands(link, msg.commands);
  }

  /**
   * A namenode answered a registration, or (already registered) says its role changed: it became active, or stepped
   * down. An answer starts the registered state (reimage report, full block report, timers); a role change only
   * updates what the link knows of the namenode.
   */
  private onRegistered(link: NamenodeLink, r: DatanodeRegisteredOutput): void {
    const log = this.host.log;
    const wasRegistered = link.stream.registered;
    const epoch = wireEpoch(r.epoch);
    this.fence.observe(epoch);
    this.setBlockTokens(link, r.blockTokens, r.blockKeys);
    const heartbeatIntervalMs = r.heartbeatIntervalMs || this.host.timing.heartbeatIntervalMs;
    const ha = epoch > 0 ? { epoch, active: r.active } : {};
    if (r.active && this.fence.isStale(epoch))
      log.warn("a namenode of an older term says it is active: its commands will be refused", {
        namenode: link.address,
        epoch,
        seen: this.fence.seen,
      });
    if (wasRegistered) {
      log.info("the namenode's role changed", { namenode: link.address, ...ha });
      if (heartbeatIntervalMs !== link.heartbeatIntervalMs) {
        link.heartbeatIntervalMs = heartbeatIntervalMs;
        this.startHeartbeats(link);
      }
      return;
    }
    if (r.datanodeId && r.datanodeId !== this.host.datanodeId)
      log.warn("namenode registered us under another id", { namenode: link.address, id: r.datanodeId });
    link.stream.markRegistered();
    link.heartbeatIntervalMs = heartbeatIntervalMs;
    log.info("registered with the namenode", { namenode: link.address, heartbeatIntervalMs, ...ha });
    if (link.pendingReimageAtMs !== undefined) {
      link.stream.send({ reimage: { atMs: link.pendingReimageAtMs } });
      link.pendingReimageAtMs = undefined;
    }
    // The full report supersedes any incremental one queued while unregistered.
    link.received.length = 0;
    link.deleted.length = 0;
    this.blockReport(link);
    if (link.blockReportTimer) clearInterval(link.blockReportTimer);
    link.blockReportTimer = setInterval(() => this.blockReport(link), this.host.timing.blockReportIntervalMs);
    this.startHeartbeats(link);
  }

  private startHeartbeats(link: NamenodeLink): void {
    if (link.heartbeatTimer) clearInterval(link.heartbeatTimer);
    link.heartbeatTimer = setInterval(() => this.heartbeat(link), link.heartbeatIntervalMs);
    this.heartbeat(link);
  }

  /**
   * Block tokens, per namenode: required once it says so at a registration (checked against the keys it sent),
   * waived when it says it issues none. The requirement is remembered on disk (see `blockKeys`).
   */
  private setBlockTokens(
    link: NamenodeLink,
    required: boolean,
    keys: readonly { keyId: number; secret: Buffer; expiresMs: number }[],
  ): void {
    link.tokens = required ? keyMap(keys) : "off";
    const marker = this.markerFile;
    if (required) {
      if (!existsSync(marker)) writeFileSync(marker, "block access tokens are required\n");
    } else if (this.blockKeys() === "off") rmSync(marker, { force: true });
  }

  private onCommands(link: NamenodeLink, c: DatanodeCommandsOutput): void {
    const epoch = wireEpoch(c.epoch);
    const verdict = commandVerdict(this.fence, this.links.length > 1, epoch);
    // Registering again concerns this namenode alone, whatever its term: its answer says who it is now.
    if (c.reregister) {
      this.host.log.info("namenode asked us to register again", { namenode: link.address });
      link.stream.register();
    }
    // Its keys replace its own set, whatever its term: they verify its tokens only, whose writes the fence refuses.
    if (c.blockKeys.length > 0 && link.tokens instanceof Map) link.tokens = keyMap(c.blockKeys);
    if (!hasWork(c)) return;
    if (verdict === "execute") {
      this.host.execute(c, (msg) => link.stream.send(msg));
    } else if (verdict === "stale") {
      this.host.staleCommands();
      if (this.warnedEpochs.has(epoch)) return;
      this.warnedEpochs.add(epoch);
      this.host.log.warn("refused commands from a namenode of an older term (fencing)", {
        namenode: link.address,
        epoch,
        seen: this.fence.seen,
      });
    } else if (!this.warnedStandby) {
      this.warnedStandby = true;
      this.host.log.warn("ignored commands that name no term (HA: from a standby)", { namenode: link.address });
    }
  }

  private blockReport(link: NamenodeLink): void {
    if (!link.stream.registered) return;
    const blocks = this.host.blockReport();
    if (blocks) link.stream.send({ blockReport: { blocks } });
  }

  private heartbeat(link: NamenodeLink): void {
    if (!link.stream.registered) return;
    const body = this.host.heartbeat();
    if (!body) return;
    link.stream.send({ heartbeat: { seq: ++link.seq, ...body } });
    if (this.links.find((l) => l.stream.registered) === link) this.host.afterHeartbeat();
  }
}
