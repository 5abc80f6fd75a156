/**
 * The terasort example's pure steps (examples/tasks/terasort-lib.ts): the record generator, the total-order
 * partitioner, the map's sort and the reduce's merge, run together on a few thousand records without a cluster, and
 * the check the sort bench runs on an output.
 */
import { describe, expect, it } from "vitest";
import {
  compareKeys,
  generateRecords,
  KEY_BYTES,
  LINE_BYTES,
  lineRecordNumber,
  mergeRuns,
  partitionBounds,
  partitionOf,
  RECORD_BYTES,
  recordCount,
  RunCollector,
  recordNumberOf,
  SortedOutputCheck,
  sortLines,
  sortRecords,
  splitRecords,
  wholeRecordSegments,
} from "../../examples/tasks/terasort-lib.js";

/** The records of `buf` in key order, equal keys in input order: the reference every sort must match. */
function referenceSort(buf: Buffer): Buffer {
  const n = recordCount(buf);
  const order = Array.from({ length: n }, (_, i) => i);
  order.sort((a, b) => compareKeys(buf, a * RECORD_BYTES, buf, b * RECORD_BYTES) || a - b);
  return Buffer.concat(order.map((i) => buf.subarray(i * RECORD_BYTES, (i + 1) * RECORD_BYTES)));
}

/** Asserts `actual` holds `expected`'s bytes, naming the first record that differs (toEqual on Buffers is slow). */
function expectSameRecords(actual: Buffer, expected: Buffer): void {
  expect(actual.length).toBe(expected.length);
  let first = -1;
  for (let i = 0; i < actual.length && first < 0; i += RECORD_BYTES)
    if (actual.compare(expected, i, i + RECORD_BYTES, i, i + RECORD_BYTES) !== 0) first = i / RECORD_BYTES;
  expect(first, "the first record that differs").toBe(-1);
}

/**
 * Runs the job's logic in memory as the tasks do: each map sorts its split in place and cuts it by reducer; each
 * reducer merges its runs through a ring of reused buffers, copying each chunk out before it asks for more.
 */
function sortLikeTheJob(data: Buffer, maps: number, reduces: number): Buffer[] {
  const starts = splitRecords(recordCount(data), maps);
  const parts = Array.from({ length: maps }, (_, m) => {
    const split = Buffer.from(data.subarray(starts[m]! * RECORD_BYTES, starts[m + 1]! * RECORD_BYTES));
    const sorted = sortRecords(split, split);
    expect(sorted).toBe(split);
    const bounds = partitionBounds(sorted, reduces);
    return Array.from({ length: reduces }, (_, r) =>
      sorted.subarray(bounds[r]! * RECORD_BYTES, bounds[r + 1]! * RECORD_BYTES),
    );
  });
  return Array.from({ length: reduces }, (_, r) => {
    const chunks: Buffer[] = [];
    for (const chunk of mergeRuns(
      parts.map((p) => p[r]!),
      { chunkRecords: 97, reuse: 3 },
    ))
      chunks.push(Buffer.from(chunk));
    return Buffer.concat(chunks);
  });
}

/** A record with the given key bytes (the rest of the key zero) and a value naming `n`. */
function recordWithKey(keyStart: number[], n: number): Buffer {
  const rec = generateRecords(0, n, 1);
  rec.fill(0, 0, KEY_BYTES);
  Buffer.from(keyStart).copy(rec, 0);
  return rec;
}

describe("the terasort records", () => {
  it("generates the same records for a seed whatever range is asked for, and other records for another seed", () => {
    const whole = generateRecords(7, 0, 3000);
    expectSameRecords(Buffer.concat([generateRecords(7, 0, 1234), generateRecords(7, 1234, 1766)]), whole);
    expectSameRecords(generateRecords(7, 0, 3000), whole);
    const other = generateRecords(8, 0, 3000);
    let sameKeys = 0;
    for (let i = 0; i < 3000; i++) if (compareKeys(whole, i * RECORD_BYTES, other, i * RECORD_BYTES) === 0) sameKeys++;
    expect(sameKeys).toBe(0);
  });

  it("carries each record's number in a printable value without a newline", () => {
    const data = generateRecords(3, 5_000_000_000, 200);
    const numbers = Array.from({ length: 200 }, (_, i) => recordNumberOf(data, i * RECORD_BYTES));
    expect(numbers).toEqual(Array.from({ length: 200 }, (_, i) => 5_000_000_000 + i));
    const values = Array.from({ length: 200 }, (_, i) =>
      data.toString("latin1", i * RECORD_BYTES + KEY_BYTES, (i + 1) * RECORD_BYTES),
    );
    for (const v of values) expect(v).toMatch(/^[0-9A-F]{32}[A-Z]{58}$/);
  });

  it("spreads keys evenly over the reducers' equal key ranges", () => {
    const data = generateRecords(11, 0, 8000);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 8000; i++) counts[partitionOf(data, i * RECORD_BYTES, 4)]! += 1;
    for (const c of counts) expect(Math.abs(c - 2000)).toBeLessThan(200);
  });
});

