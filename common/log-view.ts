/**
 * A container's log as a web page shows it, shared by the node manager's live logs (`/node/containerlogs`) and the
 * resource manager's copies kept in the DFS (`/jobs/:appId/logs`): a browser gets the tail with links to the whole log,
 * a download and the other stream; a script gets `text/plain` with the log's length and the offset of what it got.
 */
import type { Readable } from "node:stream";
import { CONTAINER_LOG_STREAMS } from "./container-logs.js";
import { HarvestError } from "./errors.js";
import { formatBytes } from "./web-page.js";
import { escapeHtml } from "./web-server.js";
import type { WebRequest, WebResponse } from "./web-server.js";

/** How much of the end of a log a browser is shown first. */
export const LOG_PAGE_TAIL_BYTES = 4096;

/** Part of a log: `data` from byte `offset` of a log of `totalBytes`. */
export interface LogPart {
  data: Buffer;
  offset: number;
  totalBytes: number;
}

/** Part of a log sent as it is read (a script's whole log, however long): `length` bytes from `offset`. */
export interface LogStreamPart {
  stream: Readable;
  offset: number;
  length: number;
  totalBytes: number;
}

/** The part of a log of `size` bytes from `start` (negative: that many before the end), at most `maxBytes`. */
export function logRange(
  size: number,
  start: number,
  maxBytes: number,
): { offset: number; length: number; totalBytes: number } {
  const offset = Math.min(size, start < 0 ? Math.max(0, size + start) : start);
  return { offset, length: Math.min(size - offset, maxBytes), totalBytes: size };
}

/** Whether the request wants the HTML page (a browser, unless `format=text`). */
export function wantsLogHtml(req: WebRequest): boolean {
  return req.wantsHtml && req.query.get("format") !== "text";
}

/**
 * `start`: a byte offset, or negative for that many bytes before the end; when absent, the tail for a browser and the
 * whole log for a script.
 */
export function logStart(req: WebRequest): number {
  const raw = req.query.get("start");
  if (raw === null || raw === "") return wantsLogHtml(req) ? -LOG_PAGE_TAIL_BYTES : 0;
  if (!/^-?\d{1,15}$/.test(raw))
    throw new HarvestError("INVALID_ARGUMENT", "start must be a byte offset (negative: from the end)", {
      details: { field: "start" },
    });
  return Number(raw);
}

/**
 * The `text/plain` answer: the bytes (streamed, with their length, for a {@link LogStreamPart}),
 * `x-harvest-log-length` and `x-harvest-log-offset`; `download=1` names a file.
 */
export function logText(
  req: WebRequest,
  part: LogPart | LogStreamPart,
  containerId: string,
  stream: string,
): WebResponse {
  return {
    ...("data" in part ? { body: part.data } : { stream: part.stream }),
    contentType: "text/plain; charset=utf-8",
    headers: {
      ...("data" in part ? {} : { "content-length": String(part.length) }),
      "x-harvest-log-length": String(part.totalBytes),
      "x-harvest-log-offset": String(part.offset),
      ...(req.query.get("download") === "1"
        ? { "content-disposition": `attachment; filename="${containerId}-${stream}.log"` }
        : {}),
    },
  };
}

/**
 * The page's body: what part is shown (`#log-extent`, after `note`), links to the whole log, a download, the other
 * stream and `extraLinks`, then the text (`#log`). `href(stream, query)` is the page's own address for a stream.
 */
export function logBody(
  part: LogPart,
  stream: string,
  href: (stream: string, query?: string) => string,
  opts: { note?: string; extraLinks?: string[] } = {},
): string {
  const whole = part.offset === 0 && part.data.length === part.totalBytes;
  const shown = whole
    ? `the whole log, ${formatBytes(part.totalBytes)}`
    : `bytes ${part.offset}-${part.offset + part.data.length} of ${part.totalBytes}`;
  const links = [
    whole ? "" : `<a id="whole-log" href="${escapeHtml(href(stream, "?start=0"))}">whole log</a>`,
    `<a id="download-log" href="${escapeHtml(href(stream, "?format=text&start=0&download=1"))}">download</a>`,
    ...CONTAINER_LOG_STREAMS.filter((s) => s !== stream).map((s) => `<a href="${escapeHtml(href(s))}">${s}</a>`),
    ...(opts.extraLinks ?? []),
  ].filter(Boolean);
  const extent = [...(opts.note ? [escapeHtml(opts.note)] : []), escapeHtml(shown), links.join(" · ")].join(" · ");
  return `<p class="muted" id="log-extent">${extent}</p>
<pre id="log" class="log">${escapeHtml(part.data.toString("utf8"))}</pre>`;
}
