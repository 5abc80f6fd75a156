/**
 * A client's ClientNamenode.NamespaceCalls stream: Create, AddBlock and Complete as messages on one long-lived stream
 * instead of one unary call each (the HTTP/2 stream and headers of a unary call cost more than the namespace work of a
 * small file). Calls are matched to results by id, each with its own deadline; a coded error answers only its call.
 *
 * The stream opens on the first call and ends once no call has been waiting for `idleMs` (an open call would keep a
 * client's process alive). When the stream fails (the namenode went away, the connection broke), every call waiting on
 * it fails with the stream's error, UNAVAILABLE for a lost connection, exactly as a unary call would, so callers retry
 * as they do for unary calls; the next call opens a new stream.
 */
import * as grpc from "@grpc/grpc-js";
import { fromCallError, fromGrpcError, HarvestError } from "../common/errors.js";
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

interface Waiting {
  kind: keyof StreamedCalls;
  resolve: (res: unknown) => void;
  reject: (err: HarvestError) => void;
  timer: NodeJS.Timeout;
}

export class NamespaceChannel {
  private stream: Stream | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly client: ClientNamenodeClient,
    /** The metadata every stream opens with (the claimed user on a plaintext cluster). */
    private readonly metadata: () => grpc.Metadata,
    private readonly idleMs = 1_000,
  ) {}

  /** Sends one call and resolves with its answer, or rejects with its coded error, within `timeoutMs`. */
  call<K extends keyof StreamedCalls>(
    kind: K,
    req: StreamedCalls[K]["req"],
    timeoutMs: number,
  ): Promise<StreamedCalls[K]["res"]> {
    if (this.closed) return Promise.reject(new HarvestError("UNAVAILABLE", "the DFS client is closed"));
    const stream = this.open();
    const id = this.nextId++;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    return new Promise<StreamedCalls[K]["res"]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new HarvestError("DEADLINE_EXCEEDED", `the namenode did not answer ${kind} within ${timeoutMs} ms`));
        this.idleCheck();
      }, timeoutMs);
      this.waiting.set(id, { kind, resolve: resolve as (res: unknown) => void, reject, timer });
      stream.write({ id, [kind]: req } as NamespaceCall);
    });
  }

  /** Fails the calls waiting and ends the stream; later calls fail with UNAVAILABLE. */
  close(): void {
    this.closed = true;
    this.failAll(new HarvestError("UNAVAILABLE", "the DFS client is closed"));
    this.endStream();
  }

  private open(): Stream {
    if (this.stream) return this.stream;
    const stream = this.client.namespaceCalls(this.metadata());
    this.stream = stream;
    stream.on("data", (r: NamespaceResultOutput) => this.onResult(r));
    stream.on("error", (err: grpc.ServiceError) => this.onStreamEnd(stream, streamFailure(err)));
    stream.on("end", () =>
      this.onStreamEnd(stream, new HarvestError("UNAVAILABLE", "the namenode ended the NamespaceCalls stream")),
    );
    return stream;
  }

  private onResult(r: NamespaceResultOutput): void {
    const w = this.waiting.get(r.id);
    if (!w) return; // Timed out already.
    this.waiting.delete(r.id);
    clearTimeout(w.timer);
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
    this.idleCheck();
  }

  /** The stream is over (failed or ended by the namenode): every call on it fails with `err`. */
  private onStreamEnd(stream: Stream, err: HarvestError): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.failAll(err);
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
    stream.on("error", () => undefined);
    stream.end();
    // The namenode ends its side once every call is answered; a stream we give up on is cancelled outright.
    if (this.closed) stream.cancel();
  }
}

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
