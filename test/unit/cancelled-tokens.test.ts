import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DelegationTokens } from "../../common/delegation-token.js";
import { CancelledTokens } from "../../namenode/cancelled-tokens.js";
import { NamespaceStore } from "../../namenode/namespace-store.js";

const HOUR = 3_600_000;
const dir = mkdtempSync(join(tmpdir(), "harvest-cancelled-"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A namenode's tokens over a real store in `name`, as it starts: the store opened, the cancellations loaded. */
async function open(name: string, nowMs: number) {
  const store = new NamespaceStore(join(dir, name));
  await store.open();
  const cancelled = new CancelledTokens(store);
  await cancelled.load(nowMs);
  const tokens = new DelegationTokens(Buffer.alloc(32, 3), 24 * HOUR, "d1", (c) => cancelled.has(c));
  return { store, cancelled, tokens };
}

describe("cancelled delegation tokens", () => {
  it("stay refused after the namenode's store is reopened, while other tokens keep working", async () => {
    const first = await open("restart", 0);
    const job = first.tokens.issue("alice", 0, 2 * HOUR, { job: "application_1_0001" }).token;
    const other = first.tokens.issue("alice", 0, 2 * HOUR, { job: "application_1_0002" }).token;
    await first.cancelled.cancel(first.tokens.check(job, 1)!.claims);
    expect(first.tokens.verify(job, 1)).toBeUndefined();
    await first.store.close();

    const again = await open("restart", 1_000);
    expect(again.tokens.verify(job, 1_000)).toBeUndefined();
    expect(again.tokens.check(job, 1_000)?.cancelled).toBe(true);
    expect(again.tokens.verify(other, 1_000)?.job).toBe("application_1_0002");
    await again.store.close();
  });

  it("are forgotten, in memory and in the store, once the token would have expired", async () => {
    const first = await open("prune", 0);
    const short = first.tokens.issue("bob", 0, HOUR).token;
    const long = first.tokens.issue("bob", 0, 3 * HOUR).token;
    for (const t of [short, long]) await first.cancelled.cancel(first.tokens.check(t, 1)!.claims);
    expect(await first.cancelled.prune(HOUR - 1)).toBe(0);
    expect(await first.cancelled.prune(HOUR)).toBe(1);
    expect(first.cancelled.size).toBe(1);
    expect((await first.store.loadCancelledTokens()).length).toBe(1);
    await first.store.close();

    // Loading after the long one expired too forgets it at once.
    const again = await open("prune", 3 * HOUR);
    expect(again.cancelled.size).toBe(0);
    expect(await again.store.loadCancelledTokens()).toEqual([]);
    await again.store.close();
  });
});
