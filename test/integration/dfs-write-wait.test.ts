/**
 * Writes that wait out busy primaries, on real daemons: an in-process namenode and two datanodes (real gRPC and block
 * transfer on loopback, real block files) whose primary tenants are step models the test turns busy and calm. A put
 * while every primary is busy waits and then writes the file byte for byte; with a short deadline it fails with
 * DFS_DATANODES_UNAVAILABLE naming the busy primaries; a put that failed or was abandoned leaves no file behind, so
 * a retry (another client, `--overwrite` or not) succeeds at once. The CLI says why it waits on stderr. A datanode
 * that refuses a pipeline because its primary turned busy is waited for, not excluded.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import { waitFor } from "../wait-for.js";
import { DfsClient } from "../../client/dfs-client.js";
import type { DfsClientOptions } from "../../client/dfs-client.js";
import type { DatanodeInfoOutput } from "../../proto/generated/harvest/v1/DatanodeInfo.js";
import type { WriteWaitEvent } from "../../client/write-wait.js";
import { isHarvestError } from "../../common/errors.js";
import { distEntry } from "../../common/paths.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import { requireBuild, startTestDataNode, startTestNameNode } from "./harness.js";

const MiB = 1024 * 1024;
/** How long the primaries stay busy while a put waits (then they calm down). */
const BUSY_MS = 1_500;

/** Creates `path` empty and open, leased to `dfs`'s client, as a write that never got further leaves it. */
async function createOpen(dfs: DfsClient, path: string): Promise<void> {
  await dfs.nnCall(dfs.namenode.create, {
    path,
    owner: dfs.options.user,
    clientName: dfs.options.clientName,
    replication: 0,
    blockSize: 0,
    overwrite: false,
    writerDatanodeId: "",
  });
}

function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

