/**
 * The preemption notice between the daemons: what a node manager puts on its heartbeats (each container once while it
 * stays at risk), how the resource manager routes a heartbeat's ids to the jobs' Allocate answers (only containers it
 * holds on that node, bounded), and how it checks a job manager's `avoidNodes`.
 */
import { describe, expect, it } from "vitest";
import { thrown } from "../error-code.js";
import { DEFAULT_NOTICE_AVOID_MS } from "../../jobmanager/policy/noticed-servers.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";
import type { YieldInput } from "../../nodemanager/policy/yield-controller.js";
import { PreemptionNotices } from "../../nodemanager/preemption-notices.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import {
  atRiskByApp,
  checkAvoidNodes,
  MAX_AT_RISK_IDS,
  MAX_AVOID_NODES,
  MAX_QUEUED_NOTICES,
  queueNotices,
} from "../../resourcemanager/preemption-notices.js";
import type { AtRisk } from "../../resourcemanager/preemption-notices.js";

/** A 4-core server (0.4 reserved) with a 0.5-core job manager and two 1-core tasks, the primary at `primaryMilli`. */
function tick(primaryMilli: number): YieldInput {
  return {
    capacityMilli: 4_000,
    primaryMilli,
    reserveMilli: 400,
    containers: [
      { containerId: "am", vcoresMilli: 500, startedMs: 0, isAm: true },
      { containerId: "t1", vcoresMilli: 1_000, startedMs: 1_000, isAm: false },
      { containerId: "t2", vcoresMilli: 1_000, startedMs: 2_000, isAm: false },
    ],
    order: "youngest",
    nowMs: 10_000,
  };
}

const capacity = { vcoresMilli: 4_000, memoryMb: 4_096 };

describe("the node manager's notices", () => {
  it("tells a container once while it stays at risk, and again after it was safe", () => {
    const notices = new PreemptionNotices({ capacity, preemptionNotice: "notice", noticeMarginFraction: 0.1 });
    // Kill level: 3.6 - 2.5 = 1.1 cores of primary; at-risk from 0.7 (a 0.4-core margin).
    expect(notices.tick(tick(300))).toEqual([]);
    expect(notices.tick(tick(900))).toEqual(["t2"]);
    expect(notices.tick(tick(950))).toEqual([]);
    expect(notices.takeForHeartbeat()).toEqual(["t2"]);
    expect(notices.takeForHeartbeat()).toEqual([]);
    expect(notices.tick(tick(0))).toEqual([]);
    expect(notices.tick(tick(900))).toEqual(["t2"]);
    expect(notices.takeForHeartbeat()).toEqual(["t2"]);
  });

  it("does not tell the container the same tick kills, and leaves the kills as they are", () => {
    const notices = new PreemptionNotices({ capacity, preemptionNotice: "notice", noticeMarginFraction: 0.1 });
    const input = tick(1_800);
    const before = chooseVictims(input).victims;
    expect(before).toEqual(["t2"]);
    // 2.2 cores of primary would take the older task too (1.4 allowed, 1.5 left after this kill).
    expect(notices.tick(input)).toEqual(["t1"]);
    expect(chooseVictims(input).victims).toEqual(before);
  });

  it("tells nothing when the notice is off", () => {
    const notices = new PreemptionNotices({ capacity, preemptionNotice: "off", noticeMarginFraction: 0.1 });
    expect(notices.tick(tick(900))).toEqual([]);
    expect(notices.takeForHeartbeat()).toEqual([]);
  });

  it("defaults to off and refuses a notice setting or margin it does not know", () => {
    const base = { nodeId: "n1", rmAddress: "127.0.0.1:1", dataDir: "/tmp/x" };
    expect(resolveNodeManagerOptions(base).preemptionNotice).toBe("off");
    expect(resolveNodeManagerOptions(base).noticeMarginFraction).toBe(0.1);
    const bad = (o: object) => thrown(() => resolveNodeManagerOptions({ ...base, ...o }));
    expect(bad({ preemptionNotice: "warn" }).code).toBe("CONFIG_INVALID");
    expect(bad({ preemptionNotice: "warn" }).message).toContain("preemptionNotice");
    for (const noticeMarginFraction of [0, 1, -0.1, Number.NaN])
      expect(bad({ noticeMarginFraction }).message).toContain("noticeMarginFraction");
  });
});

describe("the resource manager's routing of notices", () => {
  const held = new Map([
    ["c1", { appId: "app1", nodeId: "n1" }],
    ["c2", { appId: "app2", nodeId: "n1" }],
    ["c3", { appId: "app1", nodeId: "n1" }],
    ["c4", { appId: "app1", nodeId: "n2" }],
  ]);
  const allocationOf = (id: string) => held.get(id);

  it("groups the containers it holds on the reporting node by job, ignoring unknown ids and other nodes'", () => {
    const byApp = atRiskByApp("n1", ["c1", "nope", "c2", "c4", "c3", "c1", "../../x"], allocationOf);
    expect(Object.fromEntries(byApp)).toEqual({
      app1: [
        { containerId: "c1", nodeId: "n1" },
        { containerId: "c3", nodeId: "n1" },
      ],
      app2: [{ containerId: "c2", nodeId: "n1" }],
    });
  });

  it("reads at most MAX_AT_RISK_IDS ids of one heartbeat", () => {
    const flood = [...Array<string>(MAX_AT_RISK_IDS).fill("junk"), "c1"];
    expect(atRiskByApp("n1", flood, allocationOf).size).toBe(0);
  });

  it("queues each container once per answer and keeps the newest when a job's queue overflows", () => {
    const queue: AtRisk[] = [];
    queueNotices(queue, [{ containerId: "c1", nodeId: "n1" }]);
    queueNotices(queue, [
      { containerId: "c1", nodeId: "n1" },
      { containerId: "c3", nodeId: "n1" },
    ]);
    expect(queue.map((n) => n.containerId)).toEqual(["c1", "c3"]);
    const many = Array.from({ length: MAX_QUEUED_NOTICES }, (_, i) => ({ containerId: `x${i}`, nodeId: "n1" }));
    queueNotices(queue, many);
    expect(queue).toHaveLength(MAX_QUEUED_NOTICES);
    expect(queue[0]!.containerId).toBe("x0");
  });
});

describe("a job manager's avoidNodes", () => {
  it("is deduplicated", () => {
    expect(checkAvoidNodes(["n2", "n1", "n2"])).toEqual(["n2", "n1"]);
    expect(checkAvoidNodes(undefined)).toEqual([]);
  });

  it("is refused with INVALID_ARGUMENT naming the field when too long or not node ids", () => {
    for (const value of [
      Array.from({ length: MAX_AVOID_NODES + 1 }, (_, i) => `n${i}`),
      [""],
      ["x".repeat(257)],
      [7],
      "n1",
    ]) {
      const err = thrown(() => checkAvoidNodes(value));
      expect(err.code).toBe("INVALID_ARGUMENT");
      expect(err.details).toEqual({ field: "avoidNodes" });
    }
    expect(checkAvoidNodes(Array.from({ length: MAX_AVOID_NODES }, (_, i) => `n${i}`))).toHaveLength(MAX_AVOID_NODES);
  });

  it("is held, by default, as long as the job manager's own default says", () => {
    expect(resolveResourceManagerOptions({ dataDir: "/tmp/x" }).noticeAvoidMs).toBe(DEFAULT_NOTICE_AVOID_MS);
    expect(() => resolveResourceManagerOptions({ dataDir: "/tmp/x", noticeAvoidMs: -1 })).toThrow(/noticeAvoidMs/);
  });
});
