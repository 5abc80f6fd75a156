/**
 * The HTTP(S) side of a daemon: web pages, a REST API and `/metrics`, on a port of its own beside the gRPC port.
 *
 * Security follows the gRPC side (common/auth.ts). With TLS, the server presents the daemon's certificate and asks
 * the browser or script for a client certificate signed by the cluster CA; a caller without one may present a
 * short-lived web token instead (`harvest ui login` prints a login URL that sets it as an HttpOnly cookie; scripts send
 * `Authorization: Bearer <token>`). A route names the roles that may read it, as the matching gRPC method does.
 * Without TLS (`--insecure`) nobody is authenticated and every route is open, as on the gRPC side.
 *
 * Pages are server-rendered HTML; their scripts and styles are files under `/assets/` (a Content-Security-Policy of
 * 'self' forbids inline scripts and any other origin), and the charting library is served from the package, so the
 * UI works on a cluster with no internet. Errors are JSON `{ "error": { "code", "message" } }` with the HTTP status of
 * the Harvest error code, or a small HTML page for a browser.
 */
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { TLSSocket } from "node:tls";
import type { Registry } from "prom-client";
import type { Access, Principal } from "./auth.js";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { asHarvestError, ERROR_CODES, errorMessage, HarvestError } from "./errors.js";
import type { Logger } from "./log.js";
import { formatAddress } from "./net-address.js";
import { packageRoot } from "./paths.js";
import { identityOfCertificate } from "./tls.js";
import type { TlsFiles } from "./tls.js";

/**
 * The cookie `GET /login?token=` sets, `harvest_token_<port>`: browsers scope cookies by host, not port, so the
 * resource manager and the namenode on one host would otherwise overwrite each other's token.
 */
export function webTokenCookie(port: number): string {
  return `harvest_token_${port}`;
}

/** Checks a web token; returns who holds it, or undefined when it is not valid now. Never throws. */
export type WebTokenVerifier = (token: string) => Principal | undefined;

/** Settings of a daemon's web server. */
export interface WebServerOptions {
  /** Interface to bind. */
  host: string;
  /** Port to bind; 0 picks a free one. */
  port: number;
  /** The host name in the URLs this server reports (its certificate names it). */
  advertiseHost: string;
  /** The daemon's TLS files: HTTPS with client certificates under the cluster CA. Plain HTTP without. */
  tls?: TlsFiles | undefined;
  /** Checks web tokens (`harvest ui login`); without it only certificates authenticate. */
  tokens?: WebTokenVerifier;
  /** The daemon's metrics, served at `/metrics` in Prometheus text format. */
  metrics?: Registry;
  /** Who may scrape `/metrics` when secure. @default any certificate or web token */
  metricsAccess?: readonly Access[];
  /** Title shown on pages (e.g. "Harvest resource manager"). */
  title: string;
  log: Logger;
  /**
   * HA: on a standby, the error it answers pages and the API with (NOT_ACTIVE, naming the active's gRPC address when
   * known) and the active's web URL to redirect to; undefined while this daemon serves them. `/metrics`, assets and
   * the login page stay served (each master is scraped for its own role).
   */
  standby?: () => { error: HarvestError; activeWebUrl: string | undefined } | undefined;
  /**
   * The longest a request may take to arrive whole (Node's `requestTimeout`); 0: no limit, for a server whose routes
   * take streamed uploads (a datanode's WebHDFS CREATE). @default 60000
   */
  requestTimeoutMs?: number;
}

/**
 * A route's `access` for a handler that authenticates the caller itself, from the request (a datanode's WebHDFS URL
 * carries a ticket the namenode signed): the server passes whoever it recognised, and refuses nobody.
 */
export const SELF_AUTHENTICATED = "self-authenticated";

/** Who may call a route: certificate roles (and web tokens of them), or the handler decides. */
export type RouteAccess = readonly Access[] | typeof SELF_AUTHENTICATED;

/** A request as a route sees it. */
export interface WebRequest {
  method: string;
  /** The decoded path, without the query. */
  path: string;
  /** Named parts of the route's pattern (`:id`), decoded; `*` holds the rest of the path. */
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  /** Who is asking (undefined only on an insecure server). */
  principal: Principal | undefined;
  /** Whether the client asked for HTML (a browser) rather than JSON. */
  wantsHtml: boolean;
  /**
   * The request's body, unread, for PUT and POST routes to stream; the first call sends `100 Continue` to a client
   * that waits for it, so a route that answers without calling it (a refusal, a redirect) costs the client no upload.
   */
  body?: () => Readable;
  /** The request's headers, as Node parsed them. */
  headers?: http.IncomingHttpHeaders;
}

