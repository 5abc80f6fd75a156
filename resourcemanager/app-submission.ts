/**
 * What a job is checked against before and while the resource manager holds it: a submission (validated DAG,
 * admission's demand, the durable record and the staging DAG file, both written before the answer), what admission
 * control counts for an admitted job, and a job manager's container asks.
 */
import { mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_MAX_PARALLELISM, maxConcurrency, parseDag } from "../common/dag-spec.js";
import type { DagSpec } from "../common/dag-spec.js";
import { HarvestError } from "../common/errors.js";
import { formatAppId } from "../common/ids.js";
import { fits, fromWire } from "../common/resource.js";
import type { ApplicationDeps } from "./app-runtime.js";
import { isTerminal } from "./app-state.js";
import type { AdmittedJob } from "./policy/admission.js";
import type { Ask } from "./policy/scheduler.js";
import { takeFromDemand } from "./policy/locality.js";
import type { LocalityDemand } from "./policy/locality.js";
import type { ResourceRequestOutput } from "../proto/generated/harvest/v1/ResourceRequest.js";
import type { AppRecord } from "./state-store.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";

/**
 * Validates a submitted DAG, refuses a job that even an idle cluster would not admit, and makes its record and its DAG
 * file durable. Answers the record (QUEUED when admission control is on, ACCEPTED otherwise) and the parsed DAG. The
 * job gets the `reserved` id (whose reservation its record's write drops), else a new one.
 */
export async function acceptJob(
  deps: ApplicationDeps,
  clusterTs: number,
  job: {
    dagJson: string;
    user: string;
    dfsToken: string;
    reserved?: { appId: string; seq: number };
    stagingDir?: string;
  },
): Promise<{ record: AppRecord; dag: DagSpec }> {
  const { options, scheduler, admission, store } = deps;
  const { dagJson, user, dfsToken, reserved, stagingDir } = job;
  const max = scheduler.maxNodeCapacity();
  const dag = parseDag(dagJson, {
    maxParallelism: options.maxParallelism,
    ...(max.vcoresMilli > 0 ? { maxResource: max } : {}),
  });
  const demandMilli = jobDemandMilli(deps, dag);
  // A job that even an idle cluster would not admit is refused now, not queued for ever.
  if (admission.enabled) admission.checkAdmissible({ name: dag.name, priority: dag.priority ?? 0, demandMilli });
  checkRecordFits(store.submittedRecordLimitBytes, { dagJson, dfsToken, stagingDir, user });
  const seq = reserved?.seq ?? (await store.nextAppSeq());
  const appId = reserved?.appId ?? formatAppId(clusterTs, seq);
  const record: AppRecord = {
    appId,
    seq,
    name: dag.name,
    user: user || "unknown",
    dagJson,
    state: admission.enabled ? "QUEUED" : "ACCEPTED",
    outcome: "JOB_OUTCOME_UNSPECIFIED",
    diagnostics: admission.enabled
      ? `waiting for admission (${options.admission}-moment policy)`
      : "waiting for a container for the job manager",
    demandMilli,
    submitMs: deps.clock.nowMs(),
    startMs: 0,
    finishMs: 0,
    attempt: 1,
    failedAttempts: 0,
    maxConcurrency: 0,
    priority: dag.priority ?? 0,
    ...(dfsToken ? { dfsToken } : {}),
    ...(stagingDir ? { stagingDir } : {}),
  };
  const quote = await deps.quotes?.quote(dag);
  if (quote) record.quote = quote;
  // The job manager reads its DAG from the staging directory (as YARN's job files); both writes precede the reply.
  const jobDir = join(options.stagingDir, appId);
  await mkdir(jobDir, { recursive: true });
  await writeFileDurably(join(jobDir, "dag.json"), dagJson);
  await store.putApp(record, { unreserve: reserved !== undefined });
  return { record, dag };
}

/** Room the rest of a job's record takes (ids, states, diagnostics, times, avoided servers), generously. */
const RECORD_OVERHEAD_BYTES = 8 * 1024;

