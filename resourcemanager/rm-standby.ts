/**
 * A standby resource manager's servers: its gRPC port answers every call of every resource-manager service with
 * NOT_ACTIVE naming the active (when known), so that clients, job managers and node managers made from the list of
 * addresses go there; HaAdmin (admins only) says its role. Its web port redirects every page to the active's web URL
 * (503 while none is known) and serves its own `/metrics`. It holds no state: a promotion stops it and the active
 * resource manager binds the same ports.
 */
import type * as grpc from "@grpc/grpc-js";
import { amTokenVerifier, ANY_CERTIFICATE, Gate } from "../common/auth.js";
import type { Access } from "../common/auth.js";
import { HarvestError, toServiceError } from "../common/errors.js";
import { haAdminHandlers, loadHaAdminProto } from "../common/ha-admin.js";
import { haGauges } from "../common/ha-metrics.js";
import type { HaAdminSource } from "../common/ha-admin.js";
import { bindServer, createServer, loadHarvestProto, shutdownServer } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import { daemonRegistry, grpcServerMetrics } from "../common/metrics.js";
import { WebServer } from "../common/web-server.js";
import type { ResourceManagerOptions } from "./options.js";

/** The resource-manager services a standby refuses (every one the active serves, but HaAdmin). */
export function rmServiceDefinitions(): grpc.ServiceDefinition[] {
  const proto = loadHarvestProto();
  return [
    proto.ResourceTracker.service,
    proto.ApplicationMasterService.service,
    proto.ApplicationClientService.service,
    proto.TenantAdmin.service,
    proto.PowerAdmin.service,
    proto.NodeAdmin.service,
  ];
}

/** The NOT_ACTIVE a standby resource manager answers with. */
export function notActive(active: string | undefined, epoch: number): HarvestError<"NOT_ACTIVE"> {
  return new HarvestError(
    "NOT_ACTIVE",
    `this resource manager is a standby${active ? `; the active one is at ${active}` : " and knows no active one yet"}`,
    { details: { ...(active ? { active } : {}), ...(epoch > 0 ? { epoch: String(epoch) } : {}) } },
  );
}

/** What the standby reads of the election. */
export interface StandbyView {
  /** The active's gRPC address and web URL, when known. */
  active(): { address: string; webUrl: string } | undefined;
  epoch(): number;
  admin: HaAdminSource;
}

/** A standby's servers (see the file comment). */
export class RmStandby {
  /** Its own metrics (process, gRPC, role and term), served at `/metrics` on the web port. */
  private readonly registry = daemonRegistry("resourcemanager");
  private readonly server: grpc.Server;
  private web: WebServer | undefined;
  private grpcPort = 0;

  constructor(
    private readonly options: ResourceManagerOptions,
    private readonly view: StandbyView,
    private readonly log: Logger,
  ) {
    this.server = createServer([grpcServerMetrics(this.registry)]);
    haGauges(this.registry, () => view.admin.status());
  }

  /** The ports bound (valid once started). */
  get ports(): { port: number; httpPort: number } {
    return { port: this.grpcPort, httpPort: this.web?.port ?? 0 };
  }

  get webUrl(): string {
    return this.web?.url ?? "";
  }

  /** Binds `port` and `httpPort` (0: free ones) and serves. */
  async start(port: number, httpPort: number): Promise<void> {
    const o = this.options;
    // Everyone the active would let in hears where the active is (a job manager's AM token included).
    const gate = new Gate(o.tls, { "am-token": amTokenVerifier(o.secret) });
    const refuse = (): grpc.ServiceError => toServiceError(this.refusal()) as grpc.ServiceError;
    for (const service of rmServiceDefinitions()) {
      const impl: grpc.UntypedServiceImplementation = {};
      const rules: Record<string, readonly Access[]> = {};
      for (const [name, method] of Object.entries(service)) {
        rules[name] = [...ANY_CERTIFICATE, "am-token"];
        impl[name] =
          method.responseStream || method.requestStream
            ? (call: grpc.ServerDuplexStream<unknown, unknown>) => {
                call.on("error", () => undefined);
                call.emit("error", refuse());
              }
            : (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(refuse());
      }
      gate.allow(service, rules);
      this.server.addService(service, impl);
    }
    const ha = loadHaAdminProto();
    gate.allow(ha.HaAdmin.service, { GetHaStatus: ["admin"], Failover: ["admin"] });
    this.server.addService(ha.HaAdmin.service, haAdminHandlers(this.view.admin));
    this.grpcPort = await bindServer(this.server, o.host, port, gate.credentials());
    const web = new WebServer({
      host: o.httpHost,
      port: httpPort,
      advertiseHost: o.advertiseHost,
      tls: o.tls,
      metrics: this.registry,
      title: "Harvest resource manager (standby)",
      log: this.log.child("web"),
    });
    const redirect = (req: {
      path: string;
      query: URLSearchParams;
    }): { status: number; headers: Record<string, string>; text: string } => {
      const active = this.view.active();
      if (!active?.webUrl) throw this.refusal();
      const query = req.query.toString();
      const location = `${active.webUrl}${req.path}${query ? `?${query}` : ""}`;
      return { status: 307, headers: { location }, text: `standby; the active resource manager is at ${location}\n` };
    };
    web.get("/", ANY_CERTIFICATE, redirect).get("/*", ANY_CERTIFICATE, redirect);
    try {
      await web.start();
    } catch (err) {
      await shutdownServer(this.server, 500);
      throw err;
    }
    this.web = web;
  }

  /** Stops both servers (their ports are free once this resolves); idempotent. */
  async stop(): Promise<void> {
    await this.web?.stop();
    this.web = undefined;
    await shutdownServer(this.server, 500);
  }

  private refusal(): HarvestError<"NOT_ACTIVE"> {
    return notActive(this.view.active()?.address, this.view.epoch());
  }
}
