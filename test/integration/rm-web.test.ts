/**
 * The resource manager's web server on a real secure resource manager (mutual TLS under a test CA), over HTTPS on
 * loopback: who may read what (a certificate, a web token from GetWebToken as a bearer or through the login cookie,
 * nothing or a forged token refused), the REST API answering exactly what the gRPC services answer, the pages' stable
 * ids with every value escaped, and `/metrics` as strict Prometheus text whose counters move with the work done. A
 * node manager is played by the test over the real ResourceTracker stream; the job waits for a job manager that never
 * fits (amResource larger than any node), so nothing changes under the comparisons.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { PlayedNode } from "../played-node.js";
import { cpuVertex } from "./harness.js";

// ------------------------------------------------------------------------------------------------ Prometheus text

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Family {
  type: string;
  help: string;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** The family a sample belongs to: its own name, or the name less a histogram's or summary's suffix. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const own = families.get(name);
  if (own) return own;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  const f = m ? families.get(m[1]!) : undefined;
  return f && (f.type === "histogram" || f.type === "summary") ? f : undefined;
}

/** Parses `{a="x",b="y\"z"}` strictly; returns the labels and the rest of the line. */
function parseLabels(text: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  const fail = (why: string): never => {
    throw new Error(`line ${line}: ${why}: ${text}`);
  };
  for (;;) {
    if (text[i] === "}") return { labels, rest: text.slice(i + 1) };
    const eq = text.indexOf("=", i);
    if (eq < 0) fail("label without =");
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) fail(`bad label name ${name}`);
    if (name in labels) fail(`label ${name} twice`);
    if (text[eq + 1] !== '"') fail("label value not quoted");
    let value = "";
    let j = eq + 2;
    for (;;) {
      const c = text[j];
      if (c === undefined) fail("unterminated label value");
      if (c === '"') break;
      if (c === "\\") {
        const e = text[j + 1];
        if (e === "\\") value += "\\";
        else if (e === '"') value += '"';
        else if (e === "n") value += "\n";
        else fail(`bad escape \\${e ?? ""}`);
        j += 2;
      } else {
        value += c;
        j++;
      }
    }
    labels[name] = value;
    i = j + 1;
    if (text[i] === ",") i++;
    else if (text[i] !== "}") fail("expected , or }");
  }
}

/** Parses Prometheus text format 0.0.4 strictly: every line well formed, HELP and TYPE once each, before the samples. */
function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seenSeries = new Set<string>();
  text.split("\n").forEach((raw, index) => {
    const line = index + 1;
    if (raw === "") return;
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      const f = families.get(name) ?? { type: "", help: "", samples: [] };
      if (f.samples.length > 0) throw new Error(`line ${line}: ${kind} for ${name} after its samples`);
      if (kind === "TYPE") {
        if (f.type) throw new Error(`line ${line}: second TYPE for ${name}`);
        if (!TYPES.has(rest)) throw new Error(`line ${line}: unknown type ${rest}`);
        f.type = rest;
      } else {
        if (f.help) throw new Error(`line ${line}: second HELP for ${name}`);
        f.help = rest;
      }
      families.set(name, f);
      return;
    }
    if (raw.startsWith("#")) return;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?( .*)$/.exec(raw);
    if (!m) throw new Error(`line ${line}: not a sample: ${raw}`);
    const name = m[1]!;
    const { labels, rest } = m[2] ? parseLabels(m[2] + m[3], line) : { labels: {}, rest: m[3]! };
    const fields = rest.trim().split(" ");
    if (!rest.startsWith(" ") || fields.length < 1 || fields.length > 2)
      throw new Error(`line ${line}: bad value part`);
    const v = fields[0]!;
    const value = v === "+Inf" ? Infinity : v === "-Inf" ? -Infinity : v === "NaN" ? NaN : Number(v);
    if (!/^(NaN|[+-]Inf|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$/.test(v))
      throw new Error(`line ${line}: bad value ${v}: ${raw}`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`line ${line}: bad timestamp`);
    const family = familyOf(name, families);
    if (!family || !family.type) throw new Error(`line ${line}: sample ${name} without a TYPE`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seenSeries.has(key)) throw new Error(`line ${line}: series ${key} twice`);
    seenSeries.add(key);
    family.samples.push({ name, labels, value });
  });
  return families;
}

