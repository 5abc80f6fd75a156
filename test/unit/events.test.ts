/** The daemon events schema (common/events.ts): the writer's JSON lines read back, bad lines counted, versions checked. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  EVENTS_FILE_NAME,
  EventWriter,
  eventsFileFromEnv,
  eventsOfType,
  parseEvents,
  readEvents,
} from "../../common/events.js";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "harvest-events-"));
  dirs.push(d);
  return d;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("the daemon events file", () => {
  it("reads back every event the writer appended, in order, stamped with version 1 and the time", () => {
    const file = join(tempDir(), EVENTS_FILE_NAME);
    const writer = new EventWriter(file, () => 1_000);
    writer.emit({ type: "primary-monitor-started", daemon: "server-1" });
    writer.emit({ type: "node-registered", daemon: "server-1", heartbeatIntervalMs: 250 });
    writer.emit({ type: "job-manager-registered", daemon: "rm", appId: "app_1_0001", attempt: 2, resync: false });
    writer.emit({
      type: "container-finished",
      daemon: "server-2",
      containerId: "container_1_0001_01_000002",
      cause: "SUCCEEDED",
      exitCode: 0,
      atMs: 5,
    });
    writer.emit({ type: "container-lost-with-node", daemon: "rm", containerId: "c7", nodeId: "server-3" });
    const { events, skipped } = readEvents(file);
    expect(skipped).toBe(0);
    expect(events).toEqual([
      { v: 1, type: "primary-monitor-started", atMs: 1_000, daemon: "server-1" },
      { v: 1, type: "node-registered", atMs: 1_000, daemon: "server-1", heartbeatIntervalMs: 250 },
      {
        v: 1,
        type: "job-manager-registered",
        atMs: 1_000,
        daemon: "rm",
        appId: "app_1_0001",
        attempt: 2,
        resync: false,
      },
      {
        v: 1,
        type: "container-finished",
        atMs: 5,
        daemon: "server-2",
        containerId: "container_1_0001_01_000002",
        cause: "SUCCEEDED",
        exitCode: 0,
      },
      { v: 1, type: "container-lost-with-node", atMs: 1_000, daemon: "rm", containerId: "c7", nodeId: "server-3" },
    ]);
    expect(eventsOfType(events, "node-registered").map((e) => e.heartbeatIntervalMs)).toEqual([250]);
    expect(eventsOfType(events, "container-lost-with-node").map((e) => [e.containerId, e.nodeId])).toEqual([
      ["c7", "server-3"],
    ]);
  });

  it("skips and counts a line cut short, a line that is not an object, an unknown type and a field of the wrong kind", () => {
    const good = JSON.stringify({ v: 1, type: "container-preempted", atMs: 3, daemon: "server-1", containerId: "c1" });
    const text = [
      good,
      good.slice(0, 20),
      "[1, 2]",
      JSON.stringify({ v: 1, type: "no-such-event", atMs: 3, daemon: "rm" }),
      JSON.stringify({ v: 1, type: "container-preempted", atMs: 3, daemon: "server-1", containerId: 7 }),
      JSON.stringify({ v: 1, type: "container-lost-with-node", atMs: 3, daemon: "rm", containerId: "c1" }),
      "",
    ].join("\n");
    const { events, skipped } = parseEvents(text);
    expect(events).toEqual([JSON.parse(good)]);
    expect(skipped).toBe(5);
  });

  it("refuses an event of a version it does not know", () => {
    const file = join(tempDir(), EVENTS_FILE_NAME);
    writeFileSync(file, JSON.stringify({ v: 2, type: "primary-monitor-started", atMs: 1, daemon: "server-1" }) + "\n");
    expect(() => readEvents(file)).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
  });

  it("writes nothing when no events directory is set, and counts a write that fails instead of throwing", () => {
    expect(eventsFileFromEnv({})).toBeUndefined();
    expect(eventsFileFromEnv({ HARVEST_EVENTS_DIR: "/x/logs" })).toBe(`/x/logs/${EVENTS_FILE_NAME}`);
    const off = new EventWriter(undefined);
    off.emit({ type: "primary-monitor-started", daemon: "server-1" });
    expect(off.failedWrites).toBe(0);
    const broken = new EventWriter(join(tempDir(), "missing", EVENTS_FILE_NAME));
    broken.emit({ type: "primary-monitor-started", daemon: "server-1" });
    expect(broken.failedWrites).toBe(1);
    expect(readEvents(join(tempDir(), EVENTS_FILE_NAME))).toEqual({ events: [], skipped: 0 });
  });
});
