/**
 * Which of a service's masters is active: etcd3's election (a leased key per candidate under
 * `/harvest/<cluster>/<service>/election/leader/`; the oldest key leads), wrapped with the fencing epoch and the
 * hand-overs a daemon needs.
 *
 * The epoch of a term is the leader key's create revision: etcd's revisions only grow, so every later term has a
 * larger one, and a write fenced by it (a transaction comparing the key's create revision, {@link fence}) fails once
 * the key is gone: when the leader's session lapsed, after a partition, a pause or a crash. Workers refuse messages
 * from a lower epoch than one they saw. A standby learns the leader from the key's value (its advertised addresses).
 */
import type { Campaign, Election, Etcd3, Namespace } from "etcd3";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { Coordination } from "./coordination.js";

/** What a master announces while it leads, and what a standby tells callers. */
export interface MasterInfo {
  /** The master's name (its node id or host). */
  id: string;
  /** Its advertised gRPC address, host:port. */
  address: string;
  /** Its web UI's base URL ("" when it serves none). */
  webUrl: string;
}

/** A master's place in its service. */
export type HaRole = "standby" | "promoting" | "active" | "stopped";

/** What the daemon does when its role changes. */
export interface ElectionHandlers {
  /**
   * Elected: become active under `epoch` (catch up, then serve). A throw (or a rejection) gives the term up: the
   * candidate resigns and campaigns again, so another master takes over.
   */
  promote(epoch: number): Promise<void>;
  /**
   * The term ended while active (the session lapsed, or the service cut it): stop acting as active at once. The
   * election campaigns again only after this settles.
   */
  demote(reason: string): Promise<void>;
  /** The leader changed (undefined: none known). */
  leaderChanged?(leader: MasterInfo | undefined): void;
}

const RETRY_MS = 1_000;
/**
 * How often a master checks its view of the election against the coordination service's own answer (the oldest key).
 * etcd3 learns that a leader key went by a watch event; one event missed (a watch stream moved between members while
 * one of them caught up after a partition healed) left a candidate whose key led waiting for ever, and a standby
 * naming an active that was gone. Two checks in a row that disagree with the view correct it.
 */
const RECHECK_MS = 2_000;

/** One master's candidacy in its service's election. */
export class MasterElection {
  private readonly election: Election;
  private campaign: Campaign | undefined;
  private roleValue: HaRole = "standby";
  private epochValue = 0;
  private leaderKey = "";
  private leaderValue: MasterInfo | undefined;
  private observing = false;
  /** The leader watch while it runs (cancelled on stop, so a stopped election leaves no stream open). */
  private observer: Awaited<ReturnType<Election["observe"]>> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private recheckTimer: NodeJS.Timeout | undefined;
  private rechecking = false;
  /** What the last recheck found wrong, by the leading key it saw (acted on when the next one agrees). */
  private suspect: { key: string; stuck: boolean; stale: boolean } | undefined;
  /** The current campaign's key under the election's folder (its lease id), once granted. */
  private campaignLease: string | undefined;
  /** Settles when the current role change has (promote or demote). */
  private transition: Promise<void> = Promise.resolve();

  constructor(
    private readonly coordination: Coordination,
    /** The service's folder name: `nn` or `rm`. */
    readonly service: string,
    private readonly me: MasterInfo,
    private readonly handlers: ElectionHandlers,
    private readonly log: Logger,
  ) {
    this.election = coordination.service(service).election("leader", coordination.sessionTtlS);
  }

  get role(): HaRole {
    return this.roleValue;
  }

  /** The current term's epoch while active or promoting; else the last epoch seen (0: none yet). */
  get epoch(): number {
    return this.epochValue;
  }

  /**
   * The active master as last observed (this one while active or promoting). A standby never names itself: a value
   * naming this master is an event of its own ended term delivered late (or a key whose campaign the recheck is
   * about to take up), and sending callers to itself would loop.
   */
  get leader(): MasterInfo | undefined {
    if (this.roleValue === "active" || this.roleValue === "promoting") return this.me;
    return this.leaderValue?.id === this.me.id ? undefined : this.leaderValue;
  }

  /** Campaigns and watches the leader. */
  start(): void {
    this.runCampaign();
    void this.observe();
    this.recheckTimer = setInterval(() => void this.recheck(), RECHECK_MS);
  }

  /**
   * A comparison for a transaction that succeeds only while this term lasts (the leader key still exists with the
   * epoch as its create revision). Use it on every write an active makes to the service's state.
   */
  fence(ns: Etcd3 | Namespace): ReturnType<Etcd3["if"]> {
    return (ns as Etcd3).if(this.leaderKey, "Create", "==", this.epochValue);
  }

  /** The full key of this term's leader key (for a transaction built by hand). */
  get fenceKey(): { key: string; epoch: number } {
    return { key: this.leaderKey, epoch: this.epochValue };
  }