describe("a write while every datanode's primary tenant is busy", () => {
  let dir: string;
  let nn: NameNode;
  const monitors: StepPrimaryMonitor[] = [];
  const datanodes: DataNode[] = [];
  const clients: DfsClient[] = [];

  /** A new client (a new client name, as a new `harvest fs put` process has). */
  function client(options: ConstructorParameters<typeof DfsClient>[1] = {}): DfsClient {
    const c = new DfsClient(nn.address, options);
    clients.push(c);
    return c;
  }

  /** Turns every primary busy (or calm) and waits until the namenode has heard it from each datanode. */
  async function setPrimaries(busy: boolean): Promise<void> {
    for (const m of monitors) m.set(busy ? 1000 : 0);
    const probe = client();
    await waitFor(
      async () => {
        const dns = await probe.datanodes();
        return dns.length === monitors.length && dns.every((d) => d.primaryBusy === busy) ? true : undefined;
      },
      { what: `every primary ${busy ? "busy" : "calm"} at the namenode`, intervalMs: 50, timeoutMs: 20_000 },
    );
  }

  /** A local file of `bytes` random bytes, and its contents. */
  function localFile(name: string, bytes: number): [string, Buffer] {
    const data = randomBytes(bytes);
    const path = join(dir, name);
    writeFileSync(path, data);
    return [path, data];
  }

  async function readBack(path: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of client().createReadStream(path)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /**
   * Runs the CLI against this namenode (asynchronously: the daemons serve from this process); `whileRunning` gets the
   * process and its stderr so far.
   */
  async function harvest(
    args: string[],
    whileRunning?: (cli: ChildProcess, stderr: () => string) => Promise<void>,
  ): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const config = join(dir, "client.json");
    writeFileSync(config, JSON.stringify({ nnAddress: nn.address }));
    const cli = spawn(process.execPath, [distEntry("cli/harvest.js"), ...args, "--config", config], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    cli.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    cli.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = once(cli, "exit") as Promise<[number | null]>;
    await whileRunning?.(cli, () => stderr);
    const [status] = await exited;
    return { status, stdout, stderr };
  }

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-write-wait-"));
    nn = await startTestNameNode(dir, { defaultReplication: 2, defaultBlockSizeBytes: 2 * MiB });
    for (const id of ["dn1", "dn2"]) {
      const monitor = new StepPrimaryMonitor({ capacityMilli: 1000 });
      monitors.push(monitor);
      datanodes.push(await startTestDataNode(dir, id, nn.address, { monitorTickMs: 20 }, monitor));
    }
    await setPrimaries(false);
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    for (const dn of datanodes) await dn.stop();
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("waits until the primaries calm down and then writes the file byte for byte", async () => {
    const [local, data] = localFile("wait.bin", 5 * MiB);
    await setPrimaries(true);
    const waits: WriteWaitEvent[] = [];
    const dfs = client({ writeWaitMs: 30_000 });
    let calm: NodeJS.Timeout | undefined;
    try {
      const status = await dfs.put(local, "/wait/file.bin", {
        onWait: (w) => {
          waits.push(w);
          // The primaries calm down a while after the write began to wait.
          calm ??= setTimeout(() => monitors.forEach((m) => m.set(0)), BUSY_MS);
        },
      });
      expect(status.complete).toBe(true);
      expect(status.length).toBe(data.length);
    } finally {
      clearTimeout(calm);
      monitors.forEach((m) => m.set(0));
    }
    // It waited, and said why: both datanodes' primaries were busy.
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]!.reason).toBe("2 busy with their primary tenants");
    expect(waits[0]!.refusal).toMatchObject({ live: 2, busy: 2 });
    expect(waits.every((w) => w.deadlineMs === 30_000 && w.waitedMs < 30_000)).toBe(true);
    expect(dfs.writeStats.datanodeWaits).toBe(waits.length);
    expect(sha256(await readBack("/wait/file.bin"))).toBe(sha256(data));
    await setPrimaries(false);
  });

  it("fails with DFS_DATANODES_UNAVAILABLE naming the busy primaries once its deadline passes, leaving no file", async () => {
    const [local, data] = localFile("deadline.bin", 3 * MiB);
    // A complete file at the path first: the failed put with overwrite replaced it, and then removes what it made.
    await client().put(localFile("old.bin", 1000)[0], "/wait/deadline.bin");
    await setPrimaries(true);
    let failure: unknown;
    try {
      await client({ writeWaitMs: 400 }).put(local, "/wait/deadline.bin", { overwrite: true });
    } catch (err) {
      failure = err;
    }
    expect(isHarvestError(failure, "DFS_DATANODES_UNAVAILABLE")).toBe(true);
    const err = failure as Error & { details: Record<string, string> };
    expect(err.message).toMatch(
      /^no datanode could take a block of \/wait\/deadline\.bin within 0\.4 s: 2 busy with their primary tenants; /,
    );
    expect(err.details).toMatchObject({ path: "/wait/deadline.bin", live: "2", busy: "2", full: "0" });
    // The failed put removed the file it created: nothing is half-written at the path.
    expect(await codeOf(client().stat("/wait/deadline.bin"))).toBe("NAMENODE_FILE_NOT_FOUND");
    await setPrimaries(false);
    // A retry at once, by another client, with overwrite: no NAMENODE_FILE_INCOMPLETE, and the bytes are the new ones.
    await client().put(local, "/wait/deadline.bin", { overwrite: true });
    expect(sha256(await readBack("/wait/deadline.bin"))).toBe(sha256(data));
  });

  it("leaves nothing in the way of a retry when its writer abandons the stream mid-block", async () => {
    const dfs = client();
    const out = dfs.createWriteStream("/wait/abandoned.bin");
    await new Promise<void>((resolve, reject) => out.write(randomBytes(3 * MiB), (e) => (e ? reject(e) : resolve())));
    await waitFor(async () => ((await client().stat("/wait/abandoned.bin")).complete === false ? true : undefined), {
      what: "the file open for writing",
      retryOnError: true,
    });
    out.destroy();
    await once(out, "close");
    expect(await codeOf(client().stat("/wait/abandoned.bin"))).toBe("NAMENODE_FILE_NOT_FOUND");
    const [local, data] = localFile("abandoned.bin", 3 * MiB);
    await client().put(local, "/wait/abandoned.bin", { overwrite: true });
    expect(sha256(await readBack("/wait/abandoned.bin"))).toBe(sha256(data));
  });

  it("deletes only a file its client is writing when asked as a writer giving up", async () => {
    await client().put(localFile("kept.bin", 1000)[0], "/wait/kept.bin");
    const dfs = client();
    // A complete file, and another client's open one: neither is the caller's to remove as a writer.
    expect(
      await codeOf(dfs.nnCall(dfs.namenode.delete, { path: "/wait/kept.bin", clientName: dfs.options.clientName })),
    ).toBe("NAMENODE_LEASE_MISMATCH");
    const other = client();
    const open = other.createWriteStream("/wait/others.bin");
    await new Promise<void>((resolve, reject) => open.write(randomBytes(1000), (e) => (e ? reject(e) : resolve())));
    await waitFor(async () => ((await dfs.stat("/wait/others.bin")).complete === false ? true : undefined), {
      what: "the other client's open file",
      retryOnError: true,
    });
    expect(
      await codeOf(dfs.nnCall(dfs.namenode.delete, { path: "/wait/others.bin", clientName: dfs.options.clientName })),
    ).toBe("NAMENODE_LEASE_MISMATCH");
    open.end();
    await once(open, "finish");
    expect((await dfs.stat("/wait/kept.bin")).complete).toBe(true);
    expect((await dfs.stat("/wait/others.bin")).length).toBe(1000);
  });

  it("is never blocked by its own open file: the same client overwrites it at once, another must wait for its lease", async () => {
    const dfs = client();
    // A file this client left open (its cleanup did not reach the namenode, say).
    await createOpen(dfs, "/wait/own.bin");
    const [local, data] = localFile("own.bin", 1000);
    expect(await codeOf(client().put(local, "/wait/own.bin", { overwrite: true }))).toBe("NAMENODE_FILE_INCOMPLETE");
    await dfs.put(local, "/wait/own.bin", { overwrite: true });
    expect(sha256(await readBack("/wait/own.bin"))).toBe(sha256(data));
  });

  it("harvest fs put --wait says on stderr why it waits, once, and succeeds when the primaries calm down", async () => {
    const [local, data] = localFile("cli.bin", 3 * MiB);
    await setPrimaries(true);
    let run: Awaited<ReturnType<typeof harvest>>;
    try {
      run = await harvest(["fs", "put", "--wait", "30", local, "/wait/cli.bin"], async (_cli, stderr) => {
        await waitFor(() => (stderr().includes("waiting for a datanode") ? true : undefined), {
          what: "the put to wait",
          timeoutMs: 20_000,
        });
        await new Promise((resolve) => setTimeout(resolve, BUSY_MS));
        monitors.forEach((m) => m.set(0));
      });
    } finally {
      monitors.forEach((m) => m.set(0));
    }
    expect(run.status, run.stderr).toBe(0);
    const line = "harvest: waiting for a datanode: 2 busy with their primary tenants (retrying for up to 30 s)\n";
    expect(run.stderr.split(line).length - 1, run.stderr).toBe(1);
    expect(run.stdout).toMatch(/^put .* -> \/wait\/cli\.bin: 3145728 bytes/);
    expect(sha256(await readBack("/wait/cli.bin"))).toBe(sha256(data));
    await setPrimaries(false);
  });

  it("harvest fs put --wait 0 fails at once with the coded error, and a retry with --overwrite succeeds", async () => {
    const [local, data] = localFile("cli0.bin", 1000);
    await setPrimaries(true);
    const failed = await harvest(["fs", "put", "--wait", "0", local, "/wait/cli0.bin"]);
    expect(failed.status).not.toBe(0);
    expect(failed.stderr).toMatch(
      /no datanode could take a block of \/wait\/cli0\.bin within 0 s: 2 busy with their primary tenants/,
    );
    expect(failed.stderr).toContain("DFS_DATANODES_UNAVAILABLE");
    await setPrimaries(false);
    const retried = await harvest(["fs", "put", "--overwrite", local, "/wait/cli0.bin"]);
    expect(retried.status, retried.stderr).toBe(0);
    expect(sha256(await readBack("/wait/cli0.bin"))).toBe(sha256(data));
  });

  it("harvest fs put interrupted while it waits removes its file, so that a retry with --overwrite succeeds at once", async () => {
    const [local, data] = localFile("sigint.bin", 2 * MiB);
    await setPrimaries(true);
    const interrupted = await harvest(["fs", "put", "--wait", "60", local, "/wait/sigint.bin"], async (cli, stderr) => {
      await waitFor(() => (stderr().includes("waiting for a datanode") ? true : undefined), {
        what: "the put to wait",
        timeoutMs: 20_000,
      });
      cli.kill("SIGINT");
    });
    expect(interrupted.status).not.toBe(0);
    expect(interrupted.stderr).toContain("the write of /wait/sigint.bin was cancelled");
    expect(await codeOf(client().stat("/wait/sigint.bin"))).toBe("NAMENODE_FILE_NOT_FOUND");
    await setPrimaries(false);
    const retried = await harvest(["fs", "put", "--overwrite", local, "/wait/sigint.bin"]);
    expect(retried.status, retried.stderr).toBe(0);
    expect(sha256(await readBack("/wait/sigint.bin"))).toBe(sha256(data));
  });

  it("is refused by the namenode with each reason named once", async () => {
    monitors[1]!.set(1000);
    const probe = client();
    await waitFor(async () => ((await probe.datanodes()).some((d) => d.primaryBusy) ? true : undefined), {
      what: "one primary busy at the namenode",
      intervalMs: 50,
    });
    const dfs = client();
    const idle = (await dfs.datanodes()).find((d) => !d.primaryBusy)!.datanodeId;
    await createOpen(dfs, "/wait/refused.bin");
    let refusal: unknown;
    await dfs
      .nnCall(dfs.namenode.addBlock, {
        path: "/wait/refused.bin",
        clientName: dfs.options.clientName,
        excludedDatanodes: [idle],
      })
      .catch((e: unknown) => (refusal = e));
    expect(isHarvestError(refusal, "NAMENODE_NOT_ENOUGH_DATANODES")).toBe(true);
    expect((refusal as Error).message).toBe(
      "no datanode can take a block of /wait/refused.bin now: of 2 live, 1 busy with its primary tenant, " +
        "1 excluded by this writer after a failed pipeline",
    );
    await setPrimaries(false);
  });

  it("refuses a --wait that is not a duration", async () => {
    const [local] = localFile("bad.bin", 10);
    const run = await harvest(["fs", "put", "--wait", "soon", local, "/wait/bad.bin"]);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("--wait");
    expect(await codeOf(client().stat("/wait/bad.bin"))).toBe("NAMENODE_FILE_NOT_FOUND");
  });
});

