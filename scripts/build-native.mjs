// Builds Harvest's native checksum routine (native/checksums.c, binding.gyp) into build/Release/ with npm's own
// node-gyp, when it is out of date. It is optional: on a machine without a C compiler (or without Node's headers and
// no network to fetch them) the build warns and the data path computes chunk checksums one library call per chunk
// (common/checksum.ts), as before. `HARVEST_REQUIRE_NATIVE=1` (CI) makes a failed build an error instead.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const output = join(root, "build", "Release", "harvest_checksums.node");
const inputs = [join(root, "binding.gyp"), join(root, "native", "checksums.c")];
const required = process.env.HARVEST_REQUIRE_NATIVE === "1";

const mtime = (p) => statSync(p).mtimeMs;
if (existsSync(output) && inputs.every((p) => mtime(p) <= mtime(output))) process.exit(0);

// npm tells its scripts where its node-gyp is; run by hand, it sits beside npm in Node's installation.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "node_modules", "node-gyp", "bin", "node-gyp.js"),
].filter(Boolean);
const gyp = candidates.find((p) => existsSync(p));

function giveUp(why) {
  const message = `harvest: the native checksum routine was not built (${why}); chunk checksums fall back to one call per chunk`;
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
const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" });
if (run.status !== 0 || !existsSync(output)) {
  const detail = `${run.stderr ?? ""}${run.stdout ?? ""}`.trim().split("\n").slice(-8).join("\n");
  if (detail) console.warn(detail);
  giveUp(run.error ? run.error.message : `node-gyp exited with ${run.status}`);
}
