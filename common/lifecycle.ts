/**
 * One lifecycle for every daemon (resource manager, node manager, namenode, datanode) and the job manager: a state
 * union, one transition function with its table, and coded errors. A daemon object starts once and stops once; `stop()`
 * is idempotent and may be called from any state, so a daemon that failed half-way through `start()` can be cleaned up.
 */
import { HarvestError } from "./errors.js";

/** new → starting → running → stopping → stopped; a start that fails or is stopped goes from starting to stopping. */
export type DaemonState = "new" | "starting" | "running" | "stopping" | "stopped";

/** What moves a daemon: `start`/`stop` are asked for, `started`/`stopped` report that the daemon's steps are done. */
export type LifecycleEvent = "start" | "started" | "stop" | "stopped";

/** Every allowed transition: state × event → state. Anything not listed is refused with DAEMON_INVALID_TRANSITION. */
export const DAEMON_TRANSITIONS: Readonly<Record<DaemonState, Readonly<Partial<Record<LifecycleEvent, DaemonState>>>>> =
  {
    new: { start: "starting", stop: "stopping" },
    starting: { started: "running", stop: "stopping" },
    running: { stop: "stopping" },
    stopping: { stopped: "stopped" },
    stopped: {},
  };

/** The state `event` leads to from `from`, or DAEMON_INVALID_TRANSITION naming the daemon, the state and the event. */
export function daemonTransition(daemon: string, from: DaemonState, event: LifecycleEvent): DaemonState {
  const to = DAEMON_TRANSITIONS[from][event];
  if (to === undefined)
    throw new HarvestError("DAEMON_INVALID_TRANSITION", `${daemon} cannot ${event} from state ${from}`, {
      details: { daemon, from, event },
    });
  return to;
}

/**
 * A daemon's lifecycle state. The daemon's `start()` runs its steps through `start(steps)` and its `stop()` its closing
 * steps through `stop(steps)`; or, by hand, `beginStart()` first and `started()` once it serves, `beginStop()` first
 * (returning at once when that says so) and `stopped()` once everything is closed.
 */
export class Lifecycle {
  /** Changed only through `daemonTransition`. */
  private current: DaemonState = "new";
  /** Settles (never rejects) once the start under way, if any, has finished its steps; `stop(steps)` waits on it. */
  private startSettled: Promise<unknown> = Promise.resolve();

  /** `daemon` names the daemon in errors: "namenode", "node manager". */
  constructor(readonly daemon: string) {}

  get state(): DaemonState {
    return this.current;
  }

  get running(): boolean {
    return this.current === "running";
  }

  /** new → starting; a second start is refused (DAEMON_INVALID_TRANSITION). */
  beginStart(): void {
    this.move("start");
  }

  /** starting → running; refused when `stop()` came first (the daemon is stopping or stopped). */
  started(): void {
    this.move("started");
  }

  /**
   * → stopping, returning the state the daemon was in (one that never started has less to close); undefined when it is
   * already stopping or stopped, and `stop()` returns at once then, which makes it idempotent.
   */
  beginStop(): DaemonState | undefined {
    if (this.current === "stopping" || this.current === "stopped") return undefined;
    const was = this.current;
    this.move("stop");
    return was;
  }

  /** stopping → stopped. */
  stopped(): void {
    this.move("stopped");
  }

  /**
   * A daemon's start: new → starting, `steps`, → running. When `stop()` comes while the steps run, the start fails
   * with DAEMON_INVALID_TRANSITION once they are done, and the stop closes what they opened.
   */
  async start(steps: () => Promise<void>): Promise<void> {
    this.beginStart();
    const run = steps();
    this.startSettled = run.catch(() => undefined);
    await run;
    this.started();
  }

  /**
   * A daemon's stop: → stopping; waits for a start under way to finish its steps (so that nothing they open is left
   * behind: a server, a timer); then `steps(was)`, given the state the daemon was in; → stopped. Returns at once when
   * the daemon is already stopping or stopped, or when a failed start stopped it meanwhile.
   */
  async stop(steps: (was: DaemonState) => Promise<void>): Promise<void> {
    const was = this.beginStop();
    if (was === undefined) return;
    await this.startSettled;
    if (this.current === "stopped") return;
    await steps(was);
    this.stopped();
  }

  private move(event: LifecycleEvent): void {
    this.current = daemonTransition(this.daemon, this.current, event);
  }
}
