/**
 * `npm run screenshots`: the README's pictures of the web UIs. Brings up a secure 4-server cluster (`harvest cluster
 * up`, real traces when ../shared/data is there), stores a file, runs the demo's word-count job, logs a headless
 * Chromium in with `harvest ui login` and saves the main pages as PNGs in docs/screenshots/ (or `--out DIR`), then
 * tears the cluster down. Needs Chromium (Debian's `chromium`, or $HARVEST_CHROMIUM).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { distEntry, packageRoot } from "../common/paths.js";
import { findChromium, launchBrowser, spkiHash, watchedPage } from "./browser-kit.js";

const outArg = process.argv.indexOf("--out");
const out = resolve(outArg >= 0 ? process.argv[outArg + 1]! : join(packageRoot(), "docs", "screenshots"));
const dir = mkdtempSync(join(tmpdir(), "harvest-shots-"));

function harvest(...args: string[]): string {
  const r = spawnSync(process.execPath, [distEntry("cli/harvest.js"), ...args], {
    encoding: "utf8",
    timeout: 300_000,
    env: { ...process.env, HARVEST_CLUSTER_DIR: dir },
  });
  if (r.status !== 0) throw new Error(`harvest ${args.join(" ")} failed: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

async function main(): Promise<void> {
  const chromium = findChromium();
  if (!chromium) throw new Error("no Chromium: apt-get install chromium (or set HARVEST_CHROMIUM)");
  mkdirSync(out, { recursive: true });
  harvest("cluster", "up", "--servers", "4", "--speed", "600");
  try {
    harvest("fs", "mkdir", "/demo");
    harvest("fs", "put", join(packageRoot(), "examples", "data", "corpus.txt"), "/demo/corpus.txt");
    const appId = (
      JSON.parse(harvest("job", "submit", join(packageRoot(), "examples", "dags", "demo.json"), "--json")) as {
        appId: string;
      }
    ).appId;
    const logins = (
      JSON.parse(harvest("ui", "login", "--json")) as { logins: { daemon: string; url: string; loginUrl: string }[] }
    ).logins;
    const certOf = (name: string): string =>
      (JSON.parse(readFileSync(join(dir, "run", `${name}.json`), "utf8")) as { tls: { cert: string } }).tls.cert;
    const browser = await launchBrowser(chromium, [spkiHash(certOf("rm")), spkiHash(certOf("nn"))]);
    try {
      const { page, errors } = await watchedPage(browser);
      for (const l of logins) await page.goto(l.loginUrl);
      const rm = logins.find((l) => l.daemon === "resourcemanager")!.url;
      const nn = logins.find((l) => l.daemon === "namenode")!.url;
      // Let the job run a while so that the charts and the DAG have something to show.
      await new Promise((r) => setTimeout(r, 8_000));
      const pages: [string, string][] = [
        ["rm-cluster", `${rm}/`],
        ["rm-jobs", `${rm}/jobs`],
        ["rm-job", `${rm}/jobs/${appId}`],
        ["rm-tenants", `${rm}/tenants`],
        ["rm-classes", `${rm}/classes`],
        ["rm-power", `${rm}/power`],
        ["nn-overview", `${nn}/`],
        ["nn-explorer", `${nn}/explorer?path=/demo`],
        ["nn-datanodes", `${nn}/datanodes`],
        ["nn-blocks", `${nn}/blocks`],
        ["nn-placement", `${nn}/placement`],
      ];
      for (const [name, url] of pages) {
        await page.goto(url, { waitUntil: "load" });
        await new Promise((r) => setTimeout(r, 600));
        await page.screenshot({ path: join(out, `${name}.png`) });
        process.stdout.write(`${join(out, `${name}.png`)}\n`);
      }
      if (errors.length > 0) process.stderr.write(`page errors:\n${errors.join("\n")}\n`);
    } finally {
      await browser.close();
    }
  } finally {
    harvest("cluster", "down");
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`screenshots failed: ${String(err)}\n`);
  process.exitCode = 1;
});
