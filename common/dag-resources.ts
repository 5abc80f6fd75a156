/**
 * A vertex's `localResources` in the DAG file: the files, directories and archives of the DFS the node manager
 * localizes into each task's directory (YARN's LocalResources), their visibility and type, and their parser.
 */
import { normalizeDfsPath } from "./dfs-path.js";
import { errorMessage } from "./errors.js";
import { expectObject, fail, invalid, rejectUnknownFields, show } from "./dag-fields.js";

/**
 * Who shares a localized resource's cached copy on a node: the containers of one job ("application", the default),
 * or every job ("public": the DFS file must be readable by anyone, as YARN's public resources).
 */
export type ResourceVisibility = "application" | "public";

/** The visibilities, in the order the docs list them. */
export const RESOURCE_VISIBILITIES: readonly ResourceVisibility[] = ["application", "public"];

/**
 * What the node manager does with a resource (YARN's LocalResourceType): "file" links the file or directory as it is;
 * "archive" unpacks the file (a .tar, .tar.gz/.tgz or .zip, told by its contents) into a directory of the resource's
 * name.
 */
export type LocalResourceType = "file" | "archive";

/** The resource types, in the order the docs list them. */
export const LOCAL_RESOURCE_TYPES: readonly LocalResourceType[] = ["file", "archive"];

/** One localized resource: `path` in the DFS appears as `name` in the task's working directory. */
export interface LocalResourceSpec {
  name: string;
  /** `dfs:/absolute/path`, a file or a directory (an archive: a file). */
  path: string;
  visibility: ResourceVisibility;
  type: LocalResourceType;
}

/** Names a container's directory holds already (its logs, pid and token files): no resource may take them. */
export const RESERVED_WORKDIR_NAMES: readonly string[] = [
  "stdout",
  "stderr",
  "pid",
  "container_tokens",
  "task_status",
  "tmp",
  "output",
];

const LOCAL_RESOURCE_FIELDS = ["name", "path", "visibility", "type"];
/** A resource's name in the task's directory: a plain file name. */
const RESOURCE_NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;

/** Parses a vertex's `localResources` (`at` is its field path); [] when absent. */
export function parseLocalResources(raw: unknown, at: string): LocalResourceSpec[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw))
    invalid(at, `${at} must be an array of { name, path, visibility, type } objects, got ${show(raw)}`);
  const out: LocalResourceSpec[] = [];
  raw.forEach((item: unknown, i: number) => {
    const here = `${at}[${i}]`;
    const obj = expectObject(item, here, `${here} must be an object like { "name": "tool.js", "path": "dfs:/..." }`);
    rejectUnknownFields(obj, LOCAL_RESOURCE_FIELDS, here);
    const name = obj["name"];
    if (
      typeof name !== "string" ||
      !RESOURCE_NAME_RE.test(name) ||
      name === "." ||
      name === ".." ||
      RESERVED_WORKDIR_NAMES.includes(name)
    ) {
      invalid(
        `${here}.name`,
        `${here}.name must be a file name of 1 to 128 characters from A-Z a-z 0-9 _ . - (not ".", ".." or one of ` +
          `${RESERVED_WORKDIR_NAMES.join(", ")}), got ${show(name)}`,
      );
    }
    if (out.some((r) => r.name === name))
      fail("DAG_DUPLICATE_NAME", `${here}.name`, `${here}.name ${JSON.stringify(name)} is already used in ${at}`);
    const path = obj["path"];
    if (typeof path !== "string" || !path.startsWith("dfs:/"))
      invalid(`${here}.path`, `${here}.path must be a DFS path like "dfs:/user/me/tool.js", got ${show(path)}`);
    let normalized: string;
    try {
      normalized = normalizeDfsPath(path.slice("dfs:".length), `${here}.path`);
    } catch (err) {
      invalid(`${here}.path`, `${here}.path ${JSON.stringify(path)} is not a valid DFS path: ${errorMessage(err)}`);
    }
    const visibility = obj["visibility"] ?? "application";
    if (typeof visibility !== "string" || !(RESOURCE_VISIBILITIES as readonly string[]).includes(visibility))
      invalid(
        `${here}.visibility`,
        `${here}.visibility must be one of ${RESOURCE_VISIBILITIES.join(", ")}, got ${show(visibility)}`,
      );
    const type = obj["type"] ?? "file";
    if (typeof type !== "string" || !(LOCAL_RESOURCE_TYPES as readonly string[]).includes(type))
      invalid(`${here}.type`, `${here}.type must be one of ${LOCAL_RESOURCE_TYPES.join(", ")}, got ${show(type)}`);
    out.push({
      name,
      path: `dfs:${normalized}`,
      visibility: visibility as ResourceVisibility,
      type: type as LocalResourceType,
    });
  });
  return out;
}
