/**
 * The namenode's client protocol (ClientNamenode): who is calling and what they may do, the namespace calls (alone or
 * on a NamespaceCalls stream), block allocation with replica placement, block locations in read order, bad block
 * reports, fsck, and the delegation and web tokens. The web routes call the same functions (web.ts).
 */
import type * as grpc from "@grpc/grpc-js";
import { verifyBlockToken } from "../common/block-token.js";
import type { BlockKeyManager, BlockTokenClaims } from "../common/block-token.js";
import type { Clock } from "../common/clock.js";
import { callErrorOf, HarvestError } from "../common/errors.js";
import { countRefusal, describeRefusal, refusalDetails } from "../common/placement-refusal.js";
import { CLAIMED_USER_METADATA } from "../common/fs-permission.js";
import { isValidIdentityName } from "../common/tls.js";
import { requireAccess } from "../common/auth.js";
import type { CallContext, Gate, Principal } from "../common/auth.js";
import type { DelegationTokens } from "../common/delegation-token.js";
import { parseAppId } from "../common/ids.js";
import { unary, undecodable } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import type { SeededRng } from "../common/rng.js";
import type { WebTokens } from "../common/web-token.js";
import type { AbandonBlockRequestOutput } from "../proto/generated/harvest/v1/AbandonBlockRequest.js";
import type { AddBlockRequestOutput } from "../proto/generated/harvest/v1/AddBlockRequest.js";
import type { CompleteRequestOutput } from "../proto/generated/harvest/v1/CompleteRequest.js";
import type { CreateRequestOutput } from "../proto/generated/harvest/v1/CreateRequest.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";
import type { GetBlockLocationsRequestOutput } from "../proto/generated/harvest/v1/GetBlockLocationsRequest.js";
import type { LocatedBlock } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { NamespaceCallOutput } from "../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResult } from "../proto/generated/harvest/v1/NamespaceResult.js";
import type { ReportBadBlocksRequestOutput } from "../proto/generated/harvest/v1/ReportBadBlocksRequest.js";
import type { BlockManager } from "./block-manager.js";
import type { CancelledTokens } from "./cancelled-tokens.js";
import type { DatanodeEntry } from "./datanode-entry.js";
import type { DatanodeTracker } from "./datanode-tracker.js";
import { fsckReport } from "./health.js";
import type { HealthSource } from "./health.js";
import type { Namespace } from "./namespace.js";
import type { NameNodeMetrics } from "./nn-metrics.js";
import type { NameNodeOptions } from "./options.js";
import type { AdminState } from "./policy/decommission.js";
import type { Caller } from "./policy/permissions.js";
import type { PlacementPolicy } from "./policy/placement.js";
import { orderReplicas } from "./policy/read-order.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";
import type { SafeMode } from "./safe-mode.js";
import type { FileBlockLocations } from "./web.js";

/** A ClientNamenode.NamespaceCalls stream, server side. */
type NamespaceStream = grpc.ServerDuplexStream<NamespaceCallOutput, NamespaceResult>;
/** Unanswered calls a NamespaceCalls stream may have before the namenode stops reading it. */
const MAX_STREAMED_CALLS = 64;

/** Where a replica's datanode ranks among the idle (or the busy) ones for reads: leaving datanodes last. */
const READ_RANK: Readonly<Record<AdminState, number>> = { NORMAL: 0, DECOMMISSION_IN_PROGRESS: 1, DECOMMISSIONED: 2 };
/** The user of a plaintext call that claims none (it gets only the "other" permission bits). */
const ANONYMOUS_USER = "nobody";

