/**
 * The zero-copy send (native/sendfile.c through datanode/zero-copy.ts) on real loopback sockets and real files: what
 * the reader gets is each head followed by its exact file range, also when the reader stalls and when a range ends
 * off a page; a file shorter than a frame, a cancelled send and a reader that hangs up each end the send with a coded
 * error; bad arguments are refused before any thread starts.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNativeAddon } from "../../common/paths.js";
import { plainSocketDescriptor, sendFileFrames, zeroCopyAvailable } from "../../datanode/zero-copy.js";
import type { FileFrame } from "../../datanode/zero-copy.js";
import { codeOf } from "../error-code.js";

const MiB = 1024 * 1024;

/** A connected pair on loopback: the server's end (to send on) and the client's. */
async function socketPair(): Promise<{ server: net.Socket; client: net.Socket; close: () => void }> {
  const listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  const accepted = new Promise<net.Socket>((resolve) => listener.once("connection", resolve));
  const client = net.connect((listener.address() as net.AddressInfo).port, "127.0.0.1");
  const server = await accepted;
  await new Promise<void>((resolve) => (client.readyState === "open" ? resolve() : client.once("connect", resolve)));
  listener.close();
  // A reset by the other end is part of some tests.
  server.on("error", () => undefined);
  client.on("error", () => undefined);
  return {
    server,
    client,
    close: () => {
      server.destroy();
      client.destroy();
    },
  };
}

/** Runs `body` on a fresh loopback socket pair and destroys both ends afterwards, whatever happens. */
async function withSocketPair(body: (server: net.Socket, client: net.Socket) => Promise<void>): Promise<void> {
  const { server, client, close } = await socketPair();
  try {
    await body(server, client);
  } finally {
    close();
  }
}

/** Collects what the client receives until `bytes` have come (or the connection ends). */
function receive(client: net.Socket, bytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let got = 0;
  return new Promise((resolve) => {
    const done = (): void => resolve(Buffer.concat(parts));
    client.on("data", (b: Buffer) => {
      parts.push(b);
      got += b.length;
      if (got >= bytes) done();
    });
    client.on("end", done);
    client.on("close", done);
  });
}

const required = process.env["HARVEST_REQUIRE_NATIVE"] === "1";

describe("the native zero-copy build", () => {
  it.runIf(required)("is there when the build requires it (CI)", () => {
    expect(zeroCopyAvailable()).toBe(true);
  });
});

