// `npm run fuzz -- --runs N [--seed S] [vitest args...]`: runs the property-based tests in test/fuzz with N cases per
// target (default 10000) and a test timeout long enough for them. The default suite runs a few hundred per target.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let runs = "10000";
let seed;
const rest = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--runs") runs = args[++i] ?? "";
  else if (args[i] === "--seed") seed = args[++i] ?? "";
  else rest.push(args[i]);
}
if (!/^[1-9]\d*$/.test(runs)) {
  console.error(`fuzz: --runs must be a positive integer, got ${JSON.stringify(runs)}`);
  process.exit(2);
}
const env = { ...process.env, HARVEST_FUZZ_RUNS: runs, ...(seed ? { HARVEST_FUZZ_SEED: seed } : {}) };
// Each service target makes about `runs` gRPC calls of a few milliseconds; give a target up to 20 ms per case.
const timeoutMs = String(Math.max(600_000, Number(runs) * 20 * 2));
const vitest = join(root, "node_modules", "vitest", "vitest.mjs");
const files = rest.length > 0 ? rest : ["test/fuzz"];
const r = spawnSync(
  process.execPath,
  [vitest, "run", "--testTimeout", timeoutMs, "--hookTimeout", "120000", ...files],
  {
    cwd: root,
    env,
    stdio: "inherit",
  },
);
process.exit(r.status ?? 1);
