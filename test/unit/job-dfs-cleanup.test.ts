/**
 * What the resource manager stores, at a job's end, to do at the namenode: on a secure cluster the token to cancel and
 * the staging directory to remove with it; on a plaintext one the staging directory and the submitter to remove it
 * as; nothing without a namenode or without either. Stored with the end and read back after a restart.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Logger } from "../../common/log.js";
import { JobDfsCleanup } from "../../resourcemanager/job-dfs-cleanup.js";
import { RmStateStore } from "../../resourcemanager/state-store.js";
import type { AppRecord, HistoryRecord } from "../../resourcemanager/state-store.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-cleanup-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function record(appId: string, stagingDir?: string): AppRecord {
  return {
    ...{ appId, seq: 1, name: "j", user: "carol", dagJson: "{}", state: "FINISHED", diagnostics: "" },
    ...{ outcome: "JOB_SUCCEEDED", submitMs: 0, startMs: 0, finishMs: 1, attempt: 1, failedAttempts: 0 },
    ...{ maxConcurrency: 1, ...(stagingDir ? { stagingDir } : {}) },
  };
}

function history(appId: string): HistoryRecord {
  return { appId, name: "j", durationMs: 1, outcome: "JOB_SUCCEEDED", finishMs: 1, tasksRun: 1, tasksPreempted: 0 };
}

describe("a job's cleanup at the namenode", () => {
  it("is the token and staging directory on a secure cluster, the staging directory and submitter on a plaintext one", async () => {
    const store = new RmStateStore(join(dir, "store"));
    await store.open();
    try {
      const log = new Logger("test", "error");
      const cleanup = new JobDfsCleanup("127.0.0.1:1", undefined, store, log);
      const staging = "dfs:/user/carol/.staging/app_1";
      expect(cleanup.cleanupOf(record("app_1", staging), "tok")).toEqual({ token: "tok", stagingDir: staging });
      expect(cleanup.cleanupOf(record("app_1", staging), "")).toEqual({
        token: "",
        stagingDir: staging,
        user: "carol",
      });
      expect(cleanup.cleanupOf(record("app_1"), "tok")).toEqual({ token: "tok" });
      expect(cleanup.cleanupOf(record("app_1"), "")).toBeUndefined();
      // Without a namenode there is nothing to do it at.
      expect(new JobDfsCleanup("", undefined, store, log).cleanupOf(record("app_1", staging), "tok")).toBeUndefined();

      // Stored with the job's end, read back (after a restart), and gone once done.
      await store.finishApp(
        record("app_1", staging),
        history("app_1"),
        cleanup.cleanupOf(record("app_1", staging), ""),
      );
      await store.finishApp(record("app_2"), history("app_2"), cleanup.cleanupOf(record("app_2"), "tok2"));
      await store.finishApp(record("app_3"), history("app_3"), cleanup.cleanupOf(record("app_3"), ""));
      expect(await store.pendingJobCleanups()).toEqual([
        { appId: "app_1", token: "", stagingDir: staging, user: "carol" },
        { appId: "app_2", token: "tok2" },
      ]);
      await store.jobCleanedUp("app_1");
      expect((await store.pendingJobCleanups()).map((p) => p.appId)).toEqual(["app_2"]);
    } finally {
      await store.close();
    }
  });
});