/**
 * A client whose first `redirects` pipelines go to `busy` instead of the head the namenode chose: a datanode that
 * refuses because its primary turned busy before the namenode heard of it (a heartbeat's lag), made to happen on
 * demand. The refusal itself is the busy datanode's own, over its real transfer port.
 */
class BusyFirstClient extends DfsClient {
  constructor(
    address: string,
    private readonly busy: DatanodeInfoOutput,
    private redirects: number,
    options: Partial<DfsClientOptions>,
  ) {
    super(address, options);
  }

  override openWrite(head: DatanodeInfoOutput, blockToken: string): ReturnType<DfsClient["openWrite"]> {
    if (this.redirects <= 0) return super.openWrite(head, blockToken);
    this.redirects--;
    return super.openWrite(this.busy, blockToken);
  }
}

describe("a write whose pipeline a datanode refuses because its primary just turned busy", () => {
  let dir: string;
  let nn: NameNode;
  const datanodes: DataNode[] = [];
  let busy: DatanodeInfoOutput;

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-write-busy-"));
    nn = await startTestNameNode(dir, { defaultReplication: 1 });
    datanodes.push(await startTestDataNode(dir, "calm", nn.address));
    const monitor = new StepPrimaryMonitor({ capacityMilli: 1000, initialMilli: 1000 });
    const dn = await startTestDataNode(dir, "busy", nn.address, { monitorTickMs: 20 }, monitor);
    datanodes.push(dn);
    busy = { datanodeId: "busy", address: dn.address, rack: "", transferAddress: dn.transferAddress };
  });

  afterAll(async () => {
    for (const dn of datanodes) await dn.stop();
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("waits and tries again without excluding it or counting an attempt, and writes the file", async () => {
    const data = randomBytes(3 * MiB);
    const local = join(dir, "refused.bin");
    writeFileSync(local, data);
    const waits: WriteWaitEvent[] = [];
    // One pipeline attempt allowed: a refusal counted as a failed pipeline would fail the write.
    const dfs = new BusyFirstClient(nn.address, busy, 3, { maxBlockAttempts: 1, writeWaitMs: 30_000 });
    try {
      await dfs.put(local, "/refused.bin", { onWait: (w) => waits.push(w) });
      expect(waits.map((w) => w.reason)).toEqual(
        Array(3).fill("datanode busy refused the pipeline: its primary tenant is busy"),
      );
      expect(dfs.writeStats.pipelineFailures).toBe(3);
      const chunks: Buffer[] = [];
      for await (const chunk of dfs.createReadStream("/refused.bin")) chunks.push(chunk as Buffer);
      expect(sha256(Buffer.concat(chunks))).toBe(sha256(data));
    } finally {
      dfs.close();
    }
  });

  it("fails with DFS_DATANODES_UNAVAILABLE naming that datanode when the refusals outlast the wait", async () => {
    const dfs = new BusyFirstClient(nn.address, busy, 1_000, { writeWaitMs: 300 });
    try {
      const err = await dfs.put(join(dir, "refused.bin"), "/refused-again.bin").then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isHarvestError(err, "DFS_DATANODES_UNAVAILABLE")).toBe(true);
      expect((err as Error).message).toContain(
        "within 0.3 s: datanode busy refused the pipeline: its primary tenant is busy",
      );
      expect(await codeOf(dfs.stat("/refused-again.bin"))).toBe("NAMENODE_FILE_NOT_FOUND");
    } finally {
      dfs.close();
    }
  });
});
