import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { detailsOf } from "../../common/errors.js";
import { formatAppId } from "../../common/ids.js";
import { APP_ID_RESERVATION_MS, AppIdReservations } from "../../resourcemanager/app-id-reservations.js";
import { RmStateStore } from "../../resourcemanager/state-store.js";
import type { AppRecord } from "../../resourcemanager/state-store.js";
import { thrown } from "../error-code.js";

const TS = 1_700_000_000_000;
const dir = mkdtempSync(join(tmpdir(), "harvest-reserve-"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A resource manager's reservations over a real store in `name`, as it starts. */
async function open(name: string, clock: ManualClock) {
  const store = new RmStateStore(join(dir, name));
  await store.open();
  const reservations = new AppIdReservations(store, clock);
  await reservations.load();
  return { store, reservations };
}

/** The reason `take` refuses with (APP_ID_INVALID), or "taken". */
function reasonOf(take: () => unknown): string {
  try {
    take();
    return "taken";
  } catch (err) {
    return detailsOf(err, "APP_ID_INVALID")?.reason ?? String(err);
  }
}

const never = (): boolean => false;

/** The record a submission with `appId` stores. */
function record(appId: string, seq: number): AppRecord {
  return {
    ...{ appId, seq, name: "j", user: "alice", dagJson: "{}", state: "ACCEPTED", diagnostics: "" },
    ...{ outcome: "JOB_OUTCOME_UNSPECIFIED", submitMs: 0, startMs: 0, finishMs: 0 },
    ...{ attempt: 1, failedAttempts: 0, maxConcurrency: 0 },
  };
}

describe("application id reservations", () => {
  it("come from the counter submissions use, so a reserved id and a picked one never meet, across a restart", async () => {
    const clock = new ManualClock(0);
    const first = await open("counter", clock);
    const a = await first.reservations.reserve(TS, "alice");
    const picked = await first.store.nextAppSeq();
    await first.store.close();
    const again = await open("counter", clock);
    const b = await again.reservations.reserve(TS, "alice");
    expect(new Set([a, formatAppId(TS, picked), b]).size).toBe(3);
    // Reserved before the restart, still usable after it.
    expect(again.reservations.take(a, "alice", true, never).appId).toBe(a);
    await again.store.close();
  });

  it("hand out distinct ids to reservations made at once", async () => {
    const first = await open("concurrent", new ManualClock(0));
    const ids = await Promise.all(Array.from({ length: 20 }, () => first.reservations.reserve(TS, "alice")));
    expect(new Set(ids).size).toBe(20);
    await first.store.close();
  });

  it("are taken once, only by the user who reserved them on a secure cluster, by anyone on an insecure one", async () => {
    const { store, reservations } = await open("take", new ManualClock(0));
    const id = await reservations.reserve(TS, "alice");
    expect(reasonOf(() => reservations.take(id, "bob", true, never))).toBe("reserved-by-another-user");
    expect(reasonOf(() => reservations.take(formatAppId(TS, 999), "alice", true, never))).toBe("not-reserved");
    expect(reasonOf(() => reservations.take("application_1", "alice", true, never))).toBe("malformed");
    const r = reservations.take(id, "alice", true, never);
    expect(reasonOf(() => reservations.take(id, "alice", true, (x) => x === id))).toBe("used");
    // A submission that failed before its record was stored gives the id back.
    reservations.restore(r);
    expect(reservations.take(id, "bob", false, never).appId).toBe(id);
    expect(thrown(() => reservations.take(id, "bob", false, never)).code).toBe("APP_ID_INVALID");
    await store.close();
  });

  it("end with the submission that stores its record, and lapse unused after a day", async () => {
    const clock = new ManualClock(0);
    const first = await open("lapse", clock);
    const used = await first.reservations.reserve(TS, "alice");
    const unused = await first.reservations.reserve(TS, "alice");
    const r = first.reservations.take(used, "alice", true, never);
    await first.store.putApp(record(used, r.seq), { unreserve: true });
    expect((await first.store.loadReservations()).map((x) => x.appId)).toEqual([unused]);
    await first.store.close();

    clock.set(APP_ID_RESERVATION_MS);
    const again = await open("lapse", clock);
    expect(reasonOf(() => again.reservations.take(unused, "alice", true, never))).toBe("not-reserved");
    expect(await again.store.loadReservations()).toEqual([]);
    await again.store.close();
  });
});