/**
 * Refuses (DAG_TOO_LARGE) a job whose record would not fit in one write of a store with a record limit (the
 * coordination service's request limit, when the resource managers are highly available): before anything is written.
 */
function checkRecordFits(limitBytes: number | undefined, big: Record<string, string | undefined>): void {
  if (!limitBytes) return;
  const bytes = Buffer.byteLength(JSON.stringify(big)) + RECORD_OVERHEAD_BYTES;
  if (bytes > limitBytes)
    throw new HarvestError(
      "DAG_TOO_LARGE",
      `the job's DAG is too large to store (${bytes} bytes with its record, at most ${limitBytes}): ` +
        "put large data in the DFS and name it as an input or a resource instead",
      { details: { field: "dagJson", bytes: String(bytes), limitBytes: String(limitBytes) } },
    );
}

/**
 * Checks a job's DFS staging directory: `dfs:/user/<user>/.staging/<appId>` for the id the client reserved, and on a
 * secure cluster only with the job's DFS token (the job manager's localizer and journal act with it). INVALID_ARGUMENT
 * (field stagingDir) otherwise.
 */
export function checkStagingDir(
  stagingDir: string,
  user: string,
  appId: string,
  dfsToken: string,
  secure: boolean,
): void {
  const bad = (why: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `stagingDir ${JSON.stringify(stagingDir)}: ${why}`, {
      details: { field: "stagingDir" },
    });
  };
  if (!appId) bad("a DFS staging directory needs the reserved app id it is named after (GetNewApplication)");
  if (secure && !dfsToken) bad("on a secure cluster the job needs its DFS token to read its staging directory");
  const expected = `dfs:/user/${user}/.staging/${appId}`;
  if (stagingDir !== expected) bad(`must be ${expected}`);
}

/**
 * The cores admission control counts for a job: what its past runs held on average (`JobDemandModel`), never more
 * than its job manager and its widest stage (capped at the cluster's); a job never seen counts at that.
 */
function jobDemandMilli(deps: ApplicationDeps, dag: DagSpec): number {
  let taskMilli = 0;
  for (const v of dag.vertices) taskMilli = Math.max(taskMilli, v.resources.vcoresMilli);
  let clusterMilli = 0;
  for (const v of deps.scheduler.nodeViews()) clusterMilli += v.capacity.vcoresMilli;
  const wide = widestStageTasks(dag) * taskMilli;
  // A stage wider than the cluster runs in waves: it never holds more than the cluster.
  const widest = deps.options.amResource.vcoresMilli + (clusterMilli > 0 ? Math.min(wide, clusterMilli) : wide);
  return deps.demand.demandMilli(dag.name, widest);
}

/**
 * The DAG's widest stage in tasks (its max concurrency). A vertex whose input's splits set its parallelism, unknown
 * until its job manager starts, counts as the widest a vertex may be: the caller caps the stage at the cluster.
 */
export function widestStageTasks(dag: DagSpec): number {
  const vertices = dag.vertices.map((v) => (v.parallelism === 0 ? { ...v, parallelism: DEFAULT_MAX_PARALLELISM } : v));
  return maxConcurrency({ ...dag, vertices });
}

/** A job admission control counts as admitted (neither queued nor ended), with its end re-predicted from its uptime. */
export function admittedJobOf(deps: ApplicationDeps, r: AppRecord, now: number): AdmittedJob | undefined {
  if (isTerminal(r.state) || r.state === "QUEUED") return undefined;
  const since = r.admittedMs || r.submitMs;
  return {
    appId: r.appId,
    demandMilli: r.demandMilli ?? 0,
    allocatedMilli: deps.scheduler.allocatedMilliOf(r.appId),
    endMs: now + deps.lifetimes.jobRemainingMs(r.name, now - since),
  };
}

