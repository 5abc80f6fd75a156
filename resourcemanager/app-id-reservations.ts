/**
 * Application ids handed out before a submission (YARN's GetNewApplication): a client reserves one, asks the namenode
 * for the job's delegation token naming it, and submits with it. A reserved id comes from the same durable counter as
 * the ids picked at submission, so the two never collide, across restarts too; the reservation itself is durable (a
 * restart between the reservation and the submission keeps it) and lapses after `APP_ID_RESERVATION_MS`. An id is
 * used at most once: its reservation is taken by the submission that uses it.
 */
import type { Clock } from "../common/clock.js";
import { HarvestError } from "../common/errors.js";
import { formatAppId, parseAppId } from "../common/ids.js";
import type { AppIdReservation, RmStore } from "./state-store.js";

/** How long a reserved id stays usable; one never submitted goes unused, and its reservation is forgotten. */
export const APP_ID_RESERVATION_MS = 86_400_000;

/** The application ids reserved and not yet used. */
export class AppIdReservations {
  /** By id, oldest first. Invariant: each is durable in the store (until it is taken or lapses). */
  private readonly byId = new Map<string, AppIdReservation>();

  constructor(
    private readonly store: RmStore,
    private readonly clock: Clock,
  ) {}

  /** Reads the reservations back after a (re)start, forgetting those that lapsed. */
  async load(): Promise<void> {
    for (const r of await this.store.loadReservations()) this.byId.set(r.appId, r);
    await this.forgetLapsed();
  }

  /** Reserves a new id of the cluster `clusterTs` for `user`; resolves once the reservation is durable. */
  async reserve(clusterTs: number, user: string): Promise<string> {
    await this.forgetLapsed();
    const seq = await this.store.nextAppSeq();
    const r: AppIdReservation = { appId: formatAppId(clusterTs, seq), seq, user, reservedMs: this.clock.nowMs() };
    await this.store.putReservation(r);
    this.byId.set(r.appId, r);
    return r.appId;
  }

  /**
   * Takes the reservation of `appId` for a submission by `user` (whose name counts only when `checkUser`: on a secure
   * cluster); APP_ID_INVALID unless it is reserved, unlapsed, and (checked) by `user`. `used` tells an id a job
   * already has from one never reserved. Synchronous, so that two submissions with one id cannot both take it; the
   * submission drops the reservation from the store with its record (`putApp`), or `restore`s it when it fails.
   */
  take(appId: string, user: string, checkUser: boolean, used: (appId: string) => boolean): AppIdReservation {
    try {
      parseAppId(appId);
    } catch (err) {
      throw invalid(appId, "malformed", `${JSON.stringify(appId)} is not an application id`, err);
    }
    const r = this.byId.get(appId);
    if (!r || this.lapsed(r)) {
      if (used(appId)) throw invalid(appId, "used", `application id ${appId} is already used by a submitted job`);
      throw invalid(
        appId,
        "not-reserved",
        `application id ${appId} was not reserved by this resource manager, or its reservation lapsed`,
      );
    }
    if (checkUser && r.user !== user)
      throw invalid(appId, "reserved-by-another-user", `application id ${appId} was reserved by another user`);
    this.byId.delete(appId);
    return r;
  }

  /** Puts back a reservation taken by a submission that failed before its record was stored. */
  restore(r: AppIdReservation): void {
    this.byId.set(r.appId, r);
  }

  private lapsed(r: AppIdReservation): boolean {
    return this.clock.nowMs() >= r.reservedMs + APP_ID_RESERVATION_MS;
  }

  private async forgetLapsed(): Promise<void> {
    const lapsed = [...this.byId.values()].filter((r) => this.lapsed(r));
    if (lapsed.length === 0) return;
    for (const r of lapsed) this.byId.delete(r.appId);
    await this.store.deleteReservations(lapsed.map((r) => r.appId));
  }
}

function invalid(appId: string, reason: string, what: string, cause?: unknown): HarvestError<"APP_ID_INVALID"> {
  return new HarvestError(
    "APP_ID_INVALID",
    `${what}: submit with an id from GetNewApplication (JobClient.submit reserves one), or with none`,
    { details: { appId, reason }, ...(cause === undefined ? {} : { cause }) },
  );
}
