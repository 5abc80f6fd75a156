/** What the multi-host scenario (labs/multihost.ts) is given and what it reports: its options, checks and result. */
import type { ContainerCountsOutput } from "../proto/generated/harvest/v1/ContainerCounts.js";
import type { LabDaemon } from "./netns-lab.js";

/** Settings of a scenario run. */
export interface MultihostOptions {
  /** Where configs, logs and data go (kept afterwards). @default a new directory under the system's temp dir */
  dir?: string;
  /** The partitioned server's link stays cut at least this long. @default 12000 */
  cutMs?: number;
  /** The resource manager's `nodeExpiryMs`. @default 4000 */
  nodeExpiryMs?: number;
  /** The namenode's `datanodeExpiryMs`. @default 6000 */
  datanodeExpiryMs?: number;
  /** Progress lines. @default stdout */
  print?: (line: string) => void;
  /** Called with the running cluster before it is torn down (`--keep` waits here for Ctrl-C). */
  beforeDestroy?: (cluster: MultihostCluster) => Promise<void>;
}

/** Where the scenario's cluster is, for a look by hand. */
export interface MultihostCluster {
  runDir: string;
  prefix: string;
  clientConfig: string;
  rmAddress: string;
  nnAddress: string;
  /** `ip netns exec <master ns> node dist/cli/harvest.js` */
  cliPrefix: string[];
  daemons: readonly LabDaemon[];
  /** Every check so far passed. */
  passed: boolean;
}

/** Container counts of a job, as the resource manager reports them. */
export type ContainerCounts = ContainerCountsOutput;

/** How a job ended. */
export interface JobOutcome {
  appId: string;
  state: string;
  outcome: string;
  durationMs: number;
  taskContainers: ContainerCounts;
  amAttempts: number;
  /** Task containers per server. */
  tasksPerServer: Record<string, number>;
}

/** One outcome checked, as a sentence. */
export interface MultihostCheck {
  name: string;
  ok: boolean;
  detail: string;
}

/** What the scenario saw. Times are milliseconds; `...AfterMs` count from the cut or the heal. */
export interface MultihostResult {
  ok: boolean;
  /** Why the scenario stopped early, if it did. */
  error?: string;
  runDir: string;
  prefix: string;
  clientConfig: string;
  checks: MultihostCheck[];
  startupMs?: number;
  totalMs?: number;
  dagJob?: JobOutcome;
  file?: {
    path: string;
    bytes: number;
    sha256: string;
    readBackSha256: string;
    identical: boolean;
    putMs: number;
    getMs: number;
  };
  partition?: {
    server: string;
    /** When the link was cut and healed (ISO 8601, to find them in the daemon logs). */
    cutAt: string;
    healedAt?: string;
    cutForMs: number;
    /** Distinct consecutive states the resource manager reported for the server, cut to rejoin. */
    nodeStates: string[];
    /** Same, as the namenode reported its datanode. */
    datanodeStates: string[];
    nodeLostAfterMs?: number;
    datanodeDeadAfterMs?: number;
    /** A replication-2 file had every block back at 2 live replicas off the cut server. */
    reReplicatedAfterMs?: number;
    job?: JobOutcome & {
      /** The cut server's containers running at the cut, with how the resource manager says they ended. */
      containersAtCut: { containerId: string; isAm: boolean; state: string; cause: string }[];
      /** Inputs the job's last task read that came from one of those containers (must be none). */
      inputsFromCutContainers: string[];
    };
    write?: {
      path: string;
      bytesFed: number;
      completed: boolean;
      errorCode?: string;
      errorMessage?: string;
      identical?: boolean;
      ms: number;
      /** When the write ended, counted from the heal. */
      endedAfterHealMs: number;
    };
  };
  heal?: {
    nodeManagerRejoinMs?: number;
    datanodeRejoinMs?: number;
    /** Container processes of the cut server that ran at the cut (found by working directory under /proc). */
    processesAtCut: number;
    /** How many of them still ran when its node manager rejoined. */
    aliveAtRejoin?: number;
    /** All of them gone, counted from the heal. */
    processesGoneAfterMs?: number;
    /** When the scenario let the held tasks finish (they never end by themselves before), counted from the heal. */
    releasedAfterMs?: number;
    fsckHealthy: boolean;
    fsckHealthyAfterMs?: number;
  };
}
