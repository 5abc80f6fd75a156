/**
 * Where a container's logs are kept in the DFS once it exits (YARN's log aggregation, laid out like the job's staging
 * directory): `/user/<submitter>/.logs/<appId>/<containerId>/stdout` and `.../stderr`, in the submitter's home, where
 * the node manager writes them as the submitter (the job's DFS token). The `.logs`, application and container
 * directories are mode 0770 in the log group (`containerLogGroup`, "harvest-logs"), as YARN keeps aggregated logs
 * 0770 in the `hadoop` group: the submitter, admins and the group's members read them, and nobody else. The namenode's
 * `userGroups` makes the resource managers' certificates members, so that they show a job's logs after it ended and
 * remove an application's directory `logRetentionHours` after it was last written (resourcemanager/log-retention.ts).
 */

/** The DFS group of kept logs unless configured otherwise. */
export const DEFAULT_LOG_GROUP = "harvest-logs";

/** The mode of the kept logs' directories: the owner and the log group (read, and remove past retention). */
export const KEPT_LOG_DIR_MODE = 0o770;

/** The two logs every container has. */
export const CONTAINER_LOG_STREAMS = ["stdout", "stderr"] as const;

/** One of a container's logs. */
export type ContainerLogStream = (typeof CONTAINER_LOG_STREAMS)[number];

/** `/user/<user>/.logs`: a submitter's kept logs. */
export function userLogRoot(user: string): string {
  return `/user/${user}/.logs`;
}

/** `/user/<user>/.logs/<appId>`: one application's kept logs. */
export function appLogDir(user: string, appId: string): string {
  return `${userLogRoot(user)}/${appId}`;
}

/** `/user/<user>/.logs/<appId>/<containerId>/<stream>`: one kept log. */
export function containerLogPath(user: string, appId: string, containerId: string, stream: ContainerLogStream): string {
  return `${appLogDir(user, appId)}/${containerId}/${stream}`;
}

/**
 * The application directories under a `.logs` whose last write is older than `retentionMs` before `nowMs` (none when
 * `retentionMs` is 0: kept forever). `entries` are the directory's listing (name and mtime).
 */
export function expiredLogDirs(
  entries: readonly { path: string; isDir: boolean; mtimeMs: number }[],
  nowMs: number,
  retentionMs: number,
): string[] {
  if (!(retentionMs > 0)) return [];
  return entries.filter((e) => e.isDir && e.mtimeMs > 0 && e.mtimeMs < nowMs - retentionMs).map((e) => e.path);
}
