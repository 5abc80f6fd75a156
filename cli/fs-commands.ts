/**
 * `harvest fs ...`: the file system from the command line, over the DfsClient (which resolves a relative path against
 * the caller's home, `/user/<name>`).
 */
import type { Command } from "commander";
import { stat as fsStat } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { HarvestError, isHarvestError } from "../common/errors.js";
import { formatMode, parseMode } from "../common/fs-permission.js";
import type { DfsClient, DfsFileStatus } from "../client/dfs-client.js";
import { action, common, durationFlagMs, positiveInt, print, withDfs } from "./command-kit.js";
import { waitingMessage } from "../client/write-wait.js";
import type { GlobalOpts } from "./command-kit.js";
import { bar, duration, table } from "./format.js";
import { formatBytes } from "../common/web-page.js";

/** Files at least this big get a progress bar on a terminal. */
const PROGRESS_MIN_BYTES = 8 * 1024 * 1024;

/** A progress line on stderr (terminals only), redrawn at most every 100 ms. */
function progress(
  totalBytes: number,
  verb: string,
): { update(bytes: number): void; done(): void; readonly active: boolean } {
  const tty = process.stderr.isTTY && totalBytes >= PROGRESS_MIN_BYTES;
  const started = Date.now();
  let last = 0;
  const draw = (bytes: number): void => {
    const secs = Math.max((Date.now() - started) / 1000, 0.001);
    process.stderr.write(
      `\r${verb} ${bar(bytes, totalBytes, 30)} ${mb(bytes)}/${mb(totalBytes)} MB  ${(bytes / 1e6 / secs).toFixed(1)} MB/s   `,
    );
  };
  return {
    /** A progress line is drawn (a message goes on a line of its own). */
    get active() {
      return tty && last > 0;
    },
    update(bytes) {
      if (!tty || Date.now() - last < 100) return;
      last = Date.now();
      draw(bytes);
    },
    done() {
      if (!tty) return;
      draw(totalBytes);
      process.stderr.write("\n");
    },
  };
}

function mb(bytes: number): string {
  return (bytes / 1e6).toFixed(1);
}

function statusLine(s: DfsFileStatus): (string | number)[] {
  return [
    formatMode(s.mode, s.isDir),
    s.isDir ? "-" : s.replication,
    s.isDir ? "-" : s.length,
    s.owner,
    s.group,
    new Date(s.mtimeMs).toISOString().slice(0, 19).replace("T", " "),
    s.path + (s.isDir ? "/" : s.complete ? (s.recoveredMs > 0 ? " (recovered)" : "") : " (being written)"),
  ];
}

/** A status with its mode also written as `ls` shows it (`drwxr-x---`), for --json. */
function withPermission(s: DfsFileStatus): DfsFileStatus & { permission: string } {
  return { ...s, permission: formatMode(s.mode, s.isDir) };
}

/** A directory that `ls -R` could not list, and why. */
interface ListFailure {
  path: string;
  code: string;
  message: string;
}

/**
 * Everything below directory `dir`, depth first (a directory, then what it holds), each directory's entries in the
 * namenode's order. A directory that cannot be listed (no permission, deleted meanwhile) is reported, not fatal.
 */
async function listRecursively(
  c: DfsClient,
  dir: string,
): Promise<{ entries: DfsFileStatus[]; failures: ListFailure[] }> {
  const entries: DfsFileStatus[] = [];
  const failures: ListFailure[] = [];
  const visit = async (path: string): Promise<void> => {
    let children: DfsFileStatus[];
    try {
      children = await c.list(path);
    } catch (err) {
      // An outage or a bug ends the listing; a directory we may not read, or one deleted meanwhile, is skipped.
      if (!isHarvestError(err, "DFS_PERMISSION_DENIED") && !isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) throw err;
      failures.push({ path, code: err.code, message: err.message });
      return;
    }
    for (const child of children) {
      entries.push(child);
      if (child.isDir) await visit(child.path);
    }
  };
  await visit(dir);
  return { entries, failures };
}

