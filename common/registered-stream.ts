/**
 * A worker's registered stream to its master: a datanode's to the namenode, a node manager's to the resource manager.
 * One bidirectional gRPC stream, whose first message registers the worker; opened again with exponential backoff when
 * it closes, and given up on when the master does not answer the registration in time (the channel is dropped too:
 * it may be stuck dialing through a cut link, and a fresh one starts a new connection at once).
 *
 * A worker configured with several masters (HA; `address` is then a comma-separated list) follows the active one: when
 * a stream is refused with NOT_ACTIVE or lost, the channel is dropped and the next stream dials the active the refusal
 * named (at once), or else the next master (after the backoff).
 */
import type { ClientDuplexStream } from "@grpc/grpc-js";
import { errorMessage, fromGrpcError } from "./errors.js";
import { MasterAddresses } from "./failover.js";
import type { Logger } from "./log.js";

/** A registered stream's waits. */
export interface RegisteredStreamTiming {
  /** The first wait before opening a closed stream again, and the wait once the master has answered a registration. */
  reconnectMinMs: number;
  /** The longest wait: each loss without a registration doubles the wait up to this. */
  reconnectMaxMs: number;
  /** How long a registration may go unanswered before the stream and the channel are dropped. */
  registerTimeoutMs: number;
}

/** A gRPC client to the master: the stream dials it, keeps it between streams and closes it. */
export interface MasterChannel {
  close(): void;
}

/** What a worker gives its registered stream: backoff settings, the channel, the registration and its handlers. */
export interface RegisteredStreamOptions<Out, In, C extends MasterChannel = MasterChannel> {
  /** The master's name in log lines: "namenode", "resource manager". */
  master: string;
  /** How long to wait and for what (the daemons' options carry these fields under the same names). */
  timing: RegisteredStreamTiming;
  log: Logger;
  /** The master's host:port, or every master's, comma-separated (HA: see the file comment). */
  address: string;
  /** Dials a channel to the master at `address` (one of the list): at the first stream, and again after a drop. */
  dial(address: string): C;
  /** Opens a stream over the channel. */
  openStream(channel: C): ClientDuplexStream<Out, In>;
  /** The registration, the first message of every stream (and sent again by `register()`). */
  registration(): Out;
  /** A message from the master; one that throws is logged and ignored (a bad message never stops the worker). */
  onMessage(msg: In): void;
  /** The stream closed: whatever runs only while registered (heartbeat timers) stops here. */
  onLost(): void;
  /** Whether the worker still runs: a stream lost while stopping is not opened again. */
  isRunning(): boolean;
}

/** A worker's reconnecting registered stream to its master (see the file comment). */
export class RegisteredStream<Out, In, C extends MasterChannel = MasterChannel> {
  /** The channel the streams run over; dropped (closed and forgotten) when a registration goes unanswered. */
  private channel: C | undefined;
  private stream: ClientDuplexStream<Out, In> | undefined;
  /** True from the master's answer to the registration until the stream closes or the worker registers again. */
  private registeredValue = false;
  /** The wait before the next reconnection: reconnectMinMs after a registration, doubling to reconnectMaxMs. */
  private backoffMs: number;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private registerTimer: NodeJS.Timeout | undefined;
  /** The masters, and the one the channel dials. */
  private readonly masters: MasterAddresses;

  constructor(private readonly o: RegisteredStreamOptions<Out, In, C>) {
    this.backoffMs = o.timing.reconnectMinMs;
    this.masters = new MasterAddresses(o.address);
  }

  /** The master the stream goes to now (for logs and status). */
  get masterAddress(): string {
    return this.masters.current;
  }

  get registered(): boolean {
    return this.registeredValue;
  }

  /** How long the worker waits before opening the stream again if it closes now. */
  get reconnectDelayMs(): number {
    return this.backoffMs;
  }

  /** Whether a stream is open (registered or not). */
  get open(): boolean {
    return this.stream !== undefined;
  }

  /** Opens the stream and sends the registration; does nothing once the worker no longer runs. */
  connect(): void {
    if (!this.o.isRunning()) return;
    this.channel ??= this.o.dial(this.masters.current);
    const stream = this.o.openStream(this.channel);
    this.stream = stream;
    this.registeredValue = false;
    stream.on("data", (msg: In) => {
      try {
        this.o.onMessage(msg);
      } catch (err) {
        this.o.log.warn(`bad message from the ${this.o.master}; ignored`, { error: errorMessage(err) });
      }
    });
    const lost = (why: string, err?: Error): void => {
      if (this.stream !== stream) return;
      this.stream = undefined;
      this.registeredValue = false;
      this.o.onLost();
      if (!this.o.isRunning()) return;
      let waitMs = this.backoffMs;
      const masters = this.masters;
      if (masters.many) {
        // Another master may be the active one: the next stream dials it on a channel of its own.
        const from = masters.current;
        if (masters.afterFailure(err ? fromGrpcError(err) : undefined)) waitMs = this.o.timing.reconnectMinMs;
        this.dropChannel();
        this.o.log.warn(`${this.o.master} stream closed; trying ${masters.current}`, { why, from, inMs: waitMs });
      } else this.o.log.warn(`${this.o.master} stream closed; reconnecting`, { why, inMs: waitMs });
      this.reconnectTimer = setTimeout(() => this.connect(), waitMs);
      this.backoffMs = Math.min(this.backoffMs * 2, this.o.timing.reconnectMaxMs);
    };
    stream.on("error", (err: Error) => lost(errorMessage(err), err));
    stream.on("end", () => lost(`ended by the ${this.o.master}`));
    if (this.registerTimer) clearTimeout(this.registerTimer);
    this.registerTimer = setTimeout(() => {
      if (this.stream !== stream || this.registeredValue) return;
      this.dropChannel();
      lost(`no answer to the registration in ${this.o.timing.registerTimeoutMs} ms`);
      stream.cancel();
    }, this.o.timing.registerTimeoutMs);
    stream.write(this.o.registration());
  }

  /** The master accepted the registration: the backoff starts over. */
  markRegistered(): void {
    this.registeredValue = true;
    this.backoffMs = this.o.timing.reconnectMinMs;
  }

  /** Registers again on the open stream (after a reimage, or when the master asks): unregistered until it answers. */
  register(): void {
    if (!this.stream) return;
    this.registeredValue = false;
    this.stream.write(this.o.registration());
  }

  /** Sends on the open stream; dropped while there is none (the next registration carries the state again). */
  send(msg: Out): void {
    // Messages are small and paced by timers; the stream's own buffer absorbs a burst.
    this.stream?.write(msg);
  }

  /** Stops reconnecting, ends the stream and closes the channel. */
  close(): void {
    for (const t of [this.reconnectTimer, this.registerTimer]) if (t) clearTimeout(t);
    this.reconnectTimer = this.registerTimer = undefined;
    this.stream?.end();
    this.stream = undefined;
    this.registeredValue = false;
    this.dropChannel();
  }

  /** Closes the channel so that the next stream dials a fresh connection. */
  private dropChannel(): void {
    this.channel?.close();
    this.channel = undefined;
  }
}
