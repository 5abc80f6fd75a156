/** Telling a daemon's config file from another kind's by its fields (cli/daemon-config-kind.ts). */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkConfigKind, configKinds, DISTINCTIVE_FIELDS } from "../../cli/daemon-config-kind.js";
import { packageRoot } from "../../common/paths.js";
import { DAEMON_KINDS } from "../../localcluster/daemon-kinds.js";
import type { DaemonKind } from "../../localcluster/daemon-kinds.js";
import { thrown } from "../error-code.js";

const OPTIONS: Record<DaemonKind, [string, string]> = {
  resourcemanager: ["resourcemanager/options.ts", "ResourceManagerOptions"],
  namenode: ["namenode/options.ts", "NameNodeOptions"],
  nodemanager: ["nodemanager/options.ts", "NodeManagerOptions"],
  datanode: ["datanode/options.ts", "DataNodeOptions"],
};

/** The top-level fields of a daemon's options interface, read from its source. */
function optionFields(kind: DaemonKind): Set<string> {
  const [file, name] = OPTIONS[kind];
  const src = readFileSync(join(packageRoot(), file), "utf8");
  const open = src.indexOf("{", src.indexOf(`export interface ${name} {`));
  const fields = new Set<string>();
  let depth = 0;
  for (const line of src.slice(open + 1).split("\n")) {
    if (depth === 0) {
      const m = /^ {2}(?:readonly\s+)?(\w+)\??:/.exec(line);
      if (m) fields.add(m[1]!);
    }
    for (const ch of line.replace(/\/\*.*?\*\/|\/\/.*$/g, "")) depth += ch === "{" ? 1 : ch === "}" ? -1 : 0;
    if (depth < 0) break;
  }
  return fields;
}

/** An example config from deploy/conf. */
function example(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(packageRoot(), "deploy", "conf", path), "utf8")) as Record<string, unknown>;
}

describe("a daemon config's kind", () => {
  it("is told by fields each of which only that daemon's options have", () => {
    const fields = Object.fromEntries(DAEMON_KINDS.map((k) => [k, optionFields(k)])) as Record<DaemonKind, Set<string>>;
    for (const kind of DAEMON_KINDS) {
      expect(fields[kind].size, kind).toBeGreaterThan(20);
      for (const f of DISTINCTIVE_FIELDS[kind]) {
        expect(fields[kind].has(f), `${kind}.${f}`).toBe(true);
        for (const other of DAEMON_KINDS.filter((k) => k !== kind))
          expect(fields[other].has(f), `${f} is also a ${other} option`).toBe(false);
      }
    }
  });

  it("is recognised in every example under deploy/conf", () => {
    expect(configKinds(example("master/resourcemanager.json"))[0]?.kind).toBe("resourcemanager");
    expect(configKinds(example("master/namenode.json"))[0]?.kind).toBe("namenode");
    expect(configKinds(example("server/nodemanager.json"))[0]?.kind).toBe("nodemanager");
    expect(configKinds(example("server/datanode.json"))[0]?.kind).toBe("datanode");
    for (const [kind, path] of [
      ["resourcemanager", "master/resourcemanager.json"],
      ["namenode", "master/namenode.json"],
      ["nodemanager", "server/nodemanager.json"],
      ["datanode", "server/datanode.json"],
    ] as const)
      expect(() => checkConfigKind(kind, path, example(path))).not.toThrow();
    // A server's datanode sits in its node manager's rack, so that placement and locality agree.
    expect(example("server/datanode.json")["rack"]).toBe(example("server/nodemanager.json")["rack"]);
    expect(example("server/datanode.json")["rack"]).not.toBe("/default-rack");
  });

  it("refuses another kind's config naming its kind, and a server's config without the server's name", () => {
    const err = thrown(() => checkConfigKind("nodemanager", "nn.json", example("master/namenode.json")));
    expect(err.code).toBe("CONFIG_INVALID");
    expect(err.message).toContain("nn.json is a namenode's config (it sets placementPolicy, userGroups)");
    expect(err.message).toContain("harvest daemon start namenode --config nn.json");
    expect(thrown(() => checkConfigKind("datanode", "nm.json", example("server/nodemanager.json"))).message).toContain(
      "a nodemanager's config",
    );
    expect(thrown(() => checkConfigKind("datanode", "x.json", { dataDir: "/d" })).details).toEqual({
      field: "datanodeId",
      file: "x.json",
    });
    // A config setting only what every daemon has cannot be told apart: the daemon's own validation judges it.
    expect(() => checkConfigKind("namenode", "x.json", { dataDir: "/d", port: 1 })).not.toThrow();
  });
});
