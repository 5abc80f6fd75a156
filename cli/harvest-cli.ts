/**
 * The `harvest` command. Every subcommand has --help, a human default output, --json for scripts, exit code 0 only on
 * success, and errors that say what was wrong and what to do. Commands that talk to a cluster find it through a client
 * configuration (--config, $HARVEST_CONF, ~/.harvest/client.json) or a local cluster's directory (--dir,
 * $HARVEST_CLUSTER_DIR, ~/.harvest/cluster), the one `harvest cluster up` wrote.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { Command, Option } from "commander";
import { errorMessage, HarvestError } from "../common/errors.js";
import {
  action,
  clusterTarget,
  common,
  durationFlagMs,
  positiveInt,
  positiveNumber,
  print,
  withClient,
} from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";
import { distEntry } from "../common/paths.js";
import {
  clusterDaemons,
  resolveClusterDir,
  restartDaemon,
  startCluster,
  stopCluster,
} from "../localcluster/cluster.js";
import { registerDaemonCommands } from "./daemon-commands.js";
import { registerSecurityCommands } from "./security-commands.js";
import { runDemo } from "./demo.js";
import { registerAdminCommands } from "./admin-commands.js";
import { registerFsCommands } from "./fs-commands.js";
import { registerSimCommands } from "./sim-commands.js";
import { registerPowerCommands } from "./power-commands.js";
import { registerUiCommands } from "./ui-commands.js";
import {
  duration,
  LiveDisplay,
  outcomeText,
  progressKey,
  progressLines,
  quoteText,
  reportJson,
  table,
} from "./format.js";
import type { JobClient, JobReport } from "../client/job-client.js";
import { choosePrimaries } from "./primary-traces.js";
import { acceptsGlobal, addGlobalOptions, harvestVersion } from "./global-options.js";

const program = new Command();
program
  .name("harvest")
  .description("Harvest: run batch DAG jobs on spare cores of servers owned by primary tenants")
  .showHelpAfterError("(run with --help for usage)")
  .configureOutput({ outputError: (str, write) => write(str) });
addGlobalOptions(program);

// ------------------------------------------------------------------------------------------------ cluster

const cluster = program.command("cluster").description("start, inspect and stop a local cluster");

common(cluster.command("up"), { clientConfig: false })
  .description("start a resource manager and N node managers on loopback, each server with its own primary tenant")
  .option("--servers <n>", "number of servers (node managers)", "4")
  .option(
    "--primary <source>",
    "primary tenants: trace (real traces, or generated ones when ../shared/data is absent), trace:<file>, burn, burn:<file>, proc",
    "trace",
  )
  .option("--speed <x>", "trace replay speed (trace seconds per real second)", "60")
  .option("--vcores <n>", "vcores per server", "4")
  .option("--memory-mb <n>", "memory per server in MB", "4096")
  .option(
    "--config <file>",
    'JSON file of daemon options: { "rm": {...}, "nn": {...}, "nm": {...}, "dn": {...} } (README, Configuration)',
  )
  .option(
    "--insecure",
    "no TLS and no authentication: anyone who reaches the ports can act as anyone (a throwaway cluster only)",
  )
  .option(
    "--ha",
    "also start the coordination service of highly available masters: a three-member etcd ensemble on loopback in " +
      "<dir>/etcd, under the cluster CA (needs TLS; docs/ha.md)",
  )
  .action(
    action(
      async (
        o: GlobalOpts & {
          servers: string;
          primary: string;
          speed: string;
          vcores: string;
          memoryMb: string;
          config?: string;
          insecure?: boolean;
          ha?: boolean;
        },
      ) => {
        const dir = resolveClusterDir(o.dir);
        const servers = positiveInt(o.servers, "--servers");
        const primaries = await choosePrimaries(o.primary, servers, dir);
        const config = o.config ? readDaemonConfig(o.config) : {};
        const c = await startCluster({
          ...config,
          dir,
          primaries: primaries.map((p) => p.spec),
          offsetsMs: primaries.map((p) => p.offsetMs),
          speed: positiveNumber(o.speed, "--speed"),
          vcores: positiveNumber(o.vcores, "--vcores"),
          memoryMb: positiveInt(o.memoryMb, "--memory-mb"),
          startTimeoutMs: 20_000,
          insecure: o.insecure === true,
          ha: o.ha === true,
        });
        print(o, c, () =>
          [
            `cluster up in ${dir}` +
              (c.security
                ? ` (mutual TLS; CA ${c.security.ca}, you are the admin ${c.security.cert})`
                : " (INSECURE: plaintext, nobody authenticated)"),
            `resource manager  ${c.rm.address}  (log ${c.rm.log})`,
            ...(c.rm.httpUrl ? [`  web UI           ${c.rm.httpUrl}/`] : []),
            ...(c.rm2 ? [`resource manager  ${c.rm2.address}  (log ${c.rm2.log})`] : []),
            ...(c.nn ? [`namenode          ${c.nn.address}  (log ${c.nn.log})`] : []),
            ...(c.nn2 ? [`namenode          ${c.nn2.address}  (log ${c.nn2.log})`] : []),
            ...(c.nn?.httpUrl ? [`  web UI           ${c.nn.httpUrl}/`] : []),
            ...(c.etcd?.members ?? []).map((m) => `${m.name.padEnd(17)} ${m.clientUrl}  etcd (log ${m.log})`),
            ...c.nodes.map(
              (n, i) => `${n.nodeId.padEnd(17)} ${n.address}  primary ${primaries[i]?.label ?? n.primary}`,
            ),
            `next: harvest job submit <dag.json> --wait --dir ${dir}`,
            ...(c.security ? [`web UIs: 'harvest ui login --dir ${dir}' prints login URLs for your browser`] : []),
          ].join("\n"),
        );
      },
    ),
  );

common(cluster.command("status"))
  .description(
    "a local cluster's daemons (running or dead) and the nodes the resource manager sees: capacity, primary usage, harvested allocations",
  )
  .action(
    action(async (o: GlobalOpts) => {
      const target = clusterTarget(o);
      const daemons = target.local ? clusterDaemons(target.local.dir) : undefined;
      const rmUp = daemons ? daemons.find((d) => d.name === "rm")?.running === true : true;
      const nodes = rmUp ? await withClient(o, (c) => c.nodes()) : [];
      const dead = daemons?.filter((d) => !d.running).length ?? 0;
      print(
        o,
        {
          ...(target.local ? { dir: target.local.dir } : { config: target.source }),
          rm: { address: target.rmAddress },
          ...(target.nnAddress ? { nn: { address: target.nnAddress } } : {}),
          ...(daemons
            ? {
                daemons: daemons.map((d) => ({
                  name: d.name,
                  kind: d.kind ?? (d.entry === "etcd" ? "etcd" : ""),
                  state: d.running ? "running" : "dead",
                  pid: d.pid,
                  address: d.address,
                  ...(d.httpUrl ? { httpUrl: d.httpUrl } : {}),
                  log: d.log,
                })),
              }
            : {}),
          nodes,
        },
        () =>
          [
            target.local
              ? `cluster ${target.local.dir}  resource manager ${target.rmAddress}`
              : `cluster from ${target.source}  resource manager ${target.rmAddress}${target.nnAddress ? `  namenode ${target.nnAddress}` : ""}`,
            ...(daemons
              ? [
                  table(
                    ["DAEMON", "KIND", "STATE", "PID", "ADDRESS", "WEB", "LOG"],
                    daemons.map((d) => [
                      d.name,
                      d.kind ?? (d.entry === "etcd" ? "etcd" : ""),
                      d.running ? "running" : "dead",
                      d.pid,
                      d.address,
                      d.httpUrl ?? "",
                      d.log,
                    ]),
                  ),
                  dead ? `${dead} daemon(s) dead: 'harvest cluster restart <daemon>' starts one again` : "",
                ]
              : []),
            rmUp
              ? table(
                  ["NODE", "STATE", "ADDRESS", "VCORES", "PRIMARY", "HARVESTED", "CONTAINERS", "PRIMARY SOURCE"],
                  nodes.map((n) => [
                    n.nodeId,
                    n.state,
                    n.nmAddress,
                    (n.capacity?.vcoresMilli ?? 0) / 1000,
                    ((n.primaryUsage?.vcoresMilli ?? 0) / 1000).toFixed(2),
                    ((n.allocated?.vcoresMilli ?? 0) / 1000).toFixed(2),
                    n.containers,
                    n.primarySource.length > 60 ? "…" + n.primarySource.slice(-59) : n.primarySource,
                  ]),
                )
              : "the resource manager is dead: no node list",
          ]
            .filter(Boolean)
            .join("\n"),
      );
      return dead > 0 ? 1 : 0;
    }),
  );

common(cluster.command("restart <daemon>"), { clientConfig: false })
  .description(
    "start a stopped or dead daemon of a local cluster again on its data directory and address: rm, nn, server-N (its node manager and datanode), server-N-nm, server-N-dn, etcd-N (a member of --ha's ensemble)",
  )
  .action(
    action(async (name: string, o: GlobalOpts) => {
      const dir = resolveClusterDir(o.dir);
      const { restarted, running } = await restartDaemon(dir, name);
      print(
        o,
        { dir, restarted: restarted.map((d) => ({ name: d.name, pid: d.pid, address: d.address })), running },
        () =>
          [
            ...restarted.map((d) => `${d.name} restarted as process ${d.pid} at ${d.address} (log ${d.log})`),
            ...running.map((n) => `${n} was already running`),
          ].join("\n"),
      );
    }),
  );

common(cluster.command("down"), { clientConfig: false })
  .description("stop every process 'cluster up' started in this directory (and nothing else)")
  .action(
    action(async (o: GlobalOpts) => {
      const dir = resolveClusterDir(o.dir);
      const { stopped } = await stopCluster(dir);
      print(
        o,
        { dir, stopped },
        () => `cluster in ${dir} stopped (${stopped} daemon process${stopped === 1 ? "" : "es"})`,
      );
    }),
  );

// ------------------------------------------------------------------------------------------------ job

const job = program.command("job").description("submit and follow DAG jobs");

/** The flag that bounds how long --wait polls through a resource-manager outage. */
const RM_RETRY_FLAG = [
  "--rm-retry <duration>",
  "with --wait: keep polling through a resource-manager outage this long (e.g. 90s, 2m)",
  "120s",
] as const;