/** What the client protocol uses of the namenode: its parts, and what exists only once it has started. */
export interface ClientProtocolHost {
  /** HA: the error a standby answers with (NOT_ACTIVE naming the active); undefined while active or without HA. */
  notActive(): HarvestError | undefined;
  options: NameNodeOptions;
  clock: Clock;
  log: Logger;
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  gate: Gate;
  metrics: NameNodeMetrics;
  namespace: Namespace;
  blocks: BlockManager;
  monitor: ReplicationMonitor;
  placement: PlacementPolicy;
  rng: SeededRng;
  /** Signs block access tokens; undefined when the namenode issues none (`blockTokens: false`). */
  blockKeys: BlockKeyManager | undefined;
  tracker: DatanodeTracker;
  safeMode: SafeMode;
  /** Issues delegation tokens (secure namenodes only, once started). */
  delegation(): DelegationTokens | undefined;
  /** The delegation tokens cancelled before they expired (durable). */
  cancelledTokens: CancelledTokens;
  /** Issues web tokens (secure namenodes only, once started). */
  webTokens(): WebTokens | undefined;
  /** Base URL of the web UI (once started). */
  httpUrl(): string | undefined;
  /** What the health reports read (health.ts). */
  healthSource(): HealthSource;
}

/** The ClientNamenode service and the calls the web routes share with it. */
export class ClientProtocol {
  private readonly options: NameNodeOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly gate: Gate;
  private readonly metrics: NameNodeMetrics;
  private readonly namespace: Namespace;
  private readonly blocks: BlockManager;
  private readonly monitor: ReplicationMonitor;
  private readonly placement: PlacementPolicy;
  private readonly rng: SeededRng;
  private readonly blockKeys: BlockKeyManager | undefined;
  private readonly tracker: DatanodeTracker;
  private readonly safeMode: SafeMode;

  constructor(private readonly host: ClientProtocolHost) {
    ({
      options: this.options,
      clock: this.clock,
      log: this.log,
      gate: this.gate,
      metrics: this.metrics,
      namespace: this.namespace,
      blocks: this.blocks,
      monitor: this.monitor,
      placement: this.placement,
      rng: this.rng,
      blockKeys: this.blockKeys,
      tracker: this.tracker,
      safeMode: this.safeMode,
    } = host);
  }

