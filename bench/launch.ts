/**
 * What a container's account costs at launch: the time from a node manager's spawn to the exit of a container that
 * does nothing (`/bin/true`), as a root node manager runs it: as one fixed account (the stock one-account behaviour,
 * setpriv's no_new_privs), as an account of the application's own sharing the server's /tmp, and as one with a
 * private /tmp and /dev/shm (unshare, three mounts, setpriv). Launches of the kinds alternate, so load hits each
 * alike. Without root only the node manager's own account runs (it cannot switch).
 */
import { mkdtempSync, rmSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatContainerId } from "../common/ids.js";
import {
  ContainerProcess,
  detectCgroups,
  fixedContainerAccount,
  ownAccount,
  PRIVATE_TMP,
} from "../nodemanager/index.js";
import type { ContainerAccount } from "../nodemanager/index.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec } from "./flags.js";
import { fmt, ratio, summarize, table } from "./report.js";
import type { Summary } from "./report.js";

const FLAGS = {
  launches: { kind: "int", default: 40, min: 1, help: "launches of each kind" },
} satisfies Record<string, FlagSpec>;

type Kind = "own" | "fixed" | "leased" | "application";

const LABEL: Record<Kind, string> = {
  own: "the node manager's own account (not root)",
  fixed: "one fixed account (setpriv)",
  leased: "the application's own, shared /tmp (setpriv)",
  application: "the application's own, private /tmp (unshare + mounts + setpriv)",
};

export const launchBench: BenchDefinition = {
  name: "launch",
  summary: "container launch to exit: own account vs one fixed account vs an application's own with a private /tmp",
  flags: FLAGS,
  async run(argv, progress): Promise<BenchReport> {
    const f = parseFlags(argv, FLAGS);
    const root = process.getuid?.() === 0;
    // A root node manager never runs a container as itself; one that is not root cannot switch.
    const kinds: Kind[] = !root ? ["own"] : PRIVATE_TMP ? ["fixed", "leased", "application"] : ["fixed", "leased"];
    const dir = mkdtempSync(join(tmpdir(), "harvest-launch-bench-"));
    chmodSync(dir, 0o755);
    const cgroups = detectCgroups("harvest-launch-bench", "none");
    const fixed = root ? fixedContainerAccount("nobody") : ownAccount();
    // A uid of systemd's dynamic range that no account uses here (the bench leases nothing: it runs alone).
    const leased: ContainerAccount = { name: "harvest-65000", uid: 65000, gid: 65000, home: "" };
    const account: Record<Kind, ContainerAccount> = { own: ownAccount(), fixed, leased, application: leased };
    const ms: Record<Kind, number[]> = { own: [], fixed: [], leased: [], application: [] };
    let seq = 0;
    try {
      for (let i = 0; i < f.launches; i++) {
        for (const kind of kinds) {
          seq += 1;
          const containerId = formatContainerId(1_700_000_000_000, 1, 1, seq);
          const started = performance.now();
          const c = new ContainerProcess(
            {
              containerId,
              appId: "application_1700000000000_0001",
              argv: ["/bin/true"],
              env: {},
              vcoresMilli: 1000,
              memoryMb: 64,
              isAm: false,
              account: account[kind],
              workDir: join(dir, containerId),
              ...(kind === "application" ? { privateTmp: { keep: [dir] } } : {}),
            },
            cgroups,
            Date.now(),
            () => {},
          );
          await c.waitForExit();
          if (c.exitCode !== 0) throw new Error(`${kind} launch failed: ${c.diagnostics}`);
          ms[kind].push(performance.now() - started);
        }
        if ((i + 1) % 10 === 0) progress(`${i + 1} of ${f.launches}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const s = Object.fromEntries(kinds.map((k) => [k, summarize(ms[k])])) as Record<Kind, Summary>;
    const lines = [
      `Container launch to exit of /bin/true, ${f.launches} launches of each kind, alternating` +
        (root ? "" : " (not root: its own account only)"),
      "",
      ...table(
        ["account", "p50 ms", "p99 ms", "max ms", "p50 / fixed"],
        kinds.map((k) => [
          LABEL[k],
          fmt(s[k].p50, 1),
          fmt(s[k].p99, 1),
          fmt(s[k].max, 1),
          s.fixed ? ratio(s[k].p50, s.fixed.p50) : "-",
        ]),
      ),
    ];
    return { lines, result: { launches: f.launches, summaries: s } };
  },
};
