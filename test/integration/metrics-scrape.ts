/** Reading a test cluster's daemons over HTTPS: their web server URL, a GET trusting the cluster CA, /metrics. */
import { existsSync, readFileSync } from "node:fs";
import * as https from "node:https";
import { join } from "node:path";
import { expect } from "vitest";
import type { DaemonRecord } from "../../localcluster/cluster.js";
import { parsePromText } from "../prom-text.js";
import type { PromSample } from "../prom-text.js";
import type { TestCluster } from "./harness.js";

/** A daemon's web server URL: from the cluster descriptor, else from its ready file. */
export function httpUrlOf(c: TestCluster, d: DaemonRecord): string {
  if (d.httpUrl) return d.httpUrl;
  const ready = join(c.dir, "run", `${d.name ?? "?"}.ready`);
  const url = existsSync(ready) ? (JSON.parse(readFileSync(ready, "utf8")) as { httpUrl?: string }).httpUrl : undefined;
  if (!url) throw new Error(`${d.name ?? d.address} reports no web server URL`);
  return url;
}

/** GETs `url` over HTTPS trusting the cluster CA, presenting the admin's certificate unless `anonymous`. */
export function httpsGet(c: TestCluster, url: string, anonymous = false): Promise<{ status: number; body: string }> {
  const sec = c.desc.security;
  if (!sec) throw new Error("the test cluster runs without TLS");
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        ca: readFileSync(sec.ca),
        ...(anonymous ? {} : { cert: readFileSync(sec.cert), key: readFileSync(sec.key) }),
        headers: { accept: "text/plain" },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (b: Buffer) => parts.push(b));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${url} timed out`)));
  });
}

export async function scrape(c: TestCluster, d: DaemonRecord): Promise<Map<string, PromSample[]>> {
  const res = await httpsGet(c, `${httpUrlOf(c, d)}/metrics`);
  expect(res.status, res.body).toBe(200);
  return parsePromText(res.body);
}
