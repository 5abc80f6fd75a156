/**
 * A client's ClientNamenode.NamespaceCalls stream: Create, AddBlock and Complete as messages on one long-lived stream
 * instead of one unary call each (the HTTP/2 stream and headers of a unary call cost more than the namespace work of a
 * small file). Calls are matched to results by id, each with its own deadline; a coded error answers only its call.
 *
 * The stream opens on the first call and ends once no call has been waiting for `idleMs` (an open call would keep a
 * client's process alive). When the stream fails (the namenode went away, the connection broke), every call waiting on
 * it fails with the stream's error, UNAVAILABLE for a lost connection, exactly as a unary call would, so callers retry
 * as they do for unary calls; the next call opens a new stream.
 *
 * With a client of several namenodes (common/failover.ts) the stream follows the active one: a stream or a call a
 * standby refuses with NOT_ACTIVE is sent again to the active it names, unseen by the caller; a stream lost with
 * calls on it fails them as above (they may have been applied) and the next stream goes to the next namenode.
 */
import * as grpc from "@grpc/grpc-js";
import { asHarvestError, fromCallError, fromGrpcError, HarvestError, isHarvestError } from "../common/errors.js";
import { failoverOf } from "../common/failover.js";
import type { Failover } from "../common/failover.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { CompleteRequest } from "../proto/generated/harvest/v1/CompleteRequest.js";
import type { CreateRequest } from "../proto/generated/harvest/v1/CreateRequest.js";
import type { AddBlockRequest } from "../proto/generated/harvest/v1/AddBlockRequest.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { LocatedBlockOutput } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { NamespaceCall } from "../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResultOutput } from "../proto/generated/harvest/v1/NamespaceResult.js";

type Stream = grpc.ClientDuplexStream<NamespaceCall, NamespaceResultOutput>;

/** The calls that travel on the stream, with their requests and answers. */
export interface StreamedCalls {
  create: { req: CreateRequest; res: FileStatusOutput };
  addBlock: { req: AddBlockRequest; res: LocatedBlockOutput };
  complete: { req: CompleteRequest; res: FileStatusOutput };
}

/**
 * The streamed calls that may be sent again after the stream they were on was lost (their answer may have been lost
 * with a change applied). None today: create, addBlock and complete all change the namespace, and a second create or
 * addBlock would fail or allocate again. A call a standby refused (NOT_ACTIVE) is always sent again: it did nothing.
 */
const RESENT_AFTER_LOSS: ReadonlySet<keyof StreamedCalls> = new Set();

interface Waiting {
  kind: keyof StreamedCalls;
  req: StreamedCalls[keyof StreamedCalls]["req"];
  /** The stream the call was written on; undefined while it waits for one (a failover client reopening). */
  stream: Stream | undefined;
  resolve: (res: unknown) => void;
  reject: (err: HarvestError) => void;
  timer: NodeJS.Timeout;
  deadline: number;
}

export class NamespaceChannel {
  private stream: Stream | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Set when `client` was made from a list of namenodes: the stream then follows the active one. */
  private readonly failover: Failover<ClientNamenodeClient> | undefined;
  /** True while a failover client looks for a namenode to open the next stream on. */
  private opening = false;
  /** The wait before reopening after a standby refused the stream; doubles while they keep refusing. */
  private reopenDelayMs = REOPEN_MIN_MS;
  /** Streams whose end was handled. */
  private readonly ended = new WeakSet<Stream>();
  /** Streams this channel ended (idle, retired or closed), whose end is no failure of their namenode. */
  private readonly endedByUs = new WeakSet<Stream>();
  /** The namenode each stream of a failover client went to. */
  private readonly addressOf = new WeakMap<Stream, string>();

  constructor(
    private readonly client: ClientNamenodeClient,
    /** The metadata every stream opens with (the claimed user on a plaintext cluster). */
    private readonly metadata: () => grpc.Metadata,
    private readonly idleMs = 1_000,
  ) {
    this.failover = failoverOf(client);
  }

