/**
 * `npm run screenshots`: the README's pictures of the web UIs. Brings up a secure 4-server cluster (`harvest cluster
 * up`, real traces when ../shared/data is there), registers two primary tenants with a month of utilization history (real
 * series from ../shared/data, or a generated daily pattern), stores a file, runs the demo's word-count job, logs a headless
 * Chromium in with `harvest ui login` and saves the main pages as PNGs in docs/screenshots/ (or `--out DIR`), then
 * tears the cluster down. Needs Chromium (Debian's `chromium`, or $HARVEST_CHROMIUM).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { distEntry, packageRoot, sharedDataDir } from "../common/paths.js";
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

/** A month of 5-minute samples ending now: busy from `from` to `to` o'clock UTC on weekdays, quiet otherwise. */
function generatedHistory(name: string, from: number, to: number, busyPct: number): string {
  const step = 300;
  const end = Math.floor(Date.now() / 1000 / step) * step;
  const rows = ["time_s,cpu_pct"];
  for (let t = end - 30 * 86_400 + step; t <= end; t += step) {
    const d = new Date(t * 1000);
    const busy = d.getUTCDay() % 6 !== 0 && d.getUTCHours() >= from && d.getUTCHours() < to;
    rows.push(`${t},${busy ? busyPct : 8 + (t % 7)}`);
  }
  const file = join(dir, `${name}.csv`);
  writeFileSync(file, rows.join("\n") + "\n");
  return file;
}

/** Two tenants on two servers each, with the history the tenants and classes pages plot. */
function registerTenants(): void {
  const shared = sharedDataDir();
  const tenants = [
    {
      name: "web",
      servers: ["server-1", "server-2"],
      history: shared
        ? { file: join(shared, "bitbrains_rnd_2013-7", "raw", "44.csv"), format: "bitbrains" }
        : { file: generatedHistory("web", 8, 18, 65), format: "csv" },
    },
    {
      name: "search",
      servers: ["server-3", "server-4"],
      history: shared
        ? {
            file: join(shared, "nab_aws_cloudwatch", "realAWSCloudwatch", "ec2_cpu_utilization_77c1ca.csv"),
            format: "nab",
          }
        : { file: generatedHistory("search", 13, 23, 45), format: "csv" },
    },
  ];
  for (const t of tenants) {
    harvest("admin", "tenant", "register", t.name, "--environment", "prod", "--function", t.name);
    harvest("admin", "tenant", "assign", t.name, ...t.servers);
    const args = ["admin", "history", "import", t.history.file, "--format", t.history.format, "--tenant", t.name];
    harvest(...args, "--shift-to-now");
  }
  harvest("admin", "recluster");
}

async function main(): Promise<void> {
  const chromium = findChromium();
  if (!chromium) throw new Error("no Chromium: apt-get install chromium (or set HARVEST_CHROMIUM)");
  mkdirSync(out, { recursive: true });
  // A history sample every 2 s, so that the cluster page's last day has points by the time it is shot.
  const config = join(dir, "daemons.json");
  writeFileSync(config, JSON.stringify({ rm: { historySampleMs: 2_000 } }));
  harvest("cluster", "up", "--servers", "4", "--speed", "600", "--config", config);
  try {
    registerTenants();
    // Where the demo job reads its input.
    harvest("fs", "mkdir", "/demo/input");
    harvest("fs", "put", join(packageRoot(), "examples", "data", "corpus.txt"), "/demo/input/corpus.txt");
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
    const servers = (JSON.parse(readFileSync(join(dir, "cluster.json"), "utf8")) as { nodes: { nodeId: string }[] })
      .nodes;
    const trusted = ["rm", "nn", ...servers.map((n) => n.nodeId)].map((name) => spkiHash(certOf(name)));
    const browser = await launchBrowser(chromium, trusted);
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
        ["rm-node", `${rm}/node/server-1`],
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
      // The job's DAG on its own, at twice the pixels, so that its edge labels can be read.
      await page.setViewport({ width: 1360, height: 900, deviceScaleFactor: 2 });
      await page.goto(`${rm}/jobs/${appId}`, { waitUntil: "load" });
      await new Promise((r) => setTimeout(r, 600));
      const dag = await page.$("#dag");
      if (dag) {
        await dag.screenshot({ path: join(out, "rm-job-dag.png") });
        process.stdout.write(`${join(out, "rm-job-dag.png")}\n`);
      }
      // A container's log on its node manager, through the job page's link (it logs in with a node web token):
      await page.goto(`${rm}/jobs/${appId}`, { waitUntil: "load" });
      // The job manager's log (it logs as it goes), on its node manager, once it has logged something.
      for (let tries = 0; tries < 20; tries++) {
        await page.goto(`${rm}/jobs/${appId}`, { waitUntil: "load" });
        const logLink = await page.$eval("#app-facts a.log-link", (a) => a.getAttribute("href") ?? "");
        await page.goto(logLink, { waitUntil: "load" });
        if ((await page.$eval("#log", (pre) => pre.textContent ?? "").catch(() => "")) !== "") break;
        await new Promise((r) => setTimeout(r, 1_000));
      }
      await page.screenshot({ path: join(out, "nm-container-log.png") });
      process.stdout.write(`${join(out, "nm-container-log.png")}\n`);
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
