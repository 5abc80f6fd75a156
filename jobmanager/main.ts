/** Entry point of a job-manager container: runs one attempt and exits 0 when the job succeeded. */
import { errorMessage } from "../common/errors.js";
import { Logger } from "../common/log.js";
import { JobManager, jobManagerOptionsFromEnv } from "./job-manager.js";

const log = new Logger("jm");
process.on("unhandledRejection", (err) => log.error("unhandled rejection", { error: errorMessage(err) }));

async function main(): Promise<number> {
  const jm = new JobManager(jobManagerOptionsFromEnv(process.env));
  let stopping = false;
  process.on("SIGTERM", () => {
    if (stopping) return;
    stopping = true;
    log.info("SIGTERM: job manager stopping");
    process.exit(143);
  });
  try {
    const exit = await jm.run();
    return exit === "SUCCEEDED" ? 0 : exit === "SUPERSEDED" ? 0 : 1;
  } finally {
    jm.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log.error("job manager failed", { error: errorMessage(err) });
    process.exit(2);
  },
);
