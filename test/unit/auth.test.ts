import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { amTokenVerifier, Gate, TOKEN_METADATA } from "../../common/auth.js";
import { ManualClock } from "../../common/clock.js";
import { signAmToken } from "../../common/container-token.js";
import { loadHarvestProto } from "../../common/grpc.js";

const tls = { ca: "/nonexistent/ca.pem", cert: "/nonexistent/c.pem", key: "/nonexistent/k.pem" };
const proto = loadHarvestProto();
const path = (method: string): string => `/harvest.v1.ApplicationClientService/${method}`;
const RULES = {
  GetNewApplication: ["user", "admin"],
  SubmitApplication: ["user", "admin"],
  GetApplication: ["user", "admin", "daemon"],
  ListApplications: ["admin", "am-token"],
  KillApplication: ["admin"],
  GetClusterNodes: [],
  GetJobHistory: ["daemon"],
  GetWebToken: ["user", "admin", "daemon"],
} as const;

function metadata(entries: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) md.set(k, v);
  return md;
}

describe("the gate of a daemon's server", () => {
  it("needs a rule for every method a service defines, so a new method fails closed at start", () => {
    const gate = new Gate(tls);
    expect(() =>
      gate.allow(proto.ApplicationClientService.service, { GetNewApplication: ["user"], SubmitApplication: ["user"] }),
    ).toThrow(/no access rule for \/harvest.v1.ApplicationClientService\/GetApplication/);
  });

  it("lets a certificate through only with a role the method's rule lists, and names who was refused", () => {
    const gate = new Gate(tls).allow(proto.ApplicationClientService.service, RULES);
    expect(gate.check(path("SubmitApplication"), { name: "alice", role: "user" }, metadata())).toBeUndefined();
    const refused = gate.check(path("KillApplication"), { name: "alice", role: "user" }, metadata());
    expect(refused?.code).toBe("PERMISSION_DENIED");
    expect(refused?.message).toContain("alice");
    expect(refused?.message).toContain("KillApplication");
    expect(gate.check(path("GetClusterNodes"), { name: "ops", role: "admin" }, metadata())?.code).toBe(
      "PERMISSION_DENIED",
    );
    expect(gate.check("/harvest.v1.Other/Method", { name: "ops", role: "admin" }, metadata())?.code).toBe(
      "PERMISSION_DENIED",
    );
  });

  it("lets a caller without a certificate through only with a valid token of a kind the rule lists", () => {
    const gate = new Gate(tls, {
      "am-token": (t) => (t === "good" ? { name: "application_1_0001", role: "am", via: "token" } : undefined),
    }).allow(proto.ApplicationClientService.service, RULES);
    const am = (v: string): grpc.Metadata => metadata({ [TOKEN_METADATA["am-token"]]: v });
    expect(gate.check(path("ListApplications"), undefined, am("good"))).toBeUndefined();
    expect(gate.check(path("ListApplications"), undefined, am("forged"))?.code).toBe("UNAUTHENTICATED");
    expect(gate.check(path("ListApplications"), undefined, metadata())?.code).toBe("UNAUTHENTICATED");
    // A valid token of a kind the method does not take is no authentication at all.
    expect(gate.check(path("KillApplication"), undefined, am("good"))?.code).toBe("UNAUTHENTICATED");
  });

  it("refuses an AM token from its expiry on, by the verifier's clock, as it refuses a forged one", () => {
    const clock = new ManualClock(1_000_000);
    const secret = "cluster-secret";
    const gate = new Gate(tls, { "am-token": amTokenVerifier(secret, clock) }).allow(
      proto.ApplicationClientService.service,
      RULES,
    );
    const token = signAmToken(secret, { appId: "application_1_0001", attempt: 3, expiresMs: 1_005_000 });
    const am = metadata({ [TOKEN_METADATA["am-token"]]: token });
    expect(gate.check(path("ListApplications"), undefined, am)).toBeUndefined();
    const call = { getAuthContext: () => null, metadata: am };
    expect(gate.principal(call)).toMatchObject({ appId: "application_1_0001", attempt: 3, expiresMs: 1_005_000 });
    clock.advance(5_000);
    const refused = gate.check(path("ListApplications"), undefined, am);
    expect(refused?.code).toBe("UNAUTHENTICATED");
    expect(refused?.message).toBe(
      gate.check(path("ListApplications"), undefined, metadata({ [TOKEN_METADATA["am-token"]]: "forged" }))?.message,
    );
    expect(() => gate.principal(call)).toThrow(/neither a certificate nor a valid token/);
  });

  it("without TLS, authenticates nobody: the caller is whoever it claims", () => {
    const gate = new Gate(undefined);
    expect(gate.secure).toBe(false);
    const call = { getAuthContext: () => null, metadata: metadata() };
    expect(gate.principal(call, "mallory")).toEqual({ name: "mallory", role: "admin", via: "claim" });
  });
});