  /** The ClientNamenode service. */
  service(): grpc.UntypedServiceImplementation {
    return {
      Mkdirs: unary((req: { path: string; owner: string }, c) =>
        this.metrics.observe("mkdirs", () => {
          this.safeMode.checkWritable();
          const caller = this.callerOf(c, req.owner);
          return this.namespace.mkdirs(req.path, caller.user, this.checked(caller));
        }),
      ),
      Create: unary((req: CreateRequestOutput, c) => this.createFile(req, c)),
      AddBlock: unary((req: AddBlockRequestOutput) => this.addBlockCall(req)),
      AbandonBlock: unary((req: AbandonBlockRequestOutput) =>
        this.metrics.observe("abandonBlock", async () => {
          this.safeMode.checkWritable();
          const pipeline = await this.namespace.abandonBlock(req.path, req.clientName, req.block);
          // Its datanodes may have kept what they got when the writer hung up on them (for lease recovery): not
          // needed.
          if (req.block) for (const dn of pipeline) this.tracker.queueDeletions([{ datanodeId: dn, block: req.block }]);
          return {};
        }),
      ),
      Complete: unary((req: CompleteRequestOutput) => this.completeFile(req)),
      NamespaceCalls: (stream: NamespaceStream) => this.onNamespaceStream(stream),
      // Not refused in safe mode: a writer keeps its leases while the namenode waits for block reports.
      RenewLease: unary((req: { clientName: string }, c) =>
        this.metrics.observe("renewLease", () => ({
          renewed: this.namespace.renewLease(req.clientName, this.checked(this.callerOf(c))),
        })),
      ),
      GetBlockLocations: unary((req: GetBlockLocationsRequestOutput, c) => {
        const caller = this.callerOf(c);
        const located = this.locateBlocks(req.path, req.offset, req.length, this.checked(caller));
        return {
          fileLength: located.fileLength,
          complete: located.complete,
          blocks: located.blocks.map((b) => ({
            ...b,
            blockToken: this.blockKeys?.issue(b.block.blockId, "READ", caller.user) ?? "",
          })),
        };
      }),
      List: unary((req: { path: string }, c) => ({ entries: this.list(req.path, this.checked(this.callerOf(c))) })),
      Stat: unary((req: { path: string }, c) => this.stat(req.path, this.checked(this.callerOf(c)))),
      GetHomeDirectory: unary((_req: object, c) => this.metrics.observe("mkdirs", () => this.homeDirectory(c))),
      Delete: unary((req: { path: string; recursive: boolean; clientName: string }, c) =>
        this.metrics.observe("delete", async () => {
          this.safeMode.checkWritable();
          const caller = this.checked(this.callerOf(c));
          return { deleted: await this.namespace.delete(req.path, req.recursive, caller, req.clientName || undefined) };
        }),
      ),
      Rename: unary((req: { src: string; dst: string }, c) =>
        this.metrics.observe("rename", () => {
          this.safeMode.checkWritable();
          return this.namespace.rename(req.src, req.dst, this.checked(this.callerOf(c)));
        }),
      ),
      SetPermission: unary((req: { path: string; mode: number }, c) =>
        this.metrics.observe("setPermission", () => {
          this.safeMode.checkWritable();
          return this.namespace.setPermission(req.path, req.mode, this.checked(this.callerOf(c)));
        }),
      ),
      SetOwner: unary((req: { path: string; owner: string; group: string }, c) =>
        this.metrics.observe("setOwner", () => {
          this.safeMode.checkWritable();
          return this.namespace.setOwner(req.path, req.owner, req.group, this.checked(this.callerOf(c)));
        }),
      ),
      ReportBadBlocks: unary((req: ReportBadBlocksRequestOutput, c) =>
        this.metrics.observe("reportBadBlocks", () => this.reportBadBlocks(req, c)),
      ),
      Fsck: unary((req: { path: string }, c) => this.fsck(req.path || "/", this.checked(this.callerOf(c)))),
      GetDatanodes: unary(() => ({ datanodes: this.tracker.datanodeReports(), totals: this.tracker.liveCapacity() })),
      GetSafeMode: unary(() => this.safeMode.status()),
      GetDelegationToken: unary((req: { lifetimeMs: number; job: string }, c) => {
        // The job becomes part of the token and of logs: an application id or nothing.
        if (req.job) parseAppId(req.job);
        const delegation = this.host.delegation();
        if (!delegation) return { token: "", owner: "", expiresMs: 0 };
        const owner = this.gate.principal(c).name;
        const issued = delegation.issue(owner, this.clock.nowMs(), req.lifetimeMs, { job: req.job });
        this.log.info("delegation token issued", { owner, job: req.job, expiresMs: issued.expiresMs });
        return { token: issued.token, owner, expiresMs: issued.expiresMs };
      }),
      CancelDelegationToken: unary((req: { token: string }, c) => this.cancelDelegationToken(req.token, c)),
      // On an insecure namenode the web UI is open to all: there is nothing to log in to.
      GetWebToken: unary((req: { lifetimeMs: number }, c) => {
        const url = this.host.httpUrl() ?? "";
        const webTokens = this.host.webTokens();
        if (!webTokens) return { token: "", owner: "", role: "", expiresMs: 0, url };
        const issued = webTokens.issue(this.gate.principal(c), req.lifetimeMs, url);
        this.log.info("web token issued", { owner: issued.owner, role: issued.role, expiresMs: issued.expiresMs });
        return issued;
      }),
    };
  }

  /**
   * ClientNamenode.GetHomeDirectory: `/user/<caller>`, created when missing (`/user` as the superuser's, 755; the
   * home as the caller's, 755), so that a user's job client can keep staging directories there without an
   * administrator creating the home first.
   */
  private async homeDirectory(c: CallContext): Promise<FileStatusOutput> {
    const caller = this.callerOf(c);
    const home = `/user/${caller.user}`;
    if (caller.user === ANONYMOUS_USER || caller.user === "." || caller.user === ".." || caller.user.includes("/"))
      throw new HarvestError("PERMISSION_DENIED", `${caller.user} has no home directory`, {
        details: { identity: caller.user, action: "get a home directory" },
      });
    if (!this.namespace.exists(home)) {
      this.safeMode.checkWritable();
      if (!this.namespace.exists("/user")) await this.namespace.mkdirs("/user", this.options.superuser);
      await this.namespace.mkdirs(home, caller.user);
      this.log.info("home directory created", { path: home, owner: caller.user });
    }
    return this.namespace.stat(home);
  }

