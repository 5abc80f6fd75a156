/**
 * What the resource manager's admin clients (`TenantAdminClient`, `PowerAdminClient`) share: one gRPC client of one
 * of its services, built from an address or from a client configuration, and closed with the client.
 */
import type * as grpc from "@grpc/grpc-js";
import { clientConfigOf, clientSecurityOf, rmAddressFromConfig } from "./client-config.js";
import type { ClientConfig } from "./client-config.js";
import { makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";

/** The generated constructor of a gRPC service's client. */
type ServiceClientCtor<G extends grpc.Client> = new (
  address: string,
  creds: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => G;

/** A client of one resource manager service (`G`: the generated client of that service). */
export abstract class RmAdminClient<G extends grpc.Client> {
  protected readonly rm: G;

  /** `security`: TLS and an admin's certificate (a secure cluster); undefined: plaintext. */
  protected constructor(
    service: ServiceClientCtor<G>,
    readonly rmAddress: string,
    security?: ClientSecurity,
  ) {
    this.rm = makeClient(service, rmAddress, security);
  }

  /**
   * A client of the cluster a client configuration names: `config` is a file or a parsed configuration; without it,
   * `$HARVEST_CONF`, then `~/.harvest/client.json`.
   */
  static fromConfig<T>(
    this: new (rmAddress: string, security?: ClientSecurity) => T,
    config?: ClientConfig | string,
  ): T {
    const c = clientConfigOf(config);
    return new this(rmAddressFromConfig(c), clientSecurityOf(c));
  }

  /** Closes the channel to the resource manager. */
  close(): void {
    this.rm.close();
  }
}
