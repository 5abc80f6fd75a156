/**
 * The tenant admin client: register primary tenants, assign their servers, feed and import their utilization and
 * reimage history, and read the utilization classes the resource manager builds from it. `harvest admin` wraps it.
 */
import * as grpc from "@grpc/grpc-js";
import { RmAdminClient } from "./rm-admin-client.js";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { fromGrpcError, HarvestError } from "../common/errors.js";
import { call, loadHarvestProto } from "../common/grpc.js";
import { TRACE_WARNINGS_METADATA_KEY } from "../common/trace-io.js";
import type { TraceWarnings } from "../common/trace-io.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { TenantAdminClient as GrpcTenantAdminClient } from "../proto/generated/harvest/v1/TenantAdmin.js";
import type { ImportHistoryResponseOutput } from "../proto/generated/harvest/v1/ImportHistoryResponse.js";
import type { ListClassesResponseOutput } from "../proto/generated/harvest/v1/ListClassesResponse.js";
import type { TenantInfoOutput } from "../proto/generated/harvest/v1/TenantInfo.js";

/** A primary tenant as the resource manager reports it. */
export type TenantInfo = TenantInfoOutput;
/** The utilization classes and when they were built. */
export type TenantClasses = ListClassesResponseOutput;
/**
 * What an import stored, and for a utilization series what the resource manager's normalization of the file changed
 * (clamped values, merged timestamps, bridged and kept gaps, skipped lines); `warnings` is absent for a clean file,
 * a reimage list, or a resource manager too old to report them.
 */
export type ImportResult = ImportHistoryResponseOutput & { warnings?: TraceWarnings };

/** History file formats an import understands. */
export type HistoryFormat = "csv" | "nab" | "bitbrains" | "reimages";

/** Bytes per data message of an import. */
const IMPORT_CHUNK_BYTES = 256 * 1024;
/** Samples per StreamSamples call. */
const SAMPLES_PER_STREAM = 100_000;

/** Client of a resource manager's TenantAdmin service. */
export class TenantAdminClient extends RmAdminClient<GrpcTenantAdminClient> {
  /** `security`: TLS and an admin's certificate (a secure cluster); undefined: plaintext. */
  constructor(rmAddress: string, security?: ClientSecurity) {
    super(loadHarvestProto().TenantAdmin, rmAddress, security);
  }

  register(t: {
    name: string;
    environment?: string;
    machineFunction?: string;
    criticality?: string;
  }): Promise<TenantInfo> {
    return call(this.rm, this.rm.registerTenant, {
      name: t.name,
      environment: t.environment ?? "",
      machineFunction: t.machineFunction ?? "",
      criticality: t.criticality ?? "",
    });
  }

  assign(tenant: string, servers: string[]): Promise<TenantInfo> {
    return call(this.rm, this.rm.assignServers, { tenant, servers });
  }

  async list(name = ""): Promise<TenantInfo[]> {
    return (await call(this.rm, this.rm.listTenants, { name })).tenants;
  }

  classes(): Promise<TenantClasses> {
    return call(this.rm, this.rm.listClasses, {});
  }

  recluster(): Promise<TenantClasses> {
    return call(this.rm, this.rm.recluster, {}, 120_000);
  }

  recordReimage(server: string, atMs = 0): Promise<{ tenant: string; atMs: number }> {
    return call(this.rm, this.rm.recordReimage, { server, atMs });
  }

  /** Sends utilization samples; resolves once the resource manager stored them. */
  async addSamples(samples: { server: string; timeMs: number; cpuPct: number }[]): Promise<number> {
    let accepted = 0;
    for (let i = 0; i < samples.length; i += SAMPLES_PER_STREAM) {
      const part = samples.slice(i, i + SAMPLES_PER_STREAM);
      const res = await clientStream<{ accepted: number }>(
        (cb) => this.rm.streamSamples(new grpc.Metadata(), streamDeadline(), cb as never),
        part,
      );
      accepted += res.accepted;
    }
    return accepted;
  }

  /**
   * Imports a history file: a utilization series for one server (or for every server of a tenant), or a reimage
   * list. The file is read on the resource manager through the shared trace normalization (common/trace-io.ts):
   * quirks are repaired and counted in `warnings`; an unreadable file is rejected with its line number and nothing of
   * it is kept.
   */
  async importHistory(
    path: string,
    opts: { format?: HistoryFormat; server?: string; tenant?: string; shiftToNow?: boolean },
  ): Promise<ImportResult> {
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch (err) {
      throw new HarvestError("INVALID_ARGUMENT", `cannot read ${path}: ${(err as Error).message}`, {
        details: { file: path },
      });
    }
    return this.importHistoryData(data, { ...opts, fileName: basename(path) });
  }

  /** As `importHistory`, from bytes in memory. */
  importHistoryData(
    data: Buffer,
    opts: { format?: HistoryFormat; server?: string; tenant?: string; shiftToNow?: boolean; fileName?: string },
  ): Promise<ImportResult> {
    const messages: unknown[] = [
      {
        header: {
          format: opts.format ?? "csv",
          server: opts.server ?? "",
          tenant: opts.tenant ?? "",
          fileName: opts.fileName ?? "history",
          shiftToNow: opts.shiftToNow ?? false,
        },
      },
    ];
    for (let off = 0; off < data.length; off += IMPORT_CHUNK_BYTES)
      messages.push({ data: data.subarray(off, off + IMPORT_CHUNK_BYTES) });
    let warnings: TraceWarnings | undefined;
    return clientStream<ImportHistoryResponseOutput>(
      (cb) => {
        const stream = this.rm.importHistory(new grpc.Metadata(), streamDeadline(), cb as never);
        stream.on("status", (status: grpc.StatusObject) => {
          const raw = status.metadata.get(TRACE_WARNINGS_METADATA_KEY)[0];
          if (raw === undefined) return;
          try {
            warnings = JSON.parse(raw.toString()) as TraceWarnings;
          } catch {
            // Not ours to fail an import that was stored over a report we cannot read.
          }
        });
        return stream;
      },
      messages,
      true,
    ).then((res) => (warnings ? { ...res, warnings } : res));
  }
}

function streamDeadline(): grpc.CallOptions {
  return { deadline: Date.now() + 120_000 };
}

/**
 * Writes `messages` on a client stream (respecting back-pressure) and resolves to the answer; with `afterStatus`, only
 * once the call's status (and its trailing metadata) has arrived, which grpc-js reports after the answer.
 */
function clientStream<Res>(
  open: (cb: (err: grpc.ServiceError | null, res?: Res) => void) => grpc.ClientWritableStream<never>,
  messages: readonly unknown[],
  afterStatus = false,
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    let answer: { res: Res } | undefined;
    let statusSeen = false;
    const stream = open((err, res) => {
      if (err) return reject(fromGrpcError(err));
      answer = { res: res as Res };
      if (!afterStatus || statusSeen) resolve(answer.res);
    });
    if (afterStatus) {
      stream.on("status", () => {
        statusSeen = true;
        if (answer) resolve(answer.res);
      });
    }
    let i = 0;
    const pump = (): void => {
      while (i < messages.length) {
        if (!stream.write(messages[i++] as never)) {
          stream.once("drain", pump);
          return;
        }
      }
      stream.end();
    };
    // A write after the server answered with an error is dropped by grpc-js; the callback still reports the error.
    stream.on("error", () => undefined);
    pump();
  });
}
