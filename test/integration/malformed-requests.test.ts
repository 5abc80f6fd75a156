/**
 * Daemons never crash on bad input: malformed bytes, requests that break the protocol, forged container tokens and
 * path-like ids all get coded errors, and the daemons keep serving.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import type { JobClient } from "../../client/job-client.js";
import { fromGrpcError } from "../../common/errors.js";
import type { HarvestError } from "../../common/errors.js";
import { signContainer } from "../../common/container-token.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { cpuVertex, startLocalCluster } from "./harness.js";
import type { LocalCluster } from "./harness.js";

describe("malformed requests", () => {
  let local: LocalCluster;
  let rm: LocalCluster["rm"];
  let nm: LocalCluster["nm"];
  let client: JobClient;

  beforeAll(async () => {
    local = await startLocalCluster({ rm: { secret: "s3cret" }, nm: { secret: "s3cret" } });
    ({ rm, nm, client } = local);
  });

  afterAll(async () => local?.stop());

  it("answers garbage bytes on a unary method with an error and keeps serving", async () => {
    const raw = new grpc.Client(rm.address, grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError | null>((resolve) => {
      raw.makeUnaryRequest(
        "/harvest.v1.ApplicationClientService/SubmitApplication",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
        (e) => resolve(e),
      );
    });
    raw.close();
    expect(err).not.toBeNull();
    expect((await client.nodes()).map((n) => n.nodeId)).toEqual(["n1"]);
  });

  it("rejects empty, non-JSON and oversized submissions with DAG codes", async () => {
    expect(await codeOf(client.submit(""))).toBe("DAG_MALFORMED_JSON");
    expect(await codeOf(client.submit("[1,2,3]"))).toBe("DAG_INVALID_FIELD");
    expect(await codeOf(client.submit(JSON.stringify({ name: "x", vertices: [cpuVertex("a", 1_000_000)] })))).toBe(
      "DAG_BAD_PARALLELISM",
    );
  });

  it("rejects application ids that look like paths", async () => {
    expect(await codeOf(client.status("../../etc/passwd"))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(client.kill("application_1_0001/.."))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(client.status("application_1_9999"))).toBe("APP_NOT_FOUND");
  });

  it("refuses job-manager calls for unknown applications and stale attempts", async () => {
    const proto = loadHarvestProto();
    const am = makeClient(proto.ApplicationMasterService, rm.address);
    try {
      expect(
        await codeOf(call(am, am.allocate, { appId: "application_1_0042", attempt: 1, asks: [], releases: [] })),
      ).toBe("APP_NOT_FOUND");
      const appId = await client.submit(JSON.stringify({ name: "stale", vertices: [cpuVertex("a", 1)] }));
      expect(await codeOf(call(am, am.registerApplicationMaster, { appId, attempt: 7, maxConcurrency: 1 }))).toBe(
        "APP_ATTEMPT_UNKNOWN",
      );
      await client.kill(appId);
    } finally {
      am.close();
    }
  });

  it("closes a node stream that heartbeats before registering, with NODE_NOT_REGISTERED, and stays up", async () => {
    const proto = loadHarvestProto();
    const tracker = makeClient(proto.ResourceTracker, rm.address);
    const stream = tracker.nodeChannel();
    const err = await new Promise<HarvestError>((resolve) => {
      stream.on("error", (e) => resolve(fromGrpcError(e)));
      stream.on("data", () => undefined);
      stream.write({ heartbeat: { seq: 1, timeMs: Date.now(), containers: [] } });
    });
    expect(err.code).toBe("NODE_NOT_REGISTERED");
    const stream2 = tracker.nodeChannel();
    const err2 = await new Promise<HarvestError>((resolve) => {
      stream2.on("error", (e) => resolve(fromGrpcError(e)));
      stream2.on("data", () => undefined);
      stream2.write({
        register: { nodeId: "../evil", nmAddress: "127.0.0.1:1", capacity: { vcoresMilli: -5, memoryMb: 1 } },
      });
    });
    expect(err2.code).toBe("INVALID_ARGUMENT");
    tracker.close();
    expect((await client.nodes()).map((n) => n.nodeId)).toEqual(["n1"]);
  });

  it("has the node manager refuse forged tokens, path-like container ids and bad environments", async () => {
    const proto = loadHarvestProto();
    const cm = makeClient(proto.ContainerManager, nm.address);
    const appId = "application_1_0001";
    const container = {
      id: "container_1_0001_01_000009",
      nodeId: "n1",
      nmAddress: nm.address,
      resource: { vcoresMilli: 1000, memoryMb: 128 },
      priority: 0,
      token: "00".repeat(32),
    };
    try {
      expect(
        await codeOf(
          call(cm, cm.startContainer, { container, appId, argv: ["node", "-e", "0"], env: {}, isAm: false }),
        ),
      ).toBe("CONTAINER_TOKEN_INVALID");
      expect(
        await codeOf(
          call(cm, cm.startContainer, {
            container: { ...container, id: "../../../tmp/x" },
            appId,
            argv: ["true"],
            env: {},
            isAm: false,
          }),
        ),
      ).toBe("INVALID_ARGUMENT");
      expect(
        await codeOf(call(cm, cm.startContainer, { container, appId: "../x", argv: ["true"], env: {}, isAm: false })),
      ).toBe("INVALID_ARGUMENT");
      // A genuine grant with credentials the node manager does not write, or an environment that points the container
      // at a token file of the caller's choosing: refused, and nothing starts.
      const resource = container.resource;
      const granted = {
        ...container,
        token: signContainer("s3cret", { containerId: container.id, appId, nodeId: "n1", resource }),
      };
      const start = (extra: object) =>
        codeOf(
          call(cm, cm.startContainer, { container: granted, appId, argv: ["true"], env: {}, isAm: false, ...extra }),
        );
      expect(await start({ tokens: { "root-key": "x" } })).toBe("INVALID_ARGUMENT");
      expect(await start({ tokens: { "dfs-token": "" } })).toBe("INVALID_ARGUMENT");
      expect(await start({ env: { HARVEST_TOKEN_FILE: "/etc/shadow" } })).toBe("INVALID_ARGUMENT");
      expect(await codeOf(call(cm, cm.getContainerLogs, { containerId: "../../etc/passwd", stream: "stdout" }))).toBe(
        "INVALID_ARGUMENT",
      );
      expect(await codeOf(call(cm, cm.stopContainer, { containerId: "container_1_0001_01_000123" }))).toBe(
        "CONTAINER_NOT_FOUND",
      );
    } finally {
      cm.close();
    }
    expect(nm.state).toBe("running");
    expect(nm.isRegistered).toBe(true);
  });
});