  /**
   * ClientNamenode.CancelDelegationToken. Holding the token is the right to cancel it, as HDFS lets a token's renewer
   * cancel it: whoever holds it could act as its owner, and a cancellation only takes that away. So the resource
   * manager (a daemon certificate) cancels a job's token when the job ends, and the owner or an admin cancel one they
   * hold; the gate has already authenticated the caller (a certificate, or a valid token of its own).
   */
  private async cancelDelegationToken(token: string, c: CallContext): Promise<object> {
    const delegation = this.host.delegation();
    if (!delegation)
      throw new HarvestError(
        "DELEGATION_TOKEN_INVALID",
        "this namenode runs without TLS and issues no delegation tokens",
      );
    const checked = delegation.check(token, this.clock.nowMs());
    if (!checked)
      throw new HarvestError(
        "DELEGATION_TOKEN_INVALID",
        "not a delegation token of this namenode, or one that has expired: there is nothing to cancel",
      );
    const { claims } = checked;
    if (!checked.cancelled) {
      await this.host.cancelledTokens.cancel(claims);
      this.log.info("delegation token cancelled", {
        owner: claims.owner,
        job: claims.job ?? "",
        expiresMs: claims.expiresMs,
        by: this.gate.principal(c).name,
      });
    }
    return {};
  }

  /**
   * Who is calling: the identity of the TLS peer certificate when there is one (the `admin` role is the superuser),
   * and then any claimed user is ignored. Only on a plaintext connection is a claim trusted, as in HDFS's simple
   * authentication: the `harvest-user` metadata, else `claimedUser` (the owner Create and Mkdirs carry); the claimed
   * name equal to the `superuser` option is the superuser. A plaintext call that claims no one is "nobody".
   */
  callerOf(c: CallContext, claimedUser = ""): Caller {
    if (this.gate.secure) return this.callerOfPrincipal(this.gate.principal(c));
    const fromMetadata = c.metadata.get(CLAIMED_USER_METADATA)[0];
    const claimed = (typeof fromMetadata === "string" ? fromMetadata : "") || claimedUser || ANONYMOUS_USER;
    if (!isValidIdentityName(claimed))
      throw new HarvestError("INVALID_ARGUMENT", `bad user name ${JSON.stringify(claimed)}`, {
        details: { field: "user" },
      });
    return { user: claimed, groups: this.groupsOf(claimed), superuser: claimed === this.options.superuser };
  }

  /** An authenticated caller: the certificate's (or token's) name; the `admin` role is the superuser. */
  private callerOfPrincipal(who: Principal): Caller {
    return { user: who.name, groups: this.groupsOf(who.name), superuser: who.role === "admin" };
  }

  /** The caller the namespace checks, or undefined when permissions are off (`permissions: false`). */
  checked(caller: Caller): Caller | undefined {
    return this.options.permissions ? caller : undefined;
  }

  private groupsOf(user: string): string[] {
    return [user, ...(this.options.userGroups[user] ?? [])];
  }

  /** ClientNamenode.Create, on its own or on a NamespaceCalls stream. */
  private createFile(req: CreateRequestOutput, c: CallContext): Promise<FileStatusOutput> {
    return this.metrics.observe("create", () => {
      this.safeMode.checkWritable();
      const caller = this.callerOf(c, req.owner);
      return this.namespace.create({ ...req, owner: caller.user, blockSizeBytes: req.blockSize }, this.checked(caller));
    });
  }

  /** ClientNamenode.AddBlock, on its own or on a NamespaceCalls stream. */
  private addBlockCall(req: AddBlockRequestOutput): Promise<LocatedBlock> {
    return this.metrics.observe("addBlock", () => this.addBlock(req));
  }