/** The value of one series (undefined when absent). */
function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = familyOf(name, families);
  return f?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

// ------------------------------------------------------------------------------------------------ the cluster

const quiet = new Logger("test", "error");

/** A heartbeat's fields: the primary tenant using `milli` of the cores (and 512 MiB), 150 W drawn. */
function primaryUsing(milli: number): Record<string, unknown> {
  return { primaryUsage: { vcoresMilli: milli, memoryMb: 512 }, powerWatts: 150 };
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe("the resource manager's web server", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-rm-web-"));
  const caDir = join(dir, "ca");
  const ca = join(caDir, "ca.pem");
  const who: Record<string, ClientSecurity> = {};
  let rm: ResourceManager;
  let node: PlayedNode;
  let alice: JobClient;
  let appId = "";
  const evilName = `wc <img src=x onerror="alert(1)"> & co`;

  /** GET over HTTPS as `as` (a certificate), or with no certificate. */
  function get(path: string, opts: { as?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
    const tls = opts.as ? who[opts.as] : undefined;
    return new Promise((resolve, reject) => {
      const req = https.request(
        new URL(path, rm.httpUrl),
        {
          ca: readFileSync(ca),
          ...(tls?.cert && tls.key ? { cert: readFileSync(tls.cert), key: readFileSync(tls.key) } : {}),
          headers: opts.headers ?? {},
          agent: false,
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on("data", (c: Buffer) => parts.push(c));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString("utf8") }),
          );
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  const json = (r: Reply): Record<string, unknown> => JSON.parse(r.body) as Record<string, unknown>;
  const errorCode = (r: Reply): string => (json(r) as { error: { code: string } }).error.code;
  const html = { accept: "text/html" };
  const metrics = async (): Promise<Map<string, Family>> => {
    const r = await get("/metrics", { as: "ops" });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/plain/);
    return parsePrometheus(r.body);
  };

  beforeAll(async () => {
    await createCa(caDir);
    const out = join(dir, "certs");
    for (const [name, role, hosts] of [
      ["rm", "daemon", ["127.0.0.1", "localhost"]],
      ["nm", "daemon", ["127.0.0.1"]],
      ["alice", "user", []],
      ["ops", "admin", []],
    ] as const) {
      const f = await issueCertificate(caDir, out, { name, role, hosts: [...hosts] });
      who[name] = { ca, ...f };
    }
    rm = new ResourceManager(
      {
        dataDir: join(dir, "rm"),
        tls: { ca, cert: who["rm"]!.cert!, key: who["rm"]!.key! },
        secret: "0123456789abcdef0123456789abcdef",
        // The test heartbeats when it wants.
        nodeExpiryMs: 120_000,
        // No node can hold the job manager: the job waits, unchanged, while the test compares answers.
        amResource: { vcoresMilli: 64_000, memoryMb: 256 },
      },
      { logger: quiet },
    );
    await rm.start();
    node = new PlayedNode(rm.address, "n1", who["nm"]!);
    await node.register();
    await node.heartbeat(primaryUsing(1000));
    alice = new JobClient(rm.address, { security: who["alice"]! });
    appId = await alice.submit(
      JSON.stringify({
        name: evilName,
        vertices: [cpuVertex("map", 3), cpuVertex("reduce", 1)],
        edges: [{ from: "map", to: "reduce", type: "scatter-gather" }],
      }),
    );
  }, 30_000);

  afterAll(async () => {
    node?.close();
    alice?.close();
    await rm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves HTTPS at the URL it reports, on a port of its own", () => {
    expect(rm.httpUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(rm.httpUrl!).port).not.toBe(rm.address.split(":").pop());
  });

  it("refuses a caller with neither a certificate nor a token with 401 UNAUTHENTICATED", async () => {
    for (const path of ["/ws/v1/cluster/apps", "/ws/v1/cluster/power", "/jobs", "/"]) {
      const r = await get(path);
      expect(r.status, path).toBe(401);
    }
    // Refused, and nothing of the metrics shown.
    const scrape = await get("/metrics");
    expect(scrape.status).toBe(401);
    expect(errorCode(scrape)).toBe("UNAUTHENTICATED");
    expect(scrape.body).not.toContain("harvest_");
    expect(errorCode(await get("/ws/v1/cluster/apps"))).toBe("UNAUTHENTICATED");
    const page = await get("/", { headers: html });
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.body).toContain("harvest ui login");
  });

  it("lets a user certificate read the applications but not the power domains", async () => {
    const apps = await get("/ws/v1/cluster/apps", { as: "alice" });
    expect(apps.status).toBe(200);
    const power = await get("/ws/v1/cluster/power", { as: "alice" });
    expect(power.status).toBe(403);
    expect(errorCode(power)).toBe("PERMISSION_DENIED");
    expect((await get("/ws/v1/cluster/power", { as: "ops" })).status).toBe(200);
    expect((await get("/ws/v1/cluster/drains", { as: "alice" })).status).toBe(403);
    expect((await get("/ws/v1/cluster/tenants", { as: "alice" })).status).toBe(403);
    expect((await get("/ws/v1/cluster/classes", { as: "alice" })).status).toBe(200);
  });

  it("accepts a web token from GetWebToken as a bearer and through the login cookie, with the holder's role", async () => {
    const t = await alice.webToken(60_000);
    expect(t).toMatchObject({ owner: "alice", role: "user" });
    const bearer = { authorization: `Bearer ${t.token}` };
    expect((await get("/ws/v1/cluster/apps", { headers: bearer })).status).toBe(200);
    // A token stands in for its holder's certificate: alice's token is no admin's.
    expect((await get("/ws/v1/cluster/power", { headers: bearer })).status).toBe(403);

    const login = await get(`/login?token=${encodeURIComponent(t.token)}&next=/jobs`);
    expect(login.status).toBe(303);
    expect(login.headers["location"]).toBe("/jobs");
    // Only to a path on this daemon: what a browser would read as another host goes to "/" instead.
    for (const next of [
      "/\\evil.example",
      "//evil.example",
      "/\t/evil.example",
      "/.//evil.example",
      "https://evil.example",
    ]) {
      const away = await get(`/login?token=${encodeURIComponent(t.token)}&next=${encodeURIComponent(next)}`);
      expect(away.status, next).toBe(303);
      expect(away.headers["location"], next).toBe("/");
    }
    const setCookie = String(login.headers["set-cookie"] ?? "");
    expect(setCookie).toMatch(/HttpOnly/);
    const cookie = setCookie.split(";")[0]!;
    const page = await get("/jobs", { headers: { ...html, cookie } });
    expect(page.status).toBe(200);
    expect(page.body).toContain(`data-app="${appId}"`);
  });

  it("refuses a forged or altered token", async () => {
    const t = await alice.webToken(60_000);
    const [kind, claims, signature] = t.token.split(".") as [string, string, string];
    // Same claims under another signature (a character changed inside it: the last one carries padding bits that
    // may not change the bytes), and claims rewritten to admin under alice's signature.
    const flipped = `${kind}.${claims}.${signature.slice(0, 5)}${signature[5] === "A" ? "B" : "A"}${signature.slice(6)}`;
    const asAdmin = Buffer.from(
      JSON.stringify({ ...(JSON.parse(Buffer.from(claims, "base64url").toString()) as object), role: "admin" }),
    ).toString("base64url");
    for (const forged of [flipped, `${kind}.${asAdmin}.${signature}`, "w1.garbage.garbage", "x".repeat(3000)]) {
      const r = await get("/ws/v1/cluster/apps", { headers: { authorization: `Bearer ${forged}` } });
      expect(r.status).toBe(401);
      expect(errorCode(r)).toBe("UNAUTHENTICATED");
      expect((await get(`/login?token=${encodeURIComponent(forged)}`)).status).toBe(401);
    }
  });

  it("answers /ws/v1/cluster/apps exactly as ListApplications, and an app as GetApplication with its DAG", async () => {
    const rest = json(await get("/ws/v1/cluster/apps", { as: "alice" })) as { apps: { app: unknown[] } };
    expect(rest.apps.app).toEqual(await alice.list());
    const filtered = json(await get("/ws/v1/cluster/apps?states=accepted,RUNNING", { as: "alice" })) as {
      apps: { app: { appId: string }[] };
    };
    expect(filtered.apps.app.map((a) => a.appId)).toEqual([appId]);
    expect(json(await get("/ws/v1/cluster/apps?states=FINISHED", { as: "alice" }))).toEqual({ apps: { app: [] } });
    expect((await get("/ws/v1/cluster/apps?states=DONE", { as: "alice" })).status).toBe(400);

    const one = json(await get(`/ws/v1/cluster/apps/${appId}`, { as: "alice" })) as {
      app: { dag: { vertices: { name: string; level: number }[]; edges: unknown[] }; waiting: unknown };
    };
    const { dag, waiting, logs, ...report } = one.app as typeof one.app & { logs: unknown };
    expect(report).toEqual(await alice.status(appId));
    // No primary history: no kill rate is known, so the quote made at submission is certainty.
    expect((report as { quote: unknown }).quote).toMatchObject({ pNoKill: 1, expectedReruns: 0 });
    expect(dag.vertices.map((v) => [v.name, v.level])).toEqual([
      ["map", 0],
      ["reduce", 1],
    ]);
    expect(dag.edges).toEqual([{ from: "map", to: "reduce", type: "scatter-gather" }]);
    expect(waiting).toMatchObject({ kind: "job-manager" });
    expect(logs).toEqual([]);

    const missing = appId.replace(/_\d+$/, "_9999");
    const notFound = await get(`/ws/v1/cluster/apps/${missing}`, { as: "alice" });
    expect(notFound.status).toBe(404);
    expect(errorCode(notFound)).toBe("APP_NOT_FOUND");
  });

  it("shows the nodes as GetClusterNodes does, with state, power and the last heartbeats", async () => {
    const rest = json(await get("/ws/v1/cluster/nodes", { as: "alice" })) as {
      nodes: { node: Record<string, unknown>[] };
    };
    const grpcNodes = await alice.nodes();
    expect(rest.nodes.node).toHaveLength(1);
    const n = rest.nodes.node[0]!;
    const { drainState, serviceState, classId, power, ...report } = n;
    expect(report).toEqual(grpcNodes[0]);
    expect({ drainState, serviceState, classId }).toEqual({ drainState: "", serviceState: "RUNNING", classId: "" });
    expect(power).toMatchObject({ drawWatts: 150, capWatts: 0 });
    const one = json(await get("/ws/v1/cluster/nodes/n1", { as: "alice" })) as {
      node: { recent: { primaryMilli: number; drawWatts: number }[] };
    };
    expect(one.node.recent.length).toBeGreaterThanOrEqual(1);
    expect(one.node.recent.at(-1)).toMatchObject({ primaryMilli: 1000, drawWatts: 150 });
    expect((await get("/ws/v1/cluster/nodes/n9", { as: "alice" })).status).toBe(404);

    const m = json(await get("/ws/v1/cluster/metrics", { as: "alice" })) as { clusterMetrics: Record<string, number> };
    expect(m.clusterMetrics).toMatchObject({
      activeNodes: 1,
      lostNodes: 0,
      appsPending: 1,
      totalVcores: 4,
      primaryVcores: 1,
    });
    const info = json(await get("/ws/v1/cluster/info", { as: "alice" })) as { clusterInfo: Record<string, unknown> };
    expect(info.clusterInfo).toMatchObject({ state: "running", secure: true, schedulerPolicy: "stock" });
    const history = json(await get("/ws/v1/cluster/history?limit=5", { as: "alice" }));
    expect(history).toEqual({ entries: await alice.history("", 5) });
  });

  it("renders the pages with their stable ids and every value escaped", async () => {
    const cluster = await get("/", { as: "alice", headers: html });
    expect(cluster.status).toBe(200);
    expect(cluster.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(cluster.body).toContain('<table id="servers">');
    expect(cluster.body).toMatch(
      /<tr data-node="n1">.*<td class="node-state"><span class="state RUNNING">RUNNING<\/span><\/td>/,
    );
    expect(cluster.body).toContain('id="page-data"');
    // No inline style or script: the CSP would refuse them.
    expect(cluster.body).not.toMatch(/ style=|<script>|<script (?!src|type="application\/json")/);

    const jobs = await get("/jobs", { as: "alice", headers: html });
    expect(jobs.body).toMatch(new RegExp(`<table id="jobs-waiting">[^]*<tr data-app="${appId}">`));
    expect(jobs.body).toContain('id="jobs-running"');
    expect(jobs.body).toContain('id="jobs-finished"');
    expect((await get("/jobs?state=FINISHED", { as: "alice", headers: html })).body).not.toContain(
      `data-app="${appId}"`,
    );

    const job = await get(`/jobs/${appId}`, { as: "alice", headers: html });
    expect(job.status).toBe(200);
    expect(job.body).toContain('id="dag"');
    expect(job.body).toContain('<span class="state ACCEPTED" id="app-state">ACCEPTED</span>');
    expect(job.body).toContain('<tr data-vertex="map">');
    expect(job.body).toContain('<tr data-vertex="reduce">');
    expect(job.body).toMatch(/id="app-quote">100\.0 % chance that no task is killed; 0\.0 re-runs expected/);
    for (const body of [jobs.body, job.body]) {
      expect(body).not.toContain("<img");
      expect(body).toContain("wc &lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; co");
    }

    expect((await get(`/jobs/${appId.replace(/_\d+$/, "_9999")}`, { as: "alice", headers: html })).status).toBe(404);
    const power = await get("/power", { as: "alice", headers: html });
    expect(power.status).toBe(403);
    expect(power.headers["content-type"]).toMatch(/^text\/html/);
    for (const path of ["/power", "/tenants", "/classes"])
      expect((await get(path, { as: "ops", headers: html })).status, path).toBe(200);
    const rmJs = await get("/assets/rm.js");
    expect(rmJs.status).toBe(200);
    expect(rmJs.headers["content-type"]).toMatch(/^text\/javascript/);
  });

  it("serves a page per server and the cluster's last day, with job counters and the daemon's uptime", async () => {
    const cluster = await get("/", { as: "alice", headers: html });
    // Server names link to their page; the last day's charts, the counters and the process facts are on the overview.
    expect(cluster.body).toContain('<a class="node-link" href="/node/n1">n1</a>');
    for (const id of ["history-cores", "history-kills", "counters", "process"])
      expect(cluster.body, id).toContain(`id="${id}"`);
    expect(cluster.body).toMatch(/<th>Version<\/th><td>\d+\.\d+\.\d+/);

    const page = await get("/node/n1", { as: "alice", headers: html });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<span class="state RUNNING" id="node-state">RUNNING</span>');
    for (const id of ["node-facts", "node-utilization", "node-recent", "node-running", "node-ended", "node-kills"])
      expect(page.body, id).toContain(`id="${id}"`);
    expect(page.body).not.toMatch(/ style=|<script>|<script (?!src|type="application\/json")/);
    // The tenant's name is for the roles that may list tenants.
    expect(page.body).not.toContain("Primary tenant");
    expect((await get("/node/n9", { as: "alice", headers: html })).status).toBe(404);
    const evil = await get(`/node/${encodeURIComponent('<img src=x onerror="alert(1)">')}`, {
      as: "alice",
      headers: html,
    });
    expect(evil.status).toBe(404);
    expect(evil.body).not.toContain("<img");

    const u = json(await get("/ws/v1/cluster/nodes/n1/utilization", { as: "alice" }));
    expect(u).toMatchObject({
      nodeId: "n1",
      classId: "",
      classPeakPct: null,
      kills: { primary: 0, power: 0, drain: 0 },
    });
    expect(errorCode(await get("/ws/v1/cluster/nodes/n9/utilization", { as: "alice" }))).toBe("NODE_NOT_FOUND");

    const h = json(await get("/ws/v1/cluster/usage-history", { as: "alice" })) as {
      samples: { capacityMilli: number; primaryMilli: number }[];
      killsPerHour: unknown[];
      counters: { submitted: number };
    };
    // The sample taken at the start, with n1's 4 cores, once it registered; or a later one.
    expect(h.samples.length).toBeGreaterThanOrEqual(1);
    expect(h.killsPerHour).toHaveLength(24);
    expect(h.counters.submitted).toBe(1);
  });

  it("serves /metrics as Prometheus text whose counters move with the work done", async () => {
    const before = await metrics();
    for (const [name, type] of [
      ["harvest_rm_heartbeats_total", "counter"],
      ["harvest_rm_nodes", "gauge"],
      ["harvest_rm_containers_allocated_total", "counter"],
      ["harvest_rm_containers_running", "gauge"],
      ["harvest_rm_container_completions_total", "counter"],
      ["harvest_rm_applications_submitted_total", "counter"],
      ["harvest_rm_applications_finished_total", "counter"],
      ["harvest_rm_applications", "gauge"],
      ["harvest_rm_admission_queue_length", "gauge"],
      ["harvest_rm_millicores", "gauge"],
      ["harvest_rm_power_draw_watts", "gauge"],
      ["harvest_rm_power_budget_watts", "gauge"],
      ["harvest_rm_power_domains_alerting", "gauge"],
      ["harvest_grpc_server_handled_total", "counter"],
    ] as const) {
      expect(before.get(name)?.type, name).toBe(type);
      expect(before.get(name)?.help, name).not.toBe("");
    }
    expect(valueOf(before, "harvest_rm_nodes", { state: "running" })).toBe(1);
    expect(valueOf(before, "harvest_rm_nodes", { state: "lost" })).toBe(0);
    expect(valueOf(before, "harvest_rm_applications", { state: "accepted" })).toBe(1);
    expect(valueOf(before, "harvest_rm_applications_submitted_total")).toBe(1);
    expect(valueOf(before, "harvest_rm_applications_finished_total", { final_state: "killed" })).toBe(0);
    expect(
      valueOf(before, "harvest_rm_container_completions_total", { kind: "task", cause: "preempted_by_primary" }),
    ).toBe(0);
    expect(valueOf(before, "harvest_rm_containers_running", { kind: "job_manager" })).toBe(0);
    expect(valueOf(before, "harvest_rm_millicores", { use: "primary" })).toBe(1000);
    expect(valueOf(before, "harvest_rm_power_draw_watts", { domain: "rack-a" })).toBe(150);

    const listCall = { service: "ApplicationClientService", method: "ListApplications", code: "OK" };
    const heartbeats = valueOf(before, "harvest_rm_heartbeats_total")!;
    const lists = valueOf(before, "harvest_grpc_server_handled_total", listCall) ?? 0;
    await node.heartbeat(primaryUsing(500));
    await node.heartbeat(primaryUsing(500));
    await alice.list();
    const after = await metrics();
    expect(valueOf(after, "harvest_rm_heartbeats_total")).toBe(heartbeats + 2);
    expect(valueOf(after, "harvest_grpc_server_handled_total", listCall)).toBe(lists + 1);
    expect(valueOf(after, "harvest_rm_millicores", { use: "primary" })).toBe(500);

    await alice.kill(appId);
    const ended = await metrics();
    expect(valueOf(ended, "harvest_rm_applications_finished_total", { final_state: "killed" })).toBe(1);
    expect(valueOf(ended, "harvest_rm_applications", { state: "killed" })).toBe(1);
    expect(valueOf(ended, "harvest_rm_applications", { state: "accepted" })).toBe(0);
  });
});
