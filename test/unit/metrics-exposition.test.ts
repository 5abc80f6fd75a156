/** The exposition text the daemons serve at /metrics. */
import { Gauge } from "prom-client";
import { describe, expect, it } from "vitest";
import { daemonRegistry } from "../../common/metrics.js";
import { exposition } from "../../common/web-server.js";

const SAMPLE_VALUE = /^(NaN|[+-]Inf|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$/;

describe("the /metrics exposition", () => {
  it("spells a NaN sample NaN, as the text format does (the event-loop delay's mean between two quick scrapes)", async () => {
    const registry = daemonRegistry("resourcemanager");
    const gauge = new Gauge({ name: "harvest_test_ratio", help: "a ratio of nothing", registers: [registry] });
    gauge.set(NaN);
    const lines = exposition(await registry.metrics())
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(lines).toContain('harvest_test_ratio{daemon="resourcemanager"} NaN');
    for (const l of lines) expect(l.slice(l.lastIndexOf(" ") + 1)).toMatch(SAMPLE_VALUE);
  });
});
