/**
 * Starting an attempt's job manager in the container granted for it: the environment it is given (where the resource
 * manager and its DAG are, and its only credentials) and the node manager's StartContainer call.
 */
import { join } from "node:path";
import { signAmToken } from "../common/container-token.js";
import { call } from "../common/grpc.js";
import { packageRoot } from "../common/paths.js";
import type { AppRuntime, ApplicationDeps } from "./app-runtime.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";

/** Starts the job manager of `app`'s current attempt in `container`; rejects when its node manager does not. */
export async function startJobManager(
  deps: ApplicationDeps,
  app: AppRuntime,
  container: ContainerOutput,
): Promise<void> {
  const { options } = deps;
  const { appId, attempt } = app.record;
  const env: Record<string, string> = {
    HARVEST_HOME: packageRoot(),
    HARVEST_APP_ID: appId,
    HARVEST_ATTEMPT: String(attempt),
    HARVEST_RM_ADDRESS: deps.address(),
    HARVEST_STAGING_DIR: options.stagingDir,
    HARVEST_DAG_FILE: join(options.stagingDir, appId, "dag.json"),
    // The job manager's only credentials: its AM token and the submitter's file-system token (passed on to tasks).
    ...(options.secret ? { HARVEST_AM_TOKEN: signAmToken(options.secret, { appId, attempt }) } : {}),
    ...(app.record.dfsToken ? { HARVEST_DFS_TOKEN: app.record.dfsToken } : {}),
  };
  const client = deps.nodes.client(container.nmAddress);
  await call(client, client.startContainer, { container, appId, argv: options.jobManagerCommand, env, isAm: true });
  deps.log.info("job manager launched", { appId, attempt, containerId: container.id, nodeId: container.nodeId });
}