/**
 * Follows a job to its end with the live per-vertex display, polling through resource-manager outages of up to
 * `rmRetryMs` each; says so on stderr once per outage, and again when the resource manager answers.
 */
async function followJob(c: JobClient, appId: string, live: boolean, rmRetryMs: number): Promise<JobReport> {
  let display = new LiveDisplay();
  return c.waitForCompletion(
    appId,
    (r) => {
      if (live) display.update(progressLines(r, Date.now()), progressKey(r));
    },
    {
      rmRetryMs,
      onOutage: (outage) => {
        process.stderr.write(
          `harvest: resource manager unreachable; retrying for up to ${Math.round(rmRetryMs / 1000)} s (${outage.error.code})\n`,
        );
        // Draw the display afresh below the message rather than over it.
        display = new LiveDisplay();
      },
      onRecovered: (_outage, downMs) =>
        process.stderr.write(`harvest: resource manager reachable again after ${duration(downMs)}\n`),
    },
  );
}

/** `--wait`: follows the job to its end, prints its outcome and gives the exit code (0 only if it succeeded). */
async function waitForOutcome(c: JobClient, appId: string, o: GlobalOpts, rmRetryMs: number): Promise<number> {
  const report = await followJob(c, appId, !o.json, rmRetryMs);
  print(o, report, () => outcomeText(report));
  return report.state === "FINISHED" ? 0 : 1;
}

