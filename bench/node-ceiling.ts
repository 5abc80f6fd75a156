/**
 * The dfs bench's second baseline: what Node itself moves from a file, over loopback TCP, into files in other
 * processes, fsynced at the end, with no protocol, no checksums and no acknowledgements. It sits between `cp` (a copy
 * in the kernel: coreutils' cp calls copy_file_range) and Harvest's data path, which adds framing, per-chunk CRC32C,
 * acknowledgements and the namenode.
 *
 * With one target it is a put with replication 1; with three, the receivers form a chain, as a write pipeline does:
 * each writes every byte to its own file and forwards it to the next. A receiver is this file run as a child process
 * (`node node-ceiling.js --receive <file> [--forward <port>]`); it serves one transfer after another, so the bench
 * times a transfer after a warm-up one, as it times its puts.
 */
import { fork } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, createReadStream, createWriteStream, fsyncSync, openSync, rmSync } from "node:fs";
import * as net from "node:net";
import { fileURLToPath } from "node:url";

/** Reads of this size on the sender, as Harvest's `put` reads a local file. */
const READ_BYTES = 1024 * 1024;

/**
 * Sends `source` through a chain of receivers, one per `targets` file, `runs` times over the same processes; resolves
 * with the milliseconds of the last transfer, from the first byte read until every target file is fsynced.
 */
export async function nodeCeilingMs(source: string, targets: readonly string[], runs = 2): Promise<number> {
  const children: ChildProcess[] = [];
  try {
    // The last receiver first: each one before it is told the port it forwards to.
    let port: number | undefined;
    for (const target of [...targets].reverse()) {
      const forward = port === undefined ? [] : ["--forward", String(port)];
      const child = fork(fileURLToPath(import.meta.url), ["--receive", target, ...forward], { stdio: "inherit" });
      children.push(child);
      port = await nextMessage<number>(child);
    }
    if (port === undefined) throw new Error("the Node ceiling needs at least one target file");
    let ms = 0;
    for (let run = 0; run < runs; run++) {
      const synced = Promise.all(children.map((c) => nextMessage<string>(c)));
      const t0 = performance.now();
      const socket = net.connect(port, "127.0.0.1");
      createReadStream(source, { highWaterMark: READ_BYTES }).pipe(socket);
      await synced;
      ms = performance.now() - t0;
    }
    return ms;
  } finally {
    for (const child of children) child.kill();
    for (const target of targets) rmSync(target, { force: true });
  }
}

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`a Node ceiling receiver exited (${code})`));
    child.once("exit", onExit);
    child.once("message", (m) => {
      child.off("exit", onExit);
      resolve(m as T);
    });
  });
}

/** Writes each connection's bytes to `target` (from its start), forwards them to `forward` when given, fsyncs. */
function receive(target: string, forward: number | undefined): void {
  const server = net.createServer((socket) => {
    const out = createWriteStream(target, { highWaterMark: READ_BYTES });
    socket.pipe(out);
    if (forward !== undefined) socket.pipe(net.connect(forward, "127.0.0.1"));
    out.on("finish", () => {
      const fd = openSync(target, "r+");
      fsyncSync(fd);
      closeSync(fd);
      process.send?.("synced");
    });
  });
  server.listen(0, "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
}

if (process.argv[2] === "--receive" && process.argv[3]) {
  const at = process.argv.indexOf("--forward");
  receive(process.argv[3], at > 0 ? Number(process.argv[at + 1]) : undefined);
}
