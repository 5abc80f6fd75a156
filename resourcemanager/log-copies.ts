/**
 * The resource manager's page of a container's log as its node manager copied it into the DFS when the container exited
 * (common/container-logs.ts): `/jobs/:appId/logs/:containerId/:stream`, for when the server that ran it is gone,
 * reimaged or no longer answers. It mirrors the node manager's `/node/containerlogs` page (nodemanager/log-pages.ts): a
 * browser gets the tail with links to the whole log and a download, anything else the log as `text/plain`, whole
 * unless `start` says otherwise, streamed from the DFS however long (a page reads at most 64 MiB).
 *
 * Who may read it is who may read the job's logs anywhere: the job's submitter, an admin, or a daemon. The copies sit in
 * the submitter's home in directories of the log group (common/container-logs.ts), of which the namenode's `userGroups`
 * makes the resource manager's certificate a member: it reads them with that certificate, before and after the job
 * ended. Where the namenode does not say so (or the submitter took the group's rights away), it falls back to the
 * job's DFS token while it still holds it (until the job ended), and says so after. A plaintext cluster has no
 * tokens: there it reads as the submitter by name.
 */
import type { Principal } from "../common/auth.js";
import { containerLogPath } from "../common/container-logs.js";
import { logBody, logStart, logText, wantsLogHtml } from "../common/log-view.js";
import type { LogStreamPart } from "../common/log-view.js";
import type { ContainerLogStream } from "../common/container-logs.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import type { ClientSecurity } from "../common/grpc.js";
import { isContainerId } from "../common/ids.js";
import { escapeHtml } from "../common/web-server.js";
import type { WebRequest, WebResponse } from "../common/web-server.js";
import { DfsClient } from "../client/dfs-client.js";
import { readKeptLog, streamKeptLog } from "../client/kept-logs.js";
import { dfsAsSubmitter } from "./job-dfs-cleanup.js";
import { logCopyHref, logsCommand, wire } from "./web.js";
import { page } from "./web-html.js";
import type { LogCopyPart, RmWebSource } from "./web.js";

/** The most of a log one request reads (the node manager's `MAX_LOG_READ_BYTES`). */
export const MAX_LOG_COPY_READ_BYTES = 64 * 1024 * 1024;

/** What the resource manager knows of a job that lets it read the job's kept logs. */
export interface LogCopyJob {
  appId: string;
  user: string;
  /** The job's DFS token while the resource manager holds it ("" on a plaintext cluster, or once the job ended). */
  dfsToken: string;
}

/** Reads kept logs at one namenode with each job's identity. */
export class LogCopyReader {
  constructor(
    /** The namenode; empty: no log is kept, every read is CONTAINER_NOT_FOUND. */
    private readonly nnAddress: string,
    /** The daemon's TLS files (secure cluster), undefined on a plaintext one. */
    private readonly security: ClientSecurity | undefined,
  ) {}

  /**
   * Part of `job`'s container `containerId`'s kept `stream`, from byte `start` (negative: that many before the end) to
   * the end, at most `maxBytes`. CONTAINER_NOT_FOUND when no copy is there (yet) or it cannot be read any more.
   */
  read(
    job: LogCopyJob,
    containerId: string,
    stream: ContainerLogStream,
    start: number,
    maxBytes = MAX_LOG_COPY_READ_BYTES,
  ): Promise<LogCopyPart> {
    return this.reach(job, containerId, stream, async (dfs, path) => {
      try {
        return await readKeptLog(dfs, path, start, maxBytes);
      } finally {
        dfs.close();
      }
    });
  }

  /** The same part, whatever its size, streamed from the DFS (its client closes when the stream does). */
  open(job: LogCopyJob, containerId: string, stream: ContainerLogStream, start: number): Promise<LogStreamPart> {
    return this.reach(job, containerId, stream, async (dfs, path) => {
      try {
        const part = await streamKeptLog(dfs, path, start);
        if (!part) dfs.close();
        else part.stream.once("close", () => dfs.close());
        return part;
      } catch (err) {
        dfs.close();
        throw err;
      }
    });
  }

