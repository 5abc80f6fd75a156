/**
 * The multi-host scenarios' tools: the servers' daemons, the in-namespace `harvest` command, a slow FIFO writer, a
 * server watcher that polls the masters for one server's states, polling with a deadline, and the time formats of
 * their reports.
 */
import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, closeSync, constants, openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { errorMessage } from "../common/errors.js";
import { distEntry } from "../common/paths.js";
import type { NodeInfo } from "../client/job-client.js";
import type { DfsDatanode } from "../client/dfs-client.js";
import type { TlsFiles } from "../common/tls.js";
import type { LabClient, NetnsLab, RunResult } from "./netns-lab.js";

/**
 * Starts a node manager and a datanode on each of `servers` (in parallel), each binding and advertising its own
 * host's address, under a flat, low primary load (5 %: nothing is refused as busy, nothing preempted), reaching the
 * masters at `rmAddress` and `nnAddress` (lists for HA masters).
 */
export async function startServers(
  lab: NetnsLab,
  o: {
    runDir: string;
    servers: readonly string[];
    rmAddress: string;
    nnAddress: string;
    secret: string;
    tls: Record<string, TlsFiles>;
  },
): Promise<void> {
  const trace = join(o.runDir, "primary-flat.csv");
  const rows = ["time_s,cpu_pct"];
  for (let t = 0; t <= 86_400; t += 300) rows.push(`${t},5`);
  writeFileSync(trace, rows.join("\n") + "\n");
  await Promise.all(
    o.servers.map(async (s, i) => {
      const ip = lab.ipOf(s);
      const shared = {
        host: ip,
        advertiseHost: ip,
        port: 0,
        rack: `/rack-${(i % 2) + 1}`,
        primary: `trace:${trace}`,
        tls: o.tls[s],
      };
      await Promise.all([
        lab.startDaemon(s, "nodemanager", {
          nodeId: s,
          rmAddress: o.rmAddress,
          nnAddress: o.nnAddress,
          dataDir: join(o.runDir, s, "nm"),
          capacity: { vcoresMilli: 2_000, memoryMb: 2_048 },
          secret: o.secret,
          // The cgroup tree is the machine's, not the namespace's: leave it alone.
          cgroups: "none",
          ...shared,
        }),
        lab.startDaemon(s, "datanode", {
          datanodeId: s,
          namenodeAddress: o.nnAddress,
          dataDir: join(o.runDir, s, "dn"),
          ...shared,
        }),
      ]);
    }),
  );
}

/** How often the scenario polls. */
export const POLL_MS = 200;

/** A `harvest` command's result, with its --json output parsed when it is JSON. */
export interface CliResult extends RunResult {
  json?: unknown;
}

