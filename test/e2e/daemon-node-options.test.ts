/**
 * The systemd unit's command (deploy/systemd) gives a datanode its Node options and glibc's malloc setting. The daemon
 * itself is the witness: run in the foreground without them, it warns and names them. (`harvest cluster up`'s datanodes: test/e2e/cli.test.ts.)
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_NODE_OPTIONS } from "../../localcluster/node-options.js";
import { MALLOC_TUNABLES, TUNABLES_VARIABLE } from "../../localcluster/malloc-tunables.js";
import { distEntry, packageRoot } from "../../common/paths.js";
import { requireBuild } from "../integration/harness.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-node-options-"));
const WARNING = "started without its Node options";
const MALLOC_WARNING = "started without its malloc setting";

/** The unit's `Environment=NAME=value` settings and the shell script its `ExecStart=/bin/sh -c '...'` runs. */
function unitCommand(unit: string): { env: Record<string, string>; script: string } {
  const text = readFileSync(join(packageRoot(), "deploy", "systemd", unit), "utf8");
  const env: Record<string, string> = {};
  for (const m of text.matchAll(/^Environment=([A-Z_]+)=(.*)$/gm)) env[m[1]!] = m[2]!;
  const exec = /^ExecStart=\/bin\/sh -c '(.*)'$/m.exec(text);
  if (!exec) throw new Error(`${unit} has no ExecStart=/bin/sh -c '...'`);
  // systemd turns $$ into $ before the shell sees the script.
  return { env, script: exec[1]!.replaceAll("$$", "$") };
}

describe("a datanode's Node options", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("are given by the systemd unit's command to the harvest on PATH, and missed by a bare foreground run", () => {
    requireBuild();
    const { env, script } = unitCommand("harvest-datanode.service");
    expect(env["HARVEST_DATANODE_OPTS"]).toBe(DEFAULT_NODE_OPTIONS.datanode.join(" "));
    expect(env[TUNABLES_VARIABLE]).toBe(MALLOC_TUNABLES);
    // `harvest` on PATH as npm installs it: a link to the CLI's script. The unit's config file does not exist here,
    // so the datanode stops at its configuration, after its check of the options.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    symlinkSync(distEntry("cli/harvest.js"), join(bin, "harvest"));
    const run = (cmd: string[], extra: Record<string, string>): { status: number | null; stderr: string } => {
      const base: NodeJS.ProcessEnv = { ...process.env };
      delete base[TUNABLES_VARIABLE];
      const r = spawnSync(cmd[0]!, cmd.slice(1), {
        encoding: "utf8",
        timeout: 60_000,
        env: { ...base, ...extra, PATH: `${bin}:${process.env["PATH"] ?? ""}` },
      });
      return { status: r.status, stderr: r.stderr };
    };
    const unit = run(["/bin/sh", "-c", script], env);
    expect(unit.stderr).toContain("bad configuration");
    expect(unit.status).toBe(2);
    expect(unit.stderr).not.toContain(WARNING);
    expect(unit.stderr).not.toContain(MALLOC_WARNING);

    // `harvest daemon datanode` run straight by node, as a unit without the options would.
    const foreground = (extra: Record<string, string>): { status: number | null; stderr: string } =>
      run(
        [process.execPath, distEntry("cli/harvest.js"), "daemon", "datanode", "--config", "/nonexistent.json"],
        extra,
      );
    const bare = foreground({});
    expect(bare.status).toBe(2);
    expect(bare.stderr).toContain(`${WARNING} ${DEFAULT_NODE_OPTIONS.datanode.join(" ")}`);
    expect(bare.stderr).toContain(`${MALLOC_WARNING} ${TUNABLES_VARIABLE}=${MALLOC_TUNABLES}`);
    // Set empty, the variable is the operator's choice of glibc's defaults: no warning.
    expect(foreground({ [TUNABLES_VARIABLE]: "" }).stderr).not.toContain(MALLOC_WARNING);

    // A variable that is not a list of options is named, and the daemon goes on to its own checks.
    const wrong = foreground({ HARVEST_DATANODE_OPTS: "--initial-old-space-size=128 evil.js" });
    expect(wrong.stderr).toContain('HARVEST_DATANODE_OPTS: "evil.js" is not a Node option');
    expect(wrong.stderr).toContain("bad configuration");
    expect(wrong.status).toBe(2);
  });
});
