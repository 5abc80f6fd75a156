/**
 * Archive resources unpacked by the node manager: tar, tar.gz and zip unpack with the caller's modes, executables and
 * links inside the archive kept; hostile archives (paths out, links out, devices, bombs, lies) are refused with
 * ARCHIVE_REFUSED naming the entry, and nothing lands outside the target directory.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
} from "node:fs";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { unpackArchive } from "../../nodemanager/archive-unpack.js";
import type { ArchiveLimits } from "../../nodemanager/archive-unpack.js";
import { tarOf, zipOf } from "../archive-fixtures.js";
import type { TarEntry } from "../archive-fixtures.js";

const MODES = { dirMode: 0o700, fileMode: 0o600, execMode: 0o700 };
const LIMITS: ArchiveLimits = { maxBytes: 1024 * 1024, maxEntries: 100 };

let dir: string;
/** Where archives unpack: `dir/cache/out`; `dir/cache` must hold nothing else afterwards. */
let into: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "harvest-unpack-"));
  into = join(dir, "cache", "out");
  mkdirSync(into, { recursive: true });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function unpack(bytes: Buffer, limits = LIMITS): Promise<Awaited<ReturnType<typeof unpackArchive>>> {
  rmSync(into, { recursive: true, force: true });
  mkdirSync(into);
  const file = join(dir, "archive");
  writeFileSync(file, bytes);
  return unpackArchive(file, into, limits, MODES);
}

/**
 * Unpacks and expects a refusal for `entry` (undefined: the archive as a whole; null: any) with `reason`, with nothing
 * written beside the target directory.
 */
async function refused(bytes: Buffer, reason: string, entry?: string | null, limits = LIMITS): Promise<void> {
  let error: unknown;
  try {
    await unpack(bytes, limits);
  } catch (err) {
    error = err;
  }
  expect(isHarvestError(error, "ARCHIVE_REFUSED"), String(error)).toBe(true);
  const details = (error as { details: Record<string, string> }).details;
  if (entry === null) expect(details.reason).toBe(reason);
  else expect(details).toEqual({ reason, ...(entry !== undefined ? { entry } : {}) });
  expect(readdirSync(join(dir, "cache"))).toEqual(["out"]);
  expect(readdirSync(dir).sort()).toEqual(["archive", "cache"]);
}

const tree = (): string[] => {
  const out: string[] = [];
  const walk = (d: string, rel: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(p);
      if (st.isSymbolicLink()) out.push(`${r} -> ${readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${r}/ ${(st.mode & 0o777).toString(8)}`);
        walk(p, r);
      } else out.push(`${r} ${(st.mode & 0o777).toString(8)} ${readFileSync(p, "utf8")}`);
    }
  };
  walk(into, "");
  return out;
};

const GOOD_TAR: TarEntry[] = [
  { name: "./lib/", type: "5" },
  { name: "./lib/words.txt", data: "alpha beta" },
  { name: "./bin/run.sh", data: "#!/bin/sh\n", mode: 0o755 },
  { name: "./lib/current", type: "2", linkname: "words.txt" },
  { name: "./lib/again.txt", type: "1", linkname: "./lib/words.txt" },
];

