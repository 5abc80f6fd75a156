/**
 * Zero-copy reads: a read's DATA frames leave the datanode with their data sent straight from the block file to the
 * socket by sendfile(2) (native/sendfile.c), as HDFS's BlockSender does with `transferTo`. The datanode reads only the
 * chunk checksums (from the meta file) to put in each frame's head; the client verifies every chunk, as it always
 * does, and reports a bad replica to the namenode.
 *
 * Why. Sending a replica the ordinary way reads each piece into a buffer (the kernel copies it out of the page cache),
 * checks its chunks, and writes the buffer to the socket (the kernel copies it in again). On this VM a process sending
 * a 1 GiB file in 512 KiB frames over loopback used 0.73-0.78 s of CPU that way and 0.38-0.52 s with sendfile (three
 * runs each; issue 17's note), before counting the check the datanode no longer makes.
 *
 * Where. Plaintext transfer connections only: TLS encrypts in the process, so its bytes must pass through memory (Linux
 * can encrypt in the kernel with kTLS, which Node does not use). gRPC reads, and datanodes with
 * `zeroCopyReads: false` (the baseline), read and verify every piece as before. Where the routine was not built (no C
 * compiler, scripts/build-native.mjs), or on a system without sendfile, reads take the ordinary path.
 */
import type * as net from "node:net";
import { errorMessage, HarvestError } from "../common/errors.js";
import { loadNativeAddon } from "../common/paths.js";

/** The native routine (native/sendfile.c). */
interface NativeSendfile {
  /**
   * Writes heads[i], then lengths[i] bytes of the file at offsets[i], for every i, on a thread of its own; `done` runs
   * on this thread with null or the failure's name ("EOF": the file ended early; "ECANCELED": cancelled) and the bytes
   * sent.
   */
  send(
    socketFd: number,
    fileFd: number,
    heads: Buffer[],
    offsets: number[],
    lengths: number[],
    done: (error: string | null, sent: number) => void,
  ): object;
  /** Ends a job at once; its `done` still runs. */
  cancel(job: object): void;
}

const native =
  process.platform !== "linux" || process.env["HARVEST_ZERO_COPY_READS"] === "0"
    ? undefined
    : loadNativeAddon<NativeSendfile>("harvest_sendfile");

/** Whether this process can send replica data with sendfile (the routine is built; HARVEST_ZERO_COPY_READS is not 0). */
export function zeroCopyAvailable(): boolean {
  return native !== undefined;
}

/**
 * The descriptor of a plaintext TCP socket, for sendfile; undefined for anything else (a TLS socket, a socket whose
 * handle is gone). Node keeps it on the socket's handle; no public API names it.
 */
export function plainSocketDescriptor(socket: net.Socket): number | undefined {
  if ((socket as { encrypted?: boolean }).encrypted) return undefined;
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === "number" && Number.isInteger(fd) && fd >= 0 ? fd : undefined;
}

/** One frame of a zero-copy send: its head from memory, then `length` bytes of the file at `offset`. */
export interface FileFrame {
  head: Buffer;
  offset: number;
  length: number;
}

/**
 * Sends `frames` on the socket behind `socketFd` with their data from the file behind `fileFd`; resolves with the
 * bytes sent. Nothing else may write to the socket meanwhile (its own queue must be empty when this starts). Aborting
 * `signal` ends the send at once and shuts the socket down. Rejects with DATANODE_CORRUPT_BLOCK when the file is
 * shorter than a frame says ("EOF"), UNAVAILABLE when the connection fails or the send was aborted.
 */
export function sendFileFrames(
  socketFd: number,
  fileFd: number,
  frames: readonly FileFrame[],
  signal?: AbortSignal,
): Promise<number> {
  if (!native) return Promise.reject(new HarvestError("INTERNAL", "zero-copy reads are not available here"));
  if (signal?.aborted) return Promise.reject(cancelledError());
  const n = native;
  return new Promise<number>((resolve, reject) => {
    let job: object;
    const onAbort = (): void => n.cancel(job);
    try {
      job = n.send(
        socketFd,
        fileFd,
        frames.map((f) => f.head),
        frames.map((f) => f.offset),
        frames.map((f) => f.length),
        (error, sent) => {
          signal?.removeEventListener("abort", onAbort);
          if (error === null) resolve(sent);
          else if (error === "ECANCELED") reject(cancelledError());
          else if (error === "EOF")
            reject(new HarvestError("DATANODE_CORRUPT_BLOCK", "the block file is shorter than its replica's length"));
          else reject(new HarvestError("UNAVAILABLE", `sending block data failed: ${error}`));
        },
      );
    } catch (err) {
      // Bad frames (a TypeError), or no descriptor or thread to be had: nothing was sent.
      reject(new HarvestError("UNAVAILABLE", `cannot send block data: ${errorMessage(err)}`, { cause: err }));
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function cancelledError(): HarvestError {
  return new HarvestError("UNAVAILABLE", "the read was cancelled");
}
