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

  const file = (name: string, data: string): TarEntry => ({ name, data });
  const sym = (name: string, linkname: string): TarEntry => ({ name, type: "2", linkname });
  const hard = (name: string, linkname: string): TarEntry => ({ name, type: "1", linkname });
  const folder = (name: string): TarEntry => ({ name, type: "5" });
  // [what, archive, reason, entry to blame (undefined: the archive as a whole; null: any), limits]
  const few = { maxBytes: LIMITS.maxBytes, maxEntries: 2 };
  const zeros = Buffer.alloc(4 * 1024 * 1024); // A few KiB compressed.
  const three = [file("a", "1"), file("b", "2"), file("c", "3")];
  const cases: [string, Buffer, string, string | null | undefined, ArchiveLimits?][] = [
    ["a tar path with '..'", tarOf([file("ok", "x"), file("../up", "x")]), "unsafe-path", "../up"],
    ["a tar path with '..' inside", tarOf([file("a/../../up", "x")]), "unsafe-path", "a/../../up"],
    ["an absolute tar path", tarOf([file("/tmp/abs", "x")]), "unsafe-path", "/tmp/abs"],
    ["a zip path with '..'", zipOf([file("../up", "x")]), "unsafe-path", "../up"],
    ["an absolute zip path", zipOf([file("/abs", "x")]), "unsafe-path", "/abs"],
    ["a zip path with a Windows separator", zipOf([file("..\\up", "x")]), "unsafe-path", "..\\up"],
    ["an absolute symbolic link", tarOf([sym("etc", "/etc")]), "link-outside", "etc"],
    ["a symbolic link up and out", tarOf([sym("a/up", "../..")]), "link-outside", "a/up"],
    [
      "a symbolic link out through another link",
      tarOf([sym("here", "."), sym("a/out", "../here/..")]),
      "link-outside",
      "a/out",
    ],
    ["a zip's symbolic link out", zipOf([{ name: "pw", data: "/etc/passwd", mode: 0o120777 }]), "link-outside", "pw"],
    ["a loop of symbolic links", tarOf([sym("x", "y"), sym("y", "x")]), "link-outside", "x"],
    [
      "a file written through a symbolic link out",
      tarOf([sym("cache", ".."), file("cache/planted", "x")]),
      "unsafe-path",
      "cache/planted",
    ],
    [
      "a file written through a symbolic link inside",
      tarOf([folder("sub/"), sym("in", "sub"), file("in/f", "x")]),
      "unsafe-path",
      "in/f",
    ],
    ["an absolute hard link", tarOf([hard("pw", "/etc/passwd")]), "link-outside", "pw"],
    ["a hard link up and out", tarOf([hard("pw", "../../etc/pw")]), "link-outside", "pw"],
    ["a hard link to a directory", tarOf([folder("d/"), hard("pw", "d")]), "link-outside", "pw"],
    ["a character device", tarOf([{ name: "null", type: "3" }]), "special-file", "null"],
    ["a FIFO", tarOf([{ name: "pipe", type: "6" }]), "special-file", "pipe"],
    ["a zip's device", zipOf([{ name: "tty", mode: 0o20666 }]), "special-file", "tty"],
    ["two entries of one path", tarOf([file("a", "1"), file("a", "2")]), "duplicate", "a"],
    ["a file below a file", tarOf([file("a", "1"), file("a/b", "2")]), "duplicate", "a/b"],
    ["a tar.gz bomb", gzipSync(tarOf([{ name: "zeros", data: zeros }])), "too-large", null],
    ["a zip bomb", zipOf([{ name: "zeros", data: zeros, deflate: true }]), "too-large", "zeros"],
    ["a tar of too many entries", tarOf(three), "too-many-entries", "c", few],
    ["a zip of too many entries", zipOf(three), "too-many-entries", undefined, few],
    [
      "a zip entry that holds more than it declares",
      zipOf([{ name: "liar", data: Buffer.alloc(200_000), deflate: true, declaredSize: 10 }]),
      "corrupt",
      "liar",
    ],
    ["plain text", Buffer.from("just some text, not an archive\n"), "unsupported", undefined],
    ["gzip of plain text", gzipSync(Buffer.from("not a tar ".repeat(100))), "unsupported", undefined],
    ["a truncated tar", tarOf([{ name: "big", data: Buffer.alloc(4096, 1) }]).subarray(0, 2048), "corrupt", null],
  ];
  it.each(cases)(
    "refuses %s, naming the entry and writing nothing outside",
    async (_what, bytes, reason, entry, limits) => {
      await refused(bytes, reason, entry, limits);
    },
  );

  it("tests its bombs with archives of a few KiB that unpack to 4 MiB", () => {
    expect(gzipSync(tarOf([{ name: "zeros", data: zeros }])).length).toBeLessThan(64 * 1024);
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
