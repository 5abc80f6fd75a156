/**
 * `harvest admin user add <name>`: a person's home directory in the DFS, `/user/<name>`, owned by them, in a group of
 * theirs, closed to others by default (HDFS home directories, which an administrator creates). Idempotent: an existing
 * home is left as it is and described.
 */
import type { Command } from "commander";
import { HarvestError, isHarvestError } from "../common/errors.js";
import { formatMode, parseMode } from "../common/fs-permission.js";
import type { DfsFileStatus } from "../client/dfs-client.js";
import { action, badFlag, common, print, withDfs } from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";

/** An account-like name: a letter or `_` first, then letters, digits, `_`, `.` and `-`, at most 32 (as useradd). */
const ACCOUNT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

/** Names that are not people: the account an unauthenticated plaintext caller is taken for. */
const NOT_PEOPLE = new Set(["nobody"]);

/** INVALID_ARGUMENT unless `name` (of `what`) is an account-like name. */
export function checkAccountName(name: string, what: string): string {
  if (!ACCOUNT_NAME.test(name))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${what} ${JSON.stringify(name)} is not an account name: a letter or _ first, then up to 31 letters, digits, _, . or -`,
      { details: { field: what } },
    );
  if (NOT_PEOPLE.has(name))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${what} ${name} is the account of unauthenticated callers, not a person's`,
      { details: { field: what } },
    );
  return name;
}

function describe(st: DfsFileStatus): string {
  return `owner ${st.owner}, group ${st.group}, ${formatMode(st.mode, st.isDir)}`;
}

/** Adds `harvest admin user ...` to the admin command. */
export function registerUserCommands(admin: Command): void {
  const user = admin.command("user").description("people of the cluster: their home directories in the DFS");
  common(user.command("add <name>"))
    .description(
      "create /user/<name> in the DFS owned by <name> (an admin certificate may); an existing home is left as it is",
    )
    .option("--mode <mode>", "the home's permission bits, octal (default 700: the owner's alone)", "700")
    .option("--group <group>", "the home's group (default: the user's own group, named as the user)")
    .action(
      action(async (name: string, o: GlobalOpts & { mode: string; group?: string }) => {
        checkAccountName(name, "<name>");
        const group = checkAccountName(o.group ?? name, "--group");
        const mode = parseMode(o.mode, "--mode");
        if (mode > 0o777) badFlag("--mode", "must be permission bits 0..777 (no setuid, setgid or sticky bit)");
        const home = `/user/${name}`;
        return withDfs(o, async (c) => {
          const existing = await c.stat(home).catch((err: unknown) => {
            if (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) return undefined;
            throw err;
          });
          if (existing) {
            if (!existing.isDir)
              throw new HarvestError("NAMENODE_NOT_A_DIRECTORY", `${home} exists and is a file, not a home directory`, {
                details: { path: home },
              });
            print(o, { ...existing, created: false }, () =>
              [
                `${home} exists already (${describe(existing)}): nothing changed`,
                ...(existing.owner !== name
                  ? [`  it is not ${name}'s: 'harvest fs chown ${name}:${group} ${home}' gives it to ${name}`]
                  : []),
              ].join("\n"),
            );
            return 0;
          }
          // Closed first, then given away: no one else ever sees it open, and a caller who may not give it away
          // (not the superuser) leaves nothing behind.
          await c.mkdir(home);
          let st: DfsFileStatus;
          try {
            await c.chmod(home, mode);
            st = await c.chown(home, name, group);
          } catch (err) {
            // The namenode's refusal says why (only the superuser gives a directory away); the empty home goes.
            await c.delete(home).catch(() => false);
            throw err;
          }
          print(o, { ...st, created: true }, () => `created ${home} for ${name} (${describe(st)})`);
          return 0;
        });
      }),
    );
}
