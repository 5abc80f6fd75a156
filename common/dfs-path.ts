/**
 * Paths in Harvest's file system: absolute, normalised, no `.` or `..`, no empty or NUL components. The namenode
 * checks every path it is given; clients check before sending so users get the error without a round trip. Clients
 * also resolve a relative path against the caller's home (`resolveDfsPath`); the namenode sees absolute paths only.
 */
import { HarvestError } from "./errors.js";

/** Longest path accepted, in characters. */
export const MAX_PATH_LENGTH = 4096;
/** Longest single component. */
export const MAX_COMPONENT_LENGTH = 255;

/**
 * Validates a path and returns it normalised (a trailing slash removed, except for "/"); throws DFS_BAD_PATH naming
 * what is wrong. Nothing is resolved: `..` is an error, never a step up.
 */
export function normalizeDfsPath(path: string, field = "path"): string {
  return checkedPath(path, path, field);
}

/**
 * {@link normalizeDfsPath} of a path that may be relative: one that does not start with `/` names a path below
 * `home` (an absolute normalised path: the caller's home, as HDFS's working directory). The same checks apply to the
 * whole, so a `..` is still an error, never a step up; errors quote `path` as given.
 */
export function resolveDfsPath(path: string, home: string, field = "path"): string {
  if (typeof path !== "string" || path.length === 0 || path.startsWith("/")) return normalizeDfsPath(path, field);
  return checkedPath(home === "/" ? `/${path}` : `${home}/${path}`, path, field);
}

/** Checks `path` (`given` is what the caller wrote, for the message) and returns it normalised. */
function checkedPath(path: string, given: string, field: string): string {
  const bad = (why: string): never => {
    throw new HarvestError("DFS_BAD_PATH", `bad path ${JSON.stringify(given)}: ${why}`, {
      details: { field, path: given },
    });
  };
  if (typeof path !== "string" || path.length === 0) bad("it is empty");
  if (path.length > MAX_PATH_LENGTH) bad(`it is longer than ${MAX_PATH_LENGTH} characters`);
  if (!path.startsWith("/")) bad("it must be absolute (start with /)");
  if (path.includes("\0")) bad("it contains a NUL character");
  if (path === "/") return "/";
  const body = path.endsWith("/") ? path.slice(0, -1) : path;
  const parts = body.slice(1).split("/");
  for (const part of parts) {
    if (part === "") bad("it has an empty component (//)");
    if (part === "." || part === "..")
      bad(
        path === given
          ? `it has a ${part} component; use a normalised absolute path`
          : `it has a ${part} component; a relative path names a path below your home and never steps out of it`,
      );
    if (part.length > MAX_COMPONENT_LENGTH) bad(`a component is longer than ${MAX_COMPONENT_LENGTH} characters`);
  }
  return "/" + parts.join("/");
}

/** The components of a normalised path ("/" has none). */
export function pathComponents(normalized: string): string[] {
  return normalized === "/" ? [] : normalized.slice(1).split("/");
}

/** The parent of a normalised path ("/" for top-level entries and for "/" itself). */
export function parentPath(normalized: string): string {
  const i = normalized.lastIndexOf("/");
  return i <= 0 ? "/" : normalized.slice(0, i);
}

/** The last component of a normalised path ("" for "/"). */
export function baseName(normalized: string): string {
  return normalized.slice(normalized.lastIndexOf("/") + 1);
}

/** True when `path` is `ancestor` or lies below it. */
export function isWithin(path: string, ancestor: string): boolean {
  return ancestor === "/" || path === ancestor || path.startsWith(ancestor + "/");
}
