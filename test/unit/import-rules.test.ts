/** The mechanical check of the house rule that daemons never import each other (scripts/check-imports.mjs). */
import { describe, expect, it } from "vitest";
// @ts-expect-error -- a plain ES module script without type declarations
import { violations } from "../../scripts/check-imports.mjs";

/** The rule's findings on a tree of `files` (path to source text). */
const check = (files: Record<string, string>): string[] =>
  (violations as (files: Map<string, string>) => string[])(new Map(Object.entries(files)));

describe("the import-rule check", () => {
  it.each<{ rule: string; files: Record<string, string>; found: string[] }>([
    {
      rule: "flags a daemon importing another daemon",
      files: {
        "resourcemanager/a.ts": 'import { x } from "../nodemanager/b.js";',
        "nodemanager/b.ts": "export const x = 1;",
      },
      found: ["resourcemanager/a.ts imports nodemanager/b.ts: daemons meet only through proto/ and common/"],
    },
    {
      rule: "allows daemons to share common/ and flags common/ depending on a daemon",
      files: {
        "resourcemanager/a.ts": 'import { y } from "../common/c.js";',
        "common/c.ts": 'import type { Z } from "../jobmanager/z.js";\nexport const y = 1;',
        "jobmanager/z.ts": "export type Z = number;",
      },
      found: ["common/c.ts imports jobmanager/z.ts: common/ must not depend on a daemon"],
    },
    {
      rule: "lets the simulator reach a daemon's policies only through the daemon's index.ts",
      files: {
        "sim/a.ts":
          'import { P } from "../namenode/index.js";\nimport { Q } from "../namenode/replication-monitor.js";',
        "namenode/index.ts": 'export { Q as P } from "./replication-monitor.js";',
        "namenode/replication-monitor.ts": "export const Q = 1;",
      },
      found: [
        "sim/a.ts imports namenode/replication-monitor.ts: the simulator uses a daemon's policies only through namenode/index.ts",
      ],
    },
    {
      rule: "lets benchmarks and the soak reach a daemon only through the daemon's index.ts",
      files: {
        "bench/a.ts":
          'import { Scheduler } from "../resourcemanager/index.js";\nimport { classify } from "../resourcemanager/policy/classifier.js";',
        "soak/b.ts": 'import { NodeManager } from "../nodemanager/node-manager.js";',
        "resourcemanager/index.ts": 'export { Scheduler } from "./policy/scheduler.js";',
        "resourcemanager/policy/scheduler.ts": "export const Scheduler = 1;",
        "resourcemanager/policy/classifier.ts": "export const classify = 1;",
        "nodemanager/node-manager.ts": "export const NodeManager = 1;",
      },
      found: [
        "bench/a.ts imports resourcemanager/policy/classifier.ts: a benchmark uses a daemon's policies only through resourcemanager/index.ts",
        "soak/b.ts imports nodemanager/node-manager.ts: the soak uses a daemon's policies only through nodemanager/index.ts",
      ],
    },
    {
      rule: "keeps common/ below the local-cluster launcher, the launcher below the labs, and the labs below the CLI",
      files: {
        "common/tls.ts": 'import { c } from "../localcluster/cluster-ca.js";',
        "localcluster/cluster-ca.ts": 'import { t } from "../labs/testbed.js";\nexport const c = 1;',
        "labs/testbed.ts": 'import { f } from "../cli/format.js";\nexport const t = 1;',
        "cli/format.ts": "export const f = 1;",
      },
      found: [
        "common/tls.ts imports localcluster/cluster-ca.ts: common/ is below the launcher, the labs and the CLI",
        "localcluster/cluster-ca.ts imports labs/testbed.ts: the local-cluster launcher is below the labs and the CLI",
        "labs/testbed.ts imports cli/format.ts: the labs are below the CLI, which calls into them",
      ],
    },
  ])("$rule", ({ files, found }) => {
    expect(check(files)).toEqual(found);
  });

  it("finds import cycles", () => {
    const files = {
      "common/a.ts": 'import { b } from "./b.js";',
      "common/b.ts": 'export { a } from "./a.js";',
    };
    expect(check(files).some((p) => p.startsWith("import cycle: common/a.ts -> common/b.ts -> common/a.ts"))).toBe(
      true,
    );
  });
});
