import { hostname, networkInterfaces } from "node:os";
import { describe, expect, it } from "vitest";
import {
  bindAddress,
  formatAddress,
  isLocalPeer,
  isThisServer,
  parseHostPort,
  resolveAdvertiseHost,
} from "../../common/net-address.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { resolveNameNodeOptions } from "../../namenode/options.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import { thrown } from "../error-code.js";

describe("who is on this server (short-circuit reads)", () => {
  it("a datanode takes a peer for local only on loopback or on the address it was reached at", () => {
    expect(isLocalPeer("127.0.0.1", "127.0.0.1")).toBe(true);
    expect(isLocalPeer("127.0.0.5", "10.0.0.7")).toBe(true);
    expect(isLocalPeer("::1", "::1")).toBe(true);
    expect(isLocalPeer("::ffff:127.0.0.1", "::ffff:127.0.0.1")).toBe(true);
    expect(isLocalPeer("10.0.0.7", "10.0.0.7")).toBe(true);
    expect(isLocalPeer("::ffff:10.0.0.7", "10.0.0.7")).toBe(true);
    // Another server on the same network, or a peer the socket no longer knows.
    expect(isLocalPeer("10.0.0.8", "10.0.0.7")).toBe(false);
    expect(isLocalPeer("::ffff:10.0.0.8", "::ffff:10.0.0.7")).toBe(false);
    expect(isLocalPeer("fd00::2", "fd00::1")).toBe(false);
    expect(isLocalPeer(undefined, "10.0.0.7")).toBe(false);
    expect(isLocalPeer("128.0.0.1", undefined)).toBe(false);
  });

  it("a client takes loopback and its own interfaces' addresses for this server, and nothing else", () => {
    expect(isThisServer("127.0.0.1")).toBe(true);
    expect(isThisServer("::1")).toBe(true);
    expect(isThisServer("localhost")).toBe(true);
    expect(isThisServer(hostname())).toBe(true);
    for (const a of Object.values(networkInterfaces()).flatMap((l) => l ?? []))
      expect(isThisServer(a.address)).toBe(true);
    // TEST-NET-3 and a documentation IPv6 prefix: never a real interface. A host name is not resolved.
    expect(isThisServer("203.0.113.9")).toBe(false);
    expect(isThisServer("2001:db8::9")).toBe(false);
    expect(isThisServer("server-7.example.net")).toBe(false);
  });

  it("a datanode serves them only when told, and opens its data directory to its group at most", () => {
    const base = { datanodeId: "s7", namenodeAddress: "m:1", dataDir: "/d" };
    expect(resolveDataNodeOptions(base)).toMatchObject({ shortCircuitReads: false, dataDirMode: "700" });
    expect(resolveDataNodeOptions({ ...base, shortCircuitReads: true, dataDirMode: "750" })).toMatchObject({
      shortCircuitReads: true,
      dataDirMode: "750",
    });
    for (const mode of ["755", "777", "0700", 700])
      expect(thrown(() => resolveDataNodeOptions({ ...base, dataDirMode: mode as never })).message).toContain(
        "dataDirMode",
      );
    expect(thrown(() => resolveDataNodeOptions({ ...base, shortCircuitReads: "yes" as never })).code).toBe(
      "CONFIG_INVALID",
    );
  });
});

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
