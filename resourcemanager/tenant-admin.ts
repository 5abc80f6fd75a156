/**
 * The `TenantAdmin` gRPC service of the resource manager (proto/tenant_admin.proto): a thin layer over the tenant
 * registry that validates requests, bounds what a client may send, and turns registry state into wire messages.
 */
import * as grpc from "@grpc/grpc-js";
import { HarvestError, toServiceError } from "../common/errors.js";
import { unary } from "../common/grpc.js";
import { parseReimageText } from "../common/reimage-io.js";
import { hasTraceWarnings, parseTraceText, TRACE_WARNINGS_METADATA_KEY } from "../common/trace-io.js";
import type { TraceFormat } from "../common/trace-io.js";
import type { ClassSnapshot, ServerSample, TenantRecord, TenantRegistry } from "./tenant-registry.js";
import type { ImportHistoryChunkOutput } from "../proto/generated/harvest/v1/ImportHistoryChunk.js";
import type { ImportHistoryHeaderOutput } from "../proto/generated/harvest/v1/ImportHistoryHeader.js";
import type { ListClassesResponse } from "../proto/generated/harvest/v1/ListClassesResponse.js";
import type { TenantInfo } from "../proto/generated/harvest/v1/TenantInfo.js";
import type { UtilizationSampleOutput } from "../proto/generated/harvest/v1/UtilizationSample.js";

/** Most samples one StreamSamples call may carry. */
const MAX_SAMPLES_PER_STREAM = 2_000_000;
const FORMATS = new Set(["csv", "nab", "bitbrains", "reimages"]);

/** What the service needs from the resource manager besides the registry. */
export interface TenantAdminDeps {
  registry: TenantRegistry;
  nowMs(): number;
  /** Live primary utilization (CPU %) averaged over those of `servers` that heartbeat, if any does. */
  liveUtilization(servers: readonly string[]): number | undefined;
  /** Called after a recluster (the scheduler re-reads the classes). */
  onReclustered(snapshot: ClassSnapshot): void;
}

/** The handlers of the TenantAdmin service. */
export function tenantAdminHandlers(deps: TenantAdminDeps): grpc.UntypedServiceImplementation {
  const { registry } = deps;
  const info = (t: TenantRecord): TenantInfo => tenantInfo(t, registry.snapshot, deps.liveUtilization(t.servers));
  const recluster = async (): Promise<ListClassesResponse> => {
    const snapshot = await registry.recluster();
    deps.onReclustered(snapshot);
    return classesMessage(snapshot, deps);
  };
  return {
    RegisterTenant: unary(
      async (req: { name: string; environment: string; machineFunction: string; criticality: string }) =>
        info(await registry.register(req)),
    ),
    AssignServers: unary(async (req: { tenant: string; servers: string[] }) => {
      if (req.servers.length === 0) throw invalid("servers", "name at least one server");
      return info(await registry.assign(req.tenant, req.servers));
    }),
    StreamSamples: clientStream<UtilizationSampleOutput, { accepted: number }>(async (messages) => {
      const samples: ServerSample[] = [];
      for await (const m of messages) {
        if (samples.length >= MAX_SAMPLES_PER_STREAM)
          throw new HarvestError("HISTORY_TOO_LARGE", `a stream may carry at most ${MAX_SAMPLES_PER_STREAM} samples`);
        samples.push({ server: m.server, timeMs: m.timeMs, cpuPct: m.cpuPct });
      }
      // Validated whole before any is kept: a bad sample rejects the stream and keeps nothing of it.
      const accepted = registry.addSamples(samples);
      await registry.flush();
      return { accepted };
    }),
    ImportHistory: clientStream<ImportHistoryChunkOutput, object>(async (messages, trailer) => {
      let header: ImportHistoryHeaderOutput | undefined;
      const parts: Buffer[] = [];
      let bytes = 0;
      for await (const m of messages) {
        if (m.header) {
          if (header) throw invalid("header", "sent twice");
          header = m.header;
        } else if (m.data) {
          if (!header) throw invalid("header", "must come before the data");
          bytes += m.data.length;
          if (bytes > registry.options.maxImportBytes)
            throw new HarvestError(
              "HISTORY_TOO_LARGE",
              `history file is over ${registry.options.maxImportBytes} bytes; split it`,
              { details: { field: "data" } },
            );
          parts.push(Buffer.from(m.data));
        }
      }
      if (!header) throw invalid("header", "is missing");
      const format = header.format || "csv";
      if (!FORMATS.has(format)) throw invalid("format", `must be csv, nab, bitbrains or reimages, got ${format}`);
      const file = header.fileName || "history";
      const text = Buffer.concat(parts).toString("utf8");
      if (format === "reimages") {
        const list = parseReimageText(text, file);
        await registry.recordReimages(list);
        const times = list.map((r) => r.atMs);
        return {
          samples: 0,
          servers: new Set(list.map((r) => r.server)).size,
          firstMs: times.length ? Math.min(...times) : 0,
          lastMs: times.length ? Math.max(...times) : 0,
          reimages: list.length,
        };
      }
      // The shared normalization every trace reader uses (common/trace-io.ts): clamps, merges repeated timestamps,
      // bridges short gaps, skips unparseable lines; an unreadable file is rejected whole naming its line.
      const { series, warnings } = parseTraceText(text, file, format as TraceFormat);
      const target = {
        ...(header.server ? { server: header.server } : {}),
        ...(header.tenant ? { tenant: header.tenant } : {}),
      };
      const r = await registry.importSeries(target, series, header.shiftToNow ? deps.nowMs() : undefined, {
        file,
        warnings,
      });
      // ImportHistoryResponse has no field for them yet: the counts travel in trailing metadata (JSON).
      if (hasTraceWarnings(warnings)) trailer.set(TRACE_WARNINGS_METADATA_KEY, Buffer.from(JSON.stringify(warnings)));
      return { ...r, reimages: 0 };
    }),
    RecordReimage: unary(async (req: { server: string; atMs: number }) => {
      const atMs = req.atMs > 0 ? req.atMs : deps.nowMs();
      const owner = await registry.recordReimage(req.server, atMs);
      return { tenant: owner?.name ?? "", atMs };
    }),
    ListTenants: unary((req: { name: string }) => tenantsMessage(deps, req.name)),
    ListClasses: unary(() => classesMessage(registry.snapshot, deps)),
    Recluster: unary(recluster),
  };
}