/** The line(s) saying which account a job's containers run as: the node managers decide it, each for its server. */
function runAsText(lines: readonly string[]): string {
  if (lines.length === 0) return "containers run as: unknown (no node manager is running)";
  if (lines.length === 1) return `containers run as: ${lines[0]}`;
  return ["containers run as, depending on the server:", ...lines.map((l) => `  ${l}`)].join("\n");
}

common(job.command("submit <dag>"))
  .description("submit a DAG job file (JSON); with --wait, follow it to the end and exit 0 only if it succeeded")
  .option("--wait", "show live progress per vertex and wait for the outcome")
  .option(...RM_RETRY_FLAG)
  .action(
    action(async (dagPath: string, o: GlobalOpts & { wait?: boolean; rmRetry: string }) => {
      const rmRetryMs = durationFlagMs(o.rmRetry, "--rm-retry");
      if (!existsSync(dagPath)) throw new HarvestError("INVALID_ARGUMENT", `no such DAG file: ${dagPath}`);
      const dagJson = readFileSync(dagPath, "utf8");
      return withClient(o, async (c) => {
        const submitted = await c.submitJob(dagJson, undefined, { baseDir: dirname(resolve(dagPath)) });
        const { appId } = submitted;
        const quote = quoteText(submitted.quote);
        const head = `submitted ${appId}\n${runAsText(submitted.containersRunAs)}${quote ? `\n${quote}` : ""}`;
        if (!o.wait) {
          print(o, submitted, () => `${head}\nfollow it: harvest job status ${appId}`);
          return 0;
        }
        if (!o.json) process.stdout.write(`${head}\n`);
        return waitForOutcome(c, appId, o, rmRetryMs);
      });
    }),
  );

