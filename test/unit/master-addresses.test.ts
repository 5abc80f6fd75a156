/**
 * The list of masters a caller knows (common/failover.ts): which one it goes to after a standby's refusal or a loss,
 * and that a refusal never sends it to an address outside its list.
 */
import { describe, expect, it } from "vitest";
import { HarvestError } from "../../common/errors.js";
import { isIdempotentMethod, MasterAddresses, notActiveError, splitAddresses } from "../../common/failover.js";
import { thrown } from "../error-code.js";

describe("MasterAddresses", () => {
  it("reads a comma-separated list, blanks and empty entries aside, and refuses an empty one", () => {
    expect(splitAddresses(" a:1, [fd00::2]:2,,")).toEqual(["a:1", "[fd00::2]:2"]);
    expect(new MasterAddresses("a:1").many).toBe(false);
    expect(thrown(() => new MasterAddresses(" , ")).code).toBe("CONFIG_INVALID");
  });

  it("goes to the active a standby names, and to the next master after a loss", () => {
    const m = new MasterAddresses("a:1,b:2,c:3");
    expect(m.afterFailure(notActiveError("namenode", "c:3", 4))).toBe(true);
    expect(m.current).toBe("c:3");
    expect(m.afterFailure(new HarvestError("UNAVAILABLE", "connection refused"))).toBe(false);
    expect(m.current).toBe("a:1");
    expect(m.next()).toBe("b:2");
  });

  it("never follows an active outside its list, nor one naming the master that refused", () => {
    const m = new MasterAddresses("a:1,b:2");
    expect(m.afterFailure(notActiveError("namenode", "evil:443"))).toBe(false);
    expect(m.current).toBe("b:2");
    expect(m.afterFailure(notActiveError("namenode", "b:2"))).toBe(false);
    expect(m.current).toBe("a:1");
  });

  it("leaves the current master alone when another call already moved on from the one that failed", () => {
    const m = new MasterAddresses("a:1,b:2");
    m.afterFailure(notActiveError("namenode", "b:2"), "a:1");
    expect(m.afterFailure(notActiveError("namenode", "b:2"), "a:1")).toBe(true);
    expect(m.current).toBe("b:2");
  });

  it("stays on a single master whatever happens", () => {
    const m = new MasterAddresses("a:1");
    m.afterFailure(notActiveError("namenode", "b:2"));
    expect(m.next()).toBe("a:1");
  });
});

describe("isIdempotentMethod", () => {
  it("lets reads be sent twice, never a change", () => {
    for (const read of ["Stat", "List", "ListApplications", "GetBlockLocations", "Fsck", "RenewLease"])
      expect(isIdempotentMethod(read), read).toBe(true);
    for (const change of ["Create", "Rename", "Delete", "SubmitApplication", "Allocate", "Listen", "Getaway"])
      expect(isIdempotentMethod(change), change).toBe(false);
  });
});
