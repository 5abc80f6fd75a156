/**
 * A highly available resource manager (option `haCoordination`): it campaigns in the coordination service's election
 * (service "rm") and is a standby until elected (rm-standby.ts: NOT_ACTIVE to every call, pages redirected to the
 * active). Elected, it stops the standby's servers and builds a `ResourceManager` on the same ports over the state in
 * etcd (etcd-state-store.ts, fenced by its term), which recovers work-preservingly exactly as a restarted one does.
 * When the term ends (the session lapsed, a write was refused as fenced, or `harvest admin ha failover`), it stops the
 * resource manager at once and becomes a fresh standby: it never keeps serving as an active of a term that is over.
 */
import type { RunnableDaemon } from "../common/daemon-main.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { Coordination } from "../common/ha/coordination.js";
import { MasterElection } from "../common/ha/election.js";
import type { MasterInfo } from "../common/ha/election.js";
import type { HaAdminSource } from "../common/ha-admin.js";
import { Logger } from "../common/log.js";
import { formatAddress } from "../common/net-address.js";
import type { HaStatus } from "../proto/generated/harvest/v1/HaStatus.js";
import { EtcdRmStore } from "./etcd-state-store.js";
import { resolveResourceManagerOptions } from "./options.js";
import type { ResourceManagerOptions } from "./options.js";
import { ResourceManager } from "./resource-manager.js";
import { notActive, RmStandby } from "./rm-standby.js";
import type { RmStore } from "./state-store.js";

type RmConfig = Partial<ResourceManagerOptions> & { dataDir: string };

/** An active or standby resource manager (see the file comment). */
export class HaResourceManager implements RunnableDaemon {
  readonly options: ResourceManagerOptions;
  private readonly log: Logger;
  private coordination: Coordination | undefined;
  private election: MasterElection | undefined;
  /** Invariant: at most one of `standby` and `active` is set; neither while changing role or stopped. */
  private standby: RmStandby | undefined;
  private active: ResourceManager | undefined;
  /** The ports the first standby bound: every later standby and active binds the same. */
  private ports = { port: 0, httpPort: 0 };
  private webUrl = "";
  private stopped = false;

  constructor(
    private readonly config: RmConfig,
    deps: { logger?: Logger } = {},
  ) {
    this.options = resolveResourceManagerOptions(config);
    if (!this.options.haCoordination)
      throw new HarvestError("CONFIG_INVALID", "a highly available resource manager needs haCoordination", {
        details: { field: "haCoordination" },
      });
    this.log = deps.logger ?? new Logger("rm");
  }

  get address(): string {
    return formatAddress(this.options.advertiseHost, this.ports.port);
  }

  get httpUrl(): string | undefined {
    return this.webUrl || undefined;
  }

  /** "standby", "promoting", "active" or "stopped". */
  get role(): string {
    return this.election?.role ?? "standby";
  }

  /** The current term when active, else the last seen. */
  get epoch(): number {
    return this.election?.epoch ?? 0;
  }

  /** Serves as a standby and campaigns; resolves once the standby serves. */
  async start(): Promise<void> {
    this.coordination = new Coordination(this.options.haCoordination!);
    await this.becomeStandby(this.options.port, this.options.httpPort);
    const me: MasterInfo = { id: this.address, address: this.address, webUrl: this.webUrl };
    this.election = new MasterElection(
      this.coordination,
      "rm",
      me,
      {
        promote: (epoch) => this.promote(epoch),
        demote: (reason) => this.demote(reason),
        leaderChanged: (leader) => this.log.info("active resource manager", { active: leader?.address ?? "none" }),
      },
      this.log.child("election"),
    );
    this.election.start();
    this.log.info("resource manager standby serving; campaigning", { address: this.address, httpUrl: this.webUrl });
  }

  /** Stops whatever role it has, gives the term up and leaves the election; idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const active = this.active;
    this.active = undefined;
    await active?.stop();
    await this.election?.stop();
    const standby = this.standby;
    this.standby = undefined;
    await standby?.stop();
    this.coordination?.close();
  }

  /** HaAdmin's answers, on the standby's port and on the active's. */
  private admin(): HaAdminSource {
    return {
      status: () => this.status(),
      failover: () => {
        const election = this.election;
        if (!election || election.role !== "active")
          return Promise.reject(notActive(election?.leader?.address, election?.epoch ?? 0));
        const before = this.status();
        // Not awaited: stepping down stops the server this answer goes out on. The caller watches for the new active.
        void election.resign();
        return Promise.resolve(before);
      },
    };
  }

