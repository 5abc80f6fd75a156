// Builds Harvest's two native routines (native/binding.gyp) into native/build/Release/ with npm's own node-gyp, when
// they are out of date: the chunk checksums of a packet in one call (native/checksums.c) and zero-copy sends of replica
// data (native/sendfile.c). They are optional: on a machine without a C compiler (or without Node's headers and no
// network to fetch them) the build warns, the data path computes chunk checksums one library call per chunk
// (common/checksum.ts), and datanodes read replica data into memory to send it (datanode/zero-copy.ts).
// `HARVEST_REQUIRE_NATIVE=1` (CI) makes a failed build an error instead.
// binding.gyp lives in native/, not at the package root: there npm would run `node-gyp rebuild` itself at install,
// and fail the install on a machine without a compiler instead of warning.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
// sendfile(2) as used there is Linux's (binding.gyp builds it only there).
const targets = process.platform === "linux" ? ["harvest_checksums", "harvest_sendfile"] : ["harvest_checksums"];
const native = join(root, "native");
const outputs = targets.map((t) => join(native, "build", "Release", `${t}.node`));
const inputs = ["binding.gyp", "checksums.c", "sendfile.c"].map((f) => join(native, f));
const required = process.env.HARVEST_REQUIRE_NATIVE === "1";

const mtime = (p) => statSync(p).mtimeMs;
if (outputs.every((o) => existsSync(o) && inputs.every((p) => mtime(p) <= mtime(o)))) process.exit(0);

// npm tells its scripts where its node-gyp is; run by hand, it sits beside npm in Node's installation.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "node_modules", "node-gyp", "bin", "node-gyp.js"),
].filter(Boolean);
const gyp = candidates.find((p) => existsSync(p));

function giveUp(why) {
  const message = `harvest: the native routines were not built (${why}); chunk checksums fall back to one call per chunk, and datanodes send reads from memory`;
  if (required) {
    console.error(`${message}, and HARVEST_REQUIRE_NATIVE=1 asks for it`);
    process.exit(1);
  }
  console.warn(message);
  process.exit(0);
}

if (!gyp) giveUp("npm's node-gyp was not found");
const args = [gyp, "rebuild", "--silent"];
// `npm run` passes npm's nodedir (Node's headers on this machine) to its scripts; node-gyp run by hand does not read it.
if (process.env.npm_config_nodedir) args.push(`--nodedir=${process.env.npm_config_nodedir}`);
const run = spawnSync(process.execPath, args, { cwd: native, encoding: "utf8" });
if (run.status !== 0 || !outputs.every((o) => existsSync(o))) {
  const detail = `${run.stderr ?? ""}${run.stdout ?? ""}`.trim().split("\n").slice(-8).join("\n");
  if (detail) console.warn(detail);
  giveUp(run.error ? run.error.message : `node-gyp exited with ${run.status}`);
}