describe("unpacking an archive resource", () => {
  it("unpacks a tar with the cache's modes, its executables executable and its links inside kept", async () => {
    const r = await unpack(tarOf(GOOD_TAR));
    expect(tree()).toEqual([
      "bin/ 700",
      "bin/run.sh 700 #!/bin/sh\n",
      "lib/ 700",
      "lib/again.txt 600 alpha beta",
      "lib/current -> words.txt",
      "lib/words.txt 600 alpha beta",
    ]);
    expect(readFileSync(join(into, "lib", "current"), "utf8")).toBe("alpha beta");
    expect(statSync(join(into, "lib", "again.txt")).ino).toBe(statSync(join(into, "lib", "words.txt")).ino);
    expect(r).toEqual({ files: 3, bytes: 20 });
  });

  it("unpacks a gzip-compressed tar and a zip the same way, told apart by their contents", async () => {
    await unpack(gzipSync(tarOf(GOOD_TAR.slice(0, 3))));
    const fromTar = tree();
    rmSync(into, { recursive: true });
    mkdirSync(into);
    await unpack(
      zipOf([
        { name: "lib/", mode: 0o40755 },
        { name: "lib/words.txt", data: "alpha beta", deflate: true },
        { name: "bin/run.sh", data: "#!/bin/sh\n", mode: 0o100755 },
      ]),
    );
    expect(tree()).toEqual(fromTar);
    expect(fromTar).toContain("lib/words.txt 600 alpha beta");
  });

  it("unpacks a zip's symbolic link that stays inside", async () => {
    await unpack(
      zipOf([
        { name: "a/b.txt", data: "b" },
        { name: "a/up", data: "../a", mode: 0o120777 },
        { name: "top", data: "a/up/b.txt", mode: 0o120777 },
      ]),
    );
    expect(readFileSync(join(into, "top"), "utf8")).toBe("b");
  });

  describe("refuses, naming the entry", () => {
    it("a path with '..' or an absolute path, in a tar and in a zip", async () => {
      await refused(
        tarOf([
          { name: "ok.txt", data: "x" },
          { name: "../escape.txt", data: "x" },
        ]),
        "unsafe-path",
        "../escape.txt",
      );
      await refused(tarOf([{ name: "a/../../escape.txt", data: "x" }]), "unsafe-path", "a/../../escape.txt");
      await refused(tarOf([{ name: "/tmp/escape.txt", data: "x" }]), "unsafe-path", "/tmp/escape.txt");
      await refused(zipOf([{ name: "../escape.txt", data: "x" }]), "unsafe-path", "../escape.txt");
      await refused(zipOf([{ name: "/escape.txt", data: "x" }]), "unsafe-path", "/escape.txt");
      await refused(zipOf([{ name: "..\\escape.txt", data: "x" }]), "unsafe-path", "..\\escape.txt");
    });

    it("a symbolic link that leads outside, directly, by '..' or through another link", async () => {
      await refused(tarOf([{ name: "etc", type: "2", linkname: "/etc" }]), "link-outside", "etc");
      await refused(tarOf([{ name: "a/up", type: "2", linkname: "../.." }]), "link-outside", "a/up");
      await refused(
        tarOf([
          { name: "here", type: "2", linkname: "." },
          { name: "a/out", type: "2", linkname: "../here/.." },
        ]),
        "link-outside",
        "a/out",
      );
      await refused(zipOf([{ name: "passwd", data: "/etc/passwd", mode: 0o120777 }]), "link-outside", "passwd");
      await refused(
        tarOf([
          { name: "x", type: "2", linkname: "y" },
          { name: "y", type: "2", linkname: "x" },
        ]),
        "link-outside",
        "x",
      );
    });

    it("a file written through a symbolic link, whatever the link points at", async () => {
      await refused(
        tarOf([
          { name: "cache", type: "2", linkname: ".." },
          { name: "cache/planted.txt", data: "x" },
        ]),
        "unsafe-path",
        "cache/planted.txt",
      );
      await refused(
        tarOf([
          { name: "sub/", type: "5" },
          { name: "inside", type: "2", linkname: "sub" },
          { name: "inside/f.txt", data: "x" },
        ]),
        "unsafe-path",
        "inside/f.txt",
      );
    });

    it("a hard link to anything but a file the archive held before it", async () => {
      await refused(tarOf([{ name: "pw", type: "1", linkname: "/etc/passwd" }]), "link-outside", "pw");
      await refused(tarOf([{ name: "pw", type: "1", linkname: "../../../etc/passwd" }]), "link-outside", "pw");
      await refused(
        tarOf([
          { name: "d/", type: "5" },
          { name: "pw", type: "1", linkname: "d" },
        ]),
        "link-outside",
        "pw",
      );
    });

    it("devices and FIFOs", async () => {
      await refused(tarOf([{ name: "null", type: "3" }]), "special-file", "null");
      await refused(tarOf([{ name: "pipe", type: "6" }]), "special-file", "pipe");
      await refused(zipOf([{ name: "tty", mode: 0o20666 }]), "special-file", "tty");
    });

    it("two entries of one path, or a file below a file", async () => {
      await refused(
        tarOf([
          { name: "a", data: "1" },
          { name: "a", data: "2" },
        ]),
        "duplicate",
        "a",
      );
      await refused(
        tarOf([
          { name: "a", data: "1" },
          { name: "a/b", data: "2" },
        ]),
        "duplicate",
        "a/b",
      );
    });

    it("archives that unpack to more than the limit (bombs), or hold too many entries", async () => {
      const zeros = Buffer.alloc(4 * 1024 * 1024);
      // 4 MiB of zeros is a few KiB compressed.
      const bomb = gzipSync(tarOf([{ name: "zeros", data: zeros }]));
      expect(bomb.length).toBeLessThan(64 * 1024);
      await refused(bomb, "too-large", null);
      await refused(zipOf([{ name: "zeros", data: zeros, deflate: true }]), "too-large", "zeros");
      await refused(
        tarOf([
          { name: "a", data: "1" },
          { name: "b", data: "2" },
          { name: "c", data: "3" },
        ]),
        "too-many-entries",
        "c",
        { maxBytes: LIMITS.maxBytes, maxEntries: 2 },
      );
      await refused(
        zipOf([
          { name: "a", data: "1" },
          { name: "b", data: "2" },
          { name: "c", data: "3" },
        ]),
        "too-many-entries",
        undefined,
        { maxBytes: LIMITS.maxBytes, maxEntries: 2 },
      );
    });

    it("a zip entry that holds more than it declares", async () => {
      await refused(
        zipOf([{ name: "liar", data: Buffer.alloc(200_000), deflate: true, declaredSize: 10 }]),
        "corrupt",
        "liar",
      );
    });

    it("what is not a tar, tar.gz or zip, and a truncated tar", async () => {
      await refused(Buffer.from("just some text, not an archive\n"), "unsupported");
      await refused(gzipSync(Buffer.from("gzip of plain text, not of a tar ".repeat(40))), "unsupported");
      await refused(tarOf([{ name: "big", data: Buffer.alloc(4096, 1) }]).subarray(0, 2048), "corrupt", null);
    });
  });

  it("writes nothing outside even when the target directory's parent holds a file of an escaping entry's name", async () => {
    writeFileSync(join(dir, "cache", "victim"), "original");
    await expect(unpack(tarOf([{ name: "../victim", data: "overwritten" }]))).rejects.toMatchObject({
      code: "ARCHIVE_REFUSED",
    });
    expect(readFileSync(join(dir, "cache", "victim"), "utf8")).toBe("original");
    expect(existsSync(join(into, "victim"))).toBe(false);
  });
});
