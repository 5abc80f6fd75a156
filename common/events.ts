/**
 * Typed daemon events: the facts the labs (the testbed), the soak and the benches measure, written as JSON lines with a
 * versioned schema, so that no harness reads log wording (log messages may change; these fields may not without a new
 * version).
 *
 * A daemon appends its events to `events.jsonl` in the directory `HARVEST_EVENTS_DIR` names; the local-cluster launcher
 * sets it to the cluster's `logs/` directory, so every daemon of a cluster appends to the same file (each line names
 * its daemon; every line is one `appendFileSync`, and the file is opened for appending, so lines do not interleave).
 * Unset (a daemon started by hand, or in-process in a test), nothing is written. A failed write is counted, never
 * thrown: an event is an observation, and a daemon does not stop serving because its events directory went away.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "./errors.js";

/** The schema version this module writes and the only one it reads. */
export const EVENTS_VERSION = 1;

/** The environment variable naming the directory a daemon appends `events.jsonl` to (unset: no events). */
export const EVENTS_DIR_VARIABLE = "HARVEST_EVENTS_DIR";

/** The events file's name in that directory. */
export const EVENTS_FILE_NAME = "events.jsonl";

/** What every event carries: the schema version, its type, when it happened (ms since the epoch) and its daemon. */
interface EventHeader {
  v: typeof EVENTS_VERSION;
  /** Wall-clock time of the fact (ms since the epoch), comparable with the reports' `startedMs`/`submitMs`. */
  atMs: number;
  /** The daemon that emitted it: `rm`, `nn`, or a server's node id (`server-1`). */
  daemon: string;
}

/** A node manager started its primary-tenant monitor: a trace replay starts now. */
export interface PrimaryMonitorStartedEvent extends EventHeader {
  type: "primary-monitor-started";
}

/** A node manager registered with the resource manager, which gave it this heartbeat interval. */
export interface NodeRegisteredEvent extends EventHeader {
  type: "node-registered";
  heartbeatIntervalMs: number;
}

/** A node manager chose a container to kill because its primary tenant needs the cores. */
export interface ContainerPreemptedEvent extends EventHeader {
  type: "container-preempted";
  containerId: string;
}

/**
 * A node manager found a container at risk of preemption (its primary tenant came within the notice margin of taking
 * the container's cores back) and reports it on its next heartbeat; nothing is killed by it.
 */
export interface PreemptionNoticeEvent extends EventHeader {
  type: "preemption-notice";
  containerId: string;
}

/** A node manager saw a container end and wrote its exit down (`cause`: SUCCEEDED, FAILED, PREEMPTED_BY_PRIMARY...). */
export interface ContainerFinishedEvent extends EventHeader {
  type: "container-finished";
  containerId: string;
  cause: string;
  exitCode: number;
}

/** The resource manager registered an attempt's job manager (`resync`: again, after the job manager reconnected). */
export interface JobManagerRegisteredEvent extends EventHeader {
  type: "job-manager-registered";
  appId: string;
  attempt: number;
  resync: boolean;
}

/**
 * The resource manager declared a node lost (no heartbeat within its node expiry) and reported one of the containers it
 * held LOST to the container's job, which runs its task again.
 */
export interface ContainerLostWithNodeEvent extends EventHeader {
  type: "container-lost-with-node";
  containerId: string;
  nodeId: string;
}

/** Every event of schema version 1, told apart by `type`. */
export type DaemonEvent =
  | PrimaryMonitorStartedEvent
  | NodeRegisteredEvent
  | ContainerPreemptedEvent
  | PreemptionNoticeEvent
  | ContainerFinishedEvent
  | JobManagerRegisteredEvent
  | ContainerLostWithNodeEvent;

/** The type names of version 1. */
export type DaemonEventType = DaemonEvent["type"];

/** An event as a daemon hands it to the writer, which stamps the version and the time. */
export type DaemonEventInput = DaemonEvent extends infer E
  ? E extends DaemonEvent
    ? Omit<E, "v" | "atMs"> & { atMs?: number }
    : never
  : never;

