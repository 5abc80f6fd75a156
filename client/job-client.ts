/**
 * The job client: submit DAG jobs to a Harvest resource manager and follow them. The `harvest job` commands are thin
 * wrappers over this class.
 */
import { clientConfigOf, clientSecurityOf, rmAddressFromConfig } from "./client-config.js";
import { DfsClient } from "./dfs-client.js";
import { readKeptLog } from "./kept-logs.js";
import { lstat, readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { ClientConfig } from "./client-config.js";
import type { WebTokenResponseOutput } from "../proto/generated/harvest/v1/WebTokenResponse.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { containerLogPath } from "../common/container-logs.js";
import { invalidOption } from "../common/options.js";
import type { ApplicationClientServiceClient } from "../proto/generated/harvest/v1/ApplicationClientService.js";
import type { ApplicationReportOutput } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { SurvivalQuoteOutput } from "../proto/generated/harvest/v1/SurvivalQuote.js";
import type { JobHistoryEntryOutput } from "../proto/generated/harvest/v1/JobHistoryEntry.js";
import type { NodeReportOutput } from "../proto/generated/harvest/v1/NodeReport.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";

/** A job's status as the resource manager reports it. */
export type JobReport = ApplicationReportOutput;
/** A node as the resource manager sees it. */
export type NodeInfo = NodeReportOutput;
/** A finished job in the history. */
export type JobHistoryEntry = JobHistoryEntryOutput;

/** States after which a job never changes. */
export const TERMINAL_STATES: readonly string[] = ["FINISHED", "FAILED", "KILLED"];

/** How long `waitForCompletion` polls through a resource-manager outage by default (2 minutes). */
export const DEFAULT_RM_RETRY_MS = 120_000;

/** Settings of a JobClient. */
export interface JobClientOptions {
  /** TLS and this user's certificate (a secure cluster); undefined: plaintext. */
  security?: ClientSecurity;
  /**
   * The namenode: with a certificate, `submit` asks it for a delegation token naming the job, which the job's tasks
   * act on the file system with, as the submitter. Empty: the job's tasks get none.
   */
  nnAddress?: string;
  /**
   * How long `waitForCompletion` keeps polling while the resource manager cannot be reached (UNAVAILABLE or
   * DEADLINE_EXCEEDED), counted from the first failed poll of an outage; 0 gives up at the first. @default 120000
   */
  rmRetryMs?: number;
}

/** A resource-manager outage as `waitForCompletion` saw it. */
export interface RmOutage {
  /** When the first poll of the outage failed (epoch ms). */
  sinceMs: number;
  /** How long the wait keeps trying from `sinceMs` before it gives up. */
  retryForMs: number;
  /** The error of the first failed poll (code UNAVAILABLE or DEADLINE_EXCEEDED). */
  error: HarvestError;
}

/** Options of one `waitForCompletion`. */
export interface WaitOptions {
  /** Time between two polls. @default 500 */
  pollMs?: number;
  /** Overrides the client's `rmRetryMs` for this wait. */
  rmRetryMs?: number;
  /** Called once per outage, at its first failed poll (the CLI prints "resource manager unreachable; ..."). */
  onOutage?: (outage: RmOutage) => void;
  /** Called at the first successful poll after an outage, with how long it lasted. */
  onRecovered?: (outage: RmOutage, downMs: number) => void;
}

/**
 * Errors that mean "the resource manager did not answer", as opposed to an answer that is an error; NOT_ACTIVE: no
 * resource manager became active within the call's deadline (an election under way).
 */
const RM_UNREACHABLE_CODES = ["UNAVAILABLE", "DEADLINE_EXCEEDED", "NOT_ACTIVE"] as const;

/** Client of a resource manager's client protocol. */
export class JobClient {
  private readonly rm: ApplicationClientServiceClient;
  private readonly nms = new Map<string, ContainerManagerClient>();
  private readonly rmRetryMs: number;

  /** Throws CONFIG_INVALID when `options.rmRetryMs` is not a number of milliseconds >= 0. */
  constructor(
    readonly rmAddress: string,
    readonly options: JobClientOptions = {},
  ) {
    this.rmRetryMs = checkRetryMs(options.rmRetryMs ?? DEFAULT_RM_RETRY_MS, "rmRetryMs");
    this.rm = makeClient(loadHarvestProto().ApplicationClientService, rmAddress, options.security);
  }
  /**
   * A client of the cluster a client configuration names: `config` is a file or a parsed configuration; without it,
   * `$HARVEST_CONF`, then `~/.harvest/client.json`.
   */
  static fromConfig(config?: ClientConfig | string): JobClient {
    const c = clientConfigOf(config);
    const security = clientSecurityOf(c);
    return new JobClient(rmAddressFromConfig(c), { ...(security ? { security } : {}), nnAddress: c.nnAddress });
  }

  /**
   * Submits a DAG job (the JSON text of a DAG file); resolves to the application id once it is durably accepted. On
   * a secure cluster the submitter is this client's certificate (`user` is ignored), and the job carries a delegation
   * token of the namenode naming it, so that its tasks read and write files as the submitter until the job ends (the
   * resource manager cancels the token then): the client reserves the job's id first, asks for the token, and submits
   * with that id. With a namenode, the job's files go to the submitter's staging directory in the DFS first: the DAG,
   * and every local resource whose path is `file:<path>` (relative to `options.baseDir`), which the DAG then names by
   * its DFS path.
   */
  async submit(dagJson: string, user = process.env["USER"] ?? "unknown", options: SubmitOptions = {}): Promise<string> {
    return (await this.submitJob(dagJson, user, options)).appId;
  }

  /**
   * {@link submit}, resolving to the application id and the accounts its containers will run as: the distinct
   * descriptions the running node managers gave ("unknown" for one that gave none), which `harvest job submit` prints.
   */
  async submitJob(
    dagJson: string,
    user = process.env["USER"] ?? "unknown",
    options: SubmitOptions = {},
  ): Promise<SubmittedJob> {
    const nn = this.namenodeForTokens();
    if (!this.options.nnAddress)
      return await call(this.rm, this.rm.submitApplication, {
        dagJson,
        user,
        dfsToken: "",
        appId: "",
        stagingDir: "",
      });
    const dfs = new DfsClient(this.options.nnAddress, {
      ...(this.options.security ? { security: this.options.security } : {}),
      user,
    });
    try {
      const { appId } = await call(this.rm, this.rm.getNewApplication, {});
      const dfsToken = nn ? (await call(nn, nn.getDelegationToken, { lifetimeMs: 0, job: appId })).token : "";
      const staged = await stageJob(dfs, appId, dagJson, options.baseDir ?? process.cwd());
      return await call(this.rm, this.rm.submitApplication, {
        dagJson: staged.dagJson,
        user,
        dfsToken,
        appId,
        stagingDir: staged.stagingDir,
      });
    } finally {
      nn?.close();
      dfs.close();
    }
  }

  /** A client of the namenode that issues the jobs' delegation tokens: only with a certificate and `nnAddress`. */
  private namenodeForTokens(): ClientNamenodeClient | undefined {
    const { security, nnAddress } = this.options;
    if (!security?.cert || !nnAddress) return undefined;
    return makeClient(loadHarvestProto().ClientNamenode, nnAddress, security);
  }

  status(appId: string): Promise<JobReport> {
    return call(this.rm, this.rm.getApplication, { appId });
  }

  async list(states: string[] = []): Promise<JobReport[]> {
    return (await call(this.rm, this.rm.listApplications, { states })).apps;
  }

  async kill(appId: string): Promise<string> {
    return (await call(this.rm, this.rm.killApplication, { appId })).state;
  }

  async nodes(): Promise<NodeInfo[]> {
    return (await call(this.rm, this.rm.getClusterNodes, {})).nodes;
  }

  /** A web token for this client's certificate and the resource manager's web URL (`harvest ui login`). */
  webToken(lifetimeMs = 0): Promise<WebTokenResponseOutput> {
    return call(this.rm, this.rm.getWebToken, { lifetimeMs });
  }

  async history(name = "", limit = 0): Promise<JobHistoryEntry[]> {
    return (await call(this.rm, this.rm.getJobHistory, { name, limit })).entries;
  }

  /**
   * Polls until the job reaches a terminal state, calling `onUpdate` with every report. Polls that fail because the
   * resource manager cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED: down, restarting, partitioned) are retried
   * for up to `rmRetryMs` per outage, so a short outage does not end the wait; the job's real outcome is what resolves.
   * Past the window, the last such error is thrown; any other error (APP_NOT_FOUND, PERMISSION_DENIED) at once.
   * `options` may be the poll interval in ms (the older signature).
   */
  async waitForCompletion(
    appId: string,
    onUpdate?: (r: JobReport) => void,
    options: WaitOptions | number = {},
  ): Promise<JobReport> {
    const o = typeof options === "number" ? { pollMs: options } : options;
    const pollMs = o.pollMs ?? 500;
    const retryForMs = o.rmRetryMs === undefined ? this.rmRetryMs : checkRetryMs(o.rmRetryMs, "rmRetryMs");
    let outage: RmOutage | undefined;
    for (;;) {
      let report: JobReport;
      try {
        report = await this.status(appId);
      } catch (err) {
        if (!isHarvestError(err, ...RM_UNREACHABLE_CODES)) throw err;
        const now = Date.now();
        if (!outage) {
          outage = { sinceMs: now, retryForMs, error: err };
          o.onOutage?.(outage);
        }
        if (now - outage.sinceMs >= retryForMs) throw gaveUp(this.rmAddress, appId, outage, err);
        await sleep(Math.min(pollMs, outage.sinceMs + retryForMs - now));
        continue;
      }
      if (outage) {
        o.onRecovered?.(outage, Date.now() - outage.sinceMs);
        outage = undefined;
      }
      onUpdate?.(report);
      if (TERMINAL_STATES.includes(report.state)) return report;
      await sleep(pollMs);
    }
  }

  /** The tail of one container's stdout or stderr (see {@link containerLogFrom}). */
  async containerLog(
    appId: string,
    containerId: string,
    stream: "stdout" | "stderr" = "stderr",
    tailBytes = 64 * 1024,
  ): Promise<string> {
    return (await this.containerLogFrom(appId, containerId, stream, tailBytes)).text;
  }

  /**
   * The tail of one container's stdout or stderr and where it came from: the node manager that ran it while it
   * answers, else (the server is gone, reimaged, or no longer has it) the copy its node manager made in the DFS when
   * the container exited (common/container-logs.ts), read as this client's user.
   */
  async containerLogFrom(
    appId: string,
    containerId: string,
    stream: "stdout" | "stderr" = "stderr",
    tailBytes = 64 * 1024,
  ): Promise<ContainerLogRead> {
    const report = await this.status(appId);
    const ref = report.containers.find((c) => c.containerId === containerId);
    if (!ref)
      throw new HarvestError(
        "CONTAINER_NOT_FOUND",
        `${appId} has no container ${containerId}; 'harvest job status ${appId}' lists them`,
      );
    let nm = this.nms.get(ref.nmAddress);
    if (!nm) {
      nm = makeClient(loadHarvestProto().ContainerManager, ref.nmAddress, this.options.security);
      this.nms.set(ref.nmAddress, nm);
    }
    try {
      const res = await call(nm, nm.getContainerLogs, { containerId, stream, tailBytes });
      return {
        text: res.data.toString("utf8"),
        totalBytes: Number(res.totalBytes),
        from: `the node manager of ${ref.nodeId} (${ref.nmAddress})`,
      };
    } catch (err) {
      if (!this.options.nnAddress || !isHarvestError(err, ...NODE_LOG_GONE_CODES)) throw err;
      const path = containerLogPath(report.user, appId, containerId, stream);
      const dfs = new DfsClient(this.options.nnAddress, {
        ...(this.options.security ? { security: this.options.security } : { user: report.user }),
      });
      try {
        const tail = tailBytes > 0 ? tailBytes : 64 * 1024;
        const part = await readKeptLog(dfs, path, -tail, tail);
        if (!part)
          throw new HarvestError(
            "CONTAINER_NOT_FOUND",
            `the node manager of ${ref.nodeId} cannot give ${containerId}'s log (${errorMessage(err)}), and the DFS ` +
              `holds no copy at ${path} (the container may still run, or its copy failed or expired)`,
            { cause: err },
          );
        return { text: part.data.toString("utf8"), totalBytes: part.totalBytes, from: `dfs:${path}` };
      } finally {
        dfs.close();
      }
    }
  }

  close(): void {
    this.rm.close();
    for (const nm of this.nms.values()) nm.close();
  }
}

/** A container's log as {@link JobClient.containerLogFrom} read it. */
export interface ContainerLogRead {
  text: string;
  /** The log's whole length in bytes. */
  totalBytes: number;
  /** Where it was read: "the node manager of <node> (<address>)" or "dfs:<path>". */
  from: string;
}

/** What a node manager answers when it cannot give a container's log: gone, unreachable, or wiped (reimaged). */
const NODE_LOG_GONE_CODES = ["UNAVAILABLE", "DEADLINE_EXCEEDED", "CONTAINER_NOT_FOUND"] as const;

/** A submitted job: its id, and the accounts its containers will run as (see {@link JobClient.submitJob}). */
export interface SubmittedJob {
  appId: string;
  /** The running node managers' distinct descriptions of the account containers run as, sorted. */
  containersRunAs: string[];
  /** The job's survival quote, made at submission (null when the resource manager could make none). */
  quote: SurvivalQuoteOutput | null;
}

/** Options of one submission. */
export interface SubmitOptions {
  /** What `file:` paths of local resources are relative to (the DAG file's directory, for the CLI). @default cwd */
  baseDir?: string;
}

/**
 * Puts a job's files in the DFS, as YARN's job client does: `<home>/.staging/<appId>/`, the staging directories mode
 * 700 (the submitter's alone), holding the local files its vertices declare (`files/<vertex>-<resource>`) and the DAG,
 * which names them there. Returns the directory as `dfs:<path>` and the DAG as staged.
 */
async function stageJob(
  dfs: DfsClient,
  appId: string,
  dagJson: string,
  baseDir: string,
): Promise<{ stagingDir: string; dagJson: string }> {
  const root = `${await dfs.homeDirectory()}/.staging`;
  const dir = `${root}/${appId}`;
  await dfs.mkdir(dir);
  await dfs.chmod(root, 0o700);
  await dfs.chmod(dir, 0o700);
  const staged = await uploadLocalResources(dfs, `${dir}/files`, dagJson, baseDir);
  await new Promise<void>((resolve, reject) => {
    const out = dfs.createWriteStream(`${dir}/dag.json`, { overwrite: true });
    out.on("finish", resolve);
    out.on("error", reject);
    out.end(staged);
  });
  return { stagingDir: `dfs:${dir}`, dagJson: staged };
}

/**
 * Uploads the local files, directories and archives a DAG's vertices declare as resources (`"path": "file:..."`) below `into`
 * and returns the DAG naming them there; a DAG that is not valid JSON is returned as it is (the resource manager says
 * what is wrong with it). A missing local file is INVALID_ARGUMENT naming the field.
 */
async function uploadLocalResources(dfs: DfsClient, into: string, dagJson: string, baseDir: string): Promise<string> {
  let dag: { vertices?: unknown };
  try {
    dag = JSON.parse(dagJson) as { vertices?: unknown };
  } catch {
    return dagJson;
  }
  if (typeof dag !== "object" || dag === null || !Array.isArray(dag.vertices)) return dagJson;
  let changed = false;
  for (const [vi, vertex] of (dag.vertices as { localResources?: unknown }[]).entries()) {
    if (typeof vertex !== "object" || vertex === null || !Array.isArray(vertex.localResources)) continue;
    for (const [ri, resource] of (vertex.localResources as { path?: unknown; type?: unknown }[]).entries()) {
      if (typeof resource?.path !== "string" || !resource.path.startsWith("file:")) continue;
      const local = resolve(baseDir, resource.path.slice("file:".length));
      const field = `vertices[${vi}].localResources[${ri}].path`;
      const st = await lstat(local).catch(() => {
        throw new HarvestError("INVALID_ARGUMENT", `${field}: no local file or directory ${local} to upload`, {
          details: { field },
        });
      });
      if (resource.type === "archive" && st.isDirectory())
        throw new HarvestError(
          "INVALID_ARGUMENT",
          `${field}: ${local} is a directory; an archive resource is a .tar, .tar.gz/.tgz or .zip file`,
          { details: { field } },
        );
      const target = `${into}/${vi}-${ri}`;
      await dfs.mkdir(into);
      if (st.isDirectory()) await putTree(dfs, local, target);
      else await dfs.put(local, target, { overwrite: true });
      resource.path = `dfs:${target}`;
      changed = true;
    }
  }
  return changed ? JSON.stringify(dag) : dagJson;
}

/** Uploads a local directory's regular files and subdirectories to `target` (links are not followed). */
async function putTree(dfs: DfsClient, local: string, target: string): Promise<void> {
  await dfs.mkdir(target);
  for (const e of await readdir(local, { withFileTypes: true })) {
    if (e.isDirectory()) await putTree(dfs, join(local, e.name), `${target}/${e.name}`);
    else if (e.isFile()) await dfs.put(join(local, e.name), `${target}/${e.name}`, { overwrite: true });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)));
}

function checkRetryMs(ms: number, field: string): number {
  if (!(typeof ms === "number" && Number.isFinite(ms) && ms >= 0))
    invalidOption("job client", field, `must be a number of milliseconds >= 0 (got ${String(ms)})`);
  return ms;
}

/** The error a wait ends with when the resource manager stayed unreachable for the whole retry window. */
function gaveUp(rmAddress: string, appId: string, outage: RmOutage, last: HarvestError): HarvestError {
  const s = Math.round(outage.retryForMs / 1000);
  return new HarvestError(
    last.code,
    `resource manager at ${rmAddress} unreachable for ${s} s while waiting for ${appId}; gave up (${last.message}). ` +
      `The job may still be running: 'harvest job status ${appId}' once the resource manager is back`,
    { details: { ...last.details, appId, rmAddress }, cause: last },
  );
}