  /** ClientNamenode.Complete, on its own or on a NamespaceCalls stream. */
  private completeFile(req: CompleteRequestOutput): Promise<FileStatusOutput> {
    return this.metrics.observe("complete", () => {
      this.safeMode.checkWritable();
      return this.namespace.complete(req.path, req.clientName, req.last);
    });
  }

  /**
   * ClientNamenode.NamespaceCalls: each message is one Create, AddBlock or Complete, run as its unary call runs (the
   * caller is the stream's), answered by id as soon as it is done; a failure is that call's coded error, and the
   * stream goes on. A client with more than MAX_STREAMED_CALLS unanswered is not read until some are answered.
   */
  private onNamespaceStream(stream: NamespaceStream): void {
    let inFlight = 0;
    let ended = false;
    const closeIfDone = (): void => {
      if (ended && inFlight === 0) stream.end();
    };
    stream.on("data", (msg: NamespaceCallOutput) => {
      inFlight++;
      if (inFlight >= MAX_STREAMED_CALLS) stream.pause();
      const why = undecodable(msg);
      Promise.resolve()
        .then((): Promise<NamespaceResult> => {
          if (why !== undefined)
            throw new HarvestError("INVALID_ARGUMENT", `the request's bytes are not a valid message: ${why}`);
          const standby = this.host.notActive();
          if (standby) throw standby;
          if (msg.create) return this.createFile(msg.create, stream).then((r) => ({ id: msg.id, create: r }));
          if (msg.addBlock) return this.addBlockCall(msg.addBlock).then((r) => ({ id: msg.id, addBlock: r }));
          if (msg.complete) return this.completeFile(msg.complete).then((r) => ({ id: msg.id, complete: r }));
          throw new HarvestError("INVALID_ARGUMENT", "a NamespaceCall names no call (create, addBlock or complete)");
        })
        .catch((err: unknown) => ({ id: msg.id, error: callErrorOf(err) }))
        .then((result) => {
          inFlight--;
          if (stream.isPaused() && inFlight < MAX_STREAMED_CALLS) stream.resume();
          if (!stream.cancelled && !stream.destroyed) stream.write(result);
          closeIfDone();
        })
        .catch(() => undefined);
    });
    stream.on("end", () => {
      ended = true;
      closeIfDone();
    });
    stream.on("error", () => undefined);
  }

  private async addBlock(req: AddBlockRequestOutput): Promise<LocatedBlock> {
    this.safeMode.checkWritable();
    const excluded = new Set(req.excludedDatanodes);
    const { block, offset, targets } = await this.namespace.addBlock(
      { path: req.path, clientName: req.clientName, previous: req.previous },
      (file) => {
        // A datanode out of service takes no new replica; a stale one only when fresh ones are too few.
        const live = this.tracker.liveViews().filter((d) => this.monitor.adminState(d.datanodeId) === "NORMAL");
        const request = {
          writerDatanodeId: file.inode.writerDatanodeId || undefined,
          blockSizeBytes: file.inode.blockSizeBytes,
          rng: this.rng,
        };
        const chosen = this.placement.chooseTargets({
          ...request,
          replication: file.inode.replication,
          excluded,
          datanodes: live.filter((d) => !d.stale),
        });
        if (chosen.length < file.inode.replication && live.some((d) => d.stale))
          chosen.push(
            ...this.placement.chooseTargets({
              ...request,
              replication: file.inode.replication - chosen.length,
              excluded: new Set([...excluded, ...chosen.map((d) => d.datanodeId)]),
              existing: chosen.map((d) => d.datanodeId),
              datanodes: live,
            }),
          );
        if (chosen.length === 0) {
          // Counted over every live datanode, those out of service too: the writer is told each reason once.
          const refusal = countRefusal(
            this.tracker.liveViews(),
            excluded,
            file.inode.blockSizeBytes,
            (id) => this.monitor.adminState(id) !== "NORMAL",
          );
          throw new HarvestError(
            "NAMENODE_NOT_ENOUGH_DATANODES",
            `no datanode can take a block of ${file.path} now: of ${refusal.live} live, ${describeRefusal(refusal)}`,
            { details: refusalDetails(refusal) },
          );
        }
        return chosen;
      },
      (chosen) => chosen.map((d) => d.datanodeId),
    );
    return {
      block,
      offset,
      locations: targets.map((t) => this.tracker.info(t.datanodeId)),
      blockToken: this.blockKeys?.issue(block.blockId, "WRITE", req.clientName) ?? "",
    };
  }

