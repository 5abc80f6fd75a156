/**
 * The web UIs in a real browser (Debian's Chromium, headless, through puppeteer-core) against a real secure
 * `harvest cluster up`: the user logs in with the URL `harvest ui login` prints, and then sees every server on the
 * cluster page, follows a submitted job to FINISHED on its DAG page and opens its job manager's log on its node manager
 * from there, sees a node whose node manager was kill -9'd go LOST, finds a file just written in the namenode's
 * explorer, and watches a reimaged server's blocks go under-replicated and then healthy again. No page logs a console
 * error. A screenshot of each page is saved under
 * `test-artifacts/web/` (not committed). Without Chromium the test skips with a message; CI installs it.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, HTTPResponse, Page } from "puppeteer-core";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClusterDescriptor } from "../../localcluster/cluster.js";
import { packageRoot } from "../../common/paths.js";
import { findChromium, launchBrowser, spkiHash, watchedPage } from "../../examples/browser-kit.js";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { requireBuild } from "../integration/harness.js";

const chromium = findChromium();
if (!chromium)
  console.warn("web-ui browser tests skipped: no Chromium (apt-get install chromium, or set HARVEST_CHROMIUM)");

const dir = mkdtempSync(join(tmpdir(), "harvest-web-"));
const artifacts = join(packageRoot(), "test-artifacts", "web");

function harvest(...args: string[]): CliRun {
  return runHarvest(args, { env: { HARVEST_CLUSTER_DIR: dir } });
}

/**
 * Opens `url` in `page` and resolves once that page has loaded and is the one shown. A live page (the cluster page,
 * block health) reloads itself every 5 s; should its reload be in flight as the test navigates away, puppeteer can
 * report the load of one navigation while the other commits. Such a visit is made again.
 */
async function visit(page: Page, url: string): Promise<HTTPResponse | null> {
  const path = new URL(url).pathname;
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await page.goto(url, { waitUntil: "load" });
      if (new URL(page.url()).pathname === path && (await page.evaluate("document.readyState")) === "complete")
        return res;
    } catch (err) {
      if (attempt >= 3 || !/context was destroyed|ERR_ABORTED|frame was detached/i.test(String(err))) throw err;
    }
    if (attempt >= 3) throw new Error(`could not open ${url}: the browser shows ${page.url()}`);
  }
}

/** Reloads `page` at `url` until the JavaScript expression `probe`, evaluated in the page, is true. */
async function reloadUntil(page: Page, url: string, what: string, probe: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      await visit(page, url);
      return (await page.evaluate(probe).catch(() => false)) === true;
    },
    { what: `${what} at ${url}`, timeoutMs, intervalMs: 700 },
  );
}

