/**
 * What the four serving daemons (resource manager, node manager, namenode, datanode) share around their lifecycle: the
 * state, the address their gRPC server advertises, and their web server (UI, REST API, `/metrics`), started after the
 * gRPC bind. Each daemon extends `ServingDaemon` and keeps its own start and stop steps.
 */
import type { Registry } from "prom-client";
import { Lifecycle, type DaemonState } from "./lifecycle.js";
import type { Logger } from "./log.js";
import { formatAddress } from "./net-address.js";
import type { TlsFiles } from "./tls.js";
import { startDaemonWeb, WebServer, type WebServerOptions, type WebTokenVerifier } from "./web-server.js";

/** The fields of a daemon's options that say where it serves (every daemon's options carry them under these names). */
export interface ServingOptions {
  advertiseHost: string;
  httpHost: string;
  httpPort: number;
  tls?: TlsFiles | undefined;
}

/** A daemon's web server: its title, metrics, log, web tokens, routes, and what to shut when its port cannot be bound. */
export interface DaemonWebSpec {
  /** The page title: "Harvest namenode". */
  title: string;
  metrics: Registry;
  log: Logger;
  tokens?: WebTokenVerifier | undefined;
  /** Registers the daemon's pages and REST API (a daemon that serves only `/metrics` has none). */
  routes?: (web: WebServer) => void;
  /** Shuts what the daemon started already when the web port cannot be bound (see `startDaemonWeb`). */
  undo: () => Promise<void>;
  /** HA: what a standby answers web requests with (WebServerOptions.standby). */
  standby?: WebServerOptions["standby"];
  /** WebServerOptions.requestTimeoutMs (0 for a server that takes streamed uploads). @default 60000 */
  requestTimeoutMs?: number;
}

/** The base of a serving daemon: its lifecycle, bound gRPC port and web server (see the file comment). */
export abstract class ServingDaemon {
  protected readonly lifecycle: Lifecycle;
  /** The gRPC port `start()` bound (0 until then). */
  protected boundPort = 0;
  /** Set once the web server serves. */
  protected web: WebServer | undefined;
  /** When the daemon began to serve (ms since the epoch; 0 before): its overview page's uptime counts from here. */
  protected servingSinceMs = 0;

  /** `daemon` names the daemon in errors: "namenode", "node manager". */
  protected constructor(daemon: string) {
    this.lifecycle = new Lifecycle(daemon);
  }

  /** Where the daemon serves. */
  protected abstract get serving(): ServingOptions;

  /** The start's steps, up to serving: the lifecycle runs them between `starting` and `running`. */
  protected abstract startSteps(): Promise<void>;

  /** The daemon's log, where `start()` says that it serves. */
  protected abstract readonly log: Logger;

  /**
   * Runs once the daemon serves (a worker registers with its master here); returns what the "serving" log line adds to
   * the address and the web URL.
   */
  protected abstract onServing(): Record<string, unknown>;

  /** The stop's steps, given the state the daemon was in; run after a start under way has finished its own. */
  protected abstract stopSteps(was: DaemonState): Promise<void>;

  /** Starts the daemon; resolves once it serves. A stop meanwhile makes it fail with DAEMON_INVALID_TRANSITION. */
  async start(): Promise<void> {
    await this.lifecycle.start(() => this.startSteps());
    this.servingSinceMs = Date.now();
    const details = this.onServing();
    this.log.info(`${this.lifecycle.daemon} serving`, { address: this.address, httpUrl: this.httpUrl, ...details });
  }

  /** Stops the daemon and closes what it opened; idempotent, and callable from any state. */
  async stop(): Promise<void> {
    await this.lifecycle.stop((was) => this.stopSteps(was));
  }

  /** Current lifecycle state. */
  get state(): DaemonState {
    return this.lifecycle.state;
  }

  /** host:port the daemon's gRPC services are reached at (valid once started). */
  get address(): string {
    return formatAddress(this.serving.advertiseHost, this.boundPort);
  }

  /** Base URL of the daemon's web server (undefined until started). */
  get httpUrl(): string | undefined {
    return this.web?.url;
  }

  /**
   * Starts the web server (with TLS: to certificates under the cluster CA, and web tokens when given). A port that
   * cannot be bound runs `undo` and fails with CONFIG_INVALID: the configuration names one the daemon cannot have.
   */
  protected async startWeb(spec: DaemonWebSpec): Promise<void> {
    const o = this.serving;
    const web = new WebServer({
      host: o.httpHost,
      port: o.httpPort,
      advertiseHost: o.advertiseHost,
      tls: o.tls,
      ...(spec.tokens ? { tokens: spec.tokens } : {}),
      metrics: spec.metrics,
      title: spec.title,
      log: spec.log,
      ...(spec.standby ? { standby: spec.standby } : {}),
      ...(spec.requestTimeoutMs !== undefined ? { requestTimeoutMs: spec.requestTimeoutMs } : {}),
    });
    spec.routes?.(web);
    await startDaemonWeb(web, this.lifecycle.daemon, spec.undo);
    this.web = web;
  }
}