/** A tenant as the wire shows it: its record and what the last classification said of it. */
export function tenantInfo(t: TenantRecord, snapshot: ClassSnapshot, live: number | undefined): TenantInfo {
  const s = snapshot.stats.get(t.name);
  const measured = s?.measuredCriticality ?? "";
  return {
    name: t.name,
    environment: t.environment,
    machineFunction: t.machineFunction,
    criticality: t.criticality,
    servers: t.servers,
    registeredMs: t.registeredMs,
    pattern: s?.features?.pattern ?? "",
    averagePct: s?.features?.average ?? 0,
    peakPct: s?.features?.peak ?? 0,
    currentPct: live ?? s?.features?.current ?? 0,
    classId: s?.classId ?? "",
    reimagesPerServerMonth: s?.reimagesPerServerMonth ?? 0,
    reimages: s?.reimages ?? 0,
    historySlots: s?.historySlots ?? 0,
    compare8: s?.compare8 ?? 0,
    measuredCriticality: measured,
    effectiveCriticality: t.criticality || measured,
  };
}

/** TenantAdmin.ListTenants' answer: one tenant (`name`) or all, with what the last classification said of each. */
export function tenantsMessage(
  deps: Pick<TenantAdminDeps, "registry" | "liveUtilization">,
  name = "",
): { tenants: TenantInfo[]; clusteredMs: number } {
  const { registry } = deps;
  const tenants = name ? [registry.tenant(name)] : registry.tenants();
  return {
    tenants: tenants.map((t) => tenantInfo(t, registry.snapshot, deps.liveUtilization(t.servers))),
    clusteredMs: registry.snapshot.clusteredMs,
  };
}

/** TenantAdmin.ListClasses' answer: the classes of `snapshot` with each class's live utilization. */
export function classesMessage(
  snapshot: ClassSnapshot,
  deps: Pick<TenantAdminDeps, "liveUtilization">,
): ListClassesResponse {
  return {
    clusteredMs: snapshot.clusteredMs,
    unclassified: snapshot.unclassified,
    classes: snapshot.classes.map((c) => ({
      id: c.id,
      pattern: c.pattern,
      averagePct: c.average,
      peakPct: c.peak,
      currentPct: deps.liveUtilization(c.servers) ?? c.current,
      tenants: c.tenantIds,
      servers: c.servers,
    })),
  };
}

/**
 * A client-streaming handler from an async function over the incoming messages: its result is the answer (with
 * whatever `fn` put in the trailing metadata), a throw (including one from a malformed message) is answered with the
 * error's code.
 */
function clientStream<Req, Res>(
  fn: (messages: AsyncIterable<Req>, trailer: grpc.Metadata) => Promise<Res>,
): grpc.handleClientStreamingCall<Req, Res> {
  return (stream, callback) => {
    const trailer = new grpc.Metadata();
    fn(stream as unknown as AsyncIterable<Req>, trailer).then(
      (res) => callback(null, res, trailer),
      (err: unknown) => {
        callback(toServiceError(err) as grpc.ServiceError);
        // Stop reading whatever the client still sends.
        stream.destroy();
      },
    );
  };
}

function invalid(field: string, why: string): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} ${why}`, { details: { field } });
}