  /**
   * A graceful hand-over: gives the term up (the daemon demotes first), then campaigns again behind the others, so
   * that another master takes over. Resolves once the term is given up.
   */
  async resign(): Promise<void> {
    if (this.roleValue !== "active") return;
    await this.endTerm("handed over (harvest admin ha failover)");
  }

  /** Stops campaigning and watching; an active gives up its term (the daemon has stopped serving). */
  async stop(): Promise<void> {
    const was = this.roleValue;
    this.roleValue = "stopped";
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    const c = this.campaign;
    this.campaign = undefined;
    await c?.resign().catch(() => undefined);
    const observer = this.observer;
    this.observer = undefined;
    await observer?.cancel().catch(() => undefined);
    if (was === "active") this.log.info("gave up the active term: stopping", { service: this.service });
  }

  private runCampaign(): void {
    if (this.roleValue === "stopped") return;
    const c = this.election.campaign(JSON.stringify(this.me));
    this.campaign = c;
    this.campaignLease = undefined;
    c.getCampaignKey().then(
      (key) => {
        if (this.campaign === c) this.campaignLease = key.slice(key.lastIndexOf("/") + 1);
      },
      () => undefined,
    );
    // The session's keep-alive stream, as etcd3 keeps it (not part of its typed API): say when it breaks, the first
    // sign of losing the coordination service.
    const lease = (c as unknown as { lease?: { on?(event: string, fn: (err: unknown) => void): void } }).lease;
    let failing = false;
    lease?.on?.("keepaliveFailed", (err) => {
      if (!failing)
        this.log.warn("the session's keep-alive failed; retrying", { service: this.service, error: errorMessage(err) });
      failing = true;
    });
    lease?.on?.("keepaliveSucceeded", () => {
      if (failing) this.log.info("the session's keep-alive works again", { service: this.service });
      failing = false;
    });
    c.on("elected", () => {
      if (this.campaign !== c) return;
      this.transition = this.transition.then(() => this.onElected(c));
    });
    c.on("error", (err: unknown) => {
      if (this.campaign !== c) return;
      this.campaign = undefined;
      const reason = errorMessage(err);
      if (this.roleValue === "active" || this.roleValue === "promoting")
        this.transition = this.transition.then(() => this.demote(`the coordination session ended: ${reason}`));
      else this.log.warn("campaign failed; will campaign again", { service: this.service, error: reason });
      this.transition = this.transition.then(() => this.retryLater());
    });
  }

  private async onElected(c: Campaign): Promise<void> {
    // Not standby: stopped, or already elected (the recheck found the key leading before etcd3 said so).
    if (this.roleValue !== "standby" || this.campaign !== c) return;
    try {
      const key = await c.getCampaignKey();
      const kv = (await this.coordination.client.get(key).exec()).kvs[0];
      if (!kv) throw new Error("the leader key vanished at once (the session lapsed)");
      this.leaderKey = key;
      this.epochValue = Number(kv.create_revision);
      this.roleValue = "promoting";
      this.log.info("elected: becoming active", { service: this.service, epoch: this.epochValue });
      await this.handlers.promote(this.epochValue);
      if (this.campaign !== c) return; // the session ended while promoting: demote ran
      this.roleValue = "active";
      this.handlers.leaderChanged?.(this.me);
      this.log.info("active", { service: this.service, epoch: this.epochValue });
    } catch (err) {
      if (this.campaign !== c) return;
      await this.endTerm(`promotion failed: ${errorMessage(err)}`);
      this.retryLater();
    }
  }

  /** Demotes (if active or promoting) and gives the term up; the next campaign starts after RETRY_MS. */
  private async endTerm(reason: string): Promise<void> {
    const c = this.campaign;
    this.campaign = undefined;
    await this.demote(reason);
    await c?.resign().catch(() => undefined);
    this.retryLater();
  }

  private async demote(reason: string): Promise<void> {
    if (this.roleValue !== "active" && this.roleValue !== "promoting") return;
    this.roleValue = "standby";
    // Whoever leads now is not known until the observer hears of it (not this master, as it was).
    this.leaderValue = undefined;
    this.log.warn("no longer active: stepping down", { service: this.service, epoch: this.epochValue, reason });
    await this.handlers
      .demote(reason)
      .catch((err: unknown) =>
        this.log.error("stepping down failed", { service: this.service, error: errorMessage(err) }),
      );
  }