type FieldKind = "string" | "number" | "boolean";

/** The fields each type carries beyond the header, and their kinds: what the reader checks. */
const FIELDS: { [T in DaemonEventType]: Record<string, FieldKind> } = {
  "primary-monitor-started": {},
  "node-registered": { heartbeatIntervalMs: "number" },
  "container-preempted": { containerId: "string" },
  "preemption-notice": { containerId: "string" },
  "container-finished": { containerId: "string", cause: "string", exitCode: "number" },
  "job-manager-registered": { appId: "string", attempt: "number", resync: "boolean" },
  "container-lost-with-node": { containerId: "string", nodeId: "string" },
};

/** Appends events as JSON lines to one file; `file` undefined writes nothing. */
export class EventWriter {
  /** Writes that failed (the directory removed or unwritable). */
  failedWrites = 0;

  constructor(
    readonly file: string | undefined,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Appends `event`, stamped with the version and (unless given) the time. Never throws. */
  emit(event: DaemonEventInput): void {
    if (this.file === undefined) return;
    const { type, atMs, ...fields } = event;
    const line = JSON.stringify({ v: EVENTS_VERSION, type, atMs: atMs ?? this.nowMs(), ...fields });
    try {
      appendFileSync(this.file, line + "\n");
    } catch {
      this.failedWrites++;
    }
  }
}

/** The events file `HARVEST_EVENTS_DIR` names in `env`, or undefined when it is unset or empty. */
export function eventsFileFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dir = env[EVENTS_DIR_VARIABLE];
  return dir ? join(dir, EVENTS_FILE_NAME) : undefined;
}

let processWriter: EventWriter | undefined;

/** Appends `event` to this process's events file (`HARVEST_EVENTS_DIR`, read once); nothing when it is unset. */
export function emitEvent(event: DaemonEventInput): void {
  processWriter ??= new EventWriter(eventsFileFromEnv());
  processWriter.emit(event);
}

/** What a read found: the valid events in file order, and how many lines it could not read. */
export interface EventsRead {
  events: DaemonEvent[];
  /** Lines skipped: not JSON, not an object, an unknown type, or a field missing or of the wrong kind. */
  skipped: number;
}

/**
 * Parses one line. Undefined when it is not a valid event (a line cut short by a kill, an unknown type); throws
 * INVALID_ARGUMENT for a version other than this module's, which a reader must not guess at.
 */
export function parseEvent(line: string): DaemonEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const o = value as Record<string, unknown>;
  if (o["v"] !== EVENTS_VERSION) {
    if (o["v"] === undefined) return undefined;
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `an event of schema version ${JSON.stringify(o["v"])}: this reader knows version ${EVENTS_VERSION} only`,
    );
  }
  if (typeof o["atMs"] !== "number" || !Number.isFinite(o["atMs"]) || typeof o["daemon"] !== "string") return undefined;
  const type = o["type"];
  if (typeof type !== "string" || !Object.hasOwn(FIELDS, type)) return undefined;
  for (const [field, kind] of Object.entries(FIELDS[type as DaemonEventType]))
    if (typeof o[field] !== kind) return undefined;
  return o as unknown as DaemonEvent;
}

/** Parses JSON lines of events, skipping (and counting) those it cannot read; blank lines are not counted. */
export function parseEvents(text: string): EventsRead {
  const events: DaemonEvent[] = [];
  let skipped = 0;
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const e = parseEvent(line);
    if (e) events.push(e);
    else skipped++;
  }
  return { events, skipped };
}

/** The events in `file` (none when it does not exist). */
export function readEvents(file: string): EventsRead {
  return existsSync(file) ? parseEvents(readFileSync(file, "utf8")) : { events: [], skipped: 0 };
}

/** The events of one type, narrowed. */
export function eventsOfType<T extends DaemonEventType>(
  events: readonly DaemonEvent[],
  type: T,
): Extract<DaemonEvent, { type: T }>[] {
  return events.filter((e): e is Extract<DaemonEvent, { type: T }> => e.type === type);
}
