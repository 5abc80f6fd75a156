/**
 * The dfs bench's second baseline: what Node itself moves from a file, over loopback TCP, into files in other
 * processes, fsynced at the end, with no protocol, no checksums and no acknowledgements. It sits between `cp` (a copy
 * in the kernel: coreutils' cp calls copy_file_range) and Harvest's data path, which adds framing, per-chunk CRC32C,
 * acknowledgements and the namenode.
 *
 * With one receiver it is a put with replication 1; with three, the receivers form a chain, as a write pipeline does:
 * each writes every byte to its own file and forwards it to the next. A receiver is this file run as a child process
 * (`node node-ceiling.js --receive <file | -> [--forward <port>] [--tls <files as JSON>]`); it serves one transfer
 * after another, so the bench times transfers after a warm-up one, as it times its puts.
 *
 * Over TLS (`CeilingOptions.tls`) every hop is mutual TLS with the transfer port's cipher order, as on a secure
 * cluster. A receiver given `-` for its file writes nothing: the chain then measures the transport alone, which a put
 * over the same hops uses while it also writes every replica to the disk.
 */
import { fork } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, createReadStream, createWriteStream, fsyncSync, openSync, readFileSync, rmSync } from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";
import { caFiles, createCa, issueCertificate } from "../localcluster/cluster-ca.js";
import { distEntry } from "../common/paths.js";
import { TRANSFER_CIPHERS } from "../datanode/index.js";

/** Reads of this size on the sender, as Harvest's `put` reads a local file. */
const READ_BYTES = 1024 * 1024;

/** A throwaway CA and one certificate for 127.0.0.1, which every sender and receiver presents (mutual TLS). */
export interface CeilingTls {
  ca: string;
  cert: string;
  key: string;
}

/** Makes the ceiling's CA and certificate in `dir` (which must not hold a CA). */
export async function makeCeilingTls(dir: string): Promise<CeilingTls> {
  await createCa(dir, { name: "dfs bench ceiling CA", days: 1 });
  const issued = await issueCertificate(dir, dir, { name: "ceiling", role: "daemon", hosts: ["127.0.0.1"], days: 1 });
  return { ca: caFiles(dir).cert, ...issued };
}

export interface CeilingOptions {
  /** Every hop over mutual TLS with these files; plaintext TCP when absent. */
  tls?: CeilingTls;
  /** Timed transfers after the warm-up one; the fastest counts, as the puts' rounds do. @default 1 */
  rounds?: number;
}

/** A receiver's file: a path it writes and fsyncs, or null for one that drops the bytes (the transport alone). */
export type CeilingFile = string | null;

/** A chain of receiver processes, started and waiting for transfers. */
export interface CeilingChain {
  /** The first receiver's port on 127.0.0.1. */
  readonly port: number;
  /**
   * Sends `source` down the chain; resolves with the milliseconds from the first byte read until every receiver has
   * written (and fsynced) or dropped the last byte. Rejects when the source cannot be read or the connection fails;
   * the chain is then to be closed.
   */
  transfer(source: string): Promise<number>;
  /** Stops the receivers (their files stay). */
  close(): void;
}

