/**
 * The job client: submit DAG jobs to a Harvest resource manager and follow them. The `harvest job` commands are thin
 * wrappers over this class.
 */
import { clientConfigOf, clientSecurityOf, rmAddressFromConfig } from "./client-config.js";
import type { ClientConfig } from "./client-config.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { HarvestError } from "../common/errors.js";
import type { ApplicationClientServiceClient } from "../proto/generated/harvest/v1/ApplicationClientService.js";
import type { ApplicationReportOutput } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { JobHistoryEntryOutput } from "../proto/generated/harvest/v1/JobHistoryEntry.js";
import type { NodeReportOutput } from "../proto/generated/harvest/v1/NodeReport.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";

/** A job's status as the resource manager reports it. */
export type JobReport = ApplicationReportOutput;
/** A node as the resource manager sees it. */
export type NodeInfo = NodeReportOutput;
/** A finished job in the history. */
export type JobHistoryEntry = JobHistoryEntryOutput;

/** States after which a job never changes. */
export const TERMINAL_STATES: readonly string[] = ["FINISHED", "FAILED", "KILLED"];

/** Client of a resource manager's client protocol. */
export class JobClient {
  private readonly rm: ApplicationClientServiceClient;
  private readonly nms = new Map<string, ContainerManagerClient>();

  constructor(
    readonly rmAddress: string,
    readonly options: {
      /** TLS and this user's certificate (a secure cluster); undefined: plaintext. */
      security?: ClientSecurity;
      /**
       * The namenode: with a certificate, `submit` asks it for a delegation token the job's tasks act on the file
       * system with, as the submitter. Empty: the job's tasks get none.
       */
      nnAddress?: string;
    } = {},
  ) {
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
   * token of the namenode, so that its tasks read and write files as the submitter.
   */
  async submit(dagJson: string, user = process.env["USER"] ?? "unknown"): Promise<string> {
    const dfsToken = await this.delegationToken();
    const res = await call(this.rm, this.rm.submitApplication, { dagJson, user, dfsToken });
    return res.appId;
  }

  private async delegationToken(): Promise<string> {
    const { security, nnAddress } = this.options;
    if (!security?.cert || !nnAddress) return "";
    const nn = makeClient(loadHarvestProto().ClientNamenode, nnAddress, security);
    try {
      return (await call(nn, nn.getDelegationToken, { lifetimeMs: 0 })).token;
    } finally {
      nn.close();
    }
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

  async history(name = "", limit = 0): Promise<JobHistoryEntry[]> {
    return (await call(this.rm, this.rm.getJobHistory, { name, limit })).entries;
  }

  /** Polls until the job reaches a terminal state, calling `onUpdate` with every report. */
  async waitForCompletion(appId: string, onUpdate?: (r: JobReport) => void, pollMs = 500): Promise<JobReport> {
    for (;;) {
      const report = await this.status(appId);
      onUpdate?.(report);
      if (TERMINAL_STATES.includes(report.state)) return report;
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /** The tail of one container's stdout or stderr, fetched from the node manager that ran it. */
  async containerLog(
    appId: string,
    containerId: string,
    stream: "stdout" | "stderr" = "stderr",
    tailBytes = 64 * 1024,
  ): Promise<string> {
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
    const res = await call(nm, nm.getContainerLogs, { containerId, stream, tailBytes });
    return res.data.toString("utf8");
  }

  close(): void {
    this.rm.close();
    for (const nm of this.nms.values()) nm.close();
  }
}