common(job.command("status <appId>"))
  .description("show a job's state, per-vertex progress and containers; with --wait, follow it to the end")
  .option("--wait", "show live progress per vertex, wait for the outcome and exit 0 only if it succeeded")
  .option(...RM_RETRY_FLAG)
  .action(
    action(async (appId: string, o: GlobalOpts & { wait?: boolean; rmRetry: string }) => {
      const rmRetryMs = durationFlagMs(o.rmRetry, "--rm-retry");
      return withClient(o, async (c) => {
        if (o.wait) return waitForOutcome(c, appId, o, rmRetryMs);
        const r = await c.status(appId);
        print(o, reportJson(r), () =>
          [
            ...progressLines(r, Date.now()),
            r.diagnostics ? `  diagnostics: ${r.diagnostics}` : "",
            r.jobType
              ? `  placement: ${r.jobType} job; ${r.classes.length ? `classes ${r.classes.join(", ")}` : "no class yet"}${r.placementNote ? ` (${r.placementNote})` : ""}`
              : "",
            r.quote ? `  ${quoteText(r.quote)}; so far ${r.taskContainers?.preempted ?? 0} task(s) preempted` : "",
            `  containers: ${r.containers.length} (${r.containers.filter((x) => x.cause === "PREEMPTED_BY_PRIMARY").length} preempted by a primary tenant)`,
            containerTable(r),
            r.containers.length > 0
              ? `  a container's log: harvest job logs ${appId} --container <id> [--stream stdout]`
              : "",
          ]
            .filter(Boolean)
            .join("\n"),
        );
        return 0;
      });
    }),
  );

