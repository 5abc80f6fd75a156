/**
 * `harvest admin ...`: operator commands. Primary tenants (register, assign servers, list), their history (import a
 * utilization or reimage file, record a reimage), the utilization classes built from it (list, recluster), drains,
 * and people's home directories (user-commands.ts).
 */
import type { Command } from "commander";
import { TenantAdminClient } from "../client/tenant-admin-client.js";
import type { HistoryFormat, TenantClasses } from "../client/tenant-admin-client.js";
import { HarvestError } from "../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import { describeTraceWarnings, hasTraceWarnings } from "../common/trace-io.js";
import { action, clusterTarget, common, print, rmTarget, withDfs } from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";
import { table } from "./format.js";
import { registerDrainCommands } from "./drain-commands.js";
import { registerHaCommands } from "./ha-commands.js";
import { registerUserCommands } from "./user-commands.js";

const FORMATS: readonly HistoryFormat[] = ["csv", "nab", "bitbrains", "reimages"];

/** Runs `fn` with a tenant admin client of the cluster in --dir. */
function withAdmin<T>(opts: GlobalOpts, fn: (c: TenantAdminClient) => Promise<T>): Promise<T> {
  const { rmAddress, security } = rmTarget(opts);
  const client = new TenantAdminClient(rmAddress, security);
  return fn(client).finally(() => client.close());
}

