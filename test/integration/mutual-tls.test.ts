/**
 * Mutual TLS under the cluster CA on a real gRPC server: a peer without a certificate, with one from another CA or
 * with an expired one is refused with UNAUTHENTICATED before the handler runs; a valid peer reaches the handler, which
 * knows its name and role; a client refuses a server it cannot verify.
 */
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { fromGrpcError } from "../../common/errors.js";
import { CHANNEL_OPTIONS, loadHarvestProto, unary } from "../../common/grpc.js";
import { callIdentity, channelCredentials, serverCredentials } from "../../common/tls.js";
import type { Identity, TlsFiles } from "../../common/tls.js";
import type { ClientNamenodeClient } from "../../proto/generated/harvest/v1/ClientNamenode.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-tls-"));
const ca = join(dir, "ca");
const otherCa = join(dir, "other-ca");
const seen: (Identity | undefined)[] = [];
let server: grpc.Server;
let port = 0;

async function serve(tls: TlsFiles): Promise<{ server: grpc.Server; port: number }> {
  const s = new grpc.Server();
  s.addService(loadHarvestProto().ClientNamenode.service, {
    getDatanodes: unary((_req: unknown, call) => {
      seen.push(callIdentity(call));
      return { datanodes: [] };
    }),
  });
  const bound = await new Promise<number>((resolve, reject) =>
    s.bindAsync("127.0.0.1:0", serverCredentials(tls), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { server: s, port: bound };
}

/** Calls the server's one method with `creds`; resolves to "OK" or the Harvest error code. */
function callWith(creds: grpc.ChannelCredentials, at = port): Promise<string> {
  const Ctor = loadHarvestProto().ClientNamenode;
  const client = new Ctor(`127.0.0.1:${at}`, creds, CHANNEL_OPTIONS) as unknown as ClientNamenodeClient;
  return new Promise((resolve) => {
    client.getDatanodes({}, { deadline: Date.now() + 5_000 }, (err) => {
      client.close();
      resolve(err ? fromGrpcError(err).code : "OK");
    });
  });
}

const files = (who: string, caDir = ca): TlsFiles => ({
  ca: join(caDir, "ca.pem"),
  cert: join(dir, "certs", `${who}.pem`),
  key: join(dir, "certs", `${who}-key.pem`),
});

describe("mutual TLS under the cluster CA", () => {
  beforeAll(async () => {
    await createCa(ca);
    await createCa(otherCa, { name: "Someone else's CA" });
    const out = join(dir, "certs");
    await issueCertificate(ca, out, { name: "namenode", role: "daemon", hosts: ["127.0.0.1", "localhost"] });
    await issueCertificate(ca, out, { name: "alice", role: "user" });
    await issueCertificate(ca, out, { name: "ops", role: "admin" });
    await issueCertificate(ca, out, {
      name: "old",
      role: "user",
      validFromMs: Date.now() - 10 * 86_400_000,
      days: 2,
    });
    await issueCertificate(ca, out, { name: "elsewhere", role: "daemon", hosts: ["10.9.9.9"] });
    await issueCertificate(otherCa, join(dir, "other"), { name: "mallory", role: "admin" });
    ({ server, port } = await serve(files("namenode")));
  });

  afterAll(() => {
    server?.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lets a peer with a certificate from the cluster CA in, and tells the handler who it is", async () => {
    seen.length = 0;
    expect(await callWith(channelCredentials(files("alice")))).toBe("OK");
    expect(await callWith(channelCredentials(files("ops")))).toBe("OK");
    expect(seen).toEqual([
      { name: "alice", role: "user" },
      { name: "ops", role: "admin" },
    ]);
  });

  it("refuses a peer without a certificate, before the handler runs", async () => {
    seen.length = 0;
    const anonymous = grpc.credentials.createSsl(readFileSync(join(ca, "ca.pem")));
    expect(await callWith(anonymous)).toBe("UNAUTHENTICATED");
    expect(seen).toEqual([]);
  });

  it("refuses a certificate from another CA and an expired one", async () => {
    seen.length = 0;
    const mallory: TlsFiles = {
      ca: join(ca, "ca.pem"),
      cert: join(dir, "other", "mallory.pem"),
      key: join(dir, "other", "mallory-key.pem"),
    };
    expect(await callWith(channelCredentials(mallory))).toBe("UNAUTHENTICATED");
    expect(await callWith(channelCredentials(files("old")))).toBe("UNAUTHENTICATED");
    expect(seen).toEqual([]);
  });

  it("gets nothing from a plaintext peer", async () => {
    expect(await callWith(grpc.credentials.createInsecure())).toBe("UNAVAILABLE");
  });

  it("refuses, as a client, a server whose certificate is from another CA or names another host", async () => {
    const wrongCa = await serve({
      ca: join(otherCa, "ca.pem"),
      cert: join(dir, "other", "mallory.pem"),
      key: join(dir, "other", "mallory-key.pem"),
    });
    const wrongHost = await serve(files("elsewhere"));
    try {
      expect(await callWith(channelCredentials(files("alice")), wrongCa.port)).toBe("UNAVAILABLE");
      expect(await callWith(channelCredentials(files("alice")), wrongHost.port)).toBe("UNAVAILABLE");
    } finally {
      wrongCa.server.forceShutdown();
      wrongHost.server.forceShutdown();
    }
  });
});
