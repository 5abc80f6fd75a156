/**
 * The dfs bench's Node baselines move the bytes they are timed for: every receiver of a chain writes the source
 * byte-identical, over plaintext and over mutual TLS, receivers that write no file still forward every byte, and the
 * TLS chain refuses a peer without the ceiling's certificate (it measures mutual TLS, as a secure cluster runs).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCeilingTls, nodeCeilingMs, startCeilingChain } from "../../bench/node-ceiling.js";
import type { CeilingTls } from "../../bench/node-ceiling.js";

const work = mkdtempSync(join(tmpdir(), "harvest-node-ceiling-"));
let ceilingTls: CeilingTls;

beforeAll(async () => {
  ceilingTls = await makeCeilingTls(join(work, "ca"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sourceFile(name: string, bytes: number): { path: string; data: Buffer } {
  const data = randomBytes(bytes);
  const path = join(work, name);
  writeFileSync(path, data);
  return { path, data };
}

describe("Node ceiling chains", () => {
  for (const transport of ["plaintext", "TLS"] as const) {
    it(`${transport}: each of three receivers writes the source byte-identical, transfer after transfer`, async () => {
      const files = [1, 2, 3].map((i) => join(work, `${transport}-copy-${i}.bin`));
      const chain = await startCeilingChain(files, transport === "TLS" ? { tls: ceilingTls } : {});
      try {
        // A second, shorter source: each transfer replaces the files' bytes, none is left from the one before.
        for (const [name, bytes] of [
          ["first.bin", 3 * 1024 * 1024 + 17],
          ["second.bin", 1024 * 1024 + 5],
        ] as const) {
          const source = sourceFile(`${transport}-${name}`, bytes);
          const ms = await chain.transfer(source.path);
          expect(ms).toBeGreaterThan(0);
          for (const file of files) expect(readFileSync(file).equals(source.data)).toBe(true);
        }
      } finally {
        chain.close();
      }
    });
  }

  it("TLS: receivers that write no file forward every byte to the last, which writes it", async () => {
    const last = join(work, "after-dropping.bin");
    const chain = await startCeilingChain([null, null, last], { tls: ceilingTls });
    try {
      const source = sourceFile("dropped.bin", 2 * 1024 * 1024 + 3);
      await chain.transfer(source.path);
      expect(readFileSync(last).equals(source.data)).toBe(true);
    } finally {
      chain.close();
    }
  });

  it("TLS: a peer without the ceiling's certificate is refused and writes nothing", async () => {
    const target = join(work, "stranger-target.bin");
    const chain = await startCeilingChain([target], { tls: ceilingTls });
    try {
      const outcome = await new Promise<string>((resolve) => {
        const socket = tls.connect({
          host: "127.0.0.1",
          port: chain.port,
          ca: readFileSync(ceilingTls.ca),
          servername: "",
        });
        socket.on("error", (err) => resolve(`error: ${err.message}`));
        // TLS 1.3: the client's side of the handshake completes before the server checks for its certificate.
        socket.on("secureConnect", () => socket.end("hello"));
        socket.on("close", () => resolve("closed without an error"));
      });
      expect(outcome).toMatch(/^error: .*certificate required/);
      expect(existsSync(target)).toBe(false);
    } finally {
      chain.close();
    }
  });

  it("a transfer of a source that cannot be read fails instead of waiting for the chain", async () => {
    const chain = await startCeilingChain([null]);
    try {
      await expect(chain.transfer(join(work, "no-such-source.bin"))).rejects.toThrow(/ENOENT/);
    } finally {
      chain.close();
    }
  });

  it("nodeCeilingMs times the fastest round and removes the files it wrote", async () => {
    const source = sourceFile("timed.bin", 1024 * 1024);
    const files = [join(work, "timed-1.bin"), null];
    const ms = await nodeCeilingMs(source.path, files, { rounds: 2 });
    expect(Number.isFinite(ms) && ms > 0).toBe(true);
    expect(existsSync(files[0]!)).toBe(false);
  });
});