  /**
   * The blocks of a file overlapping `offset`..`offset + length` (`length` 0: to the end; the block being written
   * counts once the range reaches it), each with its good replicas in read order: GetBlockLocations, which adds block
   * tokens, and the REST API, which shows none. READ on the file.
   */
  locateBlocks(path: string, offset: number, length: number, caller: Caller | undefined): FileBlockLocations {
    return this.metrics.observe("getBlockLocations", () => {
      if (!(offset >= 0) || !(length >= 0))
        throw new HarvestError("INVALID_ARGUMENT", "offset and length must be >= 0", { details: { field: "offset" } });
      const file = this.namespace.file(path, caller);
      const end = length > 0 ? offset + length : Infinity;
      const blocks: FileBlockLocations["blocks"] = [];
      for (const b of file.blocks) {
        const overlaps =
          b.offset < end && (b.offset + b.block.numBytes > offset || (!b.committed && b.offset >= offset));
        if (overlaps) blocks.push({ block: b.block, offset: b.offset, locations: this.readOrder(b.block.blockId) });
      }
      return { fileLength: file.length, blocks, complete: file.inode.complete };
    });
  }

  /** A directory's entries, or a file's own status (List; the REST API's LISTSTATUS). */
  list(path: string, caller: Caller | undefined): FileStatusOutput[] {
    return this.metrics.observe("listing", () => this.namespace.list(path, caller));
  }

  /** A file's or directory's status (Stat; the REST API's GETFILESTATUS). */
  stat(path: string, caller: Caller | undefined): FileStatusOutput {
    return this.metrics.observe("getFileInfo", () => this.namespace.stat(path, caller));
  }

  /**
   * Good replicas on live datanodes (the corrupt ones when there are none): those whose primary is not busy first (a
   * busy one refuses reads), and within each group the in-service ones, then draining, then decommissioned ones (HDFS
   * sorts those last too: they are leaving).
   */
  private readOrder(blockId: number): DatanodeInfoOutput[] {
    const groups: DatanodeEntry[][] = Array.from({ length: 6 }, () => []);
    // With no good replica left, readers still try the corrupt ones (HDFS does too): a report may be wrong, and a
    // replica that really is bad fails its checksums on the reader's side.
    const good = this.blocks.liveReplicas(blockId);
    const replicas = good.length > 0 ? good : [...(this.blocks.get(blockId)?.replicas.values() ?? [])];
    for (const r of replicas) {
      const d = this.tracker.datanodes.get(r.datanodeId);
      // A stale datanode may be dead: read from it only after the others, as from a busy one.
      if (d?.state === "LIVE")
        groups[
          (d.primaryBusy || this.tracker.isStale(d) ? 3 : 0) + READ_RANK[this.monitor.adminState(d.datanodeId)]
        ]!.push(d);
    }
    const policy = this.options.randomizeReadOrder ? "request" : "block";
    return orderReplicas(groups, blockId, policy, (d) => d.datanodeId, this.options.seed, this.rng).map((d) =>
      this.tracker.info(d.datanodeId),
    );
  }