/** What a route answers. Exactly one of json, html, text, body or stream. */
export interface WebResponse {
  status?: number;
  json?: unknown;
  html?: string;
  text?: string;
  body?: Buffer;
  /**
   * A body sent as it is read, with backpressure (a file over WebHDFS); give its length in `headers` when known. An
   * error after the headers went out cuts the connection, so that the client sees a short body, never a clean end.
   */
  stream?: Readable;
  contentType?: string;
  headers?: Record<string, string>;
}

/** A route's handler. A thrown HarvestError becomes its HTTP status and a JSON or HTML error. */
export type WebHandler = (req: WebRequest) => WebResponse | Promise<WebResponse>;

interface Route {
  method: string;
  parts: string[];
  access: RouteAccess;
  handler: WebHandler;
}

/** The HTTP status of each gRPC status a Harvest error code travels as (the one table is ERROR_CODES). */
const HTTP_OF_GRPC: Readonly<Partial<Record<GrpcStatus, number>>> = {
  [GrpcStatus.INVALID_ARGUMENT]: 400,
  [GrpcStatus.OUT_OF_RANGE]: 400,
  [GrpcStatus.UNAUTHENTICATED]: 401,
  [GrpcStatus.PERMISSION_DENIED]: 403,
  [GrpcStatus.NOT_FOUND]: 404,
  [GrpcStatus.ALREADY_EXISTS]: 409,
  [GrpcStatus.FAILED_PRECONDITION]: 409,
  [GrpcStatus.ABORTED]: 409,
  [GrpcStatus.RESOURCE_EXHAUSTED]: 429,
  [GrpcStatus.UNAVAILABLE]: 503,
  [GrpcStatus.DEADLINE_EXCEEDED]: 504,
  [GrpcStatus.UNIMPLEMENTED]: 501,
};

/** The HTTP status for a Harvest error, through its code's gRPC status; 500 for anything else. */
export function httpStatusOf(err: HarvestError): number {
  const grpc = (ERROR_CODES as Readonly<Record<string, GrpcStatus>>)[err.code];
  return (grpc !== undefined ? HTTP_OF_GRPC[grpc] : undefined) ?? 500;
}

const ASSET_TYPES: Readonly<Record<string, string>> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

/** Files served under /assets/: Harvest's own (common/web-assets/) and the charting library from node_modules. */
function assetFile(name: string): string | undefined {
  if (name === "echarts.min.js") return join(packageRoot(), "node_modules", "echarts", "dist", "echarts.min.js");
  if (!/^[a-z0-9-]+\.(js|css|svg)$/.test(name)) return undefined;
  return join(packageRoot(), "common", "web-assets", name);
}

/**
 * Starts a daemon's web server; when its port cannot be bound, runs `undo` (shuts what the daemon started already) and
 * fails with CONFIG_INVALID naming `httpPort`: the configuration names a port the daemon cannot have.
 */
export async function startDaemonWeb(web: WebServer, daemon: string, undo: () => Promise<void>): Promise<void> {
  try {
    await web.start();
  } catch (err) {
    await undo().catch(() => undefined);
    throw new HarvestError(
      "CONFIG_INVALID",
      `${daemon} cannot serve HTTP on ${formatAddress(web.options.host, web.options.port)}: ${errorMessage(err)}`,
      { cause: err, details: { field: "httpPort" } },
    );
  }
}

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** A daemon's web server: routes, authentication, assets and /metrics. */
export class WebServer {
  private readonly routes: Route[] = [];
  private server: http.Server | undefined;
  private boundPort = 0;
  private readonly assets = new Map<string, Buffer>();

  constructor(readonly options: WebServerOptions) {}

  /** True when callers are authenticated (TLS is on). */
  get secure(): boolean {
    return this.options.tls !== undefined;
  }

  /** The server's base URL, e.g. `https://rm.example:8088` (valid once started). */
  get url(): string {
    return `${this.secure ? "https" : "http"}://${formatAddress(this.options.advertiseHost, this.boundPort)}`;
  }

  /** The port bound (valid once started). */
  get port(): number {
    return this.boundPort;
  }

  /**
   * Adds a GET route. `pattern` is a path whose `:name` parts match one segment and whose last part may be `*` (the
   * rest of the path). `access` lists the certificate roles (and "web" tokens of those roles) allowed when secure.
   */
  get(pattern: string, access: RouteAccess, handler: WebHandler): this {
    return this.route("GET", pattern, access, handler);
  }

