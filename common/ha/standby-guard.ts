/**
 * A standby's services: every unary call is answered with the error the standby gives (NOT_ACTIVE naming the active),
 * before its handler runs; streaming handlers are left to check for themselves (they answer per message).
 */
import type * as grpc from "@grpc/grpc-js";
import { toServiceError } from "../errors.js";
import type { HarvestError } from "../errors.js";

/** `impl` with each unary handler refusing while `refusal()` returns an error. */
export function guardUnary(
  impl: grpc.UntypedServiceImplementation,
  refusal: () => HarvestError | undefined,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(impl)) {
    const h = handler as unknown as (call: unknown, callback: (err: unknown) => void) => void;
    // Unary handlers take (call, callback); streaming ones only the call.
    out[name] =
      h.length !== 2
        ? handler
        : (((call: unknown, callback: (err: unknown) => void) => {
            const refused = refusal();
            if (refused) callback(toServiceError(refused));
            else h(call, callback);
          }) as unknown as grpc.UntypedHandleCall);
  }
  return out;
}
