/**
 * What a node manager checks and prepares before a container exists: that a StartContainer request is well formed and
 * its grant was signed by the resource manager for this node (`checkStartRequest`), the environment the container
 * gets from the node manager (`containerEnvironment`), and that the account it runs as can reach what it needs
 * (`checkAccountReach`), so that a launch fails with what to fix rather than a task with EACCES.
 */
import { join } from "node:path";
import { verifyContainer } from "../common/container-token.js";
import { RESERVED_WORKDIR_NAMES, RESOURCE_VISIBILITIES, TASK_ENV } from "../common/dag-spec.js";
import { HarvestError } from "../common/errors.js";
import type { Principal } from "../common/auth.js";
import { containerIdParts, isContainerId, parseAppId } from "../common/ids.js";
import { fromWire } from "../common/resource.js";
import type { Resources } from "../common/resource.js";
import { CONTAINER_TOKEN_KINDS, STATUS_FILE_NAME, TOKEN_FILE_ENV } from "../common/task-contract.js";
import { assertCanEnter, assertCanExecute, assertCanRead, handJobDirTo } from "./run-as.js";
import type { ContainerAccount } from "./run-as.js";
import { OUTPUT_DIR_NAME } from "./shuffle-service.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { StartContainerRequestOutput } from "../proto/generated/harvest/v1/StartContainerRequest.js";

/**
 * The grant and resources of a StartContainer request, once every field is checked: a well-formed container id,
 * application id, argv, environment, tokens and local resources, and a grant the resource manager signed for this
 * node. Throws INVALID_ARGUMENT naming the field, or CONTAINER_TOKEN_INVALID.
 */
