/** glibc's malloc setting: who starts with it, the operator's own variable left alone, the commands that restart. */
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import {
  DAEMON_SYSTEM_PATH,
  MALLOC_TUNABLES,
  TUNABLES_VARIABLE,
  daemonEnvironment,
  dataCommandRestartEnv,
  missingMallocTunables,
  withMallocTunables,
} from "../../localcluster/malloc-tunables.js";

const argv = (...words: string[]): string[] => ["/usr/bin/node", "/opt/harvest/dist/cli/harvest.js", ...words];

describe("glibc's malloc setting", () => {
  it("is a top pad glibc reads from GLIBC_TUNABLES", () => {
    expect(TUNABLES_VARIABLE).toBe("GLIBC_TUNABLES");
    expect(MALLOC_TUNABLES).toMatch(/^glibc\.malloc\.top_pad=\d+$/);
  });

  it("is added when the variable is unset, and an operator's value, even empty, is kept", () => {
    expect(withMallocTunables({ PATH: "/bin" })).toEqual({ PATH: "/bin", GLIBC_TUNABLES: MALLOC_TUNABLES });
    expect(withMallocTunables({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" })).toEqual({
      GLIBC_TUNABLES: "glibc.malloc.arena_max=2",
    });
    expect(withMallocTunables({ GLIBC_TUNABLES: "" })).toEqual({ GLIBC_TUNABLES: "" });
    const env = { HOME: "/root" };
    withMallocTunables(env);
    expect(env).toEqual({ HOME: "/root" });
  });

  it("goes to the datanodes only", () => {
    expect(daemonEnvironment("datanode", {})[TUNABLES_VARIABLE]).toBe(MALLOC_TUNABLES);
    for (const kind of ["namenode", "resourcemanager", "nodemanager"] as const)
      expect(daemonEnvironment(kind, {})[TUNABLES_VARIABLE]).toBeUndefined();
  });

  it("starts every daemon with its Node's folder and the system's on PATH, never the caller's", () => {
    for (const kind of ["datanode", "namenode", "resourcemanager", "nodemanager"] as const) {
      const env = daemonEnvironment(kind, { PATH: "/tmp/node_modules/.bin:/usr/bin", HOME: "/root" });
      expect(env["PATH"]).toBe(`${dirname(process.execPath)}:${DAEMON_SYSTEM_PATH}`);
      expect(env["HOME"]).toBe("/root");
    }
  });

  it("is named when a datanode on Linux started without it", () => {
    expect(missingMallocTunables("datanode", {}, "linux")).toBe(`GLIBC_TUNABLES=${MALLOC_TUNABLES}`);
    expect(missingMallocTunables("datanode", { GLIBC_TUNABLES: "" }, "linux")).toBeUndefined();
    expect(missingMallocTunables("datanode", {}, "darwin")).toBeUndefined();
    expect(missingMallocTunables("namenode", {}, "linux")).toBeUndefined();
  });

  it("restarts fs put, get and cat without it, and no other command", () => {
    for (const cmd of [
      ["fs", "put", "a", "/a"],
      ["fs", "get", "/a", "a"],
      ["fs", "cat", "/a", "--json"],
      ["--dir", "/tmp/c", "fs", "put", "a", "/a"],
      ["--config=client.json", "fs", "get", "/a", "a"],
    ])
      expect(dataCommandRestartEnv(argv(...cmd), { HOME: "/root" }, "linux")).toEqual({
        HOME: "/root",
        GLIBC_TUNABLES: MALLOC_TUNABLES,
      });
    for (const cmd of [
      [],
      ["fs"],
      ["fs", "ls", "/"],
      ["job", "submit", "fs"],
      ["daemon", "datanode"],
      ["put", "fs"],
      ["--dir", "fs", "put", "a"],
    ])
      expect(dataCommandRestartEnv(argv(...cmd), {}, "linux"), cmd.join(" ")).toBeUndefined();
    // Already set (the restarted process itself, or the operator's), or not glibc's platform: no restart.
    expect(dataCommandRestartEnv(argv("fs", "get", "/a", "a"), { GLIBC_TUNABLES: MALLOC_TUNABLES }, "linux")).toBe(
      undefined,
    );
    expect(dataCommandRestartEnv(argv("fs", "get", "/a", "a"), { GLIBC_TUNABLES: "" }, "linux")).toBeUndefined();
    expect(dataCommandRestartEnv(argv("fs", "get", "/a", "a"), {}, "darwin")).toBeUndefined();
  });
});
