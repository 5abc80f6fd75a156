/**
 * Fuzzing the storage side on a real cluster (a namenode and two datanodes as processes, with TLS): every request type
 * of ClientNamenode, NamenodeAdmin, the DatanodeProtocol stream and the datanodes' DataTransfer gets random,
 * wrong-typed, empty, huge and garbage requests. Every answer is OK or a coded error (never INTERNAL); after each
 * method's batch the daemons still run and answer, and a file written before the fuzzing reads back byte-identical.
 */
import type * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alive } from "../processes.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { normalizeDfsPath } from "../../common/dfs-path.js";
import { channelCredentials } from "../../common/tls.js";
import type { ClientTls } from "../../common/tls.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";
import { OutcomeTally, rawCall, rawClient, requestBytesArb, requestStrings, serviceMethods } from "./grpc-fuzz.js";
import type { MethodInfo } from "./grpc-fuzz.js";
import { SERVICE_FUZZ_RUNS, fuzzParams, fuzzTimeoutMs } from "./runs.js";

const CANARY = "/fuzz-keep/canary.bin";

/** True for the canary and its ancestors: a fuzzed delete, rename or chmod of them would be a correct answer. */
function protectsCanary(s: string): boolean {
  try {
    const p = normalizeDfsPath(s);
    return p === "/" || CANARY === p || CANARY.startsWith(p + "/");
  } catch {
    return false;
  }
}

describe("fuzzing the namenode and datanode services", () => {
  let cluster: TestCluster;
  let work: string;
  let dfs: DfsClient;
  let canary: Buffer;
  let admin: grpc.Client;
  let daemon: grpc.Client;
  let datanode: grpc.Client;
  const counts = new OutcomeTally();

  beforeAll(async () => {
    cluster = await startTestCluster({ idleServers: 2, storage: true });
    work = cluster.work;
    dfs = cluster.dfs();
    // Acknowledged before any fuzzing: it must read back byte-identical at the end.
    canary = randomBytes(300_000);
    writeFileSync(join(work, "canary.bin"), canary);
    await dfs.mkdir("/fuzz-keep");
    await dfs.put(join(work, "canary.bin"), CANARY);
    const nnTls = (JSON.parse(readFileSync(join(cluster.dir, "run", "nn.json"), "utf8")) as { tls: ClientTls }).tls;
    admin = rawClient(cluster.desc.nn!.address, channelCredentials(cluster.desc.security));
    daemon = rawClient(cluster.desc.nn!.address, channelCredentials(nnTls));
    datanode = rawClient(cluster.desc.nodes[0]!.datanode!.address, channelCredentials(cluster.desc.security));
  });

  afterAll(async () => {
    for (const c of [admin, daemon, datanode]) c?.close();
    await cluster?.stop();
    console.log(`dfs fuzz: ${SERVICE_FUZZ_RUNS} runs per target; ${JSON.stringify(counts)}`);
  });

  /** Every daemon still runs, and the canary reads back byte-identical. */
  async function expectStillServing(): Promise<void> {
    expect(alive(cluster.desc.nn!.pid)).toBe(true);
    for (const n of cluster.desc.nodes) expect(alive(n.datanode!.pid)).toBe(true);
    const out = join(work, "canary.out");
    await dfs.get(CANARY, out, { overwrite: true });
    expect(readFileSync(out).equals(canary)).toBe(true);
  }

  // Reimage is left out on purpose: wiping a datanode is its correct answer to any request (its request is Empty).
  const methods: MethodInfo[] = [
    ...serviceMethods("ClientNamenode"),
    ...serviceMethods("NamenodeAdmin"),
    ...serviceMethods("DatanodeProtocol"),
    ...serviceMethods("DataTransfer").filter((m) => m.name !== "Reimage"),
  ];

  for (const method of methods) {
    it(
      `answers every ${method.service}.${method.name} request with a result or a coded error, and loses nothing`,
      async () => {
        const strings = requestStrings([
          "/fuzz",
          "/fuzz/a",
          "/fuzz/a/b",
          "/fuzz-keep/other",
          "/tmp",
          "755",
          "0",
          "alice",
          "READ",
          "WRITE",
          "/rack-1",
          "127.0.0.1:1",
        ]).filter((s) => !protectsCanary(s));
        const client =
          method.service === "DataTransfer" ? datanode : method.service === "DatanodeProtocol" ? daemon : admin;
        const one = requestBytesArb(method, strings);
        const batch = method.requestStream ? fc.array(one, { maxLength: 6 }) : one.map((b) => [b]);
        await fc.assert(
          fc.asyncProperty(batch, async (messages) => {
            const outcome = await rawCall(client, method, messages, { timeoutMs: 15_000 });
            counts.check(outcome, `${method.service}.${method.name}`);
          }),
          fuzzParams(method.requestStream ? 0.5 : 1, SERVICE_FUZZ_RUNS),
        );
        await expectStillServing();
      },
      fuzzTimeoutMs(20),
    );
  }

  it("still writes and reads a new file after the fuzzing", async () => {
    const data = randomBytes(70_000);
    writeFileSync(join(work, "after.bin"), data);
    await dfs.put(join(work, "after.bin"), "/fuzz-keep/after.bin");
    await dfs.get("/fuzz-keep/after.bin", join(work, "after.out"));
    expect(readFileSync(join(work, "after.out")).equals(data)).toBe(true);
  }, 60_000);
});