export function checkStartRequest(
  req: StartContainerRequestOutput,
  node: { nodeId: string; secret: string; minEpoch?: number },
): { grant: ContainerOutput; resource: Resources } {
  const grant = req.container;
  if (!grant)
    throw new HarvestError("INVALID_ARGUMENT", "StartContainer needs the granted container", {
      details: { field: "container" },
    });
  if (!isContainerId(grant.id))
    throw new HarvestError("INVALID_ARGUMENT", `bad container id ${JSON.stringify(grant.id)}`, {
      details: { field: "container.id" },
    });
  parseAppId(req.appId);
  if (grant.nodeId !== node.nodeId)
    throw new HarvestError(
      "CONTAINER_TOKEN_INVALID",
      `container ${grant.id} was granted on ${grant.nodeId}, not on ${node.nodeId}`,
    );
  const resource = fromWire(grant.resource);
  if (
    !verifyContainer(
      node.secret,
      {
        containerId: grant.id,
        appId: req.appId,
        nodeId: grant.nodeId,
        resource,
        jobPriority: grant.jobPriority,
        user: grant.user,
        epoch: grant.epoch,
      },
      grant.token,
    )
  ) {
    throw new HarvestError("CONTAINER_TOKEN_INVALID", `container ${grant.id}: token does not match the grant`);
  }
  // Fencing: a grant of an older resource-manager term than the node heard of (an old active's) starts nothing; 0 is a
  // resource manager that is not highly available.
  if (grant.epoch !== 0 && grant.epoch < (node.minEpoch ?? 0))
    throw new HarvestError(
      "STALE_EPOCH",
      `container ${grant.id} was granted in resource-manager term ${grant.epoch}, after which term ${node.minEpoch} began`,
      { details: { epoch: String(grant.epoch), seen: String(node.minEpoch) } },
    );
  if (req.argv.length === 0 || req.argv.some((a) => typeof a !== "string" || a.includes("\0"))) {
    throw new HarvestError("INVALID_ARGUMENT", "argv must be a non-empty list of strings", {
      details: { field: "argv" },
    });
  }
  for (const k of Object.keys(req.env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
      throw new HarvestError("INVALID_ARGUMENT", `bad environment variable name ${JSON.stringify(k)}`, {
        details: { field: "env" },
      });
    if (k === TOKEN_FILE_ENV)
      throw new HarvestError("INVALID_ARGUMENT", `${k} is set by the node manager (credentials go in tokens)`, {
        details: { field: "env" },
      });
  }
  for (const [kind, token] of Object.entries(req.tokens)) {
    if (!(CONTAINER_TOKEN_KINDS as readonly string[]).includes(kind) || token.length === 0 || token.length > 4096)
      throw new HarvestError("INVALID_ARGUMENT", `bad container token ${JSON.stringify(kind)}`, {
        details: { field: "tokens" },
      });
  }
  for (const [i, r] of req.resources.entries()) {
    if (
      !/^[A-Za-z0-9_.-]{1,128}$/.test(r.name) ||
      r.name === "." ||
      r.name === ".." ||
      RESERVED_WORKDIR_NAMES.includes(r.name)
    )
      throw new HarvestError("INVALID_ARGUMENT", `bad local resource name ${JSON.stringify(r.name)}`, {
        details: { field: `resources[${i}].name` },
      });
    if (req.resources.findIndex((o) => o.name === r.name) !== i)
      throw new HarvestError("INVALID_ARGUMENT", `local resource name ${JSON.stringify(r.name)} is used twice`, {
        details: { field: `resources[${i}].name` },
      });
    if (!(RESOURCE_VISIBILITIES as readonly string[]).includes(r.visibility))
      throw new HarvestError("INVALID_ARGUMENT", `bad local resource visibility ${JSON.stringify(r.visibility)}`, {
        details: { field: `resources[${i}].visibility` },
      });
  }
  return { grant, resource };
}

/**
 * Whether a job manager, by its AM token (`who`), may start the container `req` asks for: a task of its own job,
 * granted to its own attempt (an earlier attempt's token starts nothing, even before it expires).
 */
export function amMayStart(who: Principal, req: StartContainerRequestOutput): boolean {
  const granted = containerIdParts(req.container?.id ?? "")?.attempt;
  return who.appId === req.appId && !req.isAm && granted !== undefined && granted === who.attempt;
}

/** Where the node manager is, for a container's environment. */
export interface LaunchPlace {
  nodeId: string;
  /** This node manager's advertised address. */
  address: string;
  rmAddress: string;
  nnAddress: string;
  /** Harvest's task runtime, localized. */
  runtimeDir: string;
  /** Whether the cluster runs TLS (the DFS user then comes from the job's token, not the environment). */
  tls: boolean;
}

/** The environment a container gets: the request's own, then what the node manager sets (which wins). */
export function containerEnvironment(
  req: StartContainerRequestOutput,
  grant: ContainerOutput,
  resource: Resources,
  place: LaunchPlace,
  workDir: string,
): Record<string, string> {
  const env: Record<string, string> = {
    ...req.env,
    // Harvest's task runtime, localized (never the installation itself).
    HARVEST_HOME: place.runtimeDir,
    HARVEST_CONTAINER_ID: grant.id,
    HARVEST_APP_ID: req.appId,
    HARVEST_NODE_ID: place.nodeId,
    HARVEST_NM_ADDRESS: place.address,
    HARVEST_RM_ADDRESS: req.env["HARVEST_RM_ADDRESS"] ?? place.rmAddress,
    HARVEST_NN_ADDRESS: place.nnAddress,
    // A plaintext namenode trusts the user a client claims: the container's is the job's submitter, not its OS
    // account (YARN's HADOOP_USER_NAME); with TLS the job's token says who it is.
    ...(place.tls ? {} : { HARVEST_DFS_USER: grant.user }),
    HARVEST_CONTAINER_VCORES: String(resource.vcoresMilli / 1000),
    HARVEST_CONTAINER_MEMORY_MB: String(resource.memoryMb),
  };
  // A task writes its outputs into its own directory, which the shuffle service serves once it has exited.
  if (!req.isAm) env[TASK_ENV.outputDir] = join(workDir, OUTPUT_DIR_NAME);
  // Its progress and counters while it runs, beside its outputs and never among them (task-status.ts).
  if (!req.isAm) env[TASK_ENV.statusFile] = join(workDir, STATUS_FILE_NAME);
  return env;
}

/**
 * Checks that `account` can reach what its container needs (the task runtime, the Node binary when argv runs "node",
 * the cluster CA), and for a job manager's launch from a local staging directory hands the job's directory there to
 * the account (the journal and the tasks' outputs). Throws CONTAINER_LAUNCH_FAILED saying what to fix.
 */
export function checkAccountReach(
  req: StartContainerRequestOutput,
  env: Record<string, string>,
  account: ContainerAccount,
  paths: { runtimeDir: string; nodeBinary: string; dataDir: string },
): void {
  assertCanEnter(paths.runtimeDir, account, "Harvest's task runtime (HARVEST_HOME, in the node's file cache)");
  // "node" in argv runs this node manager's own Node binary, or its localized copy (container.ts).
  if (req.argv[0] === "node") assertCanExecute(paths.nodeBinary, account, "the Node binary");
  if (env["HARVEST_CA"]) assertCanRead(env["HARVEST_CA"], account, "the cluster CA certificate (HARVEST_CA)");
  const staging = req.env["HARVEST_STAGING_DIR"];
  if (req.isAm && staging) handJobDirTo(join(staging, req.appId), account, paths.dataDir);
}
