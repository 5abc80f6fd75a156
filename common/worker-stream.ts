/**
 * The master's side of a worker's long-lived stream (node manager -> resource manager, datanode -> namenode): messages
 * are handled one at a time in arrival order (a handler may be async, e.g. to write its store before answering); a
 * handler that throws closes the stream with the error's code, and the master keeps serving everyone else.
 */
import type * as grpc from "@grpc/grpc-js";
import { errorMessage, toServiceError } from "./errors.js";
import type { Logger } from "./log.js";

/** How a master serves one worker stream. */
export interface WorkerStreamHandlers<In> {
  /** Handles one message; a throw closes this stream with the error's code. */
  onMessage(msg: In): void | Promise<void>;
  /** The stream ended, failed or was cancelled (called at most once per cause; must be idempotent). */
  onClose(): void;
  /** False once the master is stopping: later messages are dropped. */
  isRunning(): boolean;
  log: Logger;
  /** "node" or "datanode", for log lines. */
  what: string;
  /** Fields that identify the worker in log lines (its id once registered). */
  context(): Record<string, unknown>;
}

/** Attaches `handlers` to a worker's bidirectional stream. */
export function serveWorkerStream<In, Out>(
  stream: grpc.ServerDuplexStream<In, Out>,
  handlers: WorkerStreamHandlers<In>,
): void {
  let chain: Promise<void> = Promise.resolve();
  stream.on("data", (msg: In) => {
    chain = chain.then(async () => {
      if (stream.destroyed || !handlers.isRunning()) return;
      try {
        await handlers.onMessage(msg);
      } catch (err) {
        handlers.log.warn(`bad ${handlers.what} message; closing the stream`, {
          ...handlers.context(),
          error: errorMessage(err),
        });
        stream.emit("error", toServiceError(err));
      }
    });
  });
  stream.on("end", () => {
    handlers.onClose();
    stream.end();
  });
  stream.on("error", () => handlers.onClose());
  stream.on("cancelled", () => handlers.onClose());
}
