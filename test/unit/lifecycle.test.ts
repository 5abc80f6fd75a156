/**
 * The daemon lifecycle (common/lifecycle.ts): cases generated from DAEMON_TRANSITIONS, so that every legal transition
 * is accepted, every other one refused with DAEMON_INVALID_TRANSITION, and stop() is idempotent from every state.
 */
import { describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { DAEMON_TRANSITIONS, daemonTransition, Lifecycle } from "../../common/lifecycle.js";
import { JobManager } from "../../jobmanager/index.js";
import type { DaemonState, LifecycleEvent } from "../../common/lifecycle.js";

const STATES = Object.keys(DAEMON_TRANSITIONS) as DaemonState[];
const EVENTS: readonly LifecycleEvent[] = ["start", "started", "stop", "stopped"];
const CASES = STATES.flatMap((from) => EVENTS.map((event) => ({ from, event, to: DAEMON_TRANSITIONS[from][event] })));

/** A lifecycle brought to `state` through its own methods. */
function lifecycleIn(state: DaemonState): Lifecycle {
  const l = new Lifecycle("test daemon");
  const steps: Record<DaemonState, (() => void)[]> = {
    new: [],
    starting: [() => l.beginStart()],
    running: [() => l.beginStart(), () => l.started()],
    stopping: [() => l.beginStop()],
    stopped: [() => l.beginStop(), () => l.stopped()],
  };
  for (const step of steps[state]) step();
  expect(l.state).toBe(state);
  return l;
}

/** Feeds `event` to `l` through the method that asks for it. */
function feed(l: Lifecycle, event: LifecycleEvent): void {
  if (event === "start") l.beginStart();
  else if (event === "started") l.started();
  else if (event === "stop") l.beginStop();
  else l.stopped();
}

describe("daemon lifecycle", () => {
  it.each(CASES.filter((c) => c.to !== undefined))("accepts $event from $from, going to $to", ({ from, event, to }) => {
    expect(daemonTransition("test daemon", from, event)).toBe(to);
    const l = lifecycleIn(from);
    feed(l, event);
    expect(l.state).toBe(to);
  });

  it.each(CASES.filter((c) => c.to === undefined))(
    "refuses $event from $from with DAEMON_INVALID_TRANSITION",
    ({ from, event }) => {
      let err: unknown;
      try {
        daemonTransition("test daemon", from, event);
      } catch (e) {
        err = e;
      }
      expect(isHarvestError(err, "DAEMON_INVALID_TRANSITION")).toBe(true);
      expect((err as Error).message).toBe(`test daemon cannot ${event} from state ${from}`);
      // The daemon's stop() asks nothing of a daemon already stopping or stopped (the idempotence test below).
      if (event === "stop") return;
      const l = lifecycleIn(from);
      expect(() => feed(l, event)).toThrow(expect.objectContaining({ code: "DAEMON_INVALID_TRANSITION" }));
      expect(l.state).toBe(from);
    },
  );

  it.each(STATES)("stops from %s, and a second stop does nothing", (from) => {
    const l = lifecycleIn(from);
    const was = l.beginStop();
    if (from === "stopping" || from === "stopped") {
      expect(was).toBeUndefined();
      expect(l.state).toBe(from);
      return;
    }
    expect(was).toBe(from);
    expect(l.state).toBe("stopping");
    expect(l.beginStop()).toBeUndefined();
    l.stopped();
    expect(l.beginStop()).toBeUndefined();
    expect(l.state).toBe("stopped");
  });

  it("refuses a second start, naming the daemon and its state", () => {
    const l = lifecycleIn("running");
    expect(() => l.beginStart()).toThrow("test daemon cannot start from state running");
  });

  it("refuses to report a start finished after a stop interrupted it", () => {
    const l = lifecycleIn("starting");
    expect(l.beginStop()).toBe("starting");
    expect(() => l.started()).toThrow(expect.objectContaining({ code: "DAEMON_INVALID_TRANSITION" }));
    expect(l.running).toBe(false);
  });

  it("is running only between started and stop", () => {
    const seen = (["new", "starting", "running", "stopping", "stopped"] as const).map((s) => lifecycleIn(s).running);
    expect(seen).toEqual([false, false, true, false, false]);
  });

  it("runs a job-manager attempt once, and closes it once", async () => {
    const jm = new JobManager({
      appId: "application_1_0001",
      attempt: 1,
      rmAddress: "127.0.0.1:1",
      stagingDir: "/nonexistent",
      dagFile: "/nonexistent/dag.json",
      heartbeatMs: 300,
      maxTaskAttempts: 4,
      rmRetryMs: 0,
    });
    await expect(jm.run()).rejects.toThrow(/ENOENT/);
    expect(jm.state).toBe("starting");
    await expect(jm.run()).rejects.toMatchObject({ code: "DAEMON_INVALID_TRANSITION" });
    jm.close();
    jm.close();
    expect(jm.state).toBe("stopped");
  });
});
