/**
 * A datanode's links to its namenodes (datanode/namenode-links.ts), against two namenodes played by the test on fake
 * streams: the epoch rule (commands only from the active of the newest term; older terms refused, logged once per
 * epoch, counted), a standby's role change, per-namenode block key sets (the same key ids on both), the block-token
 * requirement, and reports to one namenode while the other is cut off.
 */
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BlockKeyManager, verifyBlockToken } from "../../common/block-token.js";
import { Logger } from "../../common/log.js";
import { commandVerdict, EpochFence, NamenodeLinks, wireEpoch } from "../../datanode/namenode-links.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import type { NamenodeLinksHost } from "../../datanode/namenode-links.js";
import type { DatanodeCommands } from "../../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeCommandsOutput } from "../../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeProtocolClient } from "../../proto/generated/harvest/v1/DatanodeProtocol.js";
import type { DatanodeRegisteredOutput } from "../../proto/generated/harvest/v1/DatanodeRegistered.js";
import type { DatanodeToNamenode } from "../../proto/generated/harvest/v1/DatanodeToNamenode.js";
import { thrown } from "../error-code.js";
import { waitFor } from "../wait-for.js";

/** A namenode's end of a datanode's stream: what the datanode wrote, and a way to answer or cut it. */
class FakeStream extends EventEmitter {
  readonly written: DatanodeToNamenode[] = [];
  write(msg: DatanodeToNamenode): boolean {
    this.written.push(msg);
    return true;
  }
  end(): void {}
  cancel(): void {}
  kinds(): string[] {
    return this.written.map((m) => Object.keys(m)[0]!);
  }
}

const NN_A = "127.0.0.1:9001";
const NN_B = "127.0.0.1:9002";

/** Commands as they come off the wire (every repeated field present). */
function commands(c: DatanodeCommands): DatanodeCommandsOutput {
  return {
    seq: 0,
    replicate: [],
    delete: [],
    reregister: false,
    blockKeys: [],
    recover: [],
    commitRecovery: [],
    epoch: 0,
    ...c,
  } as DatanodeCommandsOutput;
}

describe("the epoch rule", () => {
  it("lets commands through only when they carry the newest term, with HA only when they carry one", () => {
    const fence = new EpochFence();
    // Not HA: epoch 0 everywhere.
    expect(commandVerdict(fence, false, 0)).toBe("execute");
    // HA: the active stamps its commands with its term; a standby's carry none.
    expect(commandVerdict(fence, true, 5)).toBe("execute");
    expect(fence.seen).toBe(5);
    expect(commandVerdict(fence, true, 0)).toBe("stale");
    // A newer term seen anywhere makes the old active's commands stale, and a namenode's that names none.
    expect(commandVerdict(fence, true, 7)).toBe("execute");
    expect(commandVerdict(fence, true, 5)).toBe("stale");
    expect(commandVerdict(fence, false, 0)).toBe("stale");
    expect(commandVerdict(fence, false, 7)).toBe("execute");
    expect(fence.seen).toBe(7);
    // Before any term is known, HA commands that name none are a standby's.
    expect(commandVerdict(new EpochFence(), true, 0)).toBe("standby");
  });

  it("refuses a token of an older term with STALE_EPOCH naming both terms", () => {
    const fence = new EpochFence();
    fence.check(0, "the block token");
    fence.observe(9);
    fence.observe(4);
    expect(fence.seen).toBe(9);
    fence.check(9, "the block token");
    const err = thrown(() => fence.check(4, "the block token"));
    expect(err.code).toBe("STALE_EPOCH");
    expect(err.details).toEqual({ epoch: "4", seen: "9" });
    // A token that names no term (issued without HA) is older than any.
    expect(thrown(() => fence.check(0, "the block token")).code).toBe("STALE_EPOCH");
  });

  it("reads an epoch off the wire as a positive integer, else 0", () => {
    expect([wireEpoch(12), wireEpoch(0), wireEpoch(-3), wireEpoch(1.5), wireEpoch("7"), wireEpoch(NaN)]).toEqual([
      12, 0, 0, 0, 0, 0,
    ]);
  });
});