  private status(): HaStatus {
    const leader = this.election?.leader;
    return {
      service: "rm",
      id: this.address,
      role: this.role,
      epoch: this.epoch,
      address: this.address,
      webUrl: this.webUrl,
      activeAddress: leader?.address ?? "",
      activeWebUrl: leader?.webUrl ?? "",
    };
  }

  private async becomeStandby(port: number, httpPort: number): Promise<void> {
    const standby = new RmStandby(
      this.options,
      {
        active: () => {
          const leader = this.election?.leader;
          return leader && leader.address !== this.address ? leader : undefined;
        },
        epoch: () => this.epoch,
        admin: this.admin(),
      },
      this.log.child("standby"),
    );
    await standby.start(port, httpPort);
    this.standby = standby;
    this.ports = standby.ports;
    this.webUrl = standby.webUrl;
  }

  /** Elected: the standby's ports go to a resource manager over the fenced etcd store, which recovers. */
  private async promote(epoch: number): Promise<void> {
    const startedMs = Date.now();
    const standby = this.standby;
    this.standby = undefined;
    await standby?.stop();
    if (this.stopped || !this.coordination || !this.election) throw new Error("stopping");
    const store = new EtcdRmStore(this.coordination, this.election.fenceKey);
    const fenced = this.fencedStore(store);
    if (this.options.secret) await store.checkClusterSecret(this.options.secret);
    const rm = new ResourceManager(
      { ...this.config, port: this.ports.port, httpPort: this.ports.httpPort },
      {
        logger: this.log,
        ha: { epoch, store: fenced, webTokenKey: await store.webTokenKey(), admin: this.admin() },
      },
    );
    this.active = rm;
    // A throw gives the term up: the election demotes (a fresh standby) and campaigns again.
    await rm.start();
    this.log.info("resource manager active", { epoch, promotionMs: Date.now() - startedMs, address: this.address });
  }

  /** The term ended: stop acting at once, then serve as a fresh standby. */
  private async demote(reason: string): Promise<void> {
    const rm = this.active;
    this.active = undefined;
    this.log.warn("resource manager stepping down", { reason, epoch: this.epoch });
    await rm
      ?.stop()
      .catch((err: unknown) => this.log.error("stopping the active parts failed", { error: errorMessage(err) }));
    if (this.stopped) return;
    try {
      await this.becomeStandby(this.ports.port, this.ports.httpPort);
    } catch (err) {
      // Its ports are gone (taken meanwhile): nothing to serve with; exit so that a supervisor restarts it.
      this.log.error("cannot serve as a standby again; exiting", { error: errorMessage(err) });
      process.exitCode = 1;
      await this.stop();
    }
  }

  /**
   * The store as the resource manager uses it: a write refused as fenced (another master holds the term: the
   * session lapsed before this master heard) ends the term here at once, as the election's own `lost` would.
   */
  private fencedStore(store: EtcdRmStore): RmStore {
    const onFenced = (err: unknown): never => {
      if (isHarvestError(err, "NOT_ACTIVE") && this.active) {
        this.log.warn("a state write was refused: this term is over", { epoch: this.epoch });
        void this.election?.resign();
      }
      throw err;
    };
    return new Proxy(store, {
      get: (target, prop, receiver) => {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (typeof v !== "function") return v;
        return (...args: unknown[]) => {
          const out = (v as (...a: unknown[]) => unknown).apply(target, args);
          return out instanceof Promise ? out.catch(onFenced) : out;
        };
      },
    });
  }
}

/**
 * The resource manager a configuration asks for, as the daemon entry points make it: highly available (a standby that
 * campaigns) with `haCoordination`, else the plain one. Callable with `new`, as the CLI's daemon table expects.
 */
export const ResourceManagerDaemon = function (config: RmConfig): RunnableDaemon {
  return config.haCoordination ? new HaResourceManager(config) : new ResourceManager(config);
} as unknown as new (config: RmConfig) => RunnableDaemon;