/** A time flag: ISO 8601 ("2026-11-01T10:00:00Z") or Unix seconds. */
export function parseTimeFlag(v: string, flag: string): number {
  const trimmed = v.trim();
  const ms = /^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed);
  if (!Number.isFinite(ms) || ms < 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${flag} must be an ISO 8601 time (2026-11-01T10:00:00Z) or Unix seconds (got ${JSON.stringify(v)})`,
    );
  return Math.round(ms);
}

function pct(v: number): string {
  return `${v.toFixed(1)}%`;
}

function iso(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z") : "never";
}

function classesText(r: TenantClasses): string {
  if (r.classes.length === 0)
    return [
      `no utilization classes (last built ${iso(r.clusteredMs)}); register tenants, assign servers, import history, then 'harvest admin recluster'`,
      ...r.unclassified.map((u) => `  unclassified: ${u}`),
    ].join("\n");
  const rows = r.classes.map((c) => [
    c.id,
    c.pattern,
    pct(c.averagePct),
    pct(c.peakPct),
    pct(c.currentPct),
    c.tenants.join(","),
    c.servers.length,
  ]);
  return [
    `classes built ${iso(r.clusteredMs)}`,
    table(["CLASS", "PATTERN", "AVERAGE", "PEAK", "CURRENT", "TENANTS", "SERVERS"], rows),
    ...r.unclassified.map((u) => `unclassified: ${u}`),
  ].join("\n");
}

/** Adds `harvest admin` and its subcommands. */
export function registerAdminCommands(program: Command): void {
  const admin = program.command("admin").description("operator commands: primary tenants, their history, classes");

  const tenant = admin.command("tenant").description("register primary tenants and assign their servers");
  common(tenant.command("register <name>"))
    .description("register a primary tenant (or update its attributes)")
    .option("--environment <env>", "where it runs, e.g. prod or test (replicas go to distinct environments)", "default")
    .option("--function <fn>", "what its machines do, e.g. web, crawler, build", "")
    .option("--criticality <c>", "critical or non-critical (default: derived from its utilization history)", "")
    .action(
      action(async (name: string, o: GlobalOpts & { environment: string; function: string; criticality: string }) =>
        withAdmin(o, async (c) => {
          const t = await c.register({
            name,
            environment: o.environment,
            machineFunction: o.function,
            criticality: o.criticality,
          });
          print(
            o,
            t,
            () => `registered tenant ${t.name} (environment ${t.environment}, ${t.servers.length} server(s))`,
          );
        }),
      ),
    );

  common(tenant.command("assign <tenant> <servers...>"))
    .description("assign servers to a tenant (a server leaves its previous tenant)")
    .action(
      action(async (name: string, servers: string[], o: GlobalOpts) =>
        withAdmin(o, async (c) => {
          const t = await c.assign(name, servers);
          print(o, t, () => `${t.name} now owns ${t.servers.length} server(s): ${t.servers.join(" ")}`);
        }),
      ),
    );

  common(tenant.command("list [name]"))
    .description("list tenants with their servers, pattern, class, utilization, reimage rate and criticality")
    .action(
      action(async (name: string | undefined, o: GlobalOpts) =>
        withAdmin(o, async (c) => {
          const tenants = await c.list(name ?? "");
          print(o, tenants, () =>
            tenants.length === 0
              ? "no tenants; register one with 'harvest admin tenant register <name>'"
              : table(
                  [
                    "TENANT",
                    "ENV",
                    "FUNCTION",
                    "SERVERS",
                    "PATTERN",
                    "CLASS",
                    "AVG",
                    "PEAK",
                    "NOW",
                    "REIMAGE/SRV/MO",
                    "CRITICALITY",
                  ],
                  tenants.map((t) => [
                    t.name,
                    t.environment,
                    t.machineFunction || "-",
                    t.servers.length,
                    t.pattern || "-",
                    t.classId || "-",
                    t.pattern ? pct(t.averagePct) : "-",
                    t.pattern ? pct(t.peakPct) : "-",
                    pct(t.currentPct),
                    t.reimagesPerServerMonth.toFixed(2),
                    t.effectiveCriticality
                      ? `${t.effectiveCriticality}${t.criticality ? "" : ` (Compare8 ${t.compare8.toFixed(2)})`}`
                      : "-",
                  ]),
                ),
          );
        }),
      ),
    );

  const history = admin.command("history").description("utilization and reimage history");
  common(history.command("import <file>"))
    .description(
      "import a history file; quirks (CPU over 100 % or below 0, repeated timestamps, gaps, bad lines) are repaired and counted, an unreadable file is rejected with its line number and nothing is kept",
    )
    .option("--format <format>", `csv (time_s,cpu_pct), nab, bitbrains, or reimages (time_s,server)`, "csv")
    .option("--server <server>", "the server the series belongs to")
    .option("--tenant <tenant>", "or: every server of this tenant (the series is its average server)")
    .option("--shift-to-now", "move the series so its last sample is now (replay an old trace as recent history)")
    .action(
      action(
        async (
          file: string,
          o: GlobalOpts & { format: string; server?: string; tenant?: string; shiftToNow?: boolean },
        ) => {
          if (!FORMATS.includes(o.format as HistoryFormat))
            throw new HarvestError(
              "INVALID_ARGUMENT",
              `--format must be one of ${FORMATS.join(", ")} (got ${o.format})`,
            );
          if (o.format !== "reimages" && !o.server && !o.tenant)
            throw new HarvestError(
              "INVALID_ARGUMENT",
              "say whose history it is: --server <server> or --tenant <tenant>",
            );
          return withAdmin(o, async (c) => {
            const r = await c.importHistory(file, {
              format: o.format as HistoryFormat,
              ...(o.server ? { server: o.server } : {}),
              ...(o.tenant ? { tenant: o.tenant } : {}),
              shiftToNow: o.shiftToNow ?? false,
            });
            print(o, r, () =>
              o.format === "reimages"
                ? `imported ${r.reimages} reimage(s) of ${r.servers} server(s), ${iso(r.firstMs)} .. ${iso(r.lastMs)}`
                : `imported ${r.samples} sample(s) onto ${r.servers} server(s), ${iso(r.firstMs)} .. ${iso(r.lastMs)}; 'harvest admin recluster' rebuilds the classes` +
                  (r.warnings && hasTraceWarnings(r.warnings)
                    ? `\nwarning: ${file}: ${describeTraceWarnings(r.warnings)}`
                    : ""),
            );
          });
        },
      ),
    );

  common(admin.command("reimage <server>"))
    .description(
      "record a disk reimage of a server; without --at, also wipe its datanode now (the namenode re-replicates what it held)",
    )
    .option("--at <time>", "when a past reimage happened (ISO 8601 or Unix seconds): record it only, wipe nothing")
    .action(
      action(async (server: string, o: GlobalOpts & { at?: string }) => {
        const atMs = o.at !== undefined ? parseTimeFlag(o.at, "--at") : 0;
        let wiped: { blocksWiped: number; storageId: string } | undefined;
        if (o.at === undefined) {
          // The namenode knows every datanode's advertised address, on one machine or many.
          const datanodes = await withDfs(o, (dfs) => dfs.datanodes());
          const node = datanodes.find((d) => d.datanodeId === server);
          if (!node) {
            throw new HarvestError(
              "INVALID_ARGUMENT",
              `no datanode on ${JSON.stringify(server)}; datanodes: ${datanodes.map((d) => d.datanodeId).join(", ")} (use --at to record a past reimage of another server)`,
            );
          }
          const dt = makeClient(loadHarvestProto().DataTransfer, node.address, clusterTarget(o).security);
          try {
            wiped = await call(dt, dt.reimage, {});
          } finally {
            dt.close();
          }
        }
        const recorded = await withAdmin(o, (c) => c.recordReimage(server, atMs));
        print(o, { server, ...recorded, ...(wiped ?? {}) }, () =>
          [
            wiped
              ? `reimaged ${server}: ${wiped.blocksWiped} replica(s) wiped, new storage ${wiped.storageId}; 'harvest fs fsck' shows re-replication`
              : `recorded a reimage of ${server} at ${iso(recorded.atMs)}`,
            recorded.tenant ? `  counted against tenant ${recorded.tenant}` : `  ${server} belongs to no tenant yet`,
          ].join("\n"),
        );
      }),
    );

  registerDrainCommands(admin);
  registerHaCommands(admin);
  registerUserCommands(admin);

  // Both print the classes: as they are, or as rebuilt.
  const classCommands = [
    ["classes", "list the utilization classes (pattern, average, peak, current) with their tenants", "classes"],
    ["recluster", "rebuild the utilization classes from the history now (they are rebuilt daily anyway)", "recluster"],
  ] as const;
  for (const [name, description, call] of classCommands)
    common(admin.command(name))
      .description(description)
      .action(
        action(async (o: GlobalOpts) =>
          withAdmin(o, async (c) => {
            const r = await c[call]();
            print(o, r, () => classesText(r));
          }),
        ),
      );
}