  /**
   * `use`'s answer for the kept log's path, with the resource manager's certificate (a member of the log group; on a
   * plaintext cluster, the submitter's name), else the job's token while held. `use` owns the client it is given.
   */
  private async reach<T>(
    job: LogCopyJob,
    containerId: string,
    stream: ContainerLogStream,
    use: (dfs: DfsClient, path: string) => Promise<T | undefined>,
  ): Promise<T> {
    const path = containerLogPath(job.user, job.appId, containerId, stream);
    if (!this.nnAddress)
      throw new HarvestError("CONTAINER_NOT_FOUND", `no namenode: this cluster keeps no copy of ${containerId}'s log`);
    let got: T | undefined;
    try {
      got = await use(this.client(this.security ? undefined : job.user, undefined), path);
    } catch (err) {
      if (!isHarvestError(err, "DFS_PERMISSION_DENIED")) throw err;
      if (!job.dfsToken)
        throw new HarvestError(
          "CONTAINER_NOT_FOUND",
          `the resource manager may not read dfs:${path} (${errorMessage(err)}): the namenode's userGroups must put ` +
            `its certificate name in the log group; '${logsCommand(job.appId, containerId, stream)}' reads it as you`,
        );
      got = await use(this.client(job.user, job.dfsToken), path);
    }
    if (got === undefined)
      throw new HarvestError(
        "CONTAINER_NOT_FOUND",
        `${containerId}'s ${stream} was not copied into the DFS (yet): no dfs:${path} (the container may still ` +
          `run, or its copy failed or expired)`,
      );
    return got;
  }

  /** A client with the resource manager's certificate (`user` undefined), the job's token, or (plaintext) as `user`. */
  private client(user: string | undefined, token: string | undefined): DfsClient {
    return user === undefined
      ? new DfsClient(this.nnAddress, { security: this.security! })
      : dfsAsSubmitter(this.nnAddress, this.security, token, user);
  }
}

/** Throws PERMISSION_DENIED unless `who` is the job's submitter, an admin or a daemon (anyone on a plaintext cluster). */
function checkReader(secure: boolean, who: Principal | undefined, user: string, appId: string): void {
  if (!secure) return;
  if (!who) throw new HarvestError("UNAUTHENTICATED", "a certificate or a web token is needed");
  if (who.role === "admin" || who.role === "daemon" || (who.role === "user" && who.name === user)) return;
  throw new HarvestError("PERMISSION_DENIED", `${who.name} (${who.role}) may not read the logs of ${appId}`, {
    details: { identity: who.name, role: who.role, action: `read the logs of ${appId}` },
  });
}

/**
 * `/jobs/:appId/logs/:containerId/:stream`: the kept log, HTML (the tail) for a browser, else `text/plain` (whole
 * unless `start`), with `x-harvest-log-length` and `x-harvest-log-offset` as the node manager's page sends.
 */
export async function logCopyPage(source: RmWebSource, req: WebRequest): Promise<WebResponse> {
  const appId = req.params["appId"] ?? "";
  const containerId = req.params["containerId"] ?? "";
  const stream = req.params["stream"] ?? "";
  if (!isContainerId(containerId))
    throw new HarvestError("INVALID_ARGUMENT", `bad container id ${JSON.stringify(containerId)}`, {
      details: { field: "containerId" },
    });
  if (stream !== "stdout" && stream !== "stderr")
    throw new HarvestError("INVALID_ARGUMENT", 'stream must be "stdout" or "stderr"', { details: { field: "stream" } });
  const start = logStart(req);
  const report = wire.app(source, appId); // APP_NOT_FOUND (404) or INVALID_ARGUMENT (400) first.
  checkReader(source.info().secure, req.principal, report.user, appId);
  if (!report.containers.some((c) => c.containerId === containerId))
    throw new HarvestError(
      "CONTAINER_NOT_FOUND",
      `${appId} has no container ${containerId}; its page /jobs/${appId} lists them`,
    );
  if (!wantsLogHtml(req))
    return logText(req, await source.openLogCopy(appId, containerId, stream, start), containerId, stream);
  const part = await source.readLogCopy(appId, containerId, stream, start);
  const body = logBody(part, stream, (s, query = "") => logCopyHref(appId, containerId, s, query), {
    note: "the copy kept in the DFS",
    extraLinks: [`<a href="/jobs/${escapeHtml(encodeURIComponent(appId))}">${escapeHtml(appId)}</a>`],
  });
  return page(req, { title: `${containerId} ${stream}`, current: "/jobs", body });
}

/**
 * `RmWebSource.readLogCopy` at the namenode `nnAddress`: the job is looked up by `recordOf` (APP_NOT_FOUND for an
 * unknown one) for its submitter and the DFS token it still holds.
 */
export function logCopySource(
  nnAddress: string,
  security: ClientSecurity | undefined,
  recordOf: (appId: string) => { user: string; dfsToken?: string },
): Pick<RmWebSource, "readLogCopy" | "openLogCopy"> {
  const reader = new LogCopyReader(nnAddress, security);
  const jobOf = (appId: string): LogCopyJob => {
    const { user, dfsToken = "" } = recordOf(appId);
    return { appId, user, dfsToken };
  };
  return {
    readLogCopy: (appId, containerId, stream, start) => reader.read(jobOf(appId), containerId, stream, start),
    openLogCopy: (appId, containerId, stream, start) => reader.open(jobOf(appId), containerId, stream, start),
  };
}
