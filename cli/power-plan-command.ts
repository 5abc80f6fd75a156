/**
 * `harvest power plan`: the oversubscription planner of seeds/000 section III-E over a history of draws (a file, or one
 * generated on the spot), offline. Prints the budget per domain and the oversubscription against traditional
 * provisioning and against full-server capping, as seeds/000 Table IV does.
 */
import { readFile, writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { HarvestError } from "../common/errors.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../common/power-profiles.js";
import {
  DEFAULT_OVERSUBSCRIPTION_OPTIONS,
  planOversubscription,
  resolveOversubscriptionOptions,
} from "../resourcemanager/policy/oversubscription-planner.js";
import { generateDrawsHistory, parseDrawsCsv } from "../resourcemanager/policy/draws-history.js";
import type {
  CappingPlan,
  OversubscriptionOptions,
  OversubscriptionPlan,
} from "../resourcemanager/policy/oversubscription-planner.js";
import { action, positiveInt, positiveNumber, print } from "./command-kit.js";
import { table } from "./format.js";

interface PlanOpts {
  json?: boolean;
  draws?: string;
  generate?: string;
  domainSize?: string;
  seed: string;
  writeDraws?: string;
  profile: string;
  emaxCritical?: string;
  emaxNoncritical?: string;
  fminCritical?: string;
  fminNoncritical?: string;
  buffer?: string;
  dvfsExponent?: string;
}

/** The flag of each planner option, for error messages. */
const FLAGS: Record<keyof OversubscriptionOptions, string> = {
  emaxCritical: "--emax-critical",
  emaxNoncritical: "--emax-noncritical",
  fminCritical: "--fmin-critical",
  fminNoncritical: "--fmin-noncritical",
  bufferShare: "--buffer",
  dvfsExponent: "--dvfs-exponent",
  utilPercentile: "utilPercentile",
};

/** Seeds/000's chassis holds 12 blades: the default domain size of a generated history when the servers allow it. */
const GENERATED_CHASSIS_SERVERS = 12;
/** The largest generated history (server-slots) the command accepts. */
const MAX_GENERATED_ROWS = 5_000_000;
const GENERATED_SLOT_MS = 300_000;

/** A share flag: "0.1%" or "0.001"; a bare number above 1 is refused (it is almost surely a forgotten "%"). */
export function parseShareFlag(v: string, flag: string): number {
  const s = v.trim();
  const pct = s.endsWith("%");
  const body = pct ? s.slice(0, -1).trim() : s;
  const n = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(body) ? Number(body) : NaN;
  if (!Number.isFinite(n))
    throw new HarvestError("INVALID_ARGUMENT", `${flag} must be a percentage or a share, e.g. 10% or 0.1 (got ${v})`, {
      details: { field: flag },
    });
  if (!pct && n > 1)
    throw new HarvestError("INVALID_ARGUMENT", `${flag} ${v} is more than the whole: write ${v}% or ${n / 100}`, {
      details: { field: flag },
    });
  return pct ? n / 100 : n;
}

/** "<servers>x<days>", e.g. "48x14". */
function parseGenerate(v: string): { servers: number; days: number } {
  const m = /^\s*(\d+)\s*x\s*(\d+(?:\.\d+)?)\s*$/i.exec(v);
  const servers = m ? Number(m[1]) : NaN;
  const days = m ? Number(m[2]) : NaN;
  if (!m || !Number.isInteger(servers) || servers < 1 || !(days > 0))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `--generate must be <servers>x<days>, e.g. 48x14 (got ${JSON.stringify(v)})`,
      { details: { field: "--generate" } },
    );
  if ((servers * days * 86_400_000) / GENERATED_SLOT_MS > MAX_GENERATED_ROWS)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `--generate ${v} makes more than ${MAX_GENERATED_ROWS} server-slots; use fewer servers or days`,
      { details: { field: "--generate" } },
    );
  return { servers, days };
}

function pct(v: number, digits = 1): string {
  return `${v.toFixed(digits)}%`;
}

function share(v: number): string {
  // 0.001 -> "0.1%", 0.75 -> "75%"
  return `${Number((v * 100).toPrecision(6))}%`;
}

function watts(v: number): string {
  return `${v.toFixed(1)} W`;
}

function bindingText(p: CappingPlan): string {
  switch (p.binding) {
    case "event-rate":
      return p.approach === "full-server" ? "event rate" : "event rate (non-critical)";
    case "critical-event-rate":
      return "event rate (critical)";
    case "power-reduction":
      return "power reduction";
  }
}

