/**
 * What client and namenode share about file-system permissions: the POSIX-style mode bits as they travel on the wire
 * (FileStatus.mode) and as people write them (`750`, `rwxr-x---`), and the local user name an insecure client claims.
 * The namenode's policy is namenode/policy/permissions.ts.
 */
import { userInfo } from "node:os";
import { HarvestError } from "./errors.js";

/**
 * The name of the local user: `$USER`, else the account running this process, else "harvest". On a plaintext
 * cluster the DfsClient claims it as its identity and the namenode makes it its default superuser, so a one-user
 * cluster (the demo) is its own superuser, as HDFS's is the account running the namenode.
 */
export function localUserName(): string {
  const fromEnv = process.env["USER"];
  if (fromEnv) return fromEnv;
  try {
    return userInfo().username || "harvest";
  } catch {
    return "harvest";
  }
}

/** The largest mode accepted: rwx for owner, group and others (no setuid, setgid or sticky bits). */
export const MAX_MODE = 0o777;

/** `rwxr-x---` style text of the low nine bits, prefixed with `d` or `-` when `isDir` is given. */
export function formatMode(mode: number, isDir?: boolean): string {
  const letters = "rwxrwxrwx";
  let out = "";
  for (let i = 0; i < 9; i++) out += mode & (1 << (8 - i)) ? letters[i] : "-";
  return isDir === undefined ? out : (isDir ? "d" : "-") + out;
}

/** Parses an octal mode (`750`, `0644`); INVALID_ARGUMENT naming `field` unless it is 1-4 octal digits up to 0777. */
export function parseMode(text: string, field = "mode"): number {
  if (!/^[0-7]{1,4}$/.test(text))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${field} must be an octal mode such as 750 or 0644 (got ${JSON.stringify(text)})`,
      {
        details: { field },
      },
    );
  const mode = parseInt(text, 8);
  if (mode > MAX_MODE)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${field} ${text} sets bits Harvest does not support (setuid, setgid, sticky)`,
      {
        details: { field },
      },
    );
  return mode;
}

/**
 * gRPC metadata key under which a client claims its user name on every namenode call (HDFS's simple authentication:
 * the claim is trusted only on a plaintext connection; a TLS certificate's identity always wins).
 */
export const CLAIMED_USER_METADATA = "harvest-user";
