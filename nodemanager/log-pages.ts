/**
 * The node manager's web pages (YARN's node manager `/node/allContainers` and `/node/containerlogs`): this server's
 * containers with links to their logs, and a container's stdout or stderr, its tail with a link to the whole log and a
 * plain-text download. Who may read a container's log is who may call GetContainerLogs on it: its job's submitter, an
 * admin, or a daemon (container-records.ts `checkAccess`); the list shows a user only their own jobs' containers.
 *
 * A browser asks for HTML and gets the pages; anything else (curl, scripts) gets the container list as JSON and a log
 * as `text/plain`, whole unless `start` says otherwise, streamed from the file however long.
 */
import type { Principal } from "../common/auth.js";
import { CONTAINER_LOG_STREAMS } from "../common/container-logs.js";
import { logBody, logStart, logText, wantsLogHtml } from "../common/log-view.js";
import { escapeHtml } from "../common/web-server.js";
import type { WebRequest, WebResponse, WebServer } from "../common/web-server.js";
import { formatTime, renderPage, renderTable } from "../common/web-page.js";
import type { ContainerRecords } from "./container-records.js";
import { uploadRecordOf } from "./log-upload.js";

/** What the pages read: the node's records, whether callers are authenticated, and the node's live containers. */
export interface NodeLogSource {
  nodeId: string;
  records: ContainerRecords;
  secure: boolean;
  /** "RUNNING" for a container whose process runs here now; undefined for one that ended (its exit record says how). */
  liveState: (containerId: string) => string | undefined;
}

const ACCESS = ["user", "admin", "daemon"] as const;
/** Who an unauthenticated caller is on an insecure server (where `checkAccess` checks nothing). */
const ANONYMOUS: Principal = { name: "", role: "user", via: "claim" };
const NAV = [{ href: "/node/containers", label: "Containers" }];

/** Registers `/`, `/node/containers` and `/node/containerlogs/:containerId/:stream`. */
export function registerNodeLogPages(web: WebServer, source: NodeLogSource): void {
  const list = (req: WebRequest): WebResponse => containersPage(source, req);
  web.get("/", ACCESS, list);
  web.get("/node/containers", ACCESS, list);
  web.get("/node/containerlogs/:containerId/:stream", ACCESS, (req) => logPage(source, req));
}

function mayRead(source: NodeLogSource, who: Principal | undefined, containerId: string): boolean {
  try {
    source.records.checkAccess(source.secure, who ?? ANONYMOUS, containerId, "read");
    return true;
  } catch {
    return false;
  }
}

function logHref(containerId: string, stream: string, query = ""): string {
  return `/node/containerlogs/${encodeURIComponent(containerId)}/${stream}${query}`;
}

function containersPage(source: NodeLogSource, req: WebRequest): WebResponse {
  const rows = source.records
    .listContainers()
    .filter((c) => mayRead(source, req.principal, c.containerId))
    .map((c) => {
      const copy = uploadRecordOf(c.workDir);
      return {
        containerId: c.containerId,
        appId: c.appId,
        user: c.user,
        state: source.liveState(c.containerId) ?? (c.exit ? "COMPLETE" : "LOST"),
        exitCode: c.exit?.exitCode ?? null,
        cause: c.exit?.cause ?? "",
        finishedMs: Number(c.exit?.finishedMs ?? 0),
        copiedTo: copy ? `dfs:${copy.dfsDir}` : "",
        logs: Object.fromEntries(CONTAINER_LOG_STREAMS.map((s) => [s, logHref(c.containerId, s)])),
      };
    });
  if (!req.wantsHtml) return { json: { nodeId: source.nodeId, containers: rows } };
  const table = renderTable(
    "node-containers",
    [
      { label: "Container", cell: (r) => `<code>${escapeHtml(r.containerId)}</code>` },
      { label: "Job", cell: (r) => escapeHtml(r.appId) },
      { label: "User", cell: (r) => escapeHtml(r.user) },
      { label: "State", cell: (r) => escapeHtml(r.state) },
      { label: "Ended by", cell: (r) => escapeHtml(r.cause === "EXIT_CAUSE_UNSPECIFIED" ? "" : r.cause) },
      { label: "Exit", numeric: true, cell: (r) => (r.exitCode === null ? "" : String(r.exitCode)) },
      { label: "Finished", cell: (r) => escapeHtml(formatTime(r.finishedMs)) },
      {
        label: "Logs",
        className: "container-logs",
        cell: (r) =>
          CONTAINER_LOG_STREAMS.map((s) => `<a href="${escapeHtml(logHref(r.containerId, s))}">${s}</a>`).join(" "),
      },
      { label: "Kept in the DFS", cell: (r) => (r.copiedTo ? `<code>${escapeHtml(r.copiedTo)}</code>` : "") },
    ],
    rows,
    "No container of yours ran on this server (or its logs were removed with its job's data).",
    (r) => ({ "data-container": r.containerId }),
  );
  return {
    html: renderPage({
      title: `Containers on ${source.nodeId}`,
      daemon: "Node manager",
      nav: NAV,
      current: "/node/containers",
      body: table,
      principal: req.principal,
    }),
  };
}

async function logPage(source: NodeLogSource, req: WebRequest): Promise<WebResponse> {
  const containerId = req.params["containerId"] ?? "";
  const stream = req.params["stream"] ?? "";
  source.records.checkAccess(source.secure, req.principal ?? ANONYMOUS, containerId, "read the logs of");
  if (!wantsLogHtml(req))
    return logText(req, await source.records.streamLogRange(containerId, stream, logStart(req)), containerId, stream);
  const part = await source.records.readLogRange(containerId, stream, logStart(req));
  const body = logBody(part, stream, (s, query) => logHref(containerId, s, query));
  return {
    html: renderPage({
      title: `${containerId} ${stream}`,
      daemon: "Node manager",
      nav: NAV,
      current: "/node/containerlogs",
      body,
      principal: req.principal,
    }),
  };
}