/** Starts one receiver per entry of `files`, each forwarding to the next, as a write pipeline's datanodes do. */
export async function startCeilingChain(
  files: readonly CeilingFile[],
  opts: Pick<CeilingOptions, "tls"> = {},
): Promise<CeilingChain> {
  if (files.length === 0) throw new Error("the Node ceiling needs at least one receiver");
  const children: ChildProcess[] = [];
  const close = (): void => {
    for (const child of children) child.kill();
  };
  const tlsArgs = opts.tls ? ["--tls", JSON.stringify(opts.tls)] : [];
  let port = 0;
  try {
    // The last receiver first: each one before it is told the port it forwards to. The receivers run this module's
    // build (a test imports the source, which Node cannot run).
    for (const [i, file] of [...files].reverse().entries()) {
      const forward = i === 0 ? [] : ["--forward", String(port)];
      const child = fork(distEntry("bench/node-ceiling.js"), ["--receive", file ?? "-", ...forward, ...tlsArgs], {
        stdio: "inherit",
      });
      children.push(child);
      port = await nextMessage<number>(child);
    }
  } catch (err) {
    close();
    throw err;
  }
  const credentials = opts.tls ? readCredentials(opts.tls) : undefined;
  return {
    port,
    async transfer(source) {
      const done = Promise.all(children.map((c) => nextMessage<string>(c)));
      const t0 = performance.now();
      const socket = connect(port, credentials);
      const file = createReadStream(source, { highWaterMark: READ_BYTES });
      file.pipe(socket);
      // A refused connection or an unreadable source fails the transfer rather than leave it waiting for the chain.
      await new Promise<void>((resolve, reject) => {
        socket.once("error", reject);
        file.once("error", reject);
        done.then(() => resolve(), reject);
      }).finally(() => socket.destroy());
      return performance.now() - t0;
    },
    close,
  };
}

/**
 * Sends `source` through a chain of receivers, one per entry of `files`: a warm-up transfer, then `rounds` timed ones
 * over the same processes. Resolves with the milliseconds of the fastest timed transfer; the files are removed.
 */
export async function nodeCeilingMs(
  source: string,
  files: readonly CeilingFile[],
  opts: CeilingOptions = {},
): Promise<number> {
  const chain = await startCeilingChain(files, opts);
  try {
    await chain.transfer(source);
    let fastest = Infinity;
    for (let round = 0; round < (opts.rounds ?? 1); round++) fastest = Math.min(fastest, await chain.transfer(source));
    return fastest;
  } finally {
    chain.close();
    for (const file of files) if (file !== null) rmSync(file, { force: true });
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

interface Credentials {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

function readCredentials(files: CeilingTls): Credentials {
  return { ca: readFileSync(files.ca), cert: readFileSync(files.cert), key: readFileSync(files.key) };
}

/** A connection to a receiver on loopback: plaintext, or TLS presenting and checking the ceiling's certificate. */
function connect(port: number, credentials: Credentials | undefined): net.Socket {
  // As Harvest's transfer connections: the server's certificate is checked against the IP dialled, no SNI name.
  return credentials
    ? tls.connect({ host: "127.0.0.1", port, ...credentials, servername: "" })
    : net.connect(port, "127.0.0.1");
}

/**
 * Serves transfers one after another: each connection's bytes go to `file` (from its start, fsynced at the end) or
 * nowhere (`-`), and to `forward` when given; the parent hears "done" when the last byte is handled.
 */
function receive(file: string, forward: number | undefined, credentials: Credentials | undefined): void {
  const onConnection = (socket: net.Socket): void => {
    if (forward !== undefined) socket.pipe(connect(forward, credentials));
    if (file === "-") {
      socket.on("data", () => undefined);
      socket.on("end", () => process.send?.("done"));
      return;
    }
    const out = createWriteStream(file, { highWaterMark: READ_BYTES });
    socket.pipe(out);
    out.on("finish", () => {
      const fd = openSync(file, "r+");
      fsyncSync(fd);
      closeSync(fd);
      process.send?.("done");
    });
  };
  const server = credentials
    ? tls.createServer(
        {
          ...credentials,
          requestCert: true,
          rejectUnauthorized: true,
          ciphers: TRANSFER_CIPHERS,
          honorCipherOrder: true,
        },
        onConnection,
      )
    : net.createServer(onConnection);
  server.listen(0, "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
}

if (process.argv[2] === "--receive" && process.argv[3]) {
  const option = (name: string): string | undefined => {
    const at = process.argv.indexOf(name);
    return at > 0 ? process.argv[at + 1] : undefined;
  };
  const forward = option("--forward");
  const tlsFiles = option("--tls");
  receive(
    process.argv[3],
    forward === undefined ? undefined : Number(forward),
    tlsFiles === undefined ? undefined : readCredentials(JSON.parse(tlsFiles) as CeilingTls),
  );
}
