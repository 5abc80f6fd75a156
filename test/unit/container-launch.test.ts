/**
 * What a job manager's AM token lets it start on a node manager: a task of its own job, granted to its own attempt;
 * never a job manager, another job's container, or a container granted to another attempt of its job.
 */
import { describe, expect, it } from "vitest";
import type { Principal } from "../../common/auth.js";
import { formatAppId, formatContainerId } from "../../common/ids.js";
import { amMayStart } from "../../nodemanager/container-launch.js";
import type { StartContainerRequestOutput } from "../../proto/generated/harvest/v1/StartContainerRequest.js";

const appId = formatAppId(1_700_000_000_000, 7);
const am = (attempt: number, app = appId): Principal => ({ name: app, role: "am", via: "token", appId: app, attempt });
const request = (containerId: string, isAm = false, app = appId): StartContainerRequestOutput =>
  ({ appId: app, isAm, container: { id: containerId } }) as unknown as StartContainerRequestOutput;

describe("amMayStart", () => {
  const ofAttempt2 = formatContainerId(1_700_000_000_000, 7, 2, 5);
  it("lets a job manager start a task granted to its own attempt", () => {
    expect(amMayStart(am(2), request(ofAttempt2))).toBe(true);
  });
  it("refuses an earlier attempt's token, another job's token, a job manager's launch and a malformed id", () => {
    expect(amMayStart(am(1), request(ofAttempt2))).toBe(false);
    expect(amMayStart(am(2, formatAppId(1_700_000_000_000, 8)), request(ofAttempt2))).toBe(false);
    expect(amMayStart(am(2), request(ofAttempt2, true))).toBe(false);
    expect(amMayStart(am(2), request("container_x"))).toBe(false);
    expect(amMayStart({ ...am(2), attempt: undefined }, request(ofAttempt2))).toBe(false);
  });
});