/** Adds the `fs` command group to the program. */
export function registerFsCommands(program: Command): void {
  const fs = program
    .command("fs")
    .description(
      "Harvest's distributed file system: put, get, cat, ls, rm, mkdir, mv, stat, chmod, chown, fsck " +
        "(a path not starting with / is relative to your home, /user/<you>)",
    );

  common(fs.command("put <local> <path>"))
    .description("copy a local file into the file system (acknowledged only when every replica is on disk)")
    .option("--replication <n>", "replicas per block (default: the namenode's, 3)")
    .option("--block-size-mb <n>", "block size in MiB (default: the namenode's, 128)")
    .option("--overwrite", "replace an existing file")
    .option(
      "--wait <seconds>",
      "how long to wait for a datanode that can take the next block while every one is busy with its primary tenant or full (e.g. 30, 2m; 0: fail at once)",
      "60",
    )
    .action(
      action(
        async (
          local: string,
          path: string,
          o: GlobalOpts & { replication?: string; blockSizeMb?: string; overwrite?: boolean; wait: string },
        ) => {
          const waitMs = durationFlagMs(o.wait, "--wait");
          const size = (
            await fsStat(local).catch(() => {
              throw new HarvestError("INVALID_ARGUMENT", `no local file ${local}`, { details: { field: "local" } });
            })
          ).size;
          const started = Date.now();
          const bar = progress(size, "put");
          let lastReason = "";
          // Interrupted, the put removes the file it created before it exits, so that a retry finds nothing there.
          const cancel = new AbortController();
          const onSignal = (): void => cancel.abort();
          process.once("SIGINT", onSignal).once("SIGTERM", onSignal);
          const status = await withDfs(o, (c) =>
            c.put(local, path, {
              signal: cancel.signal,
              overwrite: o.overwrite ?? false,
              ...(o.replication ? { replication: positiveInt(o.replication, "--replication") } : {}),
              ...(o.blockSizeMb ? { blockSizeBytes: positiveInt(o.blockSizeMb, "--block-size-mb") * 1024 * 1024 } : {}),
              onProgress: (b) => bar.update(b),
              writeWaitMs: Math.round(waitMs),
              onWait: (w) => {
                // Said once per reason, not at every try.
                if (w.reason === lastReason) return;
                lastReason = w.reason;
                process.stderr.write(`${bar.active ? "\n" : ""}harvest: ${waitingMessage(w.reason, w.deadlineMs)}\n`);
              },
            }),
          ).finally(() => process.off("SIGINT", onSignal).off("SIGTERM", onSignal));
          bar.done();
          print(
            o,
            status,
            () =>
              `put ${local} -> ${status.path}: ${status.length} bytes, ${status.blocks} block(s), replication ${status.replication}, ${duration(Date.now() - started)}`,
          );
        },
      ),
    );

  common(fs.command("get <path> <local>"))
    .description("copy a file out of the file system (verified chunk by chunk; fails over between replicas)")
    .option("--overwrite", "replace an existing local file")
    .option("--allow-open", "copy the visible prefix of a file still being written (refused otherwise)")
    .action(
      action(async (path: string, local: string, o: GlobalOpts & { overwrite?: boolean; allowOpen?: boolean }) => {
        const started = Date.now();
        const bytes = await withDfs(o, async (c) => {
          const st = await c.stat(path);
          if (!st.complete && o.allowOpen)
            process.stderr.write(
              `harvest: warning: ${st.path} is still being written; copying the ${st.length} bytes visible now\n`,
            );
          const bar = progress(st.length, "get");
          const n = await c.get(path, local, {
            overwrite: o.overwrite ?? false,
            allowOpen: o.allowOpen ?? false,
            onProgress: (b) => bar.update(b),
          });
          bar.done();
          return n;
        });
        print(
          o,
          { path, local, bytes },
          () => `get ${path} -> ${local}: ${bytes} bytes, ${duration(Date.now() - started)}`,
        );
      }),
    );

  common(fs.command("cat <path>"))
    .description("write a file to standard output")
    .action(
      action(async (path: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          // A pipeline reads the file flowing, piece by piece (an async iterator's paused reads join the pieces
          // buffered into new buffers); standard output stays open. A reader that stops early (`| head`) is no error.
          await pipeline(c.createReadStream(path), process.stdout).catch((err: unknown) => {
            if ((err as NodeJS.ErrnoException).code !== "EPIPE") throw err;
          });
        }),
      ),
    );

  common(fs.command("ls [path]"))
    .description("list a directory (default: your home, /user/<you>); with -R, everything below it")
    .option("-R, --recursive", "list subdirectories too, depth first, as 'hdfs dfs -ls -R' does")
    .action(
      action(async (path: string | undefined, o: GlobalOpts & { recursive?: boolean }) =>
        withDfs(o, async (c) => {
          const target = path ?? c.workingDirectory();
          const st = await c.stat(target).catch((err: unknown) => {
            if (path === undefined && isHarvestError(err, "NAMENODE_FILE_NOT_FOUND"))
              throw new HarvestError(
                "NAMENODE_FILE_NOT_FOUND",
                `your home ${target} does not exist yet: an admin makes it ('harvest admin user add ${target.slice("/user/".length)}'); 'harvest fs ls /' lists the root`,
                { details: { path: target }, cause: err },
              );
            throw err;
          });
          const { entries, failures } = !st.isDir
            ? { entries: [st], failures: [] }
            : o.recursive
              ? await listRecursively(c, st.path)
              : { entries: await c.list(target), failures: [] };
          for (const f of failures) process.stderr.write(`harvest: cannot list ${f.path}: ${f.message} [${f.code}]\n`);
          print(o, entries.map(withPermission), () =>
            entries.length === 0
              ? `${target} is empty`
              : table(["MODE", "REPL", "BYTES", "OWNER", "GROUP", "MODIFIED", "PATH"], entries.map(statusLine)),
          );
          // As `hdfs dfs -ls -R`: what could be listed is, and a directory that could not makes the exit code 1.
          return failures.length > 0 ? 1 : 0;
        }),
      ),
    );

  common(fs.command("stat <path>"))
    .description("show a file's or directory's metadata")
    .action(
      action(async (path: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const st = await c.stat(path);
          print(o, withPermission(st), () =>
            [
              `path        ${st.path}`,
              `type        ${st.isDir ? "directory" : "file"}${st.isDir || st.complete ? "" : " (being written)"}`,
              ...(st.isDir
                ? []
                : [
                    `length      ${st.length} bytes in ${st.blocks} block(s) of up to ${st.blockSize}`,
                    `replication ${st.replication}`,
                  ]),
              `owner       ${st.owner}`,
              `group       ${st.group}`,
              `mode        ${formatMode(st.mode, st.isDir)} (${st.mode.toString(8).padStart(4, "0")})`,
              `modified    ${new Date(st.mtimeMs).toISOString()}`,
              ...(st.recoveredMs > 0
                ? [`recovered   ${new Date(st.recoveredMs).toISOString()}: ${st.recoveredReason}`]
                : []),
            ].join("\n"),
          );
        }),
      ),
    );

  common(fs.command("mkdir <path>"))
    .description("create a directory and its missing parents")
    .action(
      action(async (path: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const st = await c.mkdir(path);
          print(o, st, () => `created ${st.path}`);
        }),
      ),
    );

  common(fs.command("rm <path>"))
    .description("delete a file, or a directory with -r")
    .option("-r, --recursive", "delete a directory and everything below it")
    .action(
      action(async (path: string, o: GlobalOpts & { recursive?: boolean }) =>
        withDfs(o, async (c) => {
          const deleted = await c.delete(path, { recursive: o.recursive ?? false });
          if (!deleted)
            throw new HarvestError("NAMENODE_FILE_NOT_FOUND", `no such file or directory: ${path}`, {
              details: { path },
            });
          print(o, { path, deleted }, () => `deleted ${path}`);
        }),
      ),
    );

  common(fs.command("mv <src> <dst>"))
    .description("rename a file or directory")
    .action(
      action(async (src: string, dst: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const st = await c.rename(src, dst);
          print(o, st, () => `renamed ${src} -> ${st.path}`);
        }),
      ),
    );

  common(fs.command("chmod <mode> <path>"))
    .description(
      "set a file's or directory's permission bits, in octal (e.g. 750); only its owner or the superuser may",
    )
    .action(
      action(async (mode: string, path: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const st = await c.chmod(path, parseMode(mode, "<mode>"));
          print(o, st, () => `${st.path}: ${formatMode(st.mode, st.isDir)}`);
        }),
      ),
    );

  common(fs.command("chown <owner> <path>"))
    .description("set the owner (superuser only) and/or group: <owner>, <owner>:<group> or :<group> (the owner may)")
    .action(
      action(async (spec: string, path: string, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const [owner = "", group = ""] = spec.split(":", 2);
          if (!owner && !group)
            throw new HarvestError("INVALID_ARGUMENT", "<owner> must be <owner>, <owner>:<group> or :<group>", {
              details: { field: "owner" },
            });
          const st = await c.chown(path, owner, group);
          print(o, st, () => `${st.path}: ${st.owner}:${st.group}`);
        }),
      ),
    );

  common(fs.command("df"))
    .description(
      "show the file system's space (as hdfs dfs -df): capacity = DFS used + non-DFS used + remaining, over the live datanodes, a file system they share counted once",
    )
    .option("--datanodes", "also list every datanode's space")
    .action(
      action(async (o: GlobalOpts & { datanodes?: boolean }) =>
        withDfs(o, async (c) => {
          const { totals: t, datanodes } = await c.capacity();
          const used = t.capacityBytes > 0 ? Math.round((100 * t.dfsUsedBytes) / t.capacityBytes) : 0;
          const sizes = (...xs: number[]): string[] => xs.map((x) => formatBytes(x));
          print(o, { ...t, datanodes: o.datanodes ? datanodes : undefined }, () =>
            [
              table(
                ["FILESYSTEM", "SIZE", "DFS USED", "NON-DFS USED", "AVAILABLE", "DFS USE%"],
                [
                  [
                    c.namenodeAddress,
                    ...sizes(t.capacityBytes, t.dfsUsedBytes, t.nonDfsUsedBytes, t.remainingBytes),
                    `${used}%`,
                  ],
                ],
              ),
              `${t.liveDatanodes} live datanode(s) on ${t.fileSystems} file system(s)`,
              ...(o.datanodes
                ? [
                    "",
                    table(
                      ["DATANODE", "STATE", "CAPACITY", "DFS USED", "NON-DFS USED", "REMAINING"],
                      datanodes.map((d) => [
                        d.datanodeId,
                        d.state,
                        ...sizes(d.capacityBytes, d.usedBytes, d.nonDfsUsedBytes, d.remainingBytes),
                      ]),
                    ),
                  ]
                : []),
            ].join("\n"),
          );
        }),
      ),
    );

  common(fs.command("fsck [path]"))
    .description(
      "check blocks below a path (default /; you must be able to list every directory there): under-replicated, missing and corrupt; exit 1 unless healthy",
    )
    .action(
      action(async (path: string | undefined, o: GlobalOpts) =>
        withDfs(o, async (c) => {
          const r = await c.fsck(path ?? "/");
          const list = (title: string, blocks: typeof r.missing): string[] =>
            blocks.length === 0
              ? []
              : [
                  `${title}:`,
                  ...blocks.map(
                    (b) =>
                      `  ${b.path}  blk_${b.block?.blockId ?? "?"}  ${b.liveReplicas}/${b.expectedReplicas} live  ${b.datanodes.join(",")}`,
                  ),
                ];
          print(o, r, () =>
            [
              `${path ?? "/"}: ${r.healthy ? "HEALTHY" : "NOT HEALTHY"}${r.safeMode ? " (namenode in safe mode)" : ""}`,
              `  ${r.files} files, ${r.directories} directories, ${r.blocks} blocks, ${r.totalBytes} bytes`,
              `  datanodes: ${r.liveDatanodes} live (${r.staleDatanodes} stale: no recent heartbeat), ${r.deadDatanodes} dead`,
              `  under-replicated ${r.underReplicated.length}, missing ${r.missing.length}, corrupt ${r.corrupt.length}, ` +
                `suspect ${r.suspect.length} (${r.suspectReplicas} replicas on stale datanodes)`,
              ...list("missing", r.missing),
              ...list("corrupt", r.corrupt),
              ...list("under-replicated", r.underReplicated),
              ...list("suspect (replicas on stale datanodes listed)", r.suspect),
              ...(r.recovered.length === 0
                ? []
                : [
                    "recovered by lease recovery (may be shorter than what their writer sent):",
                    ...r.recovered.map(
                      (f) => `  ${f.path}  ${f.length} bytes  ${new Date(f.recoveredMs).toISOString()}  ${f.reason}`,
                    ),
                  ]),
            ].join("\n"),
          );
          return r.healthy ? 0 : 1;
        }),
      ),
    );
}
