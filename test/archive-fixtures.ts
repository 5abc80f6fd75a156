/**
 * Archives built byte by byte for tests: a ustar tar and a zip of stored or deflated entries, able to hold what no
 * well-behaved tool writes (`..` paths, absolute paths, links out, devices, sizes that lie), to test that the node
 * manager refuses them.
 */
import { crc32, deflateRawSync } from "node:zlib";

/** One tar entry: type "0" file, "1" hard link, "2" symbolic link, "3" character device, "5" directory, "6" FIFO. */
export interface TarEntry {
  name: string;
  type?: "0" | "1" | "2" | "3" | "5" | "6";
  data?: string | Buffer;
  mode?: number;
  linkname?: string;
}

/** A ustar archive of `entries`, ended by its two zero blocks. */
export function tarOf(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = typeof e.data === "string" ? Buffer.from(e.data) : (e.data ?? Buffer.alloc(0));
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, "utf8");
    h.write((e.mode ?? (e.type === "5" ? 0o755 : 0o644)).toString(8).padStart(7, "0") + "\0", 100);
    h.write("0000000\0", 108);
    h.write("0000000\0", 116);
    h.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
    h.write("00000000000\0", 136);
    h.fill(" ", 148, 156);
    h.write(e.type ?? "0", 156);
    h.write(e.linkname ?? "", 157, 100, "utf8");
    h.write("ustar\0", 257);
    h.write("00", 263);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** One zip entry: `mode` is the Unix st_mode a Unix zip tool records (type and permission bits). */
export interface ZipEntry {
  name: string;
  data?: string | Buffer;
  mode?: number;
  /** Deflate the data. @default false: stored */
  deflate?: boolean;
  /** The uncompressed size to declare (a lie, for the tests). @default the data's */
  declaredSize?: number;
}

/** A zip archive of `entries`, made by "Unix" (version made by 3.20) with UTF-8 names. */
export function zipOf(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const data = typeof e.data === "string" ? Buffer.from(e.data) : (e.data ?? Buffer.alloc(0));
    const stored = e.deflate ? deflateRawSync(data) : data;
    const name = Buffer.from(e.name, "utf8");
    // The fields the local header (from offset 4) and the central directory (from offset 6) share: version needed,
    // flags (UTF-8 names), method, time, date, CRC, sizes, name length.
    const common = Buffer.alloc(24);
    common.writeUInt16LE(20, 0);
    common.writeUInt16LE(0x800, 2);
    common.writeUInt16LE(e.deflate ? 8 : 0, 4);
    common.writeUInt16LE(0x21, 8);
    common.writeUInt32LE(crc32(data), 10);
    common.writeUInt32LE(stored.length, 14);
    common.writeUInt32LE(e.declaredSize ?? data.length, 18);
    common.writeUInt16LE(name.length, 22);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    common.copy(local, 4);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    common.copy(central, 6);
    central.writeUInt32LE(((e.mode ?? (e.name.endsWith("/") ? 0o40755 : 0o100644)) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, stored);
    centrals.push(central, name);
    offset += local.length + name.length + stored.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}