  /** Sends one call and resolves with its answer, or rejects with its coded error, within `timeoutMs`. */
  call<K extends keyof StreamedCalls>(
    kind: K,
    req: StreamedCalls[K]["req"],
    timeoutMs: number,
  ): Promise<StreamedCalls[K]["res"]> {
    if (this.closed) return Promise.reject(new HarvestError("UNAVAILABLE", "the DFS client is closed"));
    const id = this.nextId++;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    return new Promise<StreamedCalls[K]["res"]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new HarvestError("DEADLINE_EXCEEDED", `the namenode did not answer ${kind} within ${timeoutMs} ms`));
        this.idleCheck();
      }, timeoutMs);
      const w: Waiting = {
        kind,
        req,
        stream: undefined,
        resolve: resolve as (res: unknown) => void,
        reject,
        timer,
        deadline: Date.now() + timeoutMs,
      };
      this.waiting.set(id, w);
      if (this.stream) this.send(this.stream, id, w);
      else this.open();
    });
  }

  /** Fails the calls waiting and ends the stream; later calls fail with UNAVAILABLE. */
  close(): void {
    this.closed = true;
    this.failAll(new HarvestError("UNAVAILABLE", "the DFS client is closed"));
    this.endStream();
  }

  private send(stream: Stream, id: number, w: Waiting): void {
    w.stream = stream;
    stream.write({ id, [w.kind]: w.req } as NamespaceCall);
  }

  /**
   * Opens a stream and sends every call waiting for one. With one namenode, at once on its channel (as ever); with a
   * list, on the first namenode that has a connection (`Failover.connected`), so that a namenode found down before a
   * call was sent is simply skipped.
   */
  private open(): void {
    if (this.stream || this.opening || this.closed) return;
    if (!this.failover) {
      this.attach(this.client.namespaceCalls(this.metadata()));
      return;
    }
    if (this.waiting.size === 0) return;
    const deadline = Math.max(...[...this.waiting.values()].map((w) => w.deadline));
    this.opening = true;
    this.failover
      .connected(deadline, () => this.closed)
      .then(
        ({ address, client }) => {
          this.opening = false;
          if (this.closed || this.waiting.size === 0) return;
          const stream = client.namespaceCalls(this.metadata());
          this.addressOf.set(stream, address);
          this.attach(stream);
        },
        (err: unknown) => {
          this.opening = false;
          for (const [id, w] of [...this.waiting])
            if (!w.stream) this.settle(id, w, () => w.reject(asHarvestError(err)));
        },
      );
  }

  private attach(stream: Stream): void {
    this.stream = stream;
    stream.on("data", (r: NamespaceResultOutput) => this.onResult(stream, r));
    stream.on("error", (err: grpc.ServiceError) => this.onStreamEnd(stream, streamFailure(err)));
    stream.on("end", () =>
      this.onStreamEnd(stream, new HarvestError("UNAVAILABLE", "the namenode ended the NamespaceCalls stream")),
    );
    for (const [id, w] of this.waiting) if (!w.stream) this.send(stream, id, w);
  }

  private onResult(stream: Stream, r: NamespaceResultOutput): void {
    const w = this.waiting.get(r.id);
    if (!w || w.stream !== stream) return; // Timed out already.
    if (r.error && this.failover && r.error.code === "NOT_ACTIVE") {
      // This namenode stepped down: the call did nothing; it goes to the active with the calls still to send.
      w.stream = undefined;
      this.failover.masters.afterFailure(fromCallError(r.error), this.addressOf.get(stream));
      this.retire(stream);
      this.reopenSoon();
      return;
    }
    this.reopenDelayMs = REOPEN_MIN_MS;
    this.settle(r.id, w, () => {
      if (r.error) w.reject(fromCallError(r.error));
      else {
        const res = r[w.kind];
        if (res) w.resolve(res);
        else
          w.reject(
            new HarvestError("INTERNAL", `the namenode answered ${w.kind} with ${r.result ?? "nothing"}`, {
              details: { call: w.kind },
            }),
          );
      }
    });
    this.idleCheck();
  }

  /** Forgets call `id` and clears its timer, then runs `answer` (which resolves or rejects it). */
  private settle(id: number, w: Waiting, answer: () => void): void {
    this.waiting.delete(id);
    clearTimeout(w.timer);
    answer();
  }

  /**
   * The stream is over (failed or ended by the namenode): every call on it fails with `err`. With a list of
   * namenodes, the next stream goes to the active a NOT_ACTIVE names (else the next namenode), and a call is sent
   * again there when the standby refused it or it may run twice (RESENT_AFTER_LOSS).
   */
  private onStreamEnd(stream: Stream, err: HarvestError): void {
    // grpc-js may report a failed stream twice ("error", then "end"): the first says why.
    if (this.ended.has(stream)) return;
    this.ended.add(stream);
    if (this.stream === stream) {
      this.stream = undefined;
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    }
    const refused = isHarvestError(err, "NOT_ACTIVE");
    let resend = false;
    for (const [id, w] of [...this.waiting]) {
      if (w.stream !== stream) continue;
      if (this.failover && (refused || RESENT_AFTER_LOSS.has(w.kind))) {
        w.stream = undefined;
        resend = true;
      } else this.settle(id, w, () => w.reject(err));
    }
    if (!this.failover) return;
    // A stream this channel ended itself (idle, or moved off a standby) says nothing of its namenode.
    if (!this.endedByUs.has(stream)) this.failover.masters.afterFailure(err, this.addressOf.get(stream));
    if (resend) this.reopenSoon();
  }

  /** Ends a stream that is no longer the one new calls go on; calls still on it are answered there first. */
  private retire(stream: Stream): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    this.endedByUs.add(stream);
    stream.end();
  }

  /** Opens the next stream after a wait that doubles while namenodes keep refusing (two standbys mid-election). */
  private reopenSoon(): void {
    const delay = this.reopenDelayMs;
    this.reopenDelayMs = Math.min(this.reopenDelayMs * 2, REOPEN_MAX_MS);
    setTimeout(() => this.open(), delay).unref();
  }

  private failAll(err: HarvestError): void {
    const calls = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of calls) {
      clearTimeout(w.timer);
      w.reject(err);
    }
  }

  /** With no call waiting, ends the stream after `idleMs` unless a call comes first. */
  private idleCheck(): void {
    if (this.waiting.size > 0 || !this.stream || this.idleTimer) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.waiting.size === 0) this.endStream();
    }, this.idleMs);
  }

  private endStream(): void {
    const stream = this.stream;
    this.stream = undefined;
    if (!stream) return;
    this.endedByUs.add(stream);
    stream.on("error", () => undefined);
    stream.end();
    // The namenode ends its side once every call is answered; a stream we give up on is cancelled outright.
    if (this.closed) stream.cancel();
  }
}

/** The first wait before reopening on another namenode after a refusal, and the longest. */
const REOPEN_MIN_MS = 20;
const REOPEN_MAX_MS = 1_000;

/**
 * What the calls on a failed stream fail with. A stream the namenode's side dropped (it shut down: grpc-js reports
 * CANCELLED) is UNAVAILABLE like a lost connection, so that writers retry; a refusal (no certificate, no right) keeps
 * its code.
 */
function streamFailure(err: grpc.ServiceError): HarvestError {
  if (err.code === grpc.status.CANCELLED)
    return new HarvestError(
      "UNAVAILABLE",
      `the namenode closed the NamespaceCalls stream: ${err.details || err.message}`,
    );
  return fromGrpcError(err);
}
