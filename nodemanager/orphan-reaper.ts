/**
 * The orphan reaper: a watchdog a node manager starts beside itself, holding one end of a pipe to it. When the pipe
 * closes the node manager has exited, however it died (kill -9 included), and its containers are orphans: the resource
 * manager will declare the node lost and re-run their tasks elsewhere, so the reaper kills them (only processes proven
 * to be the containers' own, `killContainerLeftovers`) rather than let two copies of a task run and write.
 *
 * `node dist/nodemanager/orphan-reaper.js <nm data dir>`, started by the node manager with a piped stdin.
 */
import { killContainerLeftovers } from "../common/container-leftovers.js";

const dataDir = process.argv[2];
if (!dataDir) {
  process.stderr.write("usage: orphan-reaper <node manager data dir> (started by the node manager)\n");
  process.exit(2);
}
let done = false;
const reap = (): void => {
  if (done) return;
  done = true;
  const { killed, skipped } = killContainerLeftovers(dataDir);
  if (killed > 0 || skipped > 0)
    process.stderr.write(
      JSON.stringify({ level: "info", msg: "node manager gone: killed its containers", killed, skipped }) + "\n",
    );
  process.exit(0);
};
process.stdin.on("end", reap);
process.stdin.on("close", reap);
process.stdin.on("error", reap);
process.stdin.resume();