  private retryLater(): void {
    if (this.roleValue === "stopped" || this.campaign || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (!this.campaign) this.runCampaign();
    }, RETRY_MS);
  }

  /** Follows the leader key's value (the active's addresses), observing again after an error. */
  private async observe(): Promise<void> {
    if (this.observing || this.roleValue === "stopped") return;
    this.observing = true;
    try {
      const observer = await this.election.observe();
      // Stopped while the watch was being set up.
      if ((this.roleValue as HaRole) === "stopped") {
        await observer.cancel().catch(() => undefined);
        return;
      }
      this.observer = observer;
      const seen = (value: string | undefined): void => {
        if (this.observer !== observer) return; // replaced by a recheck
        this.leaderValue = parseMaster(value);
        if (this.roleValue !== "active") this.handlers.leaderChanged?.(this.leaderValue);
        // A standby reports the term it last saw (the leader key's create revision).
        void currentLeader(this.coordination, this.service).then(
          (l) => {
            if (l && this.roleValue === "standby" && l.epoch > this.epochValue) this.epochValue = l.epoch;
          },
          () => undefined,
        );
      };
      seen(observer.leader());
      observer.on("change", (value) => seen(value));
      observer.on("error", () => {
        if (this.observer !== observer) return;
        this.observing = false;
        if (this.observer === observer) this.observer = undefined;
        void observer.cancel().catch(() => undefined);
        setTimeout(() => void this.observe(), RETRY_MS);
      });
    } catch (err) {
      this.observing = false;
      this.log.debug("cannot observe the leader; will try again", { service: this.service, error: errorMessage(err) });
      setTimeout(() => void this.observe(), RETRY_MS);
    }
  }

  /**
   * Compares the view with the coordination service's answer ({@link RECHECK_MS}): a candidate whose key leads
   * takes the term, a standby follows the leader the service names. Only a standby checks; an active's term is
   * fenced by its key, and losing the key ends it through the session.
   */
  private async recheck(): Promise<void> {
    if (this.rechecking || this.roleValue !== "standby") {
      this.suspect = undefined;
      return;
    }
    this.rechecking = true;
    try {
      const leading = await leadingKey(this.coordination, this.service);
      if (this.roleValue !== "standby") return;
      const c = this.campaign;
      const key = leading?.key ?? "";
      const leader = parseMaster(leading?.value);
      const stuck = c !== undefined && leading !== undefined && this.campaignLease === key;
      const stale = !stuck && !sameMaster(leader, this.leaderValue);
      const before = this.suspect;
      this.suspect = stuck || stale ? { key, stuck, stale } : undefined;
      if (before?.key !== key) return;
      if (stuck && before.stuck && c) {
        this.suspect = undefined;
        this.log.warn(
          "this master's key leads the election but its campaign was not told (a missed watch event): " +
            "taking the term",
          { service: this.service },
        );
        this.transition = this.transition.then(() => this.onElected(c));
      } else if (stale && before.stale) {
        this.suspect = undefined;
        this.log.warn("the leader's watch missed a change: following the coordination service's answer", {
          service: this.service,
          leader: leader?.id ?? "none",
        });
        this.leaderValue = leader;
        this.handlers.leaderChanged?.(leader);
        await this.restartObserver();
      }
    } catch (err) {
      // Unreachable now: the session's keep-alive and the campaign say so on their own.
      this.log.debug("cannot check the election; will try again", { service: this.service, error: errorMessage(err) });
    } finally {
      this.rechecking = false;
    }
  }

  /** Cancels the leader's watch and opens a new one (it reads the leader afresh). */
  private async restartObserver(): Promise<void> {
    const observer = this.observer;
    if (!observer) return; // not observing now: observe() is retrying already
    this.observer = undefined;
    this.observing = false;
    await observer.cancel().catch(() => undefined);
    void this.observe();
  }
}

/** Whether two masters are the same one at the same addresses (both undefined: no leader). */
function sameMaster(a: MasterInfo | undefined, b: MasterInfo | undefined): boolean {
  return a?.id === b?.id && a?.address === b?.address && a?.webUrl === b?.webUrl;
}

/** The master a leader key's value names, or undefined if it is not one. */
export function parseMaster(value: string | undefined): MasterInfo | undefined {
  if (!value) return undefined;
  try {
    const v = JSON.parse(value) as Partial<MasterInfo>;
    if (typeof v.id === "string" && typeof v.address === "string")
      return { id: v.id, address: v.address, webUrl: typeof v.webUrl === "string" ? v.webUrl : "" };
  } catch {
    // not ours
  }
  return undefined;
}

/** The oldest key of a service's election (its leader's), read through the ensemble's majority; undefined: none. */
async function leadingKey(
  coordination: Coordination,
  service: string,
): Promise<{ key: string; value: string; createRevision: number } | undefined> {
  const res = await coordination
    .service(service)
    .namespace("election/leader/")
    .getAll()
    .sort("Create", "Ascend")
    .limit(1)
    .exec();
  const kv = res.kvs[0];
  return kv && { key: kv.key.toString(), value: kv.value.toString(), createRevision: Number(kv.create_revision) };
}

/** The active master of a service as the coordination service names it now (for `harvest admin ha status`). */
export async function currentLeader(
  coordination: Coordination,
  service: string,
): Promise<(MasterInfo & { epoch: number }) | undefined> {
  const kv = await leadingKey(coordination, service);
  const info = parseMaster(kv?.value);
  return info && kv ? { ...info, epoch: kv.createRevision } : undefined;
}
