/**
 * The dfs bench's second baseline: what Node itself moves from a file, over loopback TCP, into a file in another
 * process, fsynced at the end, with no protocol, no checksums and no replication. It sits between `cp` (a copy in the
 * kernel) and Harvest's data path, which adds framing, per-chunk CRC32C, acknowledgements and the namenode. The
 * receiver is this file run as a child process (`node node-ceiling.js --receive <file>`).
 */
import { fork } from "node:child_process";
import { closeSync, createReadStream, createWriteStream, fsyncSync, openSync, rmSync } from "node:fs";
import * as net from "node:net";
import { fileURLToPath } from "node:url";

/** Reads of this size on the sender, as Harvest's `put` reads a local file. */
const READ_BYTES = 1024 * 1024;

/** Sends `source` to a child process that writes it to `target` and fsyncs it; resolves with the milliseconds taken. */
export async function nodeCeilingMs(source: string, target: string): Promise<number> {
  const child = fork(fileURLToPath(import.meta.url), ["--receive", target], { stdio: "inherit" });
  try {
    const port = await nextMessage<number>(child);
    const t0 = performance.now();
    const socket = net.connect(port, "127.0.0.1");
    createReadStream(source, { highWaterMark: READ_BYTES }).pipe(socket);
    await nextMessage<string>(child);
    return performance.now() - t0;
  } finally {
    child.kill();
    rmSync(target, { force: true });
  }
}

function nextMessage<T>(child: ReturnType<typeof fork>): Promise<T> {
  return new Promise((resolve, reject) => {
    child.once("message", (m) => resolve(m as T));
    child.once("exit", (code) => reject(new Error(`the ceiling receiver exited (${code})`)));
  });
}

function receive(target: string): void {
  const server = net.createServer((socket) => {
    const out = createWriteStream(target, { highWaterMark: READ_BYTES });
    socket.pipe(out);
    out.on("finish", () => {
      const fd = openSync(target, "r+");
      fsyncSync(fd);
      closeSync(fd);
      process.send?.("done");
    });
  });
  server.listen(0, "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
}

if (process.argv[2] === "--receive" && process.argv[3]) receive(process.argv[3]);
