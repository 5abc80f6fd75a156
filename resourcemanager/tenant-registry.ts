/**
 * The registry of primary tenants (seeds/004, sections 3 and 4): who they are (environment, machine function,
 * criticality), which servers they own, their CPU-utilization history per server, the disk reimages of their servers,
 * and the utilization classes built from that history. Kept in LevelDB under the resource manager's data directory;
 * every acknowledged write is durable. The classification itself is the pure code of `policy/classifier.ts` and
 * `policy/criticality.ts`; this module only feeds it.
 *
 * History is stored per server in day chunks of fixed slots (`slotSec`, 2 minutes by default, as AutoPilot records):
 * each slot keeps the sum and count of the samples that fell into it, so live samples, streamed samples and imported
 * files merge into one mean per slot, and importing the same file twice leaves the means unchanged.
 */
import { Level } from "level";
import type { Clock } from "../common/clock.js";
import { mergeOptions } from "../common/options.js";
import { HarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import { SeededRng } from "../common/rng.js";
import type { TraceWarnings, UtilizationSeries } from "../common/trace-io.js";
import { describeTraceWarnings, hasTraceWarnings, traceWarningFields } from "../common/trace-io.js";
import { classifyFeatures } from "./policy/classifier.js";
import { resolveClassifierOptions } from "./policy/classifier-options.js";
import type { ClassifierOptions } from "./policy/classifier-options.js";
import type { TenantClass, TenantFeatures } from "./policy/classifier.js";
import { DEFAULT_HISTORY_WINDOW, resolveCriticalityOptions, tenantHistoryVerdict } from "./policy/criticality.js";
import type { CriticalityOptions } from "./policy/criticality.js";

const DURABLE = { sync: true } as never;
const DAY_MS = 86_400_000;
const MONTH_DAYS = 30;
const NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const SERVER_RE = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A tenant's declared criticality; empty means "derive it from the history". */
export type DeclaredCriticality = "" | "critical" | "non-critical";

/** A primary tenant as stored. */
export interface TenantRecord {
  name: string;
  environment: string;
  machineFunction: string;
  criticality: DeclaredCriticality;
  servers: string[];
  registeredMs: number;
}

/** What the last classification found about one tenant. */
export interface TenantStats {
  /** Absent when the tenant had no history in the window. */
  features?: TenantFeatures;
  classId: string;
  reimages: number;
  reimagesPerServerMonth: number;
  historySlots: number;
  compare8?: number;
  measuredCriticality: "" | "critical" | "non-critical";
}

/** The classes and per-tenant statistics of one classification. */
export interface ClassSnapshot {
  clusteredMs: number;
  classes: TenantClass[];
  stats: Map<string, TenantStats>;
  /** "<tenant>: <why>" for tenants left out of the classes. */
  unclassified: string[];
}

/** Settings of the registry. */
export interface TenantRegistryOptions {
  /** History slot length; must divide a day. @default 120 */
  slotSec: number;
  /** Classification window: the last this many days. @default 30 */
  windowDays: number;
  /** Reimage frequencies count the reimages of the last this many days. @default 90 */
  reimageWindowDays: number;
  /** Largest history file accepted by an import. @default 64 MiB */
  maxImportBytes: number;
  /** Live samples are written to the store at least this often. @default 5000 */
  flushIntervalMs: number;
  /** Thresholds of the pattern test and the clustering (see `ClassifierOptions`). */
  classifier: Partial<ClassifierOptions>;
  /** Thresholds of the criticality test (see `CriticalityOptions`). */
  criticality: Partial<CriticalityOptions>;
  /** Seed of the k-means initialisation. @default 1 */
  seed: number;
}

export const DEFAULT_TENANT_REGISTRY_OPTIONS: Readonly<Omit<TenantRegistryOptions, "classifier" | "criticality">> =
  Object.freeze({
    ...DEFAULT_HISTORY_WINDOW,
    reimageWindowDays: 90,
    maxImportBytes: 64 * 1024 * 1024,
    flushIntervalMs: 5_000,
    seed: 1,
  });

/** Fills defaults and validates, naming the bad field (`tenants.<field>`). */
export function resolveTenantRegistryOptions(partial: Partial<TenantRegistryOptions> = {}): TenantRegistryOptions {
  const o: TenantRegistryOptions = mergeOptions(
    "resource manager tenants",
    { ...DEFAULT_TENANT_REGISTRY_OPTIONS, classifier: {}, criticality: {} },
    partial,
  );
  const bad = (field: string, why: string): never => {
    throw new HarvestError("CONFIG_INVALID", `resource manager option tenants.${field} ${why}`, {
      details: { field: `tenants.${field}` },
    });
  };
  if (!(Number.isInteger(o.slotSec) && o.slotSec > 0 && 86_400 % o.slotSec === 0))
    bad("slotSec", "must be a whole number of seconds that divides a day");
  if (!(o.windowDays > 0)) bad("windowDays", "must be > 0");
  if (!(o.reimageWindowDays > 0)) bad("reimageWindowDays", "must be > 0");
  if (!(Number.isInteger(o.maxImportBytes) && o.maxImportBytes > 0))
    bad("maxImportBytes", "must be a positive integer");
  if (!(o.flushIntervalMs > 0)) bad("flushIntervalMs", "must be > 0");
  if (!Number.isInteger(o.seed)) bad("seed", "must be an integer");
  resolveClassifierOptions(o.classifier);
  resolveCriticalityOptions(o.criticality);
  return o;
}

/** One day of one server's history: per slot, the sum and the count of its samples. */
interface DayChunk {
  s: number[];
  n: number[];
}

/** A utilization sample of a server. */
export interface ServerSample {
  server: string;
  timeMs: number;
  cpuPct: number;
}

/** Tenants, server assignments, utilization and reimage history, and the classes built from them. */
export class TenantRegistry {
  readonly options: TenantRegistryOptions;
  private readonly db: Level<string, unknown>;
  private readonly tenantsByName = new Map<string, TenantRecord>();
  private readonly tenantOfServer = new Map<string, string>();
  /** Samples not yet in the store: server -> global slot index -> [sum, count]. */
  private pending = new Map<string, Map<number, [number, number]>>();
  /** Every read-modify-write of history chunks runs in this chain, one at a time. */
  private chain: Promise<unknown> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | undefined;
  private snapshotValue: ClassSnapshot = { clusteredMs: 0, classes: [], stats: new Map(), unclassified: [] };
  private reclusters = 0;

  constructor(
    path: string,
    options: Partial<TenantRegistryOptions>,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.options = resolveTenantRegistryOptions(options);
    this.db = new Level<string, unknown>(path, { valueEncoding: "json" });
  }

  private get slotMs(): number {
    return this.options.slotSec * 1000;
  }

  private get slotsPerDay(): number {
    return 86_400 / this.options.slotSec;
  }

  async open(): Promise<void> {
    await this.db.open();
    for await (const value of this.db.values({ gt: "t!", lt: "t!\xff" })) {
      const t = value as TenantRecord;
      this.tenantsByName.set(t.name, t);
      for (const s of t.servers) this.tenantOfServer.set(s, t.name);
    }
    this.flushTimer = setInterval(() => {
      this.flush().catch((err: unknown) => this.log.warn("history flush failed", { error: String(err) }));
    }, this.options.flushIntervalMs);
    this.flushTimer.unref();
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flush().catch(() => undefined);
    await this.db.close();
  }

  // ------------------------------------------------------------------------------------------------ tenants

  /** Registers a tenant, or updates the attributes of an existing one (keeping its servers). */
  async register(req: {
    name: string;
    environment: string;
    machineFunction: string;
    criticality: string;
  }): Promise<TenantRecord> {
    checkName(req.name);
    const criticality = req.criticality.trim().toLowerCase();
    if (criticality !== "" && criticality !== "critical" && criticality !== "non-critical")
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `criticality must be critical, non-critical or empty, got ${criticality}`,
        {
          details: { field: "criticality" },
        },
      );
    const environment = req.environment.trim() || "default";
    if (environment.length > 128) throw invalid("environment", "is longer than 128 characters");
    if (req.machineFunction.length > 128) throw invalid("machineFunction", "is longer than 128 characters");
    const existing = this.tenantsByName.get(req.name);
    const record: TenantRecord = {
      name: req.name,
      environment,
      machineFunction: req.machineFunction.trim(),
      criticality: criticality as DeclaredCriticality,
      servers: existing?.servers ?? [],
      registeredMs: existing?.registeredMs ?? this.clock.nowMs(),
    };
    await this.db.put(`t!${record.name}`, record, DURABLE);
    this.tenantsByName.set(record.name, record);
    return record;
  }

  /** Moves `servers` to `tenant` (out of whichever tenant held them). */
  async assign(tenant: string, servers: readonly string[]): Promise<TenantRecord> {
    const target = this.tenant(tenant);
    for (const [i, s] of servers.entries()) {
      if (!SERVER_RE.test(s)) throw invalid(`servers[${i}]`, `is not a server name: ${JSON.stringify(s)}`);
    }
    const changed = new Map<string, TenantRecord>();
    const moving = new Set(servers);
    for (const s of moving) {
      const from = this.tenantOfServer.get(s);
      if (from === undefined || from === tenant) continue;
      const old = changed.get(from) ?? { ...this.tenant(from) };
      old.servers = old.servers.filter((x) => x !== s);
      changed.set(from, old);
    }
    const next = { ...target, servers: [...target.servers, ...[...moving].filter((s) => !target.servers.includes(s))] };
    changed.set(tenant, next);
    await this.db.batch(
      [...changed.values()].map((t) => ({ type: "put" as const, key: `t!${t.name}`, value: t })),
      DURABLE,
    );
    for (const t of changed.values()) this.tenantsByName.set(t.name, t);
    for (const s of moving) this.tenantOfServer.set(s, tenant);
    return next;
  }

  /** A tenant by name, or TENANT_NOT_FOUND. */
  tenant(name: string): TenantRecord {
    const t = this.tenantsByName.get(name);
    if (!t)
      throw new HarvestError("TENANT_NOT_FOUND", `no tenant named ${JSON.stringify(name)}`, { details: { name } });
    return t;
  }

  /** Every tenant, by name. */
  tenants(): TenantRecord[] {
    return [...this.tenantsByName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The tenant owning `server`, if any. */
  ownerOf(server: string): TenantRecord | undefined {
    const name = this.tenantOfServer.get(server);
    return name === undefined ? undefined : this.tenantsByName.get(name);
  }

  // ------------------------------------------------------------------------------------------------ history

  /** Adds samples to the history (kept in memory until the next flush). Returns how many were accepted. */
  addSamples(samples: readonly ServerSample[]): number {
    samples.forEach((s, i) => checkSample(s, i));
    for (const s of samples) this.accumulate(s.server, s.timeMs, s.cpuPct, 1);
    return samples.length;
  }

  /** Writes every pending sample to the store; resolves once they are durable. */
  flush(): Promise<void> {
    return this.serialized(async () => {
      if (this.pending.size === 0) return;
      const pending = this.pending;
      this.pending = new Map();
      await this.mergeIntoStore(pending);
    });
  }

  /**
   * Imports one series for a server, or for every server of a tenant (as its average server). `shiftToNowMs` moves
   * the series so that its last sample lands at that time. All or nothing: one batch. `source` names the file and
   * what its normalization (common/trace-io.ts) changed; a file with quirks is logged once, with the counts.
   */
  async importSeries(
    target: { server?: string; tenant?: string },
    series: UtilizationSeries,
    shiftToNowMs?: number,
    source?: { file: string; warnings: TraceWarnings },
  ): Promise<{ samples: number; servers: number; firstMs: number; lastMs: number }> {
    const servers = this.importTargets(target);
    const n = series.timesMs.length;
    if (n === 0) throw invalid("data", "the file holds no samples");
    const shift = shiftToNowMs === undefined ? 0 : shiftToNowMs - series.timesMs[n - 1]!;
    const batch = new Map<string, Map<number, [number, number]>>();
    for (const server of servers) {
      const slots = new Map<number, [number, number]>();
      for (let i = 0; i < n; i++) {
        const slot = Math.floor((series.timesMs[i]! + shift) / this.slotMs);
        const acc = slots.get(slot);
        if (acc) {
          acc[0] += series.cpuPct[i]!;
          acc[1] += 1;
        } else slots.set(slot, [series.cpuPct[i]!, 1]);
      }
      batch.set(server, slots);
    }
    await this.serialized(() => this.mergeIntoStore(batch));
    if (source && hasTraceWarnings(source.warnings)) {
      this.log.warn(`history import ${source.file} normalized: ${describeTraceWarnings(source.warnings)}`, {
        file: source.file,
        ...traceWarningFields(source.warnings),
      });
    }
    return {
      samples: n,
      servers: servers.length,
      firstMs: series.timesMs[0]! + shift,
      lastMs: series.timesMs[n - 1]! + shift,
    };
  }

  /** Records a reimage of `server` at `atMs`. */
  async recordReimage(server: string, atMs: number): Promise<TenantRecord | undefined> {
    await this.recordReimages([{ server, atMs }]);
    return this.ownerOf(server);
  }

  /** Records many reimages in one durable batch (an import). */
  async recordReimages(list: readonly { server: string; atMs: number }[]): Promise<void> {
    for (const [i, r] of list.entries()) {
      if (!SERVER_RE.test(r.server)) throw invalid(`reimages[${i}].server`, `is not a server name: ${r.server}`);
      if (!(Number.isFinite(r.atMs) && r.atMs >= 0)) throw invalid(`reimages[${i}].atMs`, "must be a time >= 0");
    }
    await this.db.batch(
      list.map((r) => ({ type: "put" as const, key: `r!${r.server}!${pad(r.atMs)}`, value: r.atMs })),
      DURABLE,
    );
  }

  /** A server's history over [fromMs, toMs): slot start times and means. */
  async serverSeries(server: string, fromMs: number, toMs: number): Promise<UtilizationSeries> {
    const timesMs: number[] = [];
    const cpuPct: number[] = [];
    const firstDay = Math.floor(fromMs / DAY_MS);
    const lastDay = Math.floor((toMs - 1) / DAY_MS);
    for await (const [key, value] of this.db.iterator({
      gte: chunkKey(server, firstDay),
      lte: chunkKey(server, lastDay),
    })) {
      const day = Number(key.slice(key.lastIndexOf("!") + 1));
      const chunk = value as DayChunk;
      for (let k = 0; k < chunk.n.length; k++) {
        if (!(chunk.n[k]! > 0)) continue;
        const t = day * DAY_MS + k * this.slotMs;
        if (t < fromMs || t >= toMs) continue;
        timesMs.push(t);
        cpuPct.push(chunk.s[k]! / chunk.n[k]!);
      }
    }
    return { name: server, stepSec: this.options.slotSec, startMs: timesMs[0] ?? fromMs, timesMs, cpuPct };
  }

  // ------------------------------------------------------------------------------------------------ classes

  /** The last classification. */
  get snapshot(): ClassSnapshot {
    return this.snapshotValue;
  }

  /**
   * Rebuilds the classes from the history of the last `windowDays` (pending samples included): each tenant's average
   * server, its features and pattern, k-means classes per pattern, its criticality (seeds/000) and its reimage rate.
   */
  async recluster(): Promise<ClassSnapshot> {
    await this.flush();
    const nowMs = this.clock.nowMs();
    const fromMs = nowMs - Math.round(this.options.windowDays * DAY_MS);
    const reimageFromMs = nowMs - Math.round(this.options.reimageWindowDays * DAY_MS);
    const reimagesByServer = new Map<string, number>();
    for await (const key of this.db.keys({ gt: "r!", lt: "r!\xff" })) {
      const at = Number(key.slice(key.lastIndexOf("!") + 1));
      if (at < reimageFromMs || at > nowMs) continue;
      const server = key.slice(2, key.lastIndexOf("!"));
      reimagesByServer.set(server, (reimagesByServer.get(server) ?? 0) + 1);
    }
    const classifierOptions = resolveClassifierOptions(this.options.classifier);
    const stats = new Map<string, TenantStats>();
    const items: { tenantId: string; servers: string[]; features: TenantFeatures }[] = [];
    const unclassified: string[] = [];
    for (const t of this.tenants()) {
      const reimages = t.servers.reduce((a, s) => a + (reimagesByServer.get(s) ?? 0), 0);
      const months = this.options.reimageWindowDays / MONTH_DAYS;
      const entry: TenantStats = {
        classId: "",
        reimages,
        reimagesPerServerMonth: t.servers.length > 0 ? reimages / t.servers.length / months : 0,
        historySlots: 0,
        measuredCriticality: "",
      };
      stats.set(t.name, entry);
      if (t.servers.length === 0) {
        unclassified.push(`${t.name}: no servers assigned`);
        continue;
      }
      const perServer: UtilizationSeries[] = [];
      for (const s of t.servers) perServer.push(await this.serverSeries(s, fromMs, nowMs));
      const verdict = tenantHistoryVerdict(t.name, perServer, nowMs, {
        slotSec: this.options.slotSec,
        windowDays: this.options.windowDays,
        classifier: classifierOptions,
        criticality: this.options.criticality,
      });
      entry.historySlots = verdict.historySlots;
      if (!verdict.features) {
        unclassified.push(`${t.name}: ${verdict.missing ?? "no utilization history"}`);
        continue;
      }
      entry.features = verdict.features;
      if (verdict.compare8 !== undefined) entry.compare8 = verdict.compare8;
      entry.measuredCriticality = verdict.measuredCriticality;
      items.push({ tenantId: t.name, servers: [...t.servers], features: entry.features });
    }
    const classes = classifyFeatures(items, classifierOptions, new SeededRng(this.options.seed + this.reclusters));
    this.reclusters += 1;
    for (const c of classes) for (const id of c.tenantIds) stats.get(id)!.classId = c.id;
    this.snapshotValue = { clusteredMs: nowMs, classes, stats, unclassified };
    this.log.info("tenants reclustered", {
      tenants: this.tenantsByName.size,
      classes: classes.map((c) => `${c.id}(${c.tenantIds.length})`).join(" "),
      unclassified: unclassified.length,
    });
    return this.snapshotValue;
  }

  // ------------------------------------------------------------------------------------------------ internals

  private importTargets(target: { server?: string; tenant?: string }): string[] {
    if (target.server && target.tenant) throw invalid("server", "give a server or a tenant, not both");
    if (target.server) {
      if (!SERVER_RE.test(target.server)) throw invalid("server", `is not a server name: ${target.server}`);
      return [target.server];
    }
    if (target.tenant) {
      const t = this.tenant(target.tenant);
      if (t.servers.length === 0) throw invalid("tenant", `tenant ${t.name} has no servers; assign some first`);
      return [...t.servers];
    }
    throw invalid("server", "an import needs the server (or the tenant) the history belongs to");
  }

  private accumulate(server: string, timeMs: number, cpuPct: number, count: number): void {
    const slot = Math.floor(timeMs / this.slotMs);
    let slots = this.pending.get(server);
    if (!slots) {
      slots = new Map();
      this.pending.set(server, slots);
    }
    const acc = slots.get(slot);
    if (acc) {
      acc[0] += cpuPct * count;
      acc[1] += count;
    } else slots.set(slot, [cpuPct * count, count]);
  }

  /** Adds per-slot sums and counts into the stored day chunks in one durable batch. */
  private async mergeIntoStore(updates: Map<string, Map<number, [number, number]>>): Promise<void> {
    const perDay = this.slotsPerDay;
    const chunks = new Map<string, DayChunk>();
    for (const [server, slots] of updates) {
      for (const [slot, [sum, count]] of slots) {
        const day = Math.floor(slot / perDay);
        const key = chunkKey(server, day);
        let chunk = chunks.get(key);
        if (!chunk) {
          chunk = ((await this.db.get(key)) as DayChunk | undefined) ?? {
            s: new Array<number>(perDay).fill(0),
            n: new Array<number>(perDay).fill(0),
          };
          chunks.set(key, chunk);
        }
        const k = slot - day * perDay;
        chunk.s[k]! += sum;
        chunk.n[k]! += count;
      }
    }
    const ops = [...chunks].map(([key, value]) => ({ type: "put" as const, key, value }));
    if (ops.length > 0) await this.db.batch(ops, DURABLE);
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }
}

function chunkKey(server: string, day: number): string {
  return `h!${server}!${String(day).padStart(8, "0")}`;
}

function pad(ms: number): string {
  return String(Math.floor(ms)).padStart(15, "0");
}

function checkName(name: string): void {
  if (!NAME_RE.test(name))
    throw new HarvestError(
      "TENANT_BAD_NAME",
      `tenant name ${JSON.stringify(name)} must be 1-64 letters, digits, '.', '_' or '-'`,
      { details: { field: "name" } },
    );
}

function checkSample(s: ServerSample, i: number): void {
  if (!SERVER_RE.test(s.server))
    throw invalid(`samples[${i}].server`, `is not a server name: ${JSON.stringify(s.server)}`);
  if (!(Number.isFinite(s.timeMs) && s.timeMs >= 0)) throw invalid(`samples[${i}].timeMs`, "must be a time >= 0");
  if (!(Number.isFinite(s.cpuPct) && s.cpuPct >= 0 && s.cpuPct <= 100))
    throw invalid(`samples[${i}].cpuPct`, "must be in 0..100");
}

function invalid(field: string, why: string): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} ${why}`, { details: { field } });
}