describe("the partitioner", () => {
  it("gives reducer r the r-th of equal ranges of the key's first four bytes", () => {
    const at = (key: number[], reduces: number): number => partitionOf(recordWithKey(key, 0), 0, reduces);
    expect(at([0, 0, 0, 0], 4)).toBe(0);
    expect(at([0x3f, 0xff, 0xff, 0xff], 4)).toBe(0);
    expect(at([0x40, 0, 0, 0], 4)).toBe(1);
    expect(at([0xbf, 0xff, 0xff, 0xff], 4)).toBe(2);
    expect(at([0xff, 0xff, 0xff, 0xff], 4)).toBe(3);
    expect(at([0xff, 0xff, 0xff, 0xff], 3)).toBe(2);
    expect(at([0x55, 0x55, 0x55, 0x55], 3)).toBe(0);
    expect(at([0x55, 0x55, 0x55, 0x56], 3)).toBe(1);
    expect(at([0xff, 0xff, 0xff, 0xff], 1)).toBe(0);
  });

  it("cuts a sorted run where the reducers change, leaving empty ranges empty", () => {
    const sorted = Buffer.concat([recordWithKey([0x10], 0), recordWithKey([0x20], 1), recordWithKey([0xf0], 2)]);
    expect(partitionBounds(sorted, 4)).toEqual([0, 2, 2, 2, 3]);
    expect(partitionBounds(sorted, 1)).toEqual([0, 3]);
  });
});

describe("the map's sort", () => {
  it("sorts records by key, equal keys in input order", () => {
    const data = generateRecords(5, 0, 5000);
    expectSameRecords(sortRecords(data), referenceSort(data));
  });

  it("orders keys that tie on their first bytes by the rest of the key", () => {
    // Keys that share 4, 6 and 9 bytes, and whole keys that are equal, mixed with random ones.
    const tied = [
      recordWithKey([1, 2, 3, 4, 9], 0),
      recordWithKey([1, 2, 3, 4, 5], 1),
      recordWithKey([1, 2, 3, 4, 5, 6, 0, 0, 0, 2], 2),
      recordWithKey([1, 2, 3, 4, 5, 6, 0, 0, 0, 1], 3),
      recordWithKey([1, 2, 3, 4, 5, 6, 0, 0, 0, 1], 4),
      recordWithKey([7, 7], 5),
      recordWithKey([7, 7], 6),
    ];
    const data = Buffer.concat([generateRecords(5, 10, 3000), ...tied, generateRecords(5, 4000, 3000)]);
    expectSameRecords(sortRecords(data), referenceSort(data));
  });

  it("sorts every record alike when all keys are equal, and an empty or unaligned input or target", () => {
    const same = Buffer.concat(Array.from({ length: 300 }, (_, i) => recordWithKey([0xab, 0xcd], i)));
    expectSameRecords(sortRecords(same), same);
    expect(sortRecords(Buffer.alloc(0))).toHaveLength(0);
    const data = generateRecords(9, 0, 2000);
    const odd = Buffer.alloc(data.length + 1);
    data.copy(odd, 1);
    expectSameRecords(sortRecords(odd.subarray(1)), referenceSort(data));
    const target = Buffer.alloc(data.length + 2).subarray(2);
    expect(sortRecords(data, target)).toBe(target);
    expectSameRecords(target, referenceSort(data));
  });
});

