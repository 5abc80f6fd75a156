/**
 * `npm run bench -- webhdfs`: a file written and read back through WebHDFS (the namenode's 307 to a datanode, which
 * streams it into the DFS and back out, over HTTPS with a bearer web token, as `curl -L -T` and `curl -L` do) against
 * `harvest fs put` and `harvest fs get` of the same file (DfsClient.put and get) on the same cluster in the same run.
 * The cluster is started as `harvest cluster up` starts one (mutual TLS, block tokens; namenode and datanodes as
 * separate processes on loopback), with replication 1. Each transfer runs once to warm up and once timed; every read
 * is checked byte for byte against the file written.
 */
import {
  chmodSync,
  createReadStream,
  createWriteStream,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import type * as http from "node:http";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { localDfsClient, startCluster, stopCluster } from "../localcluster/cluster.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec } from "./flags.js";
import { fmt, ratio, table, timedAsync } from "./report.js";
import { RepeatingSource, sameAs } from "./dfs-content.js";

const FLAGS = {
  "size-mib": { kind: "int", default: 512, min: 1, help: "file size in MiB" },
  servers: { kind: "int", default: 1, min: 1, help: "datanodes (one per server)" },
} as const satisfies Record<string, FlagSpec>;

const MiB = 1024 * 1024;

/** One HTTPS request with a bearer token (when given) and an optional streamed body; resolves with the response. */
function request(
  url: string,
  method: string,
  ca: Buffer,
  token: string | undefined,
  body?: { stream: Readable; length: number },
): Promise<http.IncomingMessage> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      method,
      ca,
      agent: false,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body ? { "content-length": String(body.length) } : {}),
      },
    });
    req.on("response", resolve);
    req.on("error", reject);
    if (body) pipeline(body.stream, req).catch(reject);
    else req.end();
  });
}

/** The namenode's 307 for `op` on `path`: the datanode URL to send the data to (or read it from). */
async function redirect(nnUrl: string, path: string, op: string, ca: Buffer, token: string): Promise<string> {
  const res = await request(`${nnUrl}/webhdfs/v1${path}?op=${op}`, op === "OPEN" ? "GET" : "PUT", ca, token);
  res.resume();
  if (res.statusCode !== 307 || !res.headers.location)
    throw new Error(`the namenode answered ${op} of ${path} with ${res.statusCode ?? "nothing"}, not a redirect`);
  return res.headers.location;
}

export const webhdfsBench: BenchDefinition = {
  name: "webhdfs",
  summary: "a file through WebHDFS (307 to a datanode, streamed) against harvest fs put/get, on a TLS cluster",
  flags: FLAGS,
  async run(argv, progress): Promise<BenchReport> {
    const f = parseFlags(argv, FLAGS);
    const bytes = f["size-mib"] * MiB;
    const work = mkdtempSync(join(tmpdir(), "harvest-bench-webhdfs-"));
    // Node managers running as root start containers as other accounts, which must get through to the cluster.
    chmodSync(work, 0o755);
    const clusterDir = join(work, "cluster");
    try {
      const local = join(work, "source.bin");
      progress(`writing a ${f["size-mib"]} MiB source file`);
      const source = new RepeatingSource(bytes);
      source.writeTo(local);
      const idle = join(work, "idle.csv");
      writeFileSync(idle, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
      progress(`starting a ${f.servers}-server TLS cluster`);
      const desc = await startCluster({
        dir: clusterDir,
        primaries: Array.from({ length: f.servers }, () => `trace:${idle}`),
        speed: 1,
        vcores: 2,
        memoryMb: 2048,
        startTimeoutMs: 30_000,
        nn: { defaultReplication: 1 },
      });
      const dfs = localDfsClient(desc);
      try {
        const ca = readFileSync(desc.security!.ca);
        const nnUrl = desc.nn!.httpUrl!;
        const token = (await dfs.webToken(3_600_000)).token;
        await dfs.mkdir("/bench");
        const runs: Record<string, number> = {};
        const identical: Record<string, boolean> = {};
        for (const round of ["warm-up", "timed"]) {
          progress(`${round}: harvest fs put, WebHDFS CREATE, harvest fs get, WebHDFS OPEN`);
          await dfs.delete("/bench", { recursive: true }).catch(() => false);
          const [, putMs] = await timedAsync(() => dfs.put(local, "/bench/put.bin", { replication: 1 }));
          const [, createMs] = await timedAsync(async () => {
            const to = await redirect(nnUrl, "/bench/web.bin", "CREATE", ca, token);
            const res = await request(to, "PUT", ca, undefined, { stream: createReadStream(local), length: bytes });
            res.resume();
            if (res.statusCode !== 201) throw new Error(`WebHDFS CREATE answered ${res.statusCode ?? "nothing"}`);
          });
          const got = join(work, "got.bin");
          const [, getMs] = await timedAsync(() => dfs.get("/bench/web.bin", got, { overwrite: true }));
          identical["fs get"] = await sameAs(createReadStream(got), source);
          rmSync(got, { force: true });
          const [, openMs] = await timedAsync(async () => {
            const from = await redirect(nnUrl, "/bench/put.bin", "OPEN", ca, token);
            const res = await request(from, "GET", ca, undefined);
            if (res.statusCode !== 200) throw new Error(`WebHDFS OPEN answered ${res.statusCode ?? "nothing"}`);
            await pipeline(res, createWriteStream(got));
          });
          identical["WebHDFS OPEN"] = await sameAs(createReadStream(got), source);
          rmSync(got, { force: true });
          Object.assign(runs, { put: putMs, create: createMs, get: getMs, open: openMs });
        }
        const mbps = (ms: number): number => bytes / 1e6 / (ms / 1000);
        const result = {
          sizeMiB: f["size-mib"],
          servers: f.servers,
          putMBps: mbps(runs["put"]!),
          createMBps: mbps(runs["create"]!),
          getMBps: mbps(runs["get"]!),
          openMBps: mbps(runs["open"]!),
          identical,
        };
        const lines = [
          `${f["size-mib"]} MiB, replication 1, ${f.servers} datanode(s), mutual TLS; MB/s of the timed run`,
          "",
          ...table(
            ["transfer", "MB/s", "s", "WebHDFS / fs", "bytes identical"],
            [
              ["harvest fs put", fmt(result.putMBps), fmt(runs["put"]! / 1000, 2), "", ""],
              [
                "WebHDFS CREATE",
                fmt(result.createMBps),
                fmt(runs["create"]! / 1000, 2),
                ratio(result.createMBps, result.putMBps),
                "",
              ],
              ["harvest fs get", fmt(result.getMBps), fmt(runs["get"]! / 1000, 2), "", String(identical["fs get"])],
              [
                "WebHDFS OPEN",
                fmt(result.openMBps),
                fmt(runs["open"]! / 1000, 2),
                ratio(result.openMBps, result.getMBps),
                String(identical["WebHDFS OPEN"]),
              ],
            ],
          ),
        ];
        return { lines, result };
      } finally {
        dfs.close();
        await stopCluster(clusterDir).catch(() => undefined);
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
};
