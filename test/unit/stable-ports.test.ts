import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ephemeralLow, stablePort } from "../../localcluster/ports.js";

describe("a restarted daemon's port", () => {
  const open: Socket[] = [];
  afterAll(() => open.forEach((s) => s.destroy()));

  it("is never one the kernel hands to outgoing connections, and can be bound", async () => {
    const low = ephemeralLow();
    const ports = new Set<number>();
    for (let i = 0; i < 20; i++) ports.add(await stablePort());
    for (const port of ports) {
      expect(port).toBeLessThan(low);
      const server = createServer().listen(port, "127.0.0.1");
      await new Promise((ok, fail) => server.once("listening", ok).once("error", fail));
      // An outgoing connection takes a local port from the ephemeral range, so never this one.
      const peer = createServer().listen(0, "127.0.0.1");
      await new Promise((ok) => peer.once("listening", ok));
      const socket = connect((peer.address() as AddressInfo).port, "127.0.0.1");
      await new Promise((ok) => socket.once("connect", ok));
      open.push(socket);
      expect(socket.localPort).toBeGreaterThanOrEqual(low);
      await new Promise((ok) => server.close(ok));
      peer.close();
    }
    expect(ports.size).toBeGreaterThan(10);
  });

  it("skips a port in use and draws another", async () => {
    const taken = await stablePort();
    const holder = createServer().listen(taken, "127.0.0.1");
    await new Promise((ok) => holder.once("listening", ok));
    try {
      // The first draw lands on the taken port, the second elsewhere.
      const low = ephemeralLow();
      const draws = [(taken - 20_000) / (low - 20_000), 0.5];
      const port = await stablePort("127.0.0.1", () => draws.shift() ?? Math.random());
      expect(port).not.toBe(taken);
      expect(port).toBeLessThan(low);
    } finally {
      holder.close();
    }
  });

  it("reads the kernel's range, with Linux's default when the file is missing or odd", () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-ports-"));
    try {
      writeFileSync(join(dir, "range"), "40000\t60999\n");
      expect(ephemeralLow(join(dir, "range"))).toBe(40_000);
      writeFileSync(join(dir, "odd"), "junk\n");
      expect(ephemeralLow(join(dir, "odd"))).toBe(32_768);
      expect(ephemeralLow(join(dir, "missing"))).toBe(32_768);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