  /**
   * Adds a route for `method` (GET routes answer HEAD too). A PUT or POST handler reads the request's `body` itself;
   * its client may wait for `100 Continue` first (curl does for bodies over 1 MiB), which the server sends only when
   * the handler asks for the body, so a refusal or a redirect costs no upload.
   */
  route(method: "GET" | "PUT" | "POST" | "DELETE", pattern: string, access: RouteAccess, handler: WebHandler): this {
    this.routes.push({ method, parts: splitPath(pattern), access, handler });
    return this;
  }

  /** Binds and resolves once serving. */
  async start(): Promise<void> {
    const { tls } = this.options;
    const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => {
        // The path only: a query may hold a login token.
        this.options.log.warn("web request failed", { path: (req.url ?? "").split("?")[0], error: errorMessage(err) });
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end();
      });
    };
    this.server = tls
      ? https.createServer(
          {
            ca: readFileSync(tls.ca),
            cert: readFileSync(tls.cert),
            key: readFileSync(tls.key),
            // Ask for a certificate, but let a browser without one in: it may log in with a web token.
            requestCert: true,
            rejectUnauthorized: false,
          },
          listener,
        )
      : http.createServer(listener);
    // Answer `Expect: 100-continue` only once a route takes the body (see `route`).
    this.server.on("checkContinue", listener);
    this.server.headersTimeout = 20_000;
    this.server.requestTimeout = this.options.requestTimeoutMs ?? 60_000;
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port, this.options.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.boundPort = (server.address() as AddressInfo).port;
  }

  /** Stops serving; idempotent. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://x");
    const wantsHtml = (req.headers.accept ?? "").includes("text/html");
    let path: string;
    try {
      // The path as sent: URL parsing would resolve `a/../b` before a route could refuse it (a DFS path with `..`).
      const raw = (req.url ?? "/").split("?")[0]!;
      path = decodeURIComponent(raw.startsWith("/") ? raw : url.pathname);
    } catch {
      return this.send(
        res,
        errorResponse(new HarvestError("INVALID_ARGUMENT", "the path is not valid UTF-8"), wantsHtml),
      );
    }
    // A client waiting for `100 Continue` that is answered without it may still send its body, or not: whatever it
    // does, the connection ends with this answer rather than parse the rest as a new request.
    if (req.headers.expect) res.shouldKeepAlive = false;
    const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET");
    if (method !== "GET" && !this.routes.some((r) => r.method === method))
      return this.send(res, notAllowed(method, this.methodsAt(path)));
    if (path.startsWith("/assets/")) return this.send(res, this.asset(path.slice("/assets/".length)));
    if (path === "/login") return this.send(res, this.login(url.searchParams, req));
    // Browsers ask for it on their own, before any login: Harvest's icon, not a 401 or 404 in their console.
    if (path === "/favicon.ico") return this.send(res, this.asset("favicon.svg"));
    const principal = this.authenticate(req);
    const standby = path === "/metrics" ? undefined : this.options.standby?.();
    if (standby?.activeWebUrl)
      // 307: the same method and URL at the active, as WebHDFS's and YARN's standbys do.
      return this.send(res, { status: 307, headers: { location: standby.activeWebUrl + (req.url ?? "/") }, text: "" });
    if (standby) return this.send(res, errorResponse(standby.error, wantsHtml));
    try {
      if (path === "/metrics") {
        this.requireAccess(principal, this.options.metricsAccess ?? ANY, "/metrics");
        const metrics = this.options.metrics;
        if (!metrics) throw new HarvestError("WEB_NOT_FOUND", "no metrics here");
        return this.send(res, { text: exposition(await metrics.metrics()), contentType: metrics.contentType });
      }
      const match = this.match(path, method);
      if (!match && method !== "GET" && this.match(path, "GET"))
        return await this.send(res, notAllowed(method, this.methodsAt(path)));
      if (!match) throw new HarvestError("WEB_NOT_FOUND", `nothing is served at ${path}`);
      const access = match.route.access;
      if (access !== SELF_AUTHENTICATED) this.requireAccess(principal, access, path);
      const body = method === "GET" ? undefined : continued(req, res);
      const out = await match.route.handler({
        method,
        path,
        params: match.params,
        query: url.searchParams,
        principal,
        wantsHtml,
        headers: req.headers,
        ...(body ? { body } : {}),
      });
      await this.send(res, out, req.method === "HEAD");
    } catch (err) {
      const h = asHarvestError(err);
      if (h.code === "INTERNAL") this.options.log.warn("web route failed", { path, error: h.message });
      await this.send(res, errorResponse(h, wantsHtml, this.secure && h.code === "UNAUTHENTICATED"));
    }
  }

  /** The caller: a verified client certificate, else a web token (bearer header or cookie); undefined if neither. */
  private authenticate(req: http.IncomingMessage): Principal | undefined {
    if (!this.secure) return undefined;
    const socket = req.socket as TLSSocket;
    if (socket.authorized) {
      const identity = identityOfCertificate(socket.getPeerCertificate());
      if (identity) return { ...identity, via: "certificate" };
    }
    const token = bearerToken(req.headers.authorization) ?? cookie(req.headers.cookie, webTokenCookie(this.boundPort));
    return token ? this.options.tokens?.(token) : undefined;
  }

  private requireAccess(principal: Principal | undefined, access: readonly Access[], what: string): void {
    if (!this.secure) return;
    if (!principal)
      throw new HarvestError(
        "UNAUTHENTICATED",
        `${what} needs a client certificate signed by the cluster CA or a web token: run 'harvest ui login'`,
      );
    if (!access.includes(principal.role as Access))
      throw new HarvestError(
        "PERMISSION_DENIED",
        `${principal.name} (role ${principal.role}) may not read ${what}: it needs ${access.join(" or ")}`,
      );
  }

  /**
   * `GET /login?token=T&next=P`: a valid token becomes an HttpOnly cookie and the browser goes to `P`, a path on this
   * daemon (`loginRedirectTarget`).
   */
  private login(query: URLSearchParams, req: http.IncomingMessage): WebResponse {
    const token = query.get("token") ?? "";
    const who = this.secure ? this.options.tokens?.(token) : undefined;
    if (this.secure && !who) {
      return errorResponse(
        new HarvestError("UNAUTHENTICATED", "the login token is not valid (expired?): run 'harvest ui login' again"),
        (req.headers.accept ?? "").includes("text/html"),
      );
    }
    return {
      status: 303,
      headers: {
        location: loginRedirectTarget(query.get("next")),
        ...(who
          ? {
              "set-cookie": `${webTokenCookie(this.boundPort)}=${token}; Path=/; HttpOnly; Secure; SameSite=Lax`,
            }
          : {}),
      },
      text: "",
    };
  }

  private asset(name: string): WebResponse {
    const file = assetFile(name);
    if (!file) return errorResponse(new HarvestError("WEB_NOT_FOUND", `no asset ${name}`), false);
    let body = this.assets.get(name);
    if (!body) {
      try {
        body = readFileSync(file);
      } catch {
        return errorResponse(new HarvestError("WEB_NOT_FOUND", `no asset ${name}`), false);
      }
      this.assets.set(name, body);
    }
    const ext = name.slice(name.lastIndexOf("."));
    return {
      body,
      contentType: ASSET_TYPES[ext] ?? "application/octet-stream",
      headers: { "cache-control": "max-age=300" },
    };
  }

  /** The methods served at `path` (GET and HEAD always: a path nothing serves answers 404 to them). */
  private methodsAt(path: string): string[] {
    const others = new Set(this.routes.filter((r) => r.method !== "GET").map((r) => r.method));
    return ["GET", "HEAD", ...[...others].filter((m) => this.match(path, m))];
  }

  private match(path: string, method: string): { route: Route; params: Record<string, string> } | undefined {
    const parts = splitPath(path);
    for (const route of this.routes) {
      if (route.method !== method) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < route.parts.length && ok; i++) {
        const want = route.parts[i]!;
        if (want === "*") {
          params["*"] = "/" + parts.slice(i).join("/");
          return { route, params };
        }
        const got = parts[i];
        if (got === undefined) ok = false;
        else if (want.startsWith(":")) params[want.slice(1)] = got;
        else if (want !== got) ok = false;
      }
      if (ok && parts.length === route.parts.length) return { route, params };
    }
    return undefined;
  }

  private send(res: http.ServerResponse, out: WebResponse, headOnly = false): void | Promise<void> {
    if (out.stream) return this.sendStream(res, out, out.stream, headOnly);
    let body: Buffer;
    let type = out.contentType;
    if (out.body) body = out.body;
    else if (out.html !== undefined) {
      body = Buffer.from(out.html);
      type ??= "text/html; charset=utf-8";
    } else if (out.text !== undefined) {
      body = Buffer.from(out.text);
      type ??= "text/plain; charset=utf-8";
    } else {
      body = Buffer.from(JSON.stringify(out.json ?? null));
      type ??= "application/json";
    }
    res.writeHead(out.status ?? 200, {
      "content-type": type,
      "content-length": body.length,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
      "content-security-policy":
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
      "cache-control": "no-store",
      ...out.headers,
    });
    res.end(headOnly ? undefined : body);
  }

  /** Sends `stream` as the body, as fast as the client takes it; a failure midway cuts the connection. */
  private async sendStream(
    res: http.ServerResponse,
    out: WebResponse,
    stream: Readable,
    headOnly: boolean,
  ): Promise<void> {
    res.writeHead(out.status ?? 200, {
      "content-type": out.contentType ?? "application/octet-stream",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
      "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
      "cache-control": "no-store",
      ...out.headers,
    });
    if (headOnly) {
      stream.destroy();
      res.end();
      return;
    }
    try {
      await pipeline(stream, res);
    } catch (err) {
      // The status went out already: only a cut connection tells the client that the body is short.
      res.destroy();
      // A client that hangs up early (`curl | head`) is no failure of ours.
      if ((err as { code?: string }).code !== "ERR_STREAM_PREMATURE_CLOSE")
        this.options.log.warn("web stream failed", {
          path: (res.req.url ?? "").split("?")[0],
          error: errorMessage(err),
        });
    }
  }
}

