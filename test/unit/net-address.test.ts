import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { bindAddress, formatAddress, parseHostPort, resolveAdvertiseHost } from "../../common/net-address.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { resolveNameNodeOptions } from "../../namenode/options.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import { thrown } from "../error-code.js";

describe("bind and advertised addresses", () => {
  it("advertises the bind host, or this machine's name when every interface is bound", () => {
    expect(resolveAdvertiseHost("rm", "10.1.2.3", "")).toBe("10.1.2.3");
    expect(resolveAdvertiseHost("rm", "0.0.0.0", undefined)).toBe(hostname());
    expect(resolveAdvertiseHost("rm", "::", "")).toBe(hostname());
    expect(resolveAdvertiseHost("rm", "0.0.0.0", "master.example.net")).toBe("master.example.net");
  });

  it("refuses an advertised address a peer could not dial, naming the field", () => {
    for (const bad of ["0.0.0.0", "host:8030", "two words", "http://x"]) {
      const err = thrown(() => resolveAdvertiseHost("namenode", "0.0.0.0", bad));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(err.message).toContain("advertiseHost");
    }
    expect(thrown(() => resolveAdvertiseHost("namenode", "a b", "")).message).toContain("host");
  });

  it("brackets IPv6 literals in host:port", () => {
    expect(formatAddress("fd00::1", 8020)).toBe("[fd00::1]:8020");
    expect(formatAddress("[fd00::1]", 8020)).toBe("[fd00::1]:8020");
    expect(formatAddress("master", 8020)).toBe("master:8020");
    expect(bindAddress("::", 0)).toBe("[::]:0");
    expect(bindAddress("0.0.0.0", 8032)).toBe("0.0.0.0:8032");
  });

  it("gives every daemon the advertised host its options resolve to", () => {
    const on = { host: "0.0.0.0", advertiseHost: "server-7.example.net" };
    expect(resolveResourceManagerOptions({ dataDir: "/d", ...on }).advertiseHost).toBe("server-7.example.net");
    expect(resolveNameNodeOptions({ dataDir: "/d", ...on }).advertiseHost).toBe("server-7.example.net");
    expect(resolveNodeManagerOptions({ nodeId: "s7", rmAddress: "m:1", dataDir: "/d", ...on }).advertiseHost).toBe(
      "server-7.example.net",
    );
    expect(
      resolveDataNodeOptions({ datanodeId: "s7", namenodeAddress: "m:1", dataDir: "/d", ...on }).advertiseHost,
    ).toBe("server-7.example.net");
    expect(resolveResourceManagerOptions({ dataDir: "/d" }).advertiseHost).toBe("127.0.0.1");
  });

  it("reads a peer's host:port, and nothing else", () => {
    expect(parseHostPort("10.0.0.7:9866")).toEqual({ host: "10.0.0.7", port: 9866 });
    expect(parseHostPort("server-1.example.net:9866")).toEqual({ host: "server-1.example.net", port: 9866 });
    expect(parseHostPort("[fd00::7]:9866")).toEqual({ host: "fd00::7", port: 9866 });
    for (const bad of ["valueOf", "", "host:", ":9866", "host:0", "host:70000", "a b:1", "fd00::7:9866", "h:1:2"])
      expect(parseHostPort(bad), bad).toBeUndefined();
  });
});
