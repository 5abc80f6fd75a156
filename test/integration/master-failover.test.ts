/**
 * Clients that follow the active master (common/failover.ts): two real gRPC servers on loopback serve ClientNamenode,
 * one as active and one as a standby that answers NOT_ACTIVE naming the active. A client made from "standby,active"
 * reaches the active unseen, follows a swap of roles and a dead master, and never repeats a call another error
 * answered; the namespace channel's stream reopens on the active and resends what the standby refused.
 */
import * as grpc from "@grpc/grpc-js";
import { connect, createServer as createNetServer } from "node:net";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { NamespaceChannel } from "../../client/namespace-channel.js";
import { callErrorOf, HarvestError, toServiceError } from "../../common/errors.js";
import { notActiveError } from "../../common/failover.js";
import {
  bindServer,
  call,
  createServer,
  currentAddress,
  loadHarvestProto,
  makeClient,
  shutdownServer,
  unary,
} from "../../common/grpc.js";
import type { ClientNamenodeClient } from "../../proto/generated/harvest/v1/ClientNamenode.js";
import type { NamespaceCallOutput } from "../../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResult } from "../../proto/generated/harvest/v1/NamespaceResult.js";
import { codeOf } from "../error-code.js";

type ServerStream = grpc.ServerDuplexStream<NamespaceCallOutput, NamespaceResult>;

/** One of two namenodes: active, or a standby naming `peer` (the other's address) as the active. */
interface FakeMaster {
  address: string;
  role: "active" | "standby";
  /** How a standby refuses NamespaceCalls: the whole stream, or each call on it. */
  refuses: "stream" | "call";
  /** Run by Rename, List and streamed calls once they reach the active: the test drops the connection there. */
  onMidCall?: () => void;
  /** Calls that reached this master, by method ("NamespaceCalls.create" for a call on the stream). */
  calls: Map<string, number>;
  stop(): Promise<void>;
  /** Closes the port and every connection at once, as a host that died would. */
  kill(): void;
}

