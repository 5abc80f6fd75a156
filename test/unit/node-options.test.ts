/** The Node options each daemon starts with: defaults, HARVEST_<KIND>_OPTS, refusal of what is not an option. */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_NODE_OPTIONS,
  daemonNodeOptions,
  missingClientNodeOptions,
  missingNodeOptions,
  nodeOptionsVariable,
} from "../../localcluster/node-options.js";
import { thrown } from "../error-code.js";

describe("daemon Node options", () => {
  it("gives the datanode a larger initial old space by default, and the others nothing", () => {
    expect(daemonNodeOptions("datanode", {})).toEqual(["--initial-old-space-size=128"]);
    for (const kind of ["resourcemanager", "namenode", "nodemanager"] as const)
      expect(daemonNodeOptions(kind, {})).toEqual([]);
  });

  it("lets HARVEST_<KIND>_OPTS replace a kind's defaults, empty meaning none", () => {
    expect(nodeOptionsVariable("datanode")).toBe("HARVEST_DATANODE_OPTS");
    expect(
      daemonNodeOptions("datanode", { HARVEST_DATANODE_OPTS: "  --max-old-space-size=512\t--stack-trace-limit=50 " }),
    ).toEqual(["--max-old-space-size=512", "--stack-trace-limit=50"]);
    expect(daemonNodeOptions("datanode", { HARVEST_DATANODE_OPTS: "" })).toEqual([]);
    expect(daemonNodeOptions("namenode", { HARVEST_NAMENODE_OPTS: "--max-semi-space-size=8" })).toEqual([
      "--max-semi-space-size=8",
    ]);
    // One kind's variable leaves the others alone.
    expect(daemonNodeOptions("datanode", { HARVEST_NAMENODE_OPTS: "--max-semi-space-size=8" })).toEqual([
      ...DEFAULT_NODE_OPTIONS.datanode,
    ]);
  });

  it("refuses a word that is not an option (a script, an argument, a shell word) with CONFIG_INVALID", () => {
    for (const bad of ["/tmp/evil.js", "--max-old-space-size=512 evil.js", "-e", "--require=x;rm", "--=1", "$(id)"]) {
      const err = thrown(() => daemonNodeOptions("datanode", { HARVEST_DATANODE_OPTS: bad }));
      expect(err.code, bad).toBe("CONFIG_INVALID");
      expect(err.message).toContain("HARVEST_DATANODE_OPTS");
    }
  });

  it("names the options a process lacks", () => {
    expect(missingNodeOptions("datanode", [], {})).toEqual(["--initial-old-space-size=128"]);
    expect(missingNodeOptions("datanode", ["--initial-old-space-size=128"], {})).toEqual([]);
    expect(missingNodeOptions("nodemanager", [], {})).toEqual([]);
    expect(missingNodeOptions("datanode", [], { HARVEST_DATANODE_OPTS: "" })).toEqual([]);
  });
});

describe("a data client's Node options", () => {
  it("are the datanode's larger initial old space, added unless the process has the option in any size", () => {
    expect(missingClientNodeOptions([], {})).toEqual(["--initial-old-space-size=128"]);
    expect(missingClientNodeOptions(["--expose-gc"], { NODE_OPTIONS: "--max-old-space-size=512" })).toEqual([
      "--initial-old-space-size=128",
    ]);
    expect(missingClientNodeOptions(["--initial-old-space-size=128"], {})).toEqual([]);
    // An operator's own size, on the command line or in NODE_OPTIONS, is kept.
    expect(missingClientNodeOptions(["--initial-old-space-size=64"], {})).toEqual([]);
    expect(missingClientNodeOptions([], { NODE_OPTIONS: "--trace-gc --initial-old-space-size=256" })).toEqual([]);
  });
});