/** The request's body, for a route to call for when it reads it: sends `100 Continue` then to a client waiting for it. */
function continued(req: http.IncomingMessage, res: http.ServerResponse): () => Readable {
  let continueSent = false;
  return () => {
    if (!continueSent && /^100-continue$/i.test(req.headers.expect ?? "") && !res.headersSent) res.writeContinue();
    continueSent = true;
    return req;
  };
}

const ANY: readonly Access[] = ["daemon", "user", "admin"];

function notAllowed(method: string, allowed: string[]): WebResponse {
  return {
    status: 405,
    headers: { allow: allowed.join(", ") },
    json: { error: { code: "METHOD_NOT_ALLOWED", message: `${method} is not served at this path` } },
  };
}

function splitPath(path: string): string[] {
  return path.split("/").filter((p) => p.length > 0);
}

function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)$/i.exec(header ?? "");
  return m?.[1];
}

function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A Harvest error as JSON (scripts) or a small page (browsers). */
export function errorResponse(err: HarvestError, html: boolean, loginHint = false): WebResponse {
  const status = httpStatusOf(err);
  if (!html) return { status, json: { error: { code: err.code, message: err.message } } };
  const hint = loginHint
    ? `<p>Run <code>harvest ui login</code> and open the URL it prints, or present a client certificate.</p>`
    : "";
  return {
    status,
    html: `<!doctype html><html><head><meta charset="utf-8"><title>${status} ${escapeHtml(err.code)}</title>
<link rel="stylesheet" href="/assets/harvest.css"></head><body><main><h1>${status}: ${escapeHtml(err.code)}</h1>
<p>${escapeHtml(err.message)}</p>${hint}<p><a href="/">Home</a></p></main></body></html>`,
  };
}

/**
 * prom-client writes a NaN sample (the event-loop delay's mean when two scrapes come within one sampling interval) as
 * `Nan`; the text format spells it `NaN`, and strict parsers refuse the other.
 */
export function exposition(text: string): string {
  return text.replace(/ Nan$/gm, " NaN");
}

/** A base no request can name: `next` must resolve to a path under it. */
const LOCAL_ORIGIN = "http://this-daemon.invalid";

/**
 * Where `/login` may send the browser: `next` when it is a path on this daemon, else "/". `next` is read as a browser
 * reads a Location (the WHATWG URL parser: `\` is `/`, tabs and newlines are dropped), so that `/\evil.example`,
 * `/<tab>/evil.example` or `/.//evil.example` cannot become another host; what is sent back is the parsed path,
 * query and fragment, percent-encoded, never a path starting with `//`.
 */
export function loginRedirectTarget(next: string | null): string {
  if (!next?.startsWith("/")) return "/";
  let url: URL;
  try {
    url = new URL(next, `${LOCAL_ORIGIN}/`);
  } catch {
    return "/";
  }
  if (url.origin !== LOCAL_ORIGIN) return "/";
  const target = url.pathname + url.search + url.hash;
  return target.startsWith("//") ? "/" : target;
}
