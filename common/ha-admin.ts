/**
 * The HaAdmin service every highly available master serves, active or standby, to admins only (proto/ha_admin.proto):
 * its role and term, and a graceful hand-over. Loaded on its own (with the loader options of common/grpc.ts), so that
 * a daemon adds it beside its other services; `harvest admin ha status|failover` calls it (cli/ha-commands.ts).
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { join } from "node:path";
import { HarvestError } from "./errors.js";
import { unary } from "./grpc.js";
import { packageRoot } from "./paths.js";
import type { ProtoGrpcType } from "../proto/generated/ha_admin.js";
import type { HaStatus } from "../proto/generated/harvest/v1/HaStatus.js";

/** The HaAdmin service's definitions (typed from the generated proto types). */
export type HaAdminProto = ProtoGrpcType["harvest"]["v1"];

let cached: HaAdminProto | undefined;

/** Loads proto/ha_admin.proto once (the same loader options as `loadHarvestProto`). */
export function loadHaAdminProto(): HaAdminProto {
  if (cached) return cached;
  const includeDirs = [join(packageRoot(), "proto")];
  const options = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs };
  const definition = protoLoader.loadSync(["ha_admin.proto"], options);
  cached = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).harvest.v1;
  return cached;
}

/** What a master answers GetHaStatus with, and how it hands over. */
export interface HaAdminSource {
  status(): HaStatus;
  /** Gives the active term up (resolves once given up); throws NOT_ACTIVE on a standby. */
  failover(): Promise<HaStatus>;
}

/** The HaAdmin handlers over `source` (the caller allows them to admins only). */
export function haAdminHandlers(source: HaAdminSource): grpc.UntypedServiceImplementation {
  return {
    GetHaStatus: unary(() => source.status()),
    Failover: unary(() => source.failover()),
  };
}

/** HaAdmin as a master that is not highly available answers it: role "none", and no hand-over (INVALID_ARGUMENT). */
export function notHaAdmin(service: string, address: () => string, webUrl: () => string): HaAdminSource {
  const status = (): HaStatus => {
    const a = address();
    const w = webUrl();
    return { service, id: a, role: "none", epoch: 0, address: a, webUrl: w, activeAddress: a, activeWebUrl: w };
  };
  return {
    status,
    failover: () =>
      Promise.reject(new HarvestError("INVALID_ARGUMENT", `this ${service} master is not highly available`)),
  };
}