describe.skipIf(!zeroCopyAvailable())("sending block data from a file with sendfile", () => {
  let dir: string;
  let content: Buffer;
  let file: FileHandle;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-zero-copy-"));
    content = randomBytes(24 * MiB + 1234);
    writeFileSync(join(dir, "blk"), content);
    file = await open(join(dir, "blk"), "r");
  });

  /** What a reader should get for `frames`: each head, then its range of the file. */
  const wireBytes = (frames: readonly FileFrame[]): Buffer =>
    Buffer.concat(frames.flatMap((f) => [f.head, content.subarray(f.offset, f.offset + f.length)]));

  afterAll(async () => {
    await file.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers every head followed by exactly its range of the file, ranges off pages and empty ones included", async () => {
    await withSocketPair(async (server, client) => {
      const frames: FileFrame[] = [
        { head: Buffer.from("head one|"), offset: 0, length: 512 * 1024 },
        { head: Buffer.from("second head|"), offset: 777, length: 100_001 },
        { head: Buffer.from("empty|"), offset: 5000, length: 0 },
        { head: Buffer.from("tail|"), offset: content.length - 1234, length: 1234 },
      ];
      const expected = wireBytes(frames);
      const got = receive(client, expected.length);
      const sent = await sendFileFrames(plainSocketDescriptor(server)!, file.fd, frames);
      expect(sent).toBe(expected.length);
      expect((await got).equals(expected)).toBe(true);
    });
  });

  it("waits for a reader that stops reading, and finishes once it reads again", async () => {
    await withSocketPair(async (server, client) => {
      client.pause();
      const frames: FileFrame[] = [0, 1, 2].map((i) => ({
        head: Buffer.from(`frame ${i}|`),
        offset: i * 8 * MiB,
        length: 8 * MiB,
      }));
      const expected = wireBytes(frames);
      let finished = false;
      const sending = sendFileFrames(plainSocketDescriptor(server)!, file.fd, frames).then((n) => {
        finished = true;
        return n;
      });
      // 24 MiB do not fit in loopback's socket buffers: the send waits for the reader.
      await new Promise((r) => setTimeout(r, 300));
      expect(finished).toBe(false);
      const got = receive(client, expected.length);
      client.resume();
      expect(await sending).toBe(expected.length);
      expect((await got).equals(expected)).toBe(true);
    });
  });

  it("says DATANODE_CORRUPT_BLOCK when the file ends before a frame's data does", async () => {
    await withSocketPair(async (server, client) => {
      client.resume();
      const frames = [{ head: Buffer.from("h"), offset: content.length - 100, length: 4096 }];
      expect(await codeOf(sendFileFrames(plainSocketDescriptor(server)!, file.fd, frames))).toBe(
        "DATANODE_CORRUPT_BLOCK",
      );
    });
  });

  /** A send of 24 MiB to a reader that does not read, 100 ms in: the send waits on a full socket. */
  async function stalledSend(
    signal?: AbortSignal,
  ): Promise<{ sending: Promise<string>; client: net.Socket; close: () => void }> {
    const { server, client, close } = await socketPair();
    client.pause();
    const frames = [{ head: Buffer.from("h"), offset: 0, length: 24 * MiB }];
    const sending = codeOf(sendFileFrames(plainSocketDescriptor(server)!, file.fd, frames, signal));
    await new Promise((r) => setTimeout(r, 100));
    return { sending, client, close };
  }

  it("ends at once when cancelled while the reader stalls, and the reader sees the connection end", async () => {
    const cancel = new AbortController();
    const { sending, client, close } = await stalledSend(cancel.signal);
    try {
      const ended = new Promise<void>((resolve) => {
        client.on("end", resolve);
        client.on("close", resolve);
      });
      cancel.abort();
      expect(await sending).toBe("UNAVAILABLE");
      client.resume();
      await ended;
      // A send asked for after the abort does not start.
      expect(
        await codeOf(sendFileFrames(0, file.fd, [{ head: Buffer.from("h"), offset: 0, length: 1 }], cancel.signal)),
      ).toBe("UNAVAILABLE");
    } finally {
      close();
    }
  });

  it("says UNAVAILABLE when the reader hangs up mid-send", async () => {
    const { sending, client, close } = await stalledSend();
    try {
      client.resetAndDestroy();
      expect(await sending).toBe("UNAVAILABLE");
    } finally {
      close();
    }
  });

  it("refuses bad arguments with a TypeError", () => {
    const native = loadNativeAddon<{
      send: (...args: unknown[]) => unknown;
      cancel: (job: unknown) => void;
    }>("harvest_sendfile")!;
    const noop = (): void => undefined;
    const h = [Buffer.from("h")];
    expect(() => native.send(-1, file.fd, h, [0], [1], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, h, [0, 1], [1], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, h, [-1], [1], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, h, [0.5], [1], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, ["not a buffer"], [0], [1], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, [], [], [], noop)).toThrow(TypeError);
    expect(() => native.send(1, file.fd, h, [0], [1], "not a function")).toThrow(TypeError);
    expect(() => native.cancel({})).toThrow(TypeError);
  });

  it("finds no descriptor to send on for a socket that is gone", async () => {
    const { server, close } = await socketPair();
    expect(plainSocketDescriptor(server)).toBeGreaterThanOrEqual(0);
    close();
    await waitFor(() => plainSocketDescriptor(server) === undefined, {
      what: "the socket's descriptor to go",
      intervalMs: 5,
    });
  });
});