common(job.command("list"))
  .description("list jobs")
  .option("--state <state...>", "only these states (ACCEPTED RUNNING FINISHED FAILED KILLED)")
  .action(
    action(async (o: GlobalOpts & { state?: string[] }) =>
      withClient(o, async (c) => {
        const apps = await c.list(o.state ?? []);
        print(o, apps, () =>
          apps.length === 0
            ? "no jobs"
            : table(
                ["APP ID", "NAME", "STATE", "OUTCOME", "ELAPSED", "ATTEMPTS"],
                apps.map((a) => [
                  a.appId,
                  a.name,
                  a.state,
                  a.outcome.replace("JOB_", "").replace("OUTCOME_UNSPECIFIED", "-"),
                  duration((a.finishMs || Date.now()) - a.submitMs),
                  a.attempts,
                ]),
              ),
        );
      }),
    ),
  );

common(job.command("kill <appId>"))
  .description("kill a job and every container it holds")
  .action(
    action(async (appId: string, o: GlobalOpts) =>
      withClient(o, async (c) => {
        const state = await c.kill(appId);
        print(o, { appId, state }, () => `${appId}: ${state}`);
      }),
    ),
  );

/** The newest containers of a job, one row each: id, what ran in it, its server, state, how it ended, exit code. */
function containerTable(r: JobReport, max = 50): string {
  if (r.containers.length === 0) return "";
  const rows = [...r.containers].reverse().slice(0, max);
  const lines = table(
    ["CONTAINER", "RUNS", "SERVER", "STATE", "ENDED BY", "EXIT"],
    rows.map((x) => [
      x.containerId,
      x.isAm ? "job manager" : x.vertex ? `${x.vertex}[${x.taskIndex}]` : "task",
      x.nodeId,
      x.state,
      x.cause === "EXIT_CAUSE_UNSPECIFIED" ? "-" : x.cause,
      x.state === "COMPLETE" && x.exitCode !== -1 ? x.exitCode : "-",
    ]),
  )
    .split("\n")
    .map((l) => `  ${l}`);
  if (r.containers.length > rows.length)
    lines.push(`  (the newest ${rows.length} of ${r.containers.length}; --json lists them all)`);
  return lines.join("\n");
}

common(job.command("logs <appId>"))
  .description(
    "show a container's log (default: the job manager's stderr), from its node manager, else the copy kept in the DFS",
  )
  .option("--container <id>", "container id (see 'harvest job status')")
  .addOption(new Option("--stream <stream>", "which log").choices(["stdout", "stderr"]).default("stderr"))
  .option("--tail <bytes>", "at most this many bytes from the end", "65536")
  .action(
    action(async (appId: string, o: GlobalOpts & { container?: string; stream: "stdout" | "stderr"; tail: string }) =>
      withClient(o, async (c) => {
        const report = await c.status(appId);
        const id = o.container ?? [...report.containers].reverse().find((x) => x.isAm)?.containerId;
        if (!id)
          throw new HarvestError(
            "CONTAINER_NOT_FOUND",
            `${appId} has no job-manager container yet; try again once it runs`,
          );
        const log = await c.containerLogFrom(appId, id, o.stream, positiveInt(o.tail, "--tail"));
        if (!o.json) process.stderr.write(`${id} ${o.stream} (${log.totalBytes} bytes) from ${log.from}\n`);
        print(o, { appId, containerId: id, stream: o.stream, ...log }, () => log.text.trimEnd());
      }),
    ),
  );

common(job.command("history"))
  .description("finished jobs with their durations and outcomes (the input of job-length classification)")
  .option("--name <name>", "only jobs with this name")
  .option("--limit <n>", "at most this many", "50")
  .action(
    action(async (o: GlobalOpts & { name?: string; limit: string }) =>
      withClient(o, async (c) => {
        const entries = await c.history(o.name ?? "", positiveInt(o.limit, "--limit"));
        print(o, entries, () =>
          table(
            ["APP ID", "NAME", "OUTCOME", "DURATION", "TASKS RUN", "PREEMPTED", "NODE-LOCAL"],
            entries.map((e) => [
              e.appId,
              e.name,
              e.outcome.replace("JOB_", ""),
              duration(e.durationMs),
              e.tasksRun,
              e.tasksPreempted,
              e.locatedStarts > 0
                ? `${e.nodeLocalStarts}/${e.locatedStarts} (${Math.round((100 * e.nodeLocalStarts) / e.locatedStarts)} %)`
                : "-",
            ]),
          ),
        );
      }),
    ),
  );