describe("a sort job's logic, maps and reduces in memory", () => {
  it("leaves the reducers' outputs, in reducer order, the sorted input", () => {
    const data = generateRecords(21, 0, 6000);
    const outputs = sortLikeTheJob(data, 3, 4);
    expectSameRecords(Buffer.concat(outputs), referenceSort(data));
    // Each reducer got only its own key range.
    outputs.forEach((out, r) => {
      for (let i = 0; i < recordCount(out); i++) expect(partitionOf(out, i * RECORD_BYTES, 4)).toBe(r);
    });
    const check = new SortedOutputCheck(21, 6000);
    for (const out of outputs) check.push(out);
    expect(check.finish()).toMatchObject({ ok: true, records: 6000 });
  });

  it("merges runs received as pieces cut anywhere, as it merges them whole", () => {
    const runs = [0, 1, 2].map((i) => sortRecords(generateRecords(12, i * 700, 700)));
    // Cuts inside records, on record boundaries, at odd offsets (unaligned pieces), and empty pieces.
    const cuts = [[0, 1, 37, 100, 150, 151, 4000, 70_000], [0, 99, 99, 5003, 5004], [0]];
    const pieces = runs.map((run, i) => {
      const at = [...cuts[i]!, run.length];
      return at.slice(0, -1).map((from, j) => {
        const copy = Buffer.alloc(at[j + 1]! - from + 1).subarray(1); // off a 4-byte boundary
        run.copy(copy, 0, from, at[j + 1]);
        return copy;
      });
    });
    const expected = Buffer.concat([...mergeRuns(runs)]);
    expectSameRecords(Buffer.concat([...mergeRuns(pieces, { chunkRecords: 333 })]), expected);
    expectSameRecords(Buffer.concat(wholeRecordSegments(pieces[0]!)), runs[0]!);
    expect(() => wholeRecordSegments([runs[0]!.subarray(0, 150)])).toThrow(/not a whole number/);
  });

  it("collects a run received in pieces cut anywhere into aligned slabs of whole records, and merges them", () => {
    const runs = [0, 1].map((i) => sortRecords(generateRecords(13, i * 3000, 3000)));
    const collected = runs.map((run) => {
      const c = new RunCollector();
      // Pieces of odd lengths at odd offsets, an empty one, and one larger than any slab.
      for (const [from, to] of [
        [0, 1],
        [1, 1],
        [1, 4097],
        [4097, 70_001],
        [70_001, run.length],
      ] as const) {
        const piece = Buffer.alloc(to - from + 3).subarray(3);
        run.copy(piece, 0, from, to);
        c.push(piece);
      }
      expect(c.bytes).toBe(run.length);
      return c.finish();
    });
    for (const [i, slabs] of collected.entries()) {
      expect(slabs.every((b) => b.byteOffset % 4 === 0 && b.length % RECORD_BYTES === 0)).toBe(true);
      expectSameRecords(Buffer.concat(slabs), runs[i]!);
    }
    const expected = Buffer.concat([...mergeRuns(runs)]);
    // Released as merged: the runs' arrays are emptied, and the output is the same.
    expectSameRecords(Buffer.concat([...mergeRuns(collected, { release: true })]), expected);
    expect(collected.map((slabs) => slabs.length)).toEqual([0, 0]);
    const short = new RunCollector();
    short.push(runs[0]!.subarray(0, 150));
    expect(() => short.finish()).toThrow(/not a whole number/);
  });

  it("merges runs of any length, empty ones included, in chunks of the size asked", () => {
    const runs = [generateRecords(2, 0, 500), Buffer.alloc(0), generateRecords(2, 500, 1), generateRecords(2, 501, 77)];
    const sortedRuns = runs.map((r) => sortRecords(r));
    const chunks = [...mergeRuns(sortedRuns, { chunkRecords: 100 })];
    expect(chunks.map((c) => recordCount(c))).toEqual([100, 100, 100, 100, 100, 78]);
    expectSameRecords(Buffer.concat(chunks), referenceSort(Buffer.concat(runs)));
    expect([...mergeRuns([])]).toEqual([]);
  });
});

describe("the output check", () => {
  const data = referenceSort(generateRecords(4, 0, 1000));

  it("passes a sorted output however its bytes are cut, and records the order", () => {
    const check = new SortedOutputCheck(4, 1000, new Uint32Array(1000));
    for (let at = 0; at < data.length; at += 333) check.push(data.subarray(at, at + 333));
    expect(check.finish()).toEqual({
      records: 1000,
      outOfOrder: 0,
      corrupt: 0,
      duplicates: 0,
      missing: 0,
      trailingBytes: 0,
      ok: true,
    });
  });

  it("finds records out of order, changed, duplicated or missing", () => {
    const swapped = Buffer.from(data);
    data.copy(swapped, 0, RECORD_BYTES, 2 * RECORD_BYTES);
    data.copy(swapped, RECORD_BYTES, 0, RECORD_BYTES);
    const changed = Buffer.from(data);
    changed[500 * RECORD_BYTES + 50]! ^= 1;
    const duplicated = Buffer.concat([data.subarray(0, 2 * RECORD_BYTES), data.subarray(RECORD_BYTES)]);
    const verdict = (bytes: Buffer) => {
      const check = new SortedOutputCheck(4, 1000);
      check.push(bytes);
      return check.finish();
    };
    expect(verdict(swapped)).toMatchObject({ ok: false, outOfOrder: 1 });
    expect(verdict(changed)).toMatchObject({ ok: false, corrupt: 1, missing: 1 });
    expect(verdict(duplicated)).toMatchObject({ ok: false, duplicates: 1 });
    expect(verdict(data.subarray(RECORD_BYTES))).toMatchObject({ ok: false, missing: 1 });
    expect(verdict(data.subarray(0, data.length - 1))).toMatchObject({ ok: false, missing: 1, trailingBytes: 99 });
  });
});

describe("GNU sort's lines", () => {
  it("sort bytewise in the records' key order and carry the record numbers", () => {
    const data = generateRecords(6, 0, 2000);
    const lines = sortLines(data);
    expect(lines).toHaveLength(2000 * LINE_BYTES);
    const order = Array.from({ length: 2000 }, (_, i) => i);
    order.sort((a, b) =>
      Buffer.compare(
        lines.subarray(a * LINE_BYTES, (a + 1) * LINE_BYTES),
        lines.subarray(b * LINE_BYTES, (b + 1) * LINE_BYTES),
      ),
    );
    const sorted = referenceSort(data);
    expect(order.map((line) => lineRecordNumber(lines, line * LINE_BYTES))).toEqual(
      order.map((_, i) => recordNumberOf(sorted, i * RECORD_BYTES)),
    );
    // One newline a line: nothing in a record's line is taken for the end of it.
    expect(lines.filter((b) => b === 0x0a)).toHaveLength(2000);
  });
});
