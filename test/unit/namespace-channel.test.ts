/**
 * DfsClient's NamespaceCalls stream (client/namespace-channel.ts) against a namenode played by the test on a real gRPC
 * server: answers matched by id in any order, coded errors per call, a deadline per call, a broken stream failing
 * every call on it as UNAVAILABLE (so writers retry as for unary calls) and the next call opening a new one.
 */
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { NamespaceChannel } from "../../client/namespace-channel.js";
import { callErrorOf, HarvestError } from "../../common/errors.js";
import { bindServer, createServer, loadHarvestProto, makeClient, shutdownServer } from "../../common/grpc.js";
import type { ClientNamenodeClient } from "../../proto/generated/harvest/v1/ClientNamenode.js";
import type { NamespaceCallOutput } from "../../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResult } from "../../proto/generated/harvest/v1/NamespaceResult.js";
import { codeOf } from "../error-code.js";

type ServerStream = grpc.ServerDuplexStream<NamespaceCallOutput, NamespaceResult>;

/** A namenode that only serves NamespaceCalls, answering each call as `answer` says. */
async function fakeNamenode(
  answer: (msg: NamespaceCallOutput, stream: ServerStream) => void,
  port = 0,
): Promise<{ address: string; port: number; streams: ServerStream[]; stop(): Promise<void>; kill(): void }> {
  const server = createServer();
  const streams: ServerStream[] = [];
  const service = loadHarvestProto().ClientNamenode.service;
  const handlers: Record<string, unknown> = Object.fromEntries(
    Object.keys(service).map((m) => [
      m,
      (_call: unknown, cb: (err: Partial<grpc.ServiceError>) => void) =>
        cb({ code: grpc.status.UNIMPLEMENTED, details: m }),
    ]),
  );
  handlers["NamespaceCalls"] = (stream: ServerStream) => {
    streams.push(stream);
    stream.on("data", (msg: NamespaceCallOutput) => answer(msg, stream));
    stream.on("end", () => stream.end());
    stream.on("error", () => undefined);
  };
  server.addService(service, handlers as grpc.UntypedServiceImplementation);
  const bound = await bindServer(server, "127.0.0.1", port);
  return {
    address: `127.0.0.1:${bound}`,
    port: bound,
    streams,
    stop: () => shutdownServer(server, 1_000),
    kill: () => server.forceShutdown(),
  };
}

function status(path: string): NamespaceResult["create"] {
  return { path, length: 0, complete: false };
}

describe("NamespaceChannel", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function setUp(answer: (msg: NamespaceCallOutput, stream: ServerStream) => void, idleMs = 1_000) {
    const nn = await fakeNamenode(answer);
    const client = makeClient(loadHarvestProto().ClientNamenode, nn.address) as ClientNamenodeClient;
    const channel = new NamespaceChannel(client, () => new grpc.Metadata(), idleMs);
    cleanup.push(
      nn.stop,
      () => client.close(),
      () => channel.close(),
    );
    return { nn, channel };
  }

  it("matches answers to calls by id, whatever their order, and passes each call's coded error to it alone", async () => {
    const held: { msg: NamespaceCallOutput; stream: ServerStream }[] = [];
    const { channel } = await setUp((msg, stream) => {
      held.push({ msg, stream });
      if (held.length < 3) return;
      // Answer in reverse order; the second call fails with a Harvest error.
      for (const { msg: m, stream: s } of held.reverse()) {
        if (m.create?.path === "/b")
          s.write({ id: m.id, error: callErrorOf(new HarvestError("NAMENODE_FILE_EXISTS", "/b exists")) });
        else s.write({ id: m.id, create: status(m.create!.path) });
      }
    });
    const calls = ["/a", "/b", "/c"].map((path) =>
      channel.call("create", { path, clientName: "w" }, 5_000).then(
        (r) => r.path,
        (e: HarvestError) => e.code,
      ),
    );
    expect(await Promise.all(calls)).toEqual(["/a", "NAMENODE_FILE_EXISTS", "/c"]);
  });

  it("fails a call the namenode leaves unanswered past its deadline, and ignores a late answer", async () => {
    let late: (() => void) | undefined;
    const { channel } = await setUp((msg, stream) => {
      if (msg.create?.path === "/slow") late = () => stream.write({ id: msg.id, create: status("/slow") });
      else stream.write({ id: msg.id, create: status(msg.create!.path) });
    });
    expect(await codeOf(channel.call("create", { path: "/slow" }, 200))).toBe("DEADLINE_EXCEEDED");
    late?.();
    // The stream goes on: the next call is answered.
    expect((await channel.call("create", { path: "/next" }, 5_000)).path).toBe("/next");
  });

  it("fails every call on a stream that breaks with UNAVAILABLE, and opens a new stream for the next call", async () => {
    const { nn, channel } = await setUp(() => undefined);
    const waiting = [channel.call("create", { path: "/x" }, 10_000), channel.call("create", { path: "/y" }, 10_000)];
    await new Promise((r) => setTimeout(r, 200));
    expect(nn.streams).toHaveLength(1);
    // The namenode dies under the calls...
    nn.kill();
    expect(await Promise.all(waiting.map((p) => codeOf(p)))).toEqual(["UNAVAILABLE", "UNAVAILABLE"]);
    // ...and comes back on its port: the next call goes on a new stream.
    const back = await fakeNamenode(
      (msg, stream) => stream.write({ id: msg.id, create: status(msg.create!.path) }),
      nn.port,
    );
    cleanup.push(back.stop);
    expect((await channel.call("create", { path: "/ok" }, 10_000)).path).toBe("/ok");
    expect(back.streams).toHaveLength(1);
  });

  it("fails every call at once when the namenode is unreachable, instead of waiting for the deadline", async () => {
    const { nn, channel } = await setUp(() => undefined);
    await nn.stop();
    const t0 = Date.now();
    expect(await codeOf(channel.call("create", { path: "/z" }, 30_000))).toBe("UNAVAILABLE");
    expect(Date.now() - t0).toBeLessThan(25_000);
  });

  it("ends its stream once idle, and refuses calls after close", async () => {
    const { nn, channel } = await setUp((msg, stream) => stream.write({ id: msg.id, create: status("/f") }), 100);
    await channel.call("create", { path: "/f" }, 5_000);
    const ended = new Promise<void>((resolve) => nn.streams[0]!.on("finish", () => resolve()));
    await ended;
    channel.close();
    expect(await codeOf(channel.call("create", { path: "/g" }, 5_000))).toBe("UNAVAILABLE");
  });
});