/** Rejects a malformed ask, and (given the largest node) one no node could ever grant. */
/** An ask as it comes on the wire (locality absent from old job managers and from tests that send none). */
export type WireAsk = Pick<ResourceRequestOutput, "priority" | "resource" | "count"> &
  Partial<Pick<ResourceRequestOutput, "nodes" | "racks" | "located">>;

/** The most nodes or racks one ask may name. */
const MAX_LOCALITY_NAMES = 10_000;

export function checkAsk(i: number, ask: WireAsk, max: { vcoresMilli: number; memoryMb: number } | undefined): void {
  const r = fromWire(ask.resource);
  const bad = (field: string, what: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].${field} ${what}`, {
      details: { field: `asks[${i}].${field}` },
    });
  };
  if (!Number.isInteger(ask.priority) || ask.priority < 0) bad("priority", "must be an integer >= 0");
  if (!(r.vcoresMilli > 0 && r.memoryMb > 0)) bad("resource", "must be positive");
  if (max && !fits(r, max))
    throw new HarvestError("DAG_RESOURCES_TOO_LARGE", `asks[${i}] asks for more than any node has`, {
      details: { field: `asks[${i}].resource` },
    });
  if (!(ask.count >= 0 && ask.count <= 1_000_000)) bad("count", "out of range");
  const located = ask.located ?? 0;
  if (!(Number.isInteger(located) && located >= 0 && located <= ask.count))
    bad("located", `must be a whole number from 0 to the ask's count ${ask.count}, got ${located}`);
  for (const field of ["nodes", "racks"] as const) {
    const counts = Object.entries(ask[field] ?? {});
    if (counts.length > MAX_LOCALITY_NAMES) bad(field, `names ${counts.length} places; at most ${MAX_LOCALITY_NAMES}`);
    for (const [name, n] of counts)
      if (!(name.length > 0 && name.length <= 256 && Number.isInteger(n) && n >= 0 && n <= located))
        bad(`${field}[${JSON.stringify(name.slice(0, 64))}]`, `must be a whole number from 0 to located ${located}`);
  }
}

/**
 * The asks the scheduler keeps for a job manager's call: the job manager counted its needs before seeing the
 * containers delivered with this answer, so they are subtracted (asks are absolute), each from the locality it most
 * likely served (the node's count, then its rack's, as the scheduler took them).
 */
export function netAsks(
  asks: WireAsk[],
  delivered: ContainerOutput[],
  rackOf: (nodeId: string) => string | undefined = () => undefined,
): Ask[] {
  const byPriority = new Map<number, ContainerOutput[]>();
  for (const c of delivered) byPriority.set(c.priority, [...(byPriority.get(c.priority) ?? []), c]);
  return asks.map((a) => {
    const mine = byPriority.get(a.priority) ?? [];
    const count = Math.max(0, a.count - mine.length);
    const ask: Ask = { priority: a.priority, resource: fromWire(a.resource), count };
    const located = Math.min(a.located ?? 0, count + mine.length);
    if (located === 0) return ask;
    const locality: LocalityDemand = {
      nodes: new Map(Object.entries(a.nodes ?? {}).filter(([, n]) => n > 0)),
      racks: new Map(Object.entries(a.racks ?? {}).filter(([, n]) => n > 0)),
      located,
    };
    let remaining = a.count;
    for (const c of mine) {
      const rack = rackOf(c.nodeId) ?? "";
      const level =
        (locality.nodes.get(c.nodeId) ?? 0) > 0 ? "node" : (locality.racks.get(rack) ?? 0) > 0 ? "rack" : "any";
      // Off its places, the scheduler serves the containers without preference first.
      takeFromDemand(locality, { level, located: level !== "any" || remaining <= locality.located }, c.nodeId, rack);
      remaining -= 1;
    }
    locality.located = Math.min(locality.located, count);
    if (locality.located > 0) ask.locality = locality;
    return ask;
  });
}

/** Writes a file and fsyncs it before resolving. */
async function writeFileDurably(path: string, data: string): Promise<void> {
  const fh = await open(path, "w");
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}