/** The human report: the history, steps 1 and 2, then a Table IV-like comparison. */
function planText(r: OversubscriptionPlan): string {
  const h = r.history;
  const o = r.options;
  const days = (h.slots * h.slotSec) / 86_400;
  const lines = [
    `history   ${h.source}: ${h.servers} server(s) in ${h.domains} domain(s) of ${h.serversPerDomain}, ${h.slots} slot(s)` +
      (h.slotSec > 0 ? ` of ${h.slotSec} s (${days.toFixed(1)} days)` : "") +
      `, ${h.readings} domain reading(s); draws ${h.measured ? "measured" : "modelled from the profile"}`,
    `profile   ${r.profile.id} (${r.profile.name}): idle ${watts(r.profile.idleWatts)}, peak ${watts(r.profile.peakWatts)} ` +
      `per server; dynamic power x f^${o.dvfsExponent}`,
    `step 1    critical share of the busy CPU ${pct(100 * h.criticalShare)}; P${o.utilPercentile} utilization of the ` +
      `critical cores ${pct(100 * h.criticalUtil)}, of the non-critical cores ${pct(100 * h.noncriticalUtil)}`,
    `step 2    one server at those utilizations, by core frequency:`,
    indent(
      table(
        ["FREQUENCY", "CRITICAL", "NON-CRITICAL"],
        r.curves.map((c) => [share(c.frequency), watts(c.criticalServerWatts), watts(c.noncriticalServerWatts)]),
      ),
      12,
    ),
    `step 3    domain readings: max ${watts(h.maxReadingWatts)}, mean ${watts(h.meanReadingWatts)}`,
    `step 4-5  the lowest budget per domain meeting the limits, plus ${share(o.bufferShare)} (at most traditional):`,
    "",
    table(
      ["APPROACH", "EMAX", "FMIN", "STEP-4 BUDGET", "BOUND BY", "EVENTS", "BUDGET", "PER SERVER", "DELTA", "+SERVERS"],
      [
        [
          "traditional",
          "-",
          "-",
          "-",
          "-",
          "-",
          watts(r.traditionalWatts),
          watts(r.traditionalWatts / h.serversPerDomain),
          pct(0),
          pct(0),
        ],
        approachRow("full-server capping", r.fullServer, h.readings, [
          share(Math.min(o.emaxCritical, o.emaxNoncritical)),
          share(Math.max(o.fminCritical, o.fminNoncritical)),
        ]),
        approachRow("per-container capping", r.perContainer, h.readings, [
          `${share(o.emaxNoncritical)} (crit ${share(o.emaxCritical)})`,
          `${share(o.fminNoncritical)} (crit ${share(o.fminCritical)})`,
        ]),
      ],
    ),
    "",
    `per-container capping: budget ${pct(r.perContainerBelowFullServerPct)} below full-server capping's` +
      (r.oversubscriptionRatio !== null ? `, ${r.oversubscriptionRatio.toFixed(2)}x its oversubscription` : ""),
  ];
  const perWeek = (p: CappingPlan): string =>
    p.eventsPerDomainWeekAtMinBudget === null ? "?" : p.eventsPerDomainWeekAtMinBudget.toFixed(1);
  if (h.slotSec > 0)
    lines.push(
      `capping events per domain per week at the step-4 budget: ${perWeek(r.perContainer)} per-container, ` +
        `${perWeek(r.fullServer)} full-server (fewer at the buffered budget: ` +
        `${r.perContainer.eventsAtBudget} and ${r.fullServer.eventsAtBudget} readings in the history)`,
    );
  return lines.join("\n");
}

function approachRow(name: string, p: CappingPlan, readings: number, limits: [string, string]): string[] {
  const critical = p.approach === "per-container" ? `, ${p.criticalEventsAtMinBudget} crit` : "";
  return [
    name,
    ...limits,
    watts(p.minBudgetWatts),
    bindingText(p),
    `${p.eventsAtMinBudget}/${readings}${critical}`,
    watts(p.budgetWatts) + (p.cappedAtTraditional ? " (cap)" : ""),
    watts(p.budgetWattsPerServer),
    pct(p.oversubscriptionPct),
    pct(p.extraServersPct),
  ];
}

function indent(text: string, n: number): string {
  return text
    .split("\n")
    .map((l) => " ".repeat(n) + l)
    .join("\n");
}