/** Runs `harvest <args> --config <client.json> --json` inside a host's namespace. */
export async function harvestCli(
  lab: NetnsLab,
  host: string,
  clientConfig: string,
  runDir: string,
  args: string[],
  timeoutMs: number,
): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, HARVEST_CLUSTER_DIR: join(runDir, "no-local-cluster") };
  delete env["HARVEST_CONF"];
  const r = await lab.run(
    host,
    [process.execPath, distEntry("cli/harvest.js"), ...args, "--config", clientConfig, "--json"],
    { timeoutMs, env },
  );
  appendFileSync(
    join(runDir, "logs", "cli.log"),
    `${new Date(Date.now() - r.ms).toISOString()} [${host}] harvest ${args.join(" ")} -> exit ${r.code ?? r.signal}${r.timedOut ? " (timed out)" : ""} in ${r.ms} ms\n` +
      (r.stdout.length > 4_000 ? r.stdout.slice(0, 2_000) + "\n...\n" + r.stdout.slice(-2_000) : r.stdout) +
      r.stderr +
      "\n",
  );
  let json: unknown;
  try {
    json = r.stdout.trim() ? JSON.parse(r.stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { ...r, json };
}

export function cliFailure(r: CliResult): string {
  const err = (r.json as { error?: { code: string; message: string } } | undefined)?.error;
  if (err) return `${err.code}: ${err.message}`;
  return `exit ${r.code ?? r.signal}${r.timedOut ? " (timed out)" : ""}: ${(r.stderr || r.stdout).trim().slice(-800)}`;
}

/**
 * Feeds `total` random bytes into a FIFO at about `bytesPerSec`, non-blocking (a stalled or vanished reader never
 * blocks this process); resolves with what was written and its sha256 once done, the reader left, or `timeoutMs`.
 */
export function feedFifo(
  fifo: string,
  total: number,
  bytesPerSec: number,
  timeoutMs: number,
): { bytes: () => number; done: Promise<{ bytes: number; sha256: string; complete: boolean }> } {
  const hash = createHash("sha256");
  let written = 0;
  const done = (async () => {
    const deadline = Date.now() + timeoutMs;
    let fd: number | undefined;
    while (fd === undefined) {
      try {
        fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch (err) {
        // ENXIO: no reader yet.
        if ((err as NodeJS.ErrnoException).code !== "ENXIO" || Date.now() > deadline)
          return { bytes: 0, sha256: hash.digest("hex"), complete: false };
        await sleep(50);
      }
    }
    const started = Date.now();
    let pending = Buffer.alloc(0);
    try {
      feeding: while (written < total && Date.now() < deadline) {
        // Up to what the rate allows by now; the pipe holds only 64 KiB, so write until it is full.
        const allowed = Math.min(total, Math.round(((Date.now() - started) / 1000) * bytesPerSec));
        while (written < allowed) {
          if (pending.length === 0) pending = randomBytes(Math.min(64 * 1024, allowed - written));
          try {
            const n = writeSync(fd, pending);
            hash.update(pending.subarray(0, n));
            written += n;
            pending = pending.subarray(n);
          } catch (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code === "EPIPE") break feeding; // The reader is gone.
            if (code === "EAGAIN") break; // Full: the reader is slower than the rate, or stalled.
            throw err;
          }
        }
        await sleep(20);
      }
    } finally {
      closeSync(fd);
    }
    return { bytes: written, sha256: hash.digest("hex"), complete: written === total };
  })();
  return { bytes: () => written, done };
}

/** Thrown by an `until` probe to stop waiting at once. */
export class GiveUp extends Error {}

/** Calls `probe` every POLL_MS until it returns a value; throws after `timeoutMs` saying what it waited for. */
export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${seconds(timeoutMs)} waiting for ${what}${last ? ` (last error: ${errorMessage(last)})` : ""}`,
      );
    await sleep(POLL_MS);
  }
}

export function writeJson(path: string, value: unknown): string {
  writeFileSync(path, JSON.stringify(value, null, 2) + "\n");
  return path;
}

export function sha256File(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** "4.2 s after" / "3.0 s before" (the sign of `ms`). */
export function relative(ms: number): string {
  return `${seconds(Math.abs(ms))} ${ms < 0 ? "before" : "after"}`;
}

/** Seconds, or `otherwise` when the time was never measured. */
export function optSeconds(ms: number | undefined, otherwise = "-"): string {
  return ms !== undefined ? seconds(ms) : otherwise;
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A write in progress: the `harvest fs put` reading the FIFO, and the feeder writing into it. */
export interface InFlightWrite {
  path: string;
  put: Promise<CliResult>;
  feeder: ReturnType<typeof feedFifo>;
  startedAt: number;
}

/** What `watchServer` saw so far; `done` resolves once the loop ended after `stop()` (or the client closed). */
export interface ServerWatch {
  nodeStates: string[];
  datanodeStates: string[];
  nodeLostAt?: number;
  datanodeDeadAt?: number;
  nodeBackAt?: number;
  datanodeBackAt?: number;
  stop(): void;
  done: Promise<void>;
}

/** Polls the resource manager and the namenode about one server, recording its states and when they changed. */
export function watchServer(c: LabClient, server: string): ServerWatch {
  let stopped = false;
  const note = (list: string[], s: string): void => {
    if (list[list.length - 1] !== s) list.push(s);
  };
  const w: ServerWatch = {
    nodeStates: [],
    datanodeStates: [],
    stop: () => {
      stopped = true;
    },
    done: Promise.resolve(),
  };
  w.done = (async () => {
    // Also ends with the client, so an early error in the scenario never leaves this loop running.
    while (!stopped && !c.isClosed) {
      const [nodes, dns] = await Promise.all([
        c.call<NodeInfo[]>("nodes").catch(() => undefined),
        c.call<DfsDatanode[]>("datanodes").catch(() => undefined),
      ]);
      const now = Date.now();
      const n = nodes?.find((x) => x.nodeId === server);
      const d = dns?.find((x) => x.datanodeId === server);
      if (n) {
        note(w.nodeStates, n.state);
        if (n.state === "LOST") w.nodeLostAt ??= now;
        else if (n.state === "RUNNING" && w.nodeLostAt !== undefined) w.nodeBackAt ??= now;
      }
      if (d) {
        note(w.datanodeStates, d.state);
        if (d.state === "DEAD") w.datanodeDeadAt ??= now;
        else if (d.state === "LIVE" && w.datanodeDeadAt !== undefined) w.datanodeBackAt ??= now;
      }
      await sleep(POLL_MS);
    }
  })();
  return w;
}
