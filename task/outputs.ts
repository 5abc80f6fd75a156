/**
 * A task's outputs: files in its output directory (HARVEST_OUTPUT_DIR, its own, on its node's disk), which the node's
 * shuffle service serves to the job's other tasks once the task has exited. A file appears under its name only when
 * complete: it is written under a hidden temporary name and renamed at the end, so a consumer never reads half of one.
 */
import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import { TASK_ENV } from "../common/task-contract.js";
import { TaskError } from "./context.js";

/** An output name: a plain file name, not hidden (names starting with "_" are not data, see NOT_DATA_PREFIXES). */
const OUTPUT_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/;

/**
 * A stream writing the output file `name` (e.g. `partitionFileName(p)`); the file appears when the stream finishes,
 * and not at all when it is destroyed with an error.
 */
export function writeOutput(name: string, env: NodeJS.ProcessEnv = process.env): Writable {
  const dir = env[TASK_ENV.outputDir];
  if (!dir) throw new TaskError(`${TASK_ENV.outputDir} is not set; run this program as a Harvest task`);
  if (!OUTPUT_NAME.test(name)) throw new TaskError(`not an output file name: ${JSON.stringify(name)}`);
  const final = join(dir, name);
  const tmp = join(dir, `.${name}.tmp`);
  const file = createWriteStream(tmp, { highWaterMark: 1 << 20 });
  return new Writable({
    highWaterMark: 1 << 20,
    write(chunk: Buffer, _encoding, done) {
      if (file.write(chunk)) done();
      else file.once("drain", () => done());
    },
    final(done) {
      file.end(() => {
        rename(tmp, final).then(() => done(), done);
      });
    },
    destroy(err, done) {
      file.destroy();
      rm(tmp, { force: true }).then(
        () => done(err),
        () => done(err),
      );
    },
  });
}