  /**
   * A reader's or a datanode's report of corrupt replicas. On a secure namenode only a datanode (a daemon certificate)
   * or a client holding a valid READ block token for that block, issued to it, may report; a client's report never
   * marks a block's last good replica corrupt (HDFS keeps reported replicas until enough good ones exist; the monitor
   * deletes corrupt ones only then). Every report is logged with its caller.
   */
  private reportBadBlocks(req: ReportBadBlocksRequestOutput, c: CallContext): Record<string, never> {
    // Without TLS nobody is authenticated: every report is taken, as before, and logged with the claimed user.
    const who = this.gate.secure ? this.gate.principal(c) : undefined;
    const name = who?.name ?? this.callerOf(c).user;
    const role = who?.role ?? "unauthenticated";
    const trusted = !who || (who.role === "daemon" && who.via === "certificate");
    // The whole report is refused, or none of it: every block is checked before any replica is marked.
    for (const bad of req.blocks) {
      if (!bad.block)
        throw new HarvestError("INVALID_ARGUMENT", "a bad block needs its block", { details: { field: "block" } });
      if (!trusted) this.checkReportToken(bad.blockToken, bad.block.blockId, name, role);
    }
    for (const bad of req.blocks) {
      const blockId = bad.block!.blockId;
      const fields = { caller: name, role, blockId, datanodeId: bad.datanodeId, reason: bad.reason };
      const othersGood = this.blocks.liveReplicas(blockId).some((r) => r.datanodeId !== bad.datanodeId);
      if (!trusted && !othersGood) {
        // Its datanode checks a copy made from it on arrival, and readers still try it: nothing is lost by waiting.
        this.log.warn("bad block report kept: the block's last good replica", fields);
        continue;
      }
      const marked = this.blocks.markCorrupt(bad.datanodeId, blockId, bad.reason);
      this.log.warn(marked ? "replica reported corrupt" : "bad block report of an unknown replica", fields);
    }
    return {};
  }

  /** A client may report a block only with an unexpired READ token the namenode issued to it for that block. */
  private checkReportToken(token: string, blockId: number, user: string, role: string): void {
    const refuse = (why: string): never => {
      this.log.warn("bad block report refused", { caller: user, role, blockId, why });
      throw new HarvestError("PERMISSION_DENIED", `${user} may not report block ${blockId} bad: ${why}`, {
        details: { identity: user, role, action: `ReportBadBlocks ${blockId}` },
      });
    };
    if (!this.blockKeys) return refuse("the namenode issues no block tokens; only datanodes report");
    const keys = new Map(this.blockKeys.keys().map((k) => [k.keyId, k]));
    let claims: BlockTokenClaims;
    try {
      claims = verifyBlockToken(token, keys, blockId, "READ", this.clock.nowMs());
    } catch (err) {
      return refuse(err instanceof Error ? err.message : "bad block token");
    }
    if (claims.user !== user) refuse("the block token was issued to another user");
  }

  /**
   * Walks a subtree. `missing`: committed blocks without a good replica on a live datanode (they make it unhealthy);
   * `underReplicated`: fewer good replicas on live in-service datanodes than expected (replicas on draining or
   * decommissioned datanodes are counted apart: a block fully replicated without them is healthy); `corrupt`: blocks
   * with a corrupt replica, listing its holders. The caller needs READ_EXECUTE on every directory walked (HDFS's
   * fsck lists each as its caller): DFS_PERMISSION_DENIED, naming the first refused, tells nothing of what is below.
   */
  fsck(path: string, caller: Caller | undefined): FsckReportOutput {
    return this.metrics.observe("fsck", () => fsckReport(path, this.host.healthSource(), caller));
  }

  /**
   * The DFS caller of a web request: its certificate's or web token's identity, as over gRPC; on an insecure namenode,
   * where the web server authenticates nobody, the superuser (as the gRPC gate's principal is an admin then).
   */
  webCaller(principal: Principal | undefined): Caller | undefined {
    const su = this.options.superuser;
    return this.checked(
      principal ? this.callerOfPrincipal(principal) : { user: su, groups: this.groupsOf(su), superuser: true },
    );
  }

  /**
   * Admin RPCs: with TLS the gate already let only `admin` certificates through; on a plaintext namenode the claimed
   * user must be the superuser, as HDFS's dfsadmin requires (unless permissions are off).
   */
  requireAdmin(c: grpc.ServerUnaryCall<unknown, unknown>, action: string): void {
    if (this.gate.secure || !this.options.permissions) return;
    const caller = this.callerOf(c);
    requireAccess(caller.superuser, { name: caller.user, role: "user", via: "claim" }, action);
  }
}
