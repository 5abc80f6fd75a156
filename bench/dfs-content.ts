/**
 * The dfs bench's content check (bench/dfs.ts): its source file (a random pattern repeated) and the comparison of a
 * get's stream with that source or with a local file, cheap enough not to weigh on the get's figure.
 */
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readSync, writeSync } from "node:fs";

/** The byte check reads a source file this much at a time. */
const SAME_AS_WINDOW_BYTES = 4 * 1024 * 1024;

/** The bench's source pattern: 4 MiB and an odd 4,099 bytes. */
const PATTERN_BYTES = 4 * 1024 * 1024 + 4099;

/**
 * The bench's source file: a random pattern repeated to `length` bytes. The pattern's odd length keeps it out of step
 * with every 512-byte chunk, packet and block: two chunks of a file hold the same bytes only 512 x the pattern's length
 * apart (2.0 GiB for the bench's), so a get that yields a chunk, a packet or a block in the wrong place fails the
 * byte check, as it would against a file of random bytes throughout. The check compares with the pattern in memory
 * and never reads the file back: reading 1 GiB back cost the get's thread 0.3-0.4 s of its 1.5-2 s here, more when
 * the host had paged the file out (DEVELOPERS.md).
 */
export class RepeatingSource {
  constructor(
    readonly length: number,
    readonly pattern: Buffer = randomBytes(PATTERN_BYTES),
  ) {
    if (pattern.length === 0) throw new Error("a repeating source needs a pattern");
  }

  /** Writes the file's bytes to `path`. */
  writeTo(path: string): void {
    const fd = openSync(path, "w");
    try {
      for (let at = 0; at < this.length;) {
        const bytes = this.expectedAt(at);
        at += writeSync(fd, bytes, 0, bytes.length, at);
      }
    } finally {
      closeSync(fd);
    }
  }

  /** The file's bytes from `at` on, as far as the pattern runs on unbroken (none at the end). */
  expectedAt(at: number): Buffer {
    const from = at % this.pattern.length;
    return this.pattern.subarray(from, from + Math.max(0, Math.min(this.pattern.length - from, this.length - at)));
  }
}

/** The bytes of the local file at `path`, read a window at a time; `close` when done. */
class FileWindows {
  private readonly fd: number;
  private readonly window = Buffer.allocUnsafeSlow(SAME_AS_WINDOW_BYTES);
  /** The file's bytes [windowAt, windowAt + windowLength) are in `window`. */
  private windowAt = 0;
  private windowLength = 0;

  constructor(path: string) {
    this.fd = openSync(path, "r");
  }

  /** The file's bytes from `at` on that are in the window, read in when `at` is past it (none at the end). */
  expectedAt(at: number): Buffer {
    if (at < this.windowAt || at >= this.windowAt + this.windowLength) {
      this.windowAt = at;
      this.windowLength = readSync(this.fd, this.window, 0, this.window.length, at);
    }
    return this.window.subarray(at - this.windowAt, this.windowLength);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * True when `stream` yields exactly the bytes of `source`, a local file or the bench's repeating source: each piece
 * compared with the same range of it (a memcmp, far cheaper than hashing, so the get's figure is the file system's,
 * not the checker's). A file is read 4 MiB at a time into one buffer, not once per piece: a TLS get yields 16 KiB
 * pieces, 65,536 a GiB.
 */
export async function sameAs(stream: NodeJS.ReadableStream, source: string | RepeatingSource): Promise<boolean> {
  const expected = typeof source === "string" ? new FileWindows(source) : source;
  let at = 0;
  let same = true;
  const check = (piece: Buffer): void => {
    for (let done = 0; same && done < piece.length;) {
      const bytes = expected.expectedAt(at);
      // No bytes left: the stream is longer than the source.
      const n = Math.min(bytes.length, piece.length - done);
      same = n > 0 && bytes.subarray(0, n).equals(piece.subarray(done, done + n));
      done += n;
      at += n;
    }
  };
  try {
    // Flowing, as `harvest fs get` reads (a pipeline into a file): piece by piece as they come. An async iterator
    // reads a paused stream, whose read() joins every piece buffered into one new buffer, a copy of every byte.
    await new Promise<void>((resolve, reject) => {
      // A failed read of the source file is the check's error, not an exception thrown into the stream's emit.
      const onData = (piece: Buffer): void => {
        try {
          check(piece);
        } catch (err) {
          stream.off("data", onData);
          stream.pause();
          reject(err as Error);
        }
      };
      stream.on("data", onData);
      stream.once("end", resolve);
      stream.once("error", reject);
    });
    return same && expected.expectedAt(at).length === 0;
  } finally {
    if (expected instanceof FileWindows) expected.close();
  }
}