describe("namenodeAddress", () => {
  it("takes one namenode or a comma-separated list, each a host:port, none twice", () => {
    const base = { datanodeId: "d1", dataDir: "/d" };
    expect(resolveDataNodeOptions({ ...base, namenodeAddress: `${NN_A}, ${NN_B}` }).namenodeAddress).toBe(
      `${NN_A}, ${NN_B}`,
    );
    for (const bad of [`${NN_A},nn-b`, `${NN_A},${NN_A}`, " , ", `${NN_A},host:0`])
      expect(thrown(() => resolveDataNodeOptions({ ...base, namenodeAddress: bad })).details).toEqual({
        field: "namenodeAddress",
      });
  });
});

describe("NamenodeLinks", () => {
  let dir: string;
  let lines: string[];
  let streams: Map<string, FakeStream[]>;
  let executed: { from: string; cmds: DatanodeCommandsOutput }[];
  let stale: number;
  let links: NamenodeLinks;
  let now: number;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "harvest-nnlinks-"));
    lines = [];
    streams = new Map();
    executed = [];
    stale = 0;
    now = 1_000_000;
  });
  afterEach(() => {
    links?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(addresses = `${NN_A},${NN_B}`): void {
    let executing = "";
    streams = new Map();
    const host: NamenodeLinksHost = {
      log: new Logger("test", "info", (line) => lines.push(line)),
      datanodeId: "dn1",
      dataDir: dir,
      timing: {
        reconnectMinMs: 10,
        reconnectMaxMs: 20,
        registerTimeoutMs: 5_000,
        heartbeatIntervalMs: 60_000,
        blockReportIntervalMs: 60_000,
      },
      isRunning: () => true,
      dial: (address) =>
        ({
          datanodeChannel: () => {
            const s = new FakeStream();
            streams.set(address, [...(streams.get(address) ?? []), s]);
            return s;
          },
          close: () => undefined,
        }) as unknown as DatanodeProtocolClient,
      registration: () => ({ datanodeId: "dn1", address: "127.0.0.1:1", storageId: "DS-1" }),
      blockReport: () => [{ blockId: 1, genStamp: 1, numBytes: 10 }],
      heartbeat: () => ({ capacityBytes: 100, usedBytes: 10, remainingBytes: 90 }),
      afterHeartbeat: () => undefined,
      execute: (cmds) => executed.push({ from: executing, cmds }),
      staleCommands: () => stale++,
    };
    links = new NamenodeLinks(addresses, host);
    links.connect();
    // Which link a command came on: the stream the test answers on.
    for (const s of links.addresses) expect(streams.get(s)).toHaveLength(1);
    send = (address, msg) => {
      executing = address;
      last(address).emit("data", msg);
    };
  }

  let send: (
    address: string,
    msg: { registered?: DatanodeRegisteredOutput; commands?: DatanodeCommandsOutput },
  ) => void;
  const last = (address: string): FakeStream => streams.get(address)!.at(-1)!;
  const registered = (r: Partial<DatanodeRegisteredOutput>): { registered: DatanodeRegisteredOutput } => ({
    registered: {
      datanodeId: "dn1",
      heartbeatIntervalMs: 60_000,
      blockTokens: false,
      blockKeys: [],
      epoch: 0,
      active: false,
      ...r,
    },
  });
  const wireKeys = (m: BlockKeyManager) => m.keys().map((k) => ({ ...k }));

  it("registers and reports to every namenode, and obeys only the active one of the newest term", () => {
    start();
    expect(last(NN_A).kinds()).toEqual(["register"]);
    expect(last(NN_B).kinds()).toEqual(["register"]);
    // A is active in term 5; B is a standby that has seen no term of its own.
    send(NN_A, registered({ epoch: 5, active: true }));
    send(NN_B, registered({ epoch: 0, active: false }));
    // Each gets its full block report and a first heartbeat.
    expect(last(NN_A).kinds()).toEqual(["register", "blockReport", "heartbeat"]);
    expect(last(NN_B).kinds()).toEqual(["register", "blockReport", "heartbeat"]);
    expect(links.registeredWith()).toEqual([NN_A, NN_B]);

    const del = { delete: [{ blockId: 1, genStamp: 1 }] };
    send(NN_A, { commands: commands({ ...del, epoch: 5 }) });
    // A standby's heartbeat answer names no term and asks nothing; commands that name none are not obeyed.
    send(NN_B, { commands: commands({ seq: 1, epoch: 0 }) });
    send(NN_B, { commands: commands({ ...del, epoch: 0 }) });
    expect(executed.map((e) => e.from)).toEqual([NN_A]);
    expect(stale).toBe(1);

    // B is elected in term 9 and commands with it: from now on only B is obeyed, A's commands are of an older term.
    send(NN_B, { commands: commands({ ...del, epoch: 9 }) });
    send(NN_A, { commands: commands({ ...del, epoch: 5 }) });
    send(NN_A, { commands: commands({ replicate: [{ block: { blockId: 1, genStamp: 1 }, targets: [] }], epoch: 5 }) });
    expect(executed.map((e) => e.from)).toEqual([NN_A, NN_B]);
    expect(stale).toBe(3);
    // Logged once per epoch: 0 (the standby's) and 5 (the old active's).
    expect(lines.filter((l) => l.includes("older term")).length).toBe(2);
    // An empty heartbeat answer from the old active is no command: nothing refused, nothing counted.
    send(NN_A, { commands: commands({ seq: 3, epoch: 5 }) });
    expect(stale).toBe(3);
    // A namenode may say its role changed on its stream: no second block report.
    send(NN_B, registered({ epoch: 9, active: true }));
    expect(last(NN_B).kinds()).toEqual(["register", "blockReport", "heartbeat"]);
    // The old active may still ask to be registered with again (it concerns it alone): its answer says it is standby.
    send(NN_A, { commands: commands({ reregister: true, epoch: 5 }) });
    expect(last(NN_A).kinds().at(-1)).toBe("register");
    expect(links.registeredWith()).toEqual([NN_B]);
    send(NN_A, registered({ epoch: 9, active: false }));
    expect(last(NN_A).kinds().slice(-3)).toEqual(["register", "blockReport", "heartbeat"]);
  });

  it("keeps a key set per namenode: tokens of either verify though their key ids coincide; a roll replaces only its own", () => {
    start();
    const kmA = new BlockKeyManager(() => now, { tokenLifetimeMs: 60_000, keyUpdateIntervalMs: 5_000, epoch: 5 });
    const kmB = new BlockKeyManager(() => now, { tokenLifetimeMs: 60_000, keyUpdateIntervalMs: 5_000 });
    expect(kmA.keys()[0]!.keyId).toBe(kmB.keys()[0]!.keyId);
    send(NN_A, registered({ epoch: 5, active: true, blockTokens: true, blockKeys: wireKeys(kmA) }));
    send(NN_B, registered({ epoch: 0, active: false, blockTokens: true, blockKeys: wireKeys(kmB) }));
    const verify = (token: string) => verifyBlockToken(token, links.blockKeys() as never, 7, "WRITE", now);
    const tokenA = kmA.issue(7, "WRITE", "alice");
    const tokenB = kmB.issue(7, "WRITE", "alice");
    expect(verify(tokenA)).toMatchObject({ blockId: 7, epoch: 5 });
    expect(verify(tokenB).epoch).toBeUndefined();

    // The standby rolls its key and sends only the new one: its old key goes, A's key of the same id stays.
    now += 5_000;
    kmB.maybeRoll();
    send(NN_B, { commands: commands({ blockKeys: kmB.keys().filter((k) => k.keyId !== 1), epoch: 0 }) });
    expect(thrown(() => verify(tokenB)).message).toContain("signature invalid");
    expect(verify(tokenA).epoch).toBe(5);
    // Elected in term 9, B's tokens (of the key it rolled as a standby) verify and pass the fence; A's are stale.
    kmB.setEpoch(9);
    send(NN_B, { commands: commands({ seq: 1, epoch: 9 }) });
    const fresh = verify(kmB.issue(7, "WRITE", "alice"));
    expect(fresh.epoch).toBe(9);
    links.fence.check(fresh.epoch ?? 0, "the block token");
    expect(thrown(() => links.fence.check(verify(tokenA).epoch ?? 0, "the block token")).code).toBe("STALE_EPOCH");
    // The old active's roll replaces its own set (its READ tokens stay good; its writes are fenced anyway).
    now += 5_000;
    kmA.maybeRoll();
    send(NN_A, { commands: commands({ blockKeys: kmA.keys().filter((k) => k.keyId !== 1), epoch: 5 }) });
    expect(thrown(() => verify(tokenA)).code).toBe("DATANODE_BAD_TOKEN");
    expect(verify(kmA.issue(7, "WRITE", "alice")).epoch).toBe(5);
    expect(stale).toBe(0);
  });

  it("requires block tokens as soon as one namenode does, and remembers it across a restart", () => {
    start();
    expect(links.blockKeys()).toBe("off");
    send(NN_B, registered({ blockTokens: false }));
    expect(links.blockKeys()).toBe("off");
    const km = new BlockKeyManager(() => now);
    send(NN_A, registered({ blockTokens: true, blockKeys: wireKeys(km) }));
    expect(links.blockKeys()).toHaveLength(1);
    links.close();
    // Restarted, no namenode has answered yet: every token is refused (no keys) rather than none required.
    start();
    expect(links.blockKeys()).toEqual([]);
    send(NN_A, registered({ blockTokens: false }));
    send(NN_B, registered({ blockTokens: false }));
    expect(links.blockKeys()).toBe("off");
  });

  it("goes on reporting to one namenode while the other is cut off, and sends the other a full report when it is back", async () => {
    start();
    send(NN_A, registered({ epoch: 5, active: true }));
    send(NN_B, registered({ epoch: 5 }));
    const cut = last(NN_B);
    cut.emit("error", new Error("connection reset"));
    links.queueReceived({ blockId: 2, genStamp: 1, numBytes: 5 }, "received");
    await waitFor(() => last(NN_A).kinds().includes("received"), { what: "A's incremental report" });
    expect(cut.kinds()).not.toContain("received");
    // B's stream is opened again: a new registration, and once answered the full report covers what it missed.
    await waitFor(() => last(NN_B) !== cut, { what: "B's stream opened again" });
    expect(last(NN_B).kinds()).toEqual(["register"]);
    send(NN_B, registered({ epoch: 5 }));
    expect(last(NN_B).kinds()).toEqual(["register", "blockReport", "heartbeat"]);
  });

  it("starts a key manager's ids where it is told, within int32, wrapping to 1", () => {
    let t = 0;
    const wraps = new BlockKeyManager(() => t, { keyUpdateIntervalMs: 1 }, undefined, 2 ** 31 - 1);
    t = 1;
    wraps.maybeRoll();
    expect(wraps.keys().map((k) => k.keyId)).toEqual([2 ** 31 - 1, 1]);
    const m = new BlockKeyManager(() => now, {}, undefined, 123_456);
    expect(m.keys().map((k) => k.keyId)).toEqual([123_456]);
    expect(thrown(() => new BlockKeyManager(() => now, {}, undefined, 0)).code).toBe("CONFIG_INVALID");
    expect(thrown(() => new BlockKeyManager(() => now, { epoch: -1 })).code).toBe("CONFIG_INVALID");
  });
});
