import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { findClientConfig, loadClientConfig, parseClientConfig } from "../../client/client-config.js";
import { DfsClient } from "../../client/dfs-client.js";
import { JobClient } from "../../client/job-client.js";
import { thrown } from "../error-code.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-client-config-"));

describe("the client configuration", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads addresses and resolves certificate paths against the file's folder", () => {
    const file = join(dir, "client.json");
    writeFileSync(
      file,
      JSON.stringify({
        rmAddress: "master:8032",
        nnAddress: "[fd00::1]:8020",
        ca: "ca.pem",
        cert: "u.pem",
        key: "k.pem",
      }),
    );
    const c = loadClientConfig(file);
    expect(c).toMatchObject({ rmAddress: "master:8032", nnAddress: "[fd00::1]:8020", source: file });
    expect(c.ca).toBe(join(dir, "ca.pem"));
    expect(c.key).toBe(join(dir, "k.pem"));
  });

  it("is found by an explicit path, then $HARVEST_CONF, and is absent when neither names one", () => {
    const a = join(dir, "a.json");
    const b = join(dir, "b.json");
    writeFileSync(a, JSON.stringify({ rmAddress: "a:1" }));
    writeFileSync(b, JSON.stringify({ rmAddress: "b:2" }));
    expect(findClientConfig(a, { HARVEST_CONF: b })?.rmAddress).toBe("a:1");
    expect(findClientConfig(undefined, { HARVEST_CONF: b })?.rmAddress).toBe("b:2");
    expect(thrown(() => findClientConfig(undefined, { HARVEST_CONF: join(dir, "missing.json") })).code).toBe(
      "CONFIG_INVALID",
    );
  });

  it("gives the library's clients the addresses it names", () => {
    const file = join(dir, "lib.json");
    writeFileSync(file, JSON.stringify({ rmAddress: "master:8032", nnAddress: "master:8020" }));
    const jobs = JobClient.fromConfig(file);
    const dfs = DfsClient.fromConfig(file);
    expect([jobs.rmAddress, dfs.namenodeAddress]).toEqual(["master:8032", "master:8020"]);
    jobs.close();
    dfs.close();
    writeFileSync(file, JSON.stringify({ rmAddress: "master:8032" }));
    expect(thrown(() => DfsClient.fromConfig(file)).code).toBe("CLUSTER_NOT_FOUND");
  });

  it("takes every master's address, as a comma-separated list or a JSON array", () => {
    const c = parseClientConfig(
      { rmAddress: "rm1:8032, rm2:8032", nnAddress: ["nn1:8020", "[fd00::2]:8020"] },
      "test.json",
    );
    expect(c.rmAddress).toBe("rm1:8032,rm2:8032");
    expect(c.nnAddress).toBe("nn1:8020,[fd00::2]:8020");
  });

  it("refuses a malformed configuration, naming the field", () => {
    const cases: [unknown, string][] = [
      [[], "top level"],
      [{ rmAddress: "no-port" }, "rmAddress"],
      [{ rmAddress: 8032 }, "rmAddress"],
      [{ nnAddress: "nn:99999999" }, "nnAddress"],
      [{}, "rmAddress"],
      [{ rmAddress: "m:1", cert: "c.pem" }, "key"],
      [{ rmAddress: "m:1", token: "x" }, "token"],
      [{ rmAddress: "m:1,no-port" }, "rmAddress"],
      [{ rmAddress: "m:1,,m:2" }, "rmAddress"],
      [{ nnAddress: ["n:1", 2] }, "nnAddress"],
      [{ nnAddress: ["n:1", "n:1"] }, "nnAddress"],
    ];
    for (const [raw, field] of cases) {
      const err = thrown(() => parseClientConfig(raw, "test.json"));
      expect(err.code, JSON.stringify(raw)).toBe("CONFIG_INVALID");
      expect(err.message, JSON.stringify(raw)).toContain(field);
    }
    const notJson = join(dir, "bad.json");
    writeFileSync(notJson, "{ rmAddress: ");
    expect(thrown(() => loadClientConfig(notJson)).message).toContain("not valid JSON");
  });
});
