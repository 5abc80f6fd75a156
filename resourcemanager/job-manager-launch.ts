/**
 * Starting an attempt's job manager in the container granted for it: the environment it is given (where the resource
 * manager and its DAG are), its only credentials (in its token file) and the node manager's StartContainer call.
 */
import { join } from "node:path";
import { signAmToken, signShuffleToken } from "../common/container-token.js";
import { call } from "../common/grpc.js";
import type { ContainerTokens } from "../common/task-contract.js";
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
    HARVEST_APP_ID: appId,
    HARVEST_ATTEMPT: String(attempt),
    HARVEST_RM_ADDRESS: deps.address(),
    HARVEST_STAGING_DIR: options.stagingDir,
    HARVEST_DAG_FILE: join(options.stagingDir, appId, "dag.json"),
    HARVEST_NOTICE_AVOID_MS: String(options.noticeAvoidMs),
  };
  // A job staged in the DFS: its DAG is localized into the container like any resource (as YARN localizes job files),
  // and the job manager keeps its journal there; no server needs the resource manager's staging directory.
  const staging = app.record.stagingDir;
  const resources = staging ? [{ name: "dag.json", path: `${staging}/dag.json`, visibility: "application" }] : [];
  if (staging) {
    env["HARVEST_JOB_STAGING"] = staging;
    env["HARVEST_DAG_FILE"] = "dag.json";
    delete env["HARVEST_STAGING_DIR"];
  }
  // The job manager's only credentials, in its token file: its AM token (valid `amTokenLifetimeMs`; Allocate renews
  // it), the job's shuffle token and the submitter's file-system token (the last two it passes on to its tasks).
  const tokens: ContainerTokens = {
    ...(options.secret
      ? {
          "am-token": signAmToken(options.secret, {
            appId,
            attempt,
            expiresMs: deps.clock.nowMs() + options.amTokenLifetimeMs,
          }),
          "shuffle-token": signShuffleToken(options.secret, appId),
        }
      : {}),
    ...(app.record.dfsToken ? { "dfs-token": app.record.dfsToken } : {}),
  };
  const client = deps.nodes.client(container.nmAddress);
  const argv = options.jobManagerCommand;
  await call(client, client.startContainer, { container, appId, argv, env, tokens, isAm: true, resources });
  deps.log.info("job manager launched", { appId, attempt, containerId: container.id, nodeId: container.nodeId });
}
