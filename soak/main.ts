/**
 * `npm run soak -- --minutes N [--seed S] [--kill-every 3-6] [--servers 3] [--ha] [--json] [--keep]`: a soak with
 * random kills (soak.ts); with --ha on highly available masters, whose active ones it kills too. Exits 1 when a
 * promise was broken.
 */
import { Command } from "commander";
import { runSoak, soakSummary } from "./soak.js";

const program = new Command()
  .name("soak")
  .description("run a local cluster under a workload while a chaos loop kill -9s random daemons, then check it")
  .option("--minutes <n>", "minutes of chaos", "5")
  .option("--seed <n>", "seeds the chaos, the workload and the data", "1")
  .option("--kill-every <s>", "seconds between kills, a range lo-hi", "3-6")
  .option("--servers <n>", "servers (a node manager and a datanode each)", "3")
  .option(
    "--ha",
    "highly available masters (an etcd ensemble, rm+rm2, nn+nn2); kill the active ones and etcd members too",
  )
  .option("--dir <dir>", "cluster directory (default: a temporary one)")
  .option("--keep", "keep the cluster directory (logs) afterwards")
  .option("--json", "print the report as JSON")
  .parse();

const o = program.opts<{
  minutes: string;
  seed: string;
  killEvery: string;
  servers: string;
  ha?: boolean;
  dir?: string;
  keep?: boolean;
  json?: boolean;
}>();
const minutes = Number(o.minutes);
const [lo, hi] = o.killEvery.split("-").map(Number);
if (!(minutes > 0 && minutes <= 24 * 60)) fail("--minutes must be in (0, 1440]");
if (!(lo !== undefined && hi !== undefined && lo > 0 && hi >= lo)) fail("--kill-every must be seconds lo-hi, e.g. 3-6");
if (!(Number(o.servers) >= 2 && Number(o.servers) <= 8)) fail("--servers must be 2..8");

const report = await runSoak({
  minutes,
  seed: Number(o.seed),
  killEveryMs: [lo! * 1000, hi! * 1000],
  servers: Number(o.servers),
  ha: o.ha === true,
  keep: o.keep === true,
  ...(o.dir ? { dir: o.dir } : {}),
  log: (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`),
});
process.stdout.write((o.json ? JSON.stringify(report, null, 2) : soakSummary(report)) + "\n");
process.exit(report.violations.length === 0 ? 0 : 1);

function fail(why: string): never {
  process.stderr.write(`soak: ${why}\n`);
  process.exit(2);
}