/** Adds `plan` to the `power` command. */
export function registerPowerPlanCommand(power: Command): void {
  const d = DEFAULT_OVERSUBSCRIPTION_OPTIONS;
  power
    .command("plan")
    .description(
      "choose a power budget per domain from a history of draws (seeds/000 section III-E) and compare it with " +
        "traditional provisioning and full-server capping (Table IV)",
    )
    .option(
      "--draws <csv>",
      "history: time_s,[domain,]server,critical_util,noncritical_util[,watts], one row per server per slot",
    )
    .option("--generate <servers>x<days>", "plan over a generated history instead (seeded, 5-minute slots), e.g. 48x14")
    .option(
      "--domain-size <n>",
      "with --generate: servers per domain (default 12 when it divides the servers, else all)",
    )
    .option("--seed <n>", "with --generate: the seed", "1")
    .option("--write-draws <file>", "with --generate: also write the generated history there")
    .option("--profile <id|spec:n>", "hardware power profile of the servers", DEFAULT_POWER_PROFILE_ID)
    .option(
      "--emax-critical <share>",
      `largest share of readings that throttle critical work (default ${share(d.emaxCritical)})`,
    )
    .option(
      "--emax-noncritical <share>",
      `largest share of readings with a capping event (default ${share(d.emaxNoncritical)})`,
    )
    .option(
      "--fmin-critical <share>",
      `lowest core frequency for critical work, of nominal (default ${share(d.fminCritical)})`,
    )
    .option(
      "--fmin-noncritical <share>",
      `lowest core frequency for non-critical work (default ${share(d.fminNoncritical)})`,
    )
    .option("--buffer <share>", `added to the budget for future variability (default ${share(d.bufferShare)})`)
    .option("--dvfs-exponent <k>", `dynamic power scales as frequency^k (default ${d.dvfsExponent})`)
    .option("--json", "machine-readable output")
    .action(
      action(async (o: PlanOpts) => {
        if ((o.draws === undefined) === (o.generate === undefined))
          throw new HarvestError(
            "INVALID_ARGUMENT",
            o.draws === undefined
              ? "say what to plan over: --draws <csv> (a history of draws) or --generate <servers>x<days>"
              : "give either --draws or --generate, not both",
          );
        if (o.draws !== undefined && (o.writeDraws !== undefined || o.domainSize !== undefined))
          throw new HarvestError("INVALID_ARGUMENT", "--write-draws and --domain-size go with --generate only");
        const options = resolveOversubscriptionOptions(
          {
            ...(o.emaxCritical !== undefined
              ? { emaxCritical: parseShareFlag(o.emaxCritical, FLAGS.emaxCritical) }
              : {}),
            ...(o.emaxNoncritical !== undefined
              ? { emaxNoncritical: parseShareFlag(o.emaxNoncritical, FLAGS.emaxNoncritical) }
              : {}),
            ...(o.fminCritical !== undefined
              ? { fminCritical: parseShareFlag(o.fminCritical, FLAGS.fminCritical) }
              : {}),
            ...(o.fminNoncritical !== undefined
              ? { fminNoncritical: parseShareFlag(o.fminNoncritical, FLAGS.fminNoncritical) }
              : {}),
            ...(o.buffer !== undefined ? { bufferShare: parseShareFlag(o.buffer, FLAGS.bufferShare) } : {}),
            ...(o.dvfsExponent !== undefined
              ? { dvfsExponent: positiveNumber(o.dvfsExponent, FLAGS.dvfsExponent) }
              : {}),
          },
          FLAGS,
        );
        const profile = resolvePowerProfile(o.profile);

        let text: string;
        let source: string;
        if (o.draws !== undefined) {
          try {
            text = await readFile(o.draws, "utf8");
          } catch (err) {
            throw new HarvestError("INVALID_ARGUMENT", `cannot read --draws ${o.draws}: ${(err as Error).message}`, {
              details: { file: o.draws },
              cause: err,
            });
          }
          source = o.draws;
        } else {
          const { servers, days } = parseGenerate(o.generate!);
          const serversPerDomain =
            o.domainSize !== undefined
              ? positiveInt(o.domainSize, "--domain-size")
              : servers % GENERATED_CHASSIS_SERVERS === 0
                ? GENERATED_CHASSIS_SERVERS
                : servers;
          if (servers % serversPerDomain !== 0)
            throw new HarvestError(
              "INVALID_ARGUMENT",
              `--domain-size ${serversPerDomain} must divide the ${servers} generated servers`,
              { details: { field: "--domain-size" } },
            );
          text = generateDrawsHistory({
            servers,
            days,
            seed: positiveInt(o.seed, "--seed"),
            slotMs: GENERATED_SLOT_MS,
            serversPerDomain,
          });
          source = `generated ${servers}x${days} (seed ${o.seed})`;
          if (o.writeDraws !== undefined) await writeFile(o.writeDraws, text);
        }
        const plan = planOversubscription(parseDrawsCsv(text, source), profile, options);
        print(o, plan, () => planText(plan));
      }),
    );
}