describe.skipIf(!chromium)("the web UIs in a real browser", () => {
  let desc: ClusterDescriptor;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  let rmUrl: string;
  let nnUrl: string;
  /** The job the DAG test ran (its containers show on their servers' pages). */
  let jobAppId = "";

  async function shot(name: string): Promise<void> {
    await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
  }

  beforeAll(async () => {
    requireBuild();
    mkdirSync(artifacts, { recursive: true });
    // Idle primaries (the job runs at once), quick loss detection and re-replication.
    const idle = join(dir, "idle.csv");
    writeFileSync(idle, ["time_s,cpu_pct", ...Array.from({ length: 50 }, (_, i) => `${i * 300},3`)].join("\n") + "\n");
    const config = join(dir, "daemons.json");
    writeFileSync(
      config,
      JSON.stringify({
        // A history sample every second, so that the cluster page's last day has points to plot.
        rm: { nodeExpiryMs: 3_000, historySampleMs: 1_000 },
        // Re-replication waits a few seconds, so that the browser sees the blocks under-replicated first.
        nn: { heartbeatIntervalMs: 300, replicationIntervalMs: 5_000 },
        dn: { heartbeatIntervalMs: 300 },
      }),
    );
    const up = harvest("cluster", "up", "--servers", "3", "--primary", `trace:${idle}`, "--config", config, "--json");
    expect(up.code, up.stderr).toBe(0);
    desc = JSON.parse(up.stdout) as ClusterDescriptor;
    const login = harvest("ui", "login", "--json");
    expect(login.code, login.stderr).toBe(0);
    const logins = (JSON.parse(login.stdout) as { logins: { daemon: string; url: string; loginUrl: string }[] }).logins;
    const rm = logins.find((l) => l.daemon === "resourcemanager")!;
    const nn = logins.find((l) => l.daemon === "namenode")!;
    expect(rm.url).toMatch(/^https:\/\//);
    rmUrl = rm.url;
    nnUrl = nn.url;
    const certOf = (name: string): string =>
      (JSON.parse(readFileSync(join(dir, "run", `${name}.json`), "utf8")) as { tls: { cert: string } }).tls.cert;
    // The node managers too: the job page links each container's log to its node manager's pages.
    const trusted = ["rm", "nn", ...desc.nodes.map((n) => n.nodeId)].map((name) => spkiHash(certOf(name)));
    browser = await launchBrowser(chromium!, trusted);
    ({ page, errors } = await watchedPage(browser));
    // A browser without a certificate or token is refused...
    const refused = await page.goto(`${rmUrl}/`);
    expect(refused?.status()).toBe(401);
    expect(await page.content()).toContain("harvest ui login");
    errors.length = 0;
    // ...and logs in with the URLs `harvest ui login` printed.
    await page.goto(rm.loginUrl);
    await page.goto(nn.loginUrl);
    expect(page.url()).toBe(`${nnUrl}/`);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    if (existsSync(join(dir, "cluster.json"))) harvest("cluster", "down");
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists every server on the cluster page", async () => {
    await reloadUntil(
      page,
      `${rmUrl}/`,
      "three running servers",
      `[...document.querySelectorAll("#servers tr[data-node] .node-state")].every((c) => c.textContent === "RUNNING")
        && document.querySelectorAll("#servers tr[data-node]").length === 3`,
    );
    const nodes = await page.$$eval("#servers tr[data-node]", (rows) => rows.map((r) => r.getAttribute("data-node")));
    expect(nodes.sort()).toEqual(desc.nodes.map((n) => n.nodeId).sort());
    await shot("cluster");
  });

  it("plots the cluster's last day, and sorts and searches the servers", async () => {
    await reloadUntil(
      page,
      `${rmUrl}/`,
      "a few history samples",
      `JSON.parse(document.getElementById("page-data").textContent).history.samples.length >= 3`,
    );
    // Both charts drew (ECharts renders into a canvas), from samples that hold the servers' cores.
    for (const id of ["history-cores", "history-kills"])
      expect(await page.$eval(`#${id}`, (d) => d.querySelector("canvas") !== null), id).toBe(true);
    const samples = (await page.evaluate(
      `JSON.parse(document.getElementById("page-data").textContent).history.samples`,
    )) as { capacityMilli: number }[];
    expect(samples.at(-1)!.capacityMilli).toBeGreaterThan(0);
    expect(await page.$eval("#counters", (d) => d.textContent ?? "")).toContain("jobs submitted");

    const ids = desc.nodes.map((n) => n.nodeId).sort();
    const shown = async (): Promise<string[]> =>
      (await page.evaluate(
        `[...document.querySelectorAll("#servers tbody tr")].filter((r) => !r.hidden).map((r) => r.getAttribute("data-node"))`,
      )) as string[];
    // A click on the Server heading sorts ascending, a second descending.
    const heading = await page.$$("#servers thead th");
    await heading[0]!.click();
    expect(await shown()).toEqual(ids);
    await heading[0]!.click();
    expect(await shown()).toEqual([...ids].reverse());
    expect(await page.$eval("#servers thead th", (th) => th.getAttribute("aria-sort"))).toBe("descending");
    // The search box above the table keeps the rows that hold its text.
    await page.type('input.table-search[data-table="servers"]', ids[1]!);
    expect(await shown()).toEqual([ids[1]]);
    await page.evaluate("document.activeElement.blur()");
    await shot("cluster-history");
    // The choice survives a reload; clear it for the tests that follow.
    await visit(page, `${rmUrl}/`);
    expect(await shown()).toEqual([ids[1]]);
    await page.evaluate("sessionStorage.clear()");
  });

  it("links a server's name to its page, with its state and live chart", async () => {
    await visit(page, `${rmUrl}/`);
    const id = desc.nodes[0]!.nodeId;
    await Promise.all([page.waitForNavigation(), page.click(`#servers tr[data-node="${id}"] a.node-link`)]);
    expect(new URL(page.url()).pathname).toBe(`/node/${id}`);
    expect(await page.$eval("#node-state", (e) => e.textContent)).toBe("RUNNING");
    for (const chart of ["node-utilization", "node-recent"])
      expect(await page.$eval(`#${chart}`, (d) => d.querySelector("canvas") !== null), chart).toBe(true);
    expect(await page.$("#node-facts")).not.toBeNull();
  });

  it("shows a submitted job's DAG with its vertices until it finishes", async () => {
    const submit = harvest("job", "submit", join(packageRoot(), "examples", "dags", "three-stage.json"), "--json");
    expect(submit.code, submit.stderr).toBe(0);
    const appId = (JSON.parse(submit.stdout) as { appId: string }).appId;
    jobAppId = appId;
    await reloadUntil(
      page,
      `${rmUrl}/jobs`,
      "the job in the jobs page",
      `document.querySelector('tr[data-app="${appId}"]') !== null`,
    );
    expect(await page.$(`tr[data-app="${appId}"]`)).not.toBeNull();
    await shot("jobs");
    const dag = JSON.parse(readFileSync(join(packageRoot(), "examples", "dags", "three-stage.json"), "utf8")) as {
      vertices: { name: string }[];
    };
    // While it runs, a running task's progress (cpu-work reports it as it burns) shows beside its container.
    await reloadUntil(
      page,
      `${rmUrl}/jobs/${appId}`,
      "a running task's progress",
      `[...document.querySelectorAll("#containers td.container-progress")].some((td) => /\\d+%/.test(td.textContent))`,
      120_000,
    );
    await shot("job-running");
    await reloadUntil(
      page,
      `${rmUrl}/jobs/${appId}`,
      "the job to finish",
      `/FINISHED|SUCCEEDED/.test(document.querySelector("#app-state")?.textContent ?? "")`,
      180_000,
    );
    const vertices = await page.$$eval("#vertices tr[data-vertex]", (rows) =>
      rows.map((r) => r.getAttribute("data-vertex")),
    );
    expect(vertices.sort()).toEqual(dag.vertices.map((v) => v.name).sort());
    const progress = await page.$$eval("#vertices td.vertex-progress .pct", (tds) => tds.map((td) => td.textContent));
    expect(progress).toEqual(dag.vertices.map(() => "100%"));
    // The DAG chart drew something.
    expect(await page.$eval("#dag", (d) => d.querySelector("canvas, svg") !== null)).toBe(true);
    // Server names are links to their page and never wrap.
    const server = (await page.evaluate(
      `(() => { const td = document.querySelector("#containers td.server");
        return { wrap: getComputedStyle(td).whiteSpace, href: td.querySelector("a")?.getAttribute("href") ?? "" }; })()`,
    )) as { wrap: string; href: string };
    expect(server.wrap).toBe("nowrap");
    expect(server.href).toMatch(/^\/node\/server-\d+$/);
    await shot("job");
    // The job manager's log opens on its node manager, logged in by the link (a node web token) with no other step.
    const href = await page.$eval("#app-facts a.log-link", (a) => a.getAttribute("href") ?? "");
    await page.goto(href, { waitUntil: "load" });
    expect(new URL(page.url()).pathname).toMatch(/^\/node\/containerlogs\/container_[0-9_]+\/stderr$/);
    expect(await page.$eval("#log", (pre) => pre.textContent ?? "")).toContain("job finished");
    expect(await page.$("#download-log")).not.toBeNull();
    await shot("container-log");
  }, 330_000);

  it("shows a node whose node manager was killed as LOST", async () => {
    const victim = desc.nodes[2]!;
    process.kill(victim.pid, "SIGKILL");
    await reloadUntil(
      page,
      `${rmUrl}/`,
      `${victim.nodeId} LOST`,
      `document.querySelector('#servers tr[data-node="${victim.nodeId}"] .node-state')?.textContent === "LOST"`,
    );
    const state = await page.$eval(`#servers tr[data-node="${victim.nodeId}"] .node-state`, (c) => c.textContent);
    expect(state).toBe("LOST");
    await shot("cluster-lost-node");
  }, 60_000);

  it("lists a file just written, and a reimaged server's blocks as under-replicated, then healthy", async () => {
    const corpus = join(packageRoot(), "examples", "data", "corpus.txt");
    expect(harvest("fs", "mkdir", "/web").code).toBe(0);
    const put = harvest("fs", "put", corpus, "/web/corpus.txt", "--replication", "3");
    expect(put.code, put.stderr).toBe(0);
    await visit(page, `${nnUrl}/explorer?path=/web`);
    expect(await page.$('#entries tr[data-path="/web/corpus.txt"]')).not.toBeNull();
    await shot("explorer");
    await visit(page, `${nnUrl}/datanodes`);
    expect((await page.$$("#datanodes tr[data-datanode]")).length).toBe(3);
    await shot("datanodes");

    // Wipe a server: every server holds a replica, so its blocks go under-replicated until copied again.
    const reimage = harvest("admin", "reimage", "server-1");
    expect(reimage.code, reimage.stderr).toBe(0);
    await reloadUntil(
      page,
      `${nnUrl}/blocks`,
      "the file under-replicated",
      `document.querySelector('#under-replicated tr[data-path="/web/corpus.txt"]') !== null &&
        /UNHEALTHY/.test(document.querySelector("#health-summary")?.textContent ?? "")`,
      15_000,
    );
    await shot("blocks-under-replicated");
    await reloadUntil(
      page,
      `${nnUrl}/blocks`,
      "healthy blocks",
      `(document.querySelector("#health-summary")?.textContent ?? "").trim().startsWith("HEALTHY")`,
    );
    await shot("blocks");
    await visit(page, `${nnUrl}/placement`);
    expect(await page.$("#placement-grid")).not.toBeNull();
    await shot("placement");
  }, 90_000);

  it("plots a tenant's last 30 days and daily profile from its imported history", async () => {
    // No live page reloads itself in the background while the commands below run.
    await page.goto("about:blank");
    // 30 days of 5-minute samples ending now: the tenant is busy (70 %) 09:00-17:00 UTC and quiet (10 %) otherwise.
    const busy = (hour: number): number => (hour >= 9 && hour < 17 ? 70 : 10);
    const step = 300;
    const end = Math.floor(Date.now() / 1000 / step) * step;
    const rows = ["time_s,cpu_pct"];
    for (let t = end - 30 * 86_400 + step; t <= end; t += step)
      rows.push(`${t},${busy(new Date(t * 1000).getUTCHours())}`);
    const history = join(dir, "web-tenant.csv");
    writeFileSync(history, rows.join("\n") + "\n");
    const servers = desc.nodes.map((n) => n.nodeId);
    for (const args of [
      ["admin", "tenant", "register", "web", "--environment", "prod", "--function", "web"],
      ["admin", "tenant", "assign", "web", ...servers],
      ["admin", "history", "import", history, "--tenant", "web"],
      ["admin", "recluster"],
    ]) {
      const r = harvest(...args);
      expect(r.code, `harvest ${args.join(" ")}: ${r.stderr}`).toBe(0);
    }

    await visit(page, `${rmUrl}/tenants`);
    expect(await page.$('#tenants tr[data-tenant="web"]')).not.toBeNull();
    // Both of the tenant's charts drew (ECharts renders into a canvas).
    for (const chart of ["history", "profile"])
      expect(await page.$eval(`#tenant-${chart}-0`, (d) => d.querySelector("canvas") !== null), chart).toBe(true);
    await shot("tenants");

    // The page plots what the REST API answers: the hours this test ran in may hold the live primary's samples too.
    const usage = (await page.evaluate(`fetch("/ws/v1/cluster/tenants/web/utilization").then((r) => r.json())`)) as {
      tenant: string;
      history: { timesMs: number[]; cpuPct: number[] };
      profile: (number | null)[];
    };
    expect(usage.tenant).toBe("web");
    const settledBefore = Date.now() - 2 * 3_600_000;
    const older = usage.history.timesMs
      .map((t, i) => ({ t, v: usage.history.cpuPct[i]! }))
      .filter((s) => s.t < settledBefore);
    expect(older.length).toBeGreaterThan(29 * 24 - 3);
    for (const s of older) expect(s.v, new Date(s.t).toISOString()).toBeCloseTo(busy(new Date(s.t).getUTCHours()), 0);
    const liveHours = new Set([0, 1, 2].map((h) => new Date(Date.now() - h * 3_600_000).getUTCHours()));
    expect(usage.profile).toHaveLength(24);
    for (let h = 0; h < 24; h++) if (!liveHours.has(h)) expect(usage.profile[h], `hour ${h}`).toBeCloseTo(busy(h), 0);

    // The recluster put the tenant in a class.
    await visit(page, `${rmUrl}/classes`);
    expect(await page.$eval("body", (b) => b.textContent ?? "")).toContain("web");

    // A server's page plots its primary's last day (imported history included) against its class's peak, and lists
    // the containers the finished job ran there.
    const job = (await page.evaluate(`fetch("/ws/v1/cluster/apps/${jobAppId}").then((r) => r.json())`)) as {
      app: { containers: { containerId: string; nodeId: string }[] };
    };
    const ran = job.app.containers[0]!;
    const id = ran.nodeId;
    await visit(page, `${rmUrl}/node/${id}`);
    expect(
      await page.$(`#node-ended tr[data-container="${ran.containerId}"] a[href="/jobs/${jobAppId}"]`),
    ).not.toBeNull();
    const data = (await page.evaluate(`JSON.parse(document.getElementById("page-data").textContent)`)) as {
      classId: string;
      classPeakPct: number | null;
      utilization: { timesMs: number[]; cpuPct: number[] };
    };
    expect(data.classId).not.toBe("");
    expect(data.classPeakPct).toBeGreaterThanOrEqual(69);
    const dayAgo = Date.now() - 86_400_000;
    expect(data.utilization.timesMs.length).toBeGreaterThan(100);
    expect(data.utilization.timesMs.every((t) => t >= dayAgo - 60_000)).toBe(true);
    expect(await page.$eval("#node-utilization", (d) => d.querySelector("canvas") !== null)).toBe(true);
    expect(await page.$eval("#node-facts", (t) => t.textContent ?? "")).toContain(data.classId);
    await shot("node");
  }, 90_000);

  it("renders the classes and power pages, and no page logged a console error", async () => {
    for (const path of ["/classes", "/power"]) {
      const res = await visit(page, `${rmUrl}${path}`);
      expect(res?.status(), path).toBe(200);
      await shot(path.slice(1));
    }
    expect(errors).toEqual([]);
  });
});