registerFsCommands(program);

// ------------------------------------------------------------------------------------------------ admin

registerAdminCommands(program);

// ------------------------------------------------------------------------------------------------ power

registerPowerCommands(program);
registerUiCommands(program);

// ------------------------------------------------------------------------------------------------ sim

registerSimCommands(program);

// ------------------------------------------------------------------------------------------------ demo, bench

acceptsGlobal(program.command("demo"), "dir")
  .description(
    "bring up a 4-server cluster whose primaries replay real (or generated) traces, run a DAG job through primary spikes, print a summary, tear down",
  )
  .option("--servers <n>", "number of servers", "4")
  .option("--speed <x>", "trace replay speed", "600")
  .option("--primary <source>", "primary tenants, as for 'cluster up' (e.g. trace:<your utilization file>)", "trace")
  .option("--dir <dir>", "where the demo cluster lives (default: a new temporary directory)")
  .option("--keep", "leave the cluster running afterwards")
  .option("--json", "machine-readable summary")
  .action(
    action(
      async (o: { servers: string; speed: string; primary: string; dir?: string; keep?: boolean; json?: boolean }) => {
        const summary = await runDemo({
          primary: o.primary,
          servers: positiveInt(o.servers, "--servers"),
          speed: positiveNumber(o.speed, "--speed"),
          ...(o.dir ? { dir: o.dir } : {}),
          keep: o.keep ?? false,
          json: o.json ?? false,
        });
        return summary.outcome === "FINISHED" ? 0 : 1;
      },
    ),
  );

program
  .command("bench <name>")
  .description("run a benchmark (yield, scheduler); the same as npm run bench -- <name>")
  .allowUnknownOption()
  .action((name: string, _o: unknown, cmd: Command) => {
    const r = spawnSync(process.execPath, [distEntry("bench/run.js"), name, ...cmd.args.slice(1)], {
      stdio: "inherit",
    });
    process.exitCode = r.status ?? 1;
  });

// ------------------------------------------------------------------------------------------------ helpers

type DaemonSections = Partial<Record<"rm" | "nn" | "nm" | "dn", Record<string, unknown>>>;

/** Reads `cluster up --config`: options for the resource manager, namenode, every node manager and every datanode. */
function readDaemonConfig(path: string): DaemonSections {
  if (!existsSync(path)) throw new HarvestError("CONFIG_INVALID", `no such config file: ${path}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `${path} is not valid JSON: ${errorMessage(err)}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new HarvestError("CONFIG_INVALID", `${path} must hold an object like { "rm": {...}, "nm": {...} }`);
  const out: DaemonSections = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (k !== "rm" && k !== "nn" && k !== "nm" && k !== "dn")
      throw new HarvestError(
        "CONFIG_INVALID",
        `${path}: unknown section ${JSON.stringify(k)} (use "rm", "nn", "nm" and "dn")`,
        { details: { field: k } },
      );
    if (typeof v !== "object" || v === null || Array.isArray(v))
      throw new HarvestError("CONFIG_INVALID", `${path}: "${k}" must be an object of options`, {
        details: { field: k },
      });
    out[k] = v as Record<string, unknown>;
  }
  return out;
}

registerDaemonCommands(program);
registerSecurityCommands(program);

program
  .command("version")
  .description("print the version of harvest and of the Node.js running it")
  .option("--json", "machine-readable output")
  .action((o: GlobalOpts) =>
    print(
      o,
      { harvest: harvestVersion(), node: process.versions.node },
      () => `harvest ${harvestVersion()} (Node.js ${process.versions.node})`,
    ),
  );

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`harvest: ${errorMessage(err)}${err instanceof HarvestError ? ` [${err.code}]` : ""}\n`);
  process.exitCode = 1;
});
