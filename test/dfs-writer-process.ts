/**
 * A DFS writer in a process of its own, for tests of lease recovery: it writes a local file into the DFS through
 * DfsClient (never closing the stream), prints every acknowledged byte count as `acked <n>`, and lives until killed.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { pathToFileURL } from "node:url";
import { distEntry } from "../common/paths.js";

/** Where the writer finds the namenode: its address (insecure), or a client config file. */
export type WriterTarget = { nnAddress: string } | { config: string };

/** A writer process of `local` into `path`, with replication 3 and blocks of `blockSizeBytes`. */
export class WriterProcess {
  readonly proc: ChildProcess;
  /** The highest byte count the pipeline acknowledged so far. */
  acked = 0;
  /** What the writer printed on stderr (a failed write says why). */
  stderr = "";

  constructor(target: WriterTarget, path: string, local: string, blockSizeBytes: number) {
    const client = pathToFileURL(distEntry("client/dfs-client.js")).href;
    const connect =
      "nnAddress" in target
        ? `new DfsClient(${JSON.stringify(target.nnAddress)}, options)`
        : `DfsClient.fromConfig(${JSON.stringify(target.config)}, options)`;
    const script = `
      import { readFileSync } from "node:fs";
      const { DfsClient } = await import(${JSON.stringify(client)});
      const options = { clientName: "doomed-writer-" + process.pid };
      const dfs = ${connect};
      const out = dfs.createWriteStream(${JSON.stringify(path)}, {
        replication: 3,
        blockSizeBytes: ${blockSizeBytes},
        onProgress: (b) => process.stdout.write("acked " + b + "\\n"),
      });
      out.on("error", (err) => process.stderr.write("write failed: " + err.message + "\\n"));
      out.write(readFileSync(${JSON.stringify(local)}));
      setInterval(() => undefined, 60_000);
    `;
    this.proc = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
    let buffered = "";
    this.proc.stdout!.on("data", (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) {
        const m = /^acked (\d+)$/.exec(line);
        if (m) this.acked = Math.max(this.acked, Number(m[1]));
      }
    });
    this.proc.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
  }

  /** kill -9: no goodbye to the namenode or the datanodes. */
  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill("SIGKILL");
    await exited;
  }
}