async function fakeNamenode(role: "active" | "standby", peer: () => string): Promise<FakeMaster> {
  const server = createServer();
  const calls = new Map<string, number>();
  const master: FakeMaster = {
    address: "",
    role,
    refuses: "stream",
    calls,
    stop: () => Promise.resolve(),
    kill: () => undefined,
  };
  const count = (method: string): void => void calls.set(method, (calls.get(method) ?? 0) + 1);
  const refuseUnlessActive = (): void => {
    if (master.role !== "active") throw notActiveError("namenode", peer(), 7);
  };
  server.addService(loadHarvestProto().ClientNamenode.service, {
    Stat: unary((req: { path: string }) => {
      count("Stat");
      refuseUnlessActive();
      return { path: req.path, isDir: true };
    }),
    Mkdirs: unary((req: { path: string }) => {
      count("Mkdirs");
      refuseUnlessActive();
      return { path: req.path, isDir: true };
    }),
    // The connection drops while the call is on it (the master's host died mid-call), after the master applied it.
    Rename: unary((req: { src: string }) => {
      count("Rename");
      refuseUnlessActive();
      master.onMidCall?.();
      return new Promise<never>(() => undefined);
    }),
    List: unary((req: { path: string }) => {
      count("List");
      refuseUnlessActive();
      if (master.onMidCall) {
        master.onMidCall();
        return new Promise<never>(() => undefined);
      }
      return { entries: [{ path: req.path, isDir: true }] };
    }),
    Delete: unary((req: { path: string }) => {
      count("Delete");
      refuseUnlessActive();
      throw new HarvestError("NAMENODE_FILE_NOT_FOUND", `${req.path} does not exist`, { details: { path: req.path } });
    }),
    // A standby refuses the whole stream; the active answers each create with its path.
    NamespaceCalls: (stream: ServerStream) => {
      stream.on("error", () => undefined);
      if (master.role !== "active" && master.refuses === "stream") {
        count("NamespaceCalls.refused");
        stream.emit("error", toServiceError(notActiveError("namenode", peer(), 7)));
        return;
      }
      stream.on("data", (msg: NamespaceCallOutput) => {
        count(`NamespaceCalls.${msg.call ?? "none"}`);
        if (master.role !== "active")
          stream.write({ id: msg.id, error: callErrorOf(notActiveError("namenode", peer(), 7)) });
        else if (master.onMidCall) master.onMidCall();
        else if (msg.create) stream.write({ id: msg.id, create: { path: msg.create.path, isDir: false } });
        else stream.write({ id: msg.id, error: callErrorOf(new HarvestError("INVALID_ARGUMENT", "not served")) });
      });
      stream.on("end", () => {
        count("NamespaceCalls.ended");
        stream.end();
      });
    },
  } as grpc.UntypedServiceImplementation);
  // Clients reach the master through a TCP relay, so that kill() can cut every connection as a dead host's would
  // (without the HTTP/2 goodbye a server that shuts down sends).
  const grpcPort = await bindServer(server, "127.0.0.1", 0);
  const sockets = new Set<Socket>();
  const relay = createNetServer((inbound) => {
    const outbound = connect(grpcPort, "127.0.0.1");
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  master.address = `127.0.0.1:${(relay.address() as AddressInfo).port}`;
  master.kill = () => {
    relay.close();
    for (const s of sockets) s.destroy();
    server.forceShutdown();
  };
  master.stop = async () => {
    master.kill();
    await shutdownServer(server, 0);
  };
  return master;
}

const CREATE = { path: "", clientName: "c", owner: "", overwrite: false, replication: 0, blockSize: 0 };

describe("a client of two masters", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  /** A standby and an active namenode, and a client made from "standby,active". */
  async function setUp() {
    const masters: FakeMaster[] = [];
    const standby = await fakeNamenode("standby", () => masters[1]!.address);
    const active = await fakeNamenode("active", () => masters[0]!.address);
    masters.push(standby, active);
    const client = makeClient(
      loadHarvestProto().ClientNamenode,
      `${standby.address},${active.address}`,
    ) as ClientNamenodeClient;
    cleanup.push(standby.stop, active.stop, () => client.close());
    return { standby, active, client };
  }

  it("reaches the active through a standby, follows a swap of roles, and moves on from a dead master", async () => {
    const { standby, active, client } = await setUp();

    const first = await call(client, client.Stat, { path: "/a" }, 5_000);
    expect(first.path).toBe("/a");
    expect(standby.calls.get("Stat")).toBe(1);
    expect(active.calls.get("Stat")).toBe(1);
    expect(currentAddress(client)).toBe(active.address);

    // A failover: the old active steps down, the standby takes over.
    active.role = "standby";
    standby.role = "active";
    const made = await call(client, client.Mkdirs, { path: "/b", owner: "" }, 5_000);
    expect(made.path).toBe("/b");
    expect(active.calls.get("Mkdirs")).toBe(1);
    expect(standby.calls.get("Mkdirs")).toBe(1);
    expect(currentAddress(client)).toBe(standby.address);

    // The active's host dies (its connections cut, its port closed); the other master takes over, and calls go there.
    standby.kill();
    active.role = "active";
    const after = await call(client, client.Stat, { path: "/c" }, 5_000);
    expect(after.path).toBe("/c");
    expect(currentAddress(client)).toBe(active.address);
  });

  it("sends many calls at once through the standby to the active", async () => {
    const { active, client } = await setUp();
    const paths = ["/1", "/2", "/3", "/4", "/5", "/6"];
    const answers = await Promise.all(paths.map((path) => call(client, client.Stat, { path }, 5_000)));
    expect(answers.map((a) => a.path)).toEqual(paths);
    expect(active.calls.get("Stat")).toBe(paths.length);
    expect(currentAddress(client)).toBe(active.address);
  });

  it("passes any other error to the caller at once, without retrying the call", async () => {
    const { standby, active, client } = await setUp();
    expect(await codeOf(call(client, client.Delete, { path: "/missing", recursive: false }, 5_000))).toBe(
      "NAMENODE_FILE_NOT_FOUND",
    );
    expect(standby.calls.get("Delete")).toBe(1);
    expect(active.calls.get("Delete")).toBe(1);
    // Once on the active, a second failing call is answered by it alone.
    await call(client, client.Delete, { path: "/missing", recursive: false }, 5_000).catch(() => undefined);
    expect(standby.calls.get("Delete")).toBe(1);
    expect(active.calls.get("Delete")).toBe(2);
  });

  it("does not send again a change whose answer was lost with the connection, but does send a read again", async () => {
    const { standby, active, client } = await setUp();
    await call(client, client.Stat, { path: "/" }, 5_000);
    // The active dies with the call on it, and the standby takes over.
    active.onMidCall = () => {
      active.kill();
      standby.role = "active";
    };
    expect(await codeOf(call(client, client.Rename, { src: "/a", dst: "/b" }, 5_000))).toBe("UNAVAILABLE");
    expect(active.calls.get("Rename")).toBe(1);
    expect(standby.calls.get("Rename")).toBeUndefined();

    // A read is sent again, to the new active.
    const pair = await setUp();
    await call(pair.client, pair.client.Stat, { path: "/" }, 5_000);
    pair.active.onMidCall = () => {
      pair.active.kill();
      pair.standby.role = "active";
    };
    const listed = await call(pair.client, pair.client.List, { path: "/d" }, 5_000);
    expect(listed.entries.map((e) => e.path)).toEqual(["/d"]);
    expect(pair.active.calls.get("List")).toBe(1);
    expect(pair.standby.calls.get("List")).toBe(1);
  });

  it("fails with NOT_ACTIVE once the deadline passes while no master is active", async () => {
    const { standby, active, client } = await setUp();
    active.role = "standby";
    expect(await codeOf(call(client, client.Stat, { path: "/a" }, 600))).toBe("NOT_ACTIVE");
    // It kept asking both, with a backoff between rounds, not in a tight loop.
    const asked = (standby.calls.get("Stat") ?? 0) + (active.calls.get("Stat") ?? 0);
    expect(asked).toBeGreaterThan(2);
    expect(asked).toBeLessThan(40);
  });

  it.each(["stream", "call"] as const)(
    "reopens the namespace stream on the active and resends the calls a standby refused (refusing each %s)",
    async (refuses) => {
      const { standby, active, client } = await setUp();
      standby.refuses = refuses;
      const channel = new NamespaceChannel(client, () => new grpc.Metadata(), 100);
      cleanup.push(() => channel.close());
      const created = await Promise.all(["/x", "/y"].map((path) => channel.call("create", { ...CREATE, path }, 5_000)));
      expect(created.map((s) => s.path)).toEqual(["/x", "/y"]);
      if (refuses === "stream") expect(standby.calls.get("NamespaceCalls.refused")).toBe(1);
      else expect(standby.calls.get("NamespaceCalls.create")).toBe(2);
      expect(active.calls.get("NamespaceCalls.create")).toBe(2);

      // A stream ended for idleness is no failure: the next one goes straight to the active.
      await vi.waitFor(() => expect(active.calls.get("NamespaceCalls.ended")).toBe(1));
      await channel.call("create", { ...CREATE, path: "/w" }, 5_000);
      expect(currentAddress(client)).toBe(active.address);
      expect(standby.calls.get(refuses === "stream" ? "NamespaceCalls.refused" : "NamespaceCalls.create")).toBe(
        refuses === "stream" ? 1 : 2,
      );

      // The roles swap: the next calls reach the new active.
      active.role = "standby";
      active.refuses = refuses;
      standby.role = "active";
      const again = await channel.call("create", { ...CREATE, path: "/z" }, 5_000);
      expect(again.path).toBe("/z");
      expect(standby.calls.get("NamespaceCalls.create")).toBe(refuses === "stream" ? 1 : 3);
    },
  );

  it("fails a streamed change whose stream was lost, without sending it again, and opens the next stream on the new active", async () => {
    const { standby, active, client } = await setUp();
    const channel = new NamespaceChannel(client, () => new grpc.Metadata());
    cleanup.push(() => channel.close());
    await channel.call("create", { ...CREATE, path: "/first" }, 5_000);
    active.onMidCall = () => {
      active.kill();
      standby.role = "active";
    };
    expect(await codeOf(channel.call("create", { ...CREATE, path: "/lost" }, 5_000))).toBe("UNAVAILABLE");
    expect(active.calls.get("NamespaceCalls.create")).toBe(2);
    expect(standby.calls.get("NamespaceCalls.create")).toBeUndefined();
    const next = await channel.call("create", { ...CREATE, path: "/next" }, 5_000);
    expect(next.path).toBe("/next");
    expect(standby.calls.get("NamespaceCalls.create")).toBe(1);
  });
});
