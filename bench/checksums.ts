/**
 * `npm run bench -- checksums`: computing the CRC32C of every 512-byte chunk of a writer's packets (what a client does
 * to every byte it puts), by Harvest's native routine (native/checksums.c, one call per packet) against the way before
 * it, one @node-rs/crc32 call per chunk, in the same process on the same data. Beside them: the routine's portable
 * table walk (what a CPU without a CRC32 instruction runs), one @node-rs/crc32 call over each whole packet (the
 * instruction's rate when calls cost nothing, no chunk CRCs), and the check of a packet in 64 KiB pieces against its
 * chunk CRCs (what the pipeline's last datanode and a reader run), by the routine and by the fold it replaced. Every
 * way's CRCs must equal the per-chunk ones. The best of `--rounds` counts for each. By default the packets cycle
 * through 64 MiB, more than the CPU's caches: the memory's rate bounds every way. `--distinct-mib 1` keeps the packet
 * in the cache, as a packet just read from a socket is.
 */
import { randomBytes } from "node:crypto";
import { crc32c } from "@node-rs/crc32";
import {
  CHUNK_BYTES,
  checksumMode,
  checksumsMatch,
  chunkChecksumsBy,
  foldedChecksumsMatch,
} from "../common/checksum.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec } from "./flags.js";
import { fmt, ratio, table } from "./report.js";

const FLAGS = {
  "size-mib": { kind: "int", default: 1024, min: 1, help: "MiB checksummed by each way per round" },
  "packet-kib": { kind: "int", default: 1024, min: 1, help: "packet size in KiB (the client sends 1 MiB packets)" },
  rounds: { kind: "int", default: 3, min: 1, help: "rounds; the fastest of each way counts" },
  "distinct-mib": {
    kind: "int",
    default: 64,
    min: 1,
    help: "MiB of distinct random packets cycled through (64: more than the CPU's caches; 1: a packet in cache, as one just read from a socket)",
  },
} as const satisfies Record<string, FlagSpec>;

const MiB = 1024 * 1024;

type Way = "per-chunk" | "native" | "native-table" | "one call per packet" | "check, native" | "check, fold";

/** Bytes of each piece a check gets a packet in (a plaintext socket read's 64 KiB). */
const PIECE_BYTES = 64 * 1024;

export const checksumsBench: BenchDefinition = {
  name: "checksums",
  summary: "chunk CRC32Cs of a writer's packets: the native routine (one call per packet) vs one call per chunk",
  flags: FLAGS,
  async run(argv, progress): Promise<BenchReport> {
    const f = parseFlags(argv, FLAGS);
    const packetBytes = f["packet-kib"] * 1024;
    const packets = Array.from({ length: Math.max(1, Math.floor((f["distinct-mib"] * MiB) / packetBytes)) }, () =>
      randomBytes(packetBytes),
    );
    const count = Math.max(1, Math.round((f["size-mib"] * MiB) / packetBytes));
    const bytes = count * packetBytes;
    const mode = checksumMode();
    const expected = packets.map((p) => chunkChecksumsBy("per-chunk", p)!);
    const pieced = packets.map((p) => {
      const out: Buffer[] = [];
      for (let at = 0; at < p.length; at += PIECE_BYTES) out.push(p.subarray(at, at + PIECE_BYTES));
      return out;
    });

    const ways: Way[] = ["per-chunk", "one call per packet", "check, fold"];
    if (mode !== "per-chunk") ways.splice(1, 0, "native", "native-table");
    if (mode !== "per-chunk") ways.push("check, native");
    const run = (way: Way): number => {
      const start = performance.now();
      for (let i = 0; i < count; i++) {
        const p = packets[i % packets.length]!;
        switch (way) {
          case "per-chunk":
          case "native":
          case "native-table":
            chunkChecksumsBy(way, p);
            break;
          case "one call per packet":
            crc32c(p);
            break;
          case "check, native":
            if (!checksumsMatch(pieced[i % packets.length]!, expected[i % packets.length]!))
              throw new Error("a good packet failed its check");
            break;
          case "check, fold":
            if (!foldedChecksumsMatch(pieced[i % packets.length]!, expected[i % packets.length]!))
              throw new Error("a good packet failed its check");
            break;
        }
      }
      return performance.now() - start;
    };

    // The same CRCs from every way that computes them.
    for (const way of ["native", "native-table"] as const) {
      if (!ways.includes(way)) continue;
      packets.forEach((p, i) => {
        const got = chunkChecksumsBy(way, p)!;
        if (got.length !== expected[i]!.length || got.some((c, j) => c !== expected[i]![j]))
          throw new Error(`${way} chunk CRCs differ from the per-chunk ones`);
      });
    }

    const best = new Map<Way, number>();
    for (let round = 1; round <= f.rounds; round++) {
      progress(`round ${round} of ${f.rounds}`);
      for (const way of ways) {
        const ms = run(way);
        best.set(way, Math.min(best.get(way) ?? Infinity, ms));
      }
    }
    const perChunk = best.get("per-chunk")!;
    const gbps = (ms: number): number => bytes / 1e6 / ms;
    const rows = ways.map((way) => {
      const ms = best.get(way)!;
      return [
        way,
        fmt(ms / (bytes / (1024 * MiB)), 0),
        fmt(gbps(ms), 2),
        way === "check, native"
          ? ratio(best.get("check, fold")!, ms)
          : way === "one call per packet" || way === "check, fold"
            ? "-"
            : ratio(perChunk, ms),
      ];
    });
    const describe: Record<Way, string> = {
      "per-chunk": "one @node-rs/crc32 call per chunk (the way before the routine; its fallback)",
      native: "Harvest's routine, one call per packet (the CPU's CRC32 instruction, three chunks at a time)",
      "native-table": "the same routine's table walk (a CPU without the instruction)",
      "one call per packet": "one @node-rs/crc32 call over the whole packet: no chunk CRCs, the instruction's rate",
      "check, native": `a packet in ${PIECE_BYTES / 1024} KiB pieces against its chunk CRCs, one call into the routine (checksumsMatch)`,
      "check, fold":
        "the same check as without the routine: one @node-rs/crc32 call per piece, held against the fold of the chunk CRCs",
    };
    const lines = [
      `chunk checksums: ${fmt(bytes / MiB, 0)} MiB in ${fmt(packetBytes / 1024, 0)} KiB packets cycling through ${f["distinct-mib"]} MiB, ${CHUNK_BYTES}-byte chunks, best of ${f.rounds}; this process computes them by: ${mode}`,
      "",
      ...table(["way", "ms per GiB", "GB/s", "speed-up (a check's: vs the fold)"], rows),
      "",
      ...ways.map((w) => `  ${w}: ${describe[w]}`),
      ...(mode === "per-chunk"
        ? ["", "  the native routine is not built here (scripts/build-native.mjs): only the per-chunk way ran"]
        : []),
    ];
    return {
      lines,
      result: {
        bytes,
        distinctBytes: packets.length * packetBytes,
        packetBytes,
        mode,
        msPerGiB: Object.fromEntries(ways.map((w) => [w, best.get(w)! / (bytes / (1024 * MiB))])),
      },
    };
  },
};
