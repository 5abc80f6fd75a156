/**
 * Property-based tests of every parser a user's file or a peer's bytes reach: each either returns a valid value or
 * throws a HarvestError with a stable code other than INTERNAL; never a TypeError, a RangeError or a hang.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { clientConfigOf, parseClientConfig } from "../../client/client-config.js";
import { parseAlibabaTasks } from "../../common/alibaba-dag.js";
import { BlockKeyManager, resolveBlockKeyOptions, verifyBlockToken } from "../../common/block-token.js";
import type { BlockAccess } from "../../common/block-token.js";
import { signAmToken, signContainer, verifyAmToken, verifyContainer } from "../../common/container-token.js";
import type { TokenFields } from "../../common/container-token.js";
import { dagToJson, EDGE_TYPES, parseDag, topologicalOrder, validateDag } from "../../common/dag-spec.js";
import { DelegationTokens } from "../../common/delegation-token.js";
import { HarvestError, toServiceError } from "../../common/errors.js";
import { normalizeDfsPath, pathComponents } from "../../common/dfs-path.js";
import { parseMode } from "../../common/fs-permission.js";
import { parseAppId } from "../../common/ids.js";
import { checkSecurityOptions, checkTlsOption, requireSecurityChoice } from "../../common/options.js";
import {
  BUILTIN_POWER_PROFILES,
  parseSpecPowerText,
  powerProfileProblem,
  resolvePowerProfile,
  SPECPOWER_COLUMNS,
} from "../../common/power-profiles.js";
import { parseReimageText, REIMAGE_CSV_HEADER } from "../../common/reimage-io.js";
import { parseTraceText, PLAIN_CSV_HEADER } from "../../common/trace-io.js";
import type { TraceFormat } from "../../common/trace-io.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { resolveNameNodeOptions } from "../../namenode/options.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import {
  normalizeDomainPath,
  rackDomain,
  resolvePowerDomainOptions,
  validatePowerDomainConfig,
} from "../../resourcemanager/policy/power-domains.js";
import { resolveTenantRegistryOptions } from "../../resourcemanager/tenant-registry.js";
import { expectCodedError, fuzzParams, parsesOrRefuses } from "./runs.js";

/** Text made of pieces that matter to line-oriented parsers: separators, numbers of every shape, junk. */
function csvishText(headers: string[], width?: number): fc.Arbitrary<string> {
  const cell = fc.oneof(
    fc.integer({ min: -5, max: 2_000_000_000 }).map(String),
    fc.double().map(String),
    fc.constantFrom("", " ", "NaN", "Infinity", "-0", "1e309", "0x10", "1,5", "\u0000", "\uFEFF", "server-1", "a:b"),
    fc.string({ maxLength: 12 }),
  );
  // Rows of the width the format expects (give or take one) reach past the column-count check.
  const cells =
    width === undefined
      ? fc.array(cell, { maxLength: 6 })
      : fc.array(cell, { minLength: width - 1, maxLength: width + 1 });
  const line = cells.chain((row) => fc.constantFrom(",", ";", ";\t", "\t", " ", "|").map((sep) => row.join(sep)));
  const header = fc.oneof(fc.constantFrom(...headers), fc.string({ maxLength: 40 }));
  return fc
    .tuple(header, fc.array(line, { maxLength: 30 }), fc.constantFrom("\n", "\r\n"), fc.boolean())
    .map(([h, lines, eol, trailing]) => [h, ...lines].join(eol) + (trailing ? eol : ""));
}

/** The header of a SPECpower file with the columns the parser needs (the fuzzed rows then fill them). */
const SPEC_HEADER = SPECPOWER_COLUMNS.join("|");

/** A DAG-shaped JSON value with each field sometimes right, sometimes of the wrong type or out of range. */
const dagValue: fc.Arbitrary<unknown> = (() => {
  const names = fc.constantFrom("a", "b", "c", "a.b", "-", "../x", "", "x".repeat(65));
  const wild = fc.jsonValue({ maxDepth: 2 });
  const resources = fc.record(
    {
      vcores: fc.oneof(fc.double(), fc.integer({ min: -2, max: 64 }), wild),
      vcoresMilli: fc.oneof(fc.integer({ min: -2, max: 100_000 }), wild),
      memoryMb: fc.oneof(fc.integer({ min: -2, max: 1_000_000 }), fc.double(), wild),
    },
    { requiredKeys: [] },
  );
  const vertex = fc.record(
    {
      name: fc.oneof(names, wild),
      parallelism: fc.oneof(fc.integer({ min: -1, max: 5 }), fc.double(), fc.constant(1e12), wild),
      command: fc.oneof(fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 }), wild),
      resources: fc.oneof(resources, wild),
      env: fc.oneof(fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { maxKeys: 3 }), wild),
      extra: wild,
    },
    { requiredKeys: ["name", "parallelism", "command"] },
  );
  const edge = fc.record(
    { from: fc.oneof(names, wild), to: fc.oneof(names, wild), type: fc.oneof(fc.constantFrom(...EDGE_TYPES), wild) },
    { requiredKeys: [] },
  );
  return fc.oneof(
    fc.record(
      {
        name: fc.oneof(fc.string({ maxLength: 8 }), wild),
        priority: fc.oneof(fc.integer({ min: -1, max: 101 }), fc.double(), wild),
        vertices: fc.oneof(fc.array(vertex, { maxLength: 4 }), wild),
        edges: fc.oneof(fc.array(edge, { maxLength: 5 }), wild),
      },
      { requiredKeys: ["name", "vertices"] },
    ),
    wild,
  );
})();

/** A partial options object for a resolver: its own fields (from its defaults) set to random values, plus strays. */
function optionsFor(defaults: object): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(defaults);
  const value = fc.oneof(
    fc.jsonValue({ maxDepth: 2 }),
    fc.double(),
    fc.integer({ min: -10, max: 100_000 }),
    fc.constantFrom("", "auto", "none", "proc", "127.0.0.1", "::", "0.0.0.0:1", "/tmp", "a/b"),
  );
  const field = keys.length > 0 ? fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 10 })) : fc.string();
  return fc.dictionary(field, value, { maxKeys: 5 });
}

describe("fuzzing the parsers", () => {
  it("parses DAG files into a DAG that round-trips, or refuses them with a DAG code", () => {
    const text = fc.oneof(
      dagValue.map((v) => JSON.stringify(v)),
      fc.string({ maxLength: 200 }),
      dagValue.map((v) => JSON.stringify(v).slice(0, -1)),
    );
    fc.assert(
      fc.property(text, (json) =>
        parsesOrRefuses(
          "parseDag",
          () => parseDag(json, { maxParallelism: 1000 }),
          (dag) => {
            expect(topologicalOrder(dag)).toHaveLength(dag.vertices.length);
            expect(parseDag(dagToJson(dag), { maxParallelism: 1000 })).toEqual(dag);
          },
        ),
      ),
      fuzzParams(),
    );
  });

  it("validates DAG values built in code (not just parsed JSON) the same way", () => {
    fc.assert(
      fc.property(fc.oneof(dagValue, fc.anything()), (value) =>
        parsesOrRefuses("validateDag", () => validateDag(value)),
      ),
      fuzzParams(),
    );
  });

  it("reads utilization histories into a clean series, or names the bad line with TRACE_MALFORMED", () => {
    const nab = "timestamp,value";
    const bitbrains = "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%]";
    const format = fc.constantFrom<TraceFormat | undefined>(undefined, "csv", "nab", "bitbrains");
    fc.assert(
      fc.property(fc.oneof(csvishText([PLAIN_CSV_HEADER, nab], 2), csvishText([bitbrains], 5)), format, (text, fmt) =>
        parsesOrRefuses(
          "parseTraceText",
          () => parseTraceText(text, "fuzz.csv", fmt),
          ({ series }) => {
            expect(series.timesMs.length).toBe(series.cpuPct.length);
            expect(series.timesMs.length).toBeGreaterThan(0);
            for (let i = 1; i < series.timesMs.length; i++)
              expect(series.timesMs[i]!).toBeGreaterThan(series.timesMs[i - 1]!);
            for (const v of series.cpuPct) expect(v >= 0 && v <= 100).toBe(true);
          },
        ),
      ),
      fuzzParams(),
    );
  });

  it("reads reimage histories into records, or refuses them with TRACE_MALFORMED", () => {
    fc.assert(
      fc.property(csvishText([REIMAGE_CSV_HEADER], 2), (text) =>
        parsesOrRefuses(
          "parseReimageText",
          () => parseReimageText(text, "reimages.csv"),
          (records) => {
            for (const r of records) expect(Number.isFinite(r.atMs) && r.atMs >= 0).toBe(true);
          },
        ),
      ),
      fuzzParams(),
    );
  });

  it("reads Alibaba batch-task traces into jobs, or refuses them with a code", () => {
    fc.assert(
      fc.property(csvishText([""], 7), (text) =>
        parsesOrRefuses("parseAlibabaTasks", () => parseAlibabaTasks(text, "batch_task.csv")),
      ),
      fuzzParams(),
    );
  });

  it("normalizes DFS paths idempotently, or refuses them with DFS_BAD_PATH", () => {
    const path = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc
        .array(fc.constantFrom("", ".", "..", "a", "b c", "\u0000", "\u00e9", "x".repeat(256)), { maxLength: 6 })
        .map((parts) => "/" + parts.join("/")),
      fc.constant("/" + "a/".repeat(2100)),
    );
    fc.assert(
      fc.property(path, (p) =>
        parsesOrRefuses(
          "normalizeDfsPath",
          () => normalizeDfsPath(p),
          (norm) => {
            expect(norm.startsWith("/")).toBe(true);
            expect(normalizeDfsPath(norm)).toBe(norm);
            for (const part of pathComponents(norm)) expect(part === "" || part === "." || part === "..").toBe(false);
          },
        ),
      ),
      fuzzParams(),
    );
    expect(
      expectCodedError(
        catchError(() => normalizeDfsPath(undefined as unknown as string)),
        "undefined",
      ).code,
    ).toBe("DFS_BAD_PATH");
  });

  it("parses modes and application ids, or refuses them with INVALID_ARGUMENT", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 8 }), fc.stringMatching(/^[0-9]{1,6}$/)), (text) => {
        parsesOrRefuses(
          "parseMode",
          () => parseMode(text),
          (m) => expect(m >= 0 && m <= 0o7777).toBe(true),
        );
        parsesOrRefuses("parseAppId", () => parseAppId(text));
      }),
      fuzzParams(),
    );
  });

  it("validates power domain specs and options, or refuses them with a code", () => {
    const domainPath = fc.oneof(
      fc.string({ maxLength: 20 }),
      fc
        .array(fc.constantFrom("row1", "rack2", "", ".", "..", "a b", "x".repeat(65)), { maxLength: 10 })
        .map((s) => s.join("/")),
    );
    const config = fc.oneof(
      fc.record({
        domains: fc.oneof(
          fc.array(
            fc.record(
              {
                path: fc.oneof(domainPath, fc.jsonValue({ maxDepth: 1 })),
                budgetWatts: fc.oneof(fc.double(), fc.jsonValue({ maxDepth: 1 })),
              },
              { requiredKeys: [] },
            ),
            { maxLength: 5 },
          ),
          fc.jsonValue({ maxDepth: 1 }),
        ),
        nodes: fc.oneof(
          fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(domainPath, fc.jsonValue({ maxDepth: 1 })), {
            maxKeys: 4,
          }),
          fc.jsonValue({ maxDepth: 1 }),
        ),
      }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    fc.assert(
      fc.property(config, domainPath, optionsFor(resolvePowerDomainOptions()), (c, path, opts) => {
        parsesOrRefuses("validatePowerDomainConfig", () =>
          validatePowerDomainConfig(c as Parameters<typeof validatePowerDomainConfig>[0]),
        );
        parsesOrRefuses(
          "normalizeDomainPath",
          () => normalizeDomainPath(path),
          (norm) => expect(normalizeDomainPath(norm)).toBe(norm),
        );
        // A rack path always names some valid domain (racks come from node managers, never refused).
        expect(normalizeDomainPath(rackDomain(path))).toBe(rackDomain(path));
        parsesOrRefuses("resolvePowerDomainOptions", () => resolvePowerDomainOptions(opts));
      }),
      fuzzParams(),
    );
  });

  it("reads SPECpower files and profile names into valid profiles, or refuses them with a code", () => {
    const header = SPEC_HEADER;
    fc.assert(
      fc.property(
        csvishText([header], 16),
        fc.oneof(
          fc.string({ maxLength: 12 }),
          fc.constantFrom(...BUILTIN_POWER_PROFILES.map((p) => p.id), "spec:", "spec:0", "spec:x"),
        ),
        (text, name) => {
          parsesOrRefuses(
            "parseSpecPowerText",
            () => parseSpecPowerText(text, "spec.csv"),
            (profiles) => {
              for (const p of profiles) expect(powerProfileProblem(p)).toBeUndefined();
            },
          );
          parsesOrRefuses(
            "resolvePowerProfile",
            () => resolvePowerProfile(name),
            (p) => expect(powerProfileProblem(p)).toBeUndefined(),
          );
        },
      ),
      fuzzParams(),
    );
  });

  it("validates client configuration files, or refuses them with CONFIG_INVALID", () => {
    const config = fc.oneof(
      fc.record(
        {
          rmAddress: fc.oneof(
            fc.constantFrom("127.0.0.1:1", "[::1]:8030", "h:0", "h:65536", ":1", "h:"),
            fc.jsonValue(),
          ),
          nnAddress: fc.oneof(fc.string({ maxLength: 12 }), fc.jsonValue()),
          ca: fc.oneof(fc.string({ maxLength: 8 }), fc.jsonValue()),
          cert: fc.string({ maxLength: 8 }),
          key: fc.string({ maxLength: 8 }),
        },
        { requiredKeys: [] },
      ),
      fc.jsonValue({ maxDepth: 2 }),
    );
    fc.assert(
      fc.property(config, (raw) => {
        parsesOrRefuses("parseClientConfig", () => parseClientConfig(raw, "fuzz.json", "/tmp"));
        if (typeof raw === "string") parsesOrRefuses("clientConfigOf", () => clientConfigOf(raw));
      }),
      fuzzParams(),
    );
  });

  it("resolves every daemon's options, or refuses them with CONFIG_INVALID naming the field", () => {
    const dataDir = "/nonexistent/harvest-fuzz";
    const daemons = {
      resourcemanager: (o: Record<string, unknown>) => resolveResourceManagerOptions({ ...o, dataDir }),
      nodemanager: (o: Record<string, unknown>) =>
        resolveNodeManagerOptions({ nodeId: "n1", rmAddress: "127.0.0.1:1", ...o, dataDir }),
      namenode: (o: Record<string, unknown>) => resolveNameNodeOptions({ ...o, dataDir }),
      datanode: (o: Record<string, unknown>) =>
        resolveDataNodeOptions({ datanodeId: "d1", namenodeAddress: "127.0.0.1:1", ...o, dataDir }),
      tenantRegistry: (o: Record<string, unknown>) => resolveTenantRegistryOptions(o),
      blockKeys: (o: Record<string, unknown>) => resolveBlockKeyOptions(o),
    };
    for (const [name, resolve] of Object.entries(daemons)) {
      fc.assert(
        fc.property(optionsFor(resolve({})), (opts) => {
          parsesOrRefuses(`${name} options`, () => resolve(opts));
        }),
        fuzzParams(),
      );
    }
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 2 }), fc.boolean(), (tls, insecure) => {
        parsesOrRefuses("checkTlsOption", () => checkTlsOption("fuzz", tls));
        parsesOrRefuses("checkSecurityOptions", () =>
          checkSecurityOptions("fuzz", { tls, insecure } as unknown as Parameters<typeof checkSecurityOptions>[1]),
        );
        parsesOrRefuses("requireSecurityChoice", () =>
          requireSecurityChoice(
            "fuzz",
            (typeof tls === "object" && tls !== null ? tls : { tls }) as Record<string, unknown>,
          ),
        );
      }),
      fuzzParams(),
    );
  });

  // Bug (nodemanager/options.ts, resourcemanager/options.ts, resourcemanager/tenant-registry.ts, not ours to edit): an
  // option of the wrong type in a daemon's configuration file throws a TypeError instead of CONFIG_INVALID naming it.
  // Regression (found by this file): these threw a TypeError deep in the resolver; mergeOptions checks kinds first.
  it("refuses daemon options of the wrong type with CONFIG_INVALID", () => {
    const dataDir = "/nonexistent/harvest-fuzz";
    const cases: [string, () => unknown][] = [
      ...Object.keys(WRONG_KIND_OPTIONS["resourcemanager"]!).map((k): [string, () => unknown] => [
        `resourcemanager ${k}: null`,
        () => resolveResourceManagerOptions({ [k]: null, dataDir } as never),
      ]),
      ...Object.keys(WRONG_KIND_OPTIONS["nodemanager"]!).map((k): [string, () => unknown] => [
        `nodemanager ${k}: ${k === "powerDomain" ? "0" : "null"}`,
        () =>
          resolveNodeManagerOptions({
            nodeId: "n1",
            rmAddress: "127.0.0.1:1",
            [k]: k === "powerDomain" ? 0 : null,
            dataDir,
          } as never),
      ]),
      ...Object.keys(WRONG_KIND_OPTIONS["tenantRegistry"]!).map((k): [string, () => unknown] => [
        `tenant registry ${k}: null`,
        () => resolveTenantRegistryOptions({ [k]: null } as never),
      ]),
    ];
    for (const [what, fn] of cases) expect(expectCodedError(catchError(fn), what).code).toBe("CONFIG_INVALID");
  });

  // Regression (found by the service fuzzing): an error message with a lone surrogate or of 100 kB could not travel in
  // gRPC trailers, and the call was never answered. toServiceError now sends bounded, well-formed text.
  it("turns any error message into bounded, well-formed trailer text", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: "binary" }),
          fc.nat({ max: 200_000 }).map((n) => "\uD83D".repeat(n)),
        ),
        (m) => {
          const wire = toServiceError(new HarvestError("DAG_MALFORMED_JSON", m, { details: { field: m } }));
          expect(() => encodeURIComponent(wire.details!)).not.toThrow();
          expect(wire.details!.length).toBeLessThanOrEqual(2_003);
          expect(
            JSON.parse(wire.metadata!.get("harvest-details-bin")[0]!.toString())["field"].length,
          ).toBeLessThanOrEqual(515);
        },
      ),
      fuzzParams(),
    );
  });

  it("accepts only the container and AM tokens it signed, and never throws on a forged one", () => {
    const secret = "fuzz-secret";
    const fields = fc.record({
      containerId: fc.string({ maxLength: 10 }),
      appId: fc.string({ maxLength: 10 }),
      nodeId: fc.string({ maxLength: 10 }),
      resource: fc.record({ vcoresMilli: fc.integer(), memoryMb: fc.integer() }),
      jobPriority: fc.integer({ min: 0, max: 100 }),
      user: fc.string({ maxLength: 6 }),
    });
    const tamper = fc.tuple(fc.nat(), fc.constantFrom("0", "f", "g", "", ":", "\u0000"));
    fc.assert(
      fc.property(fields, fc.anything(), tamper, (f: TokenFields, junk, [at, ch]) => {
        const token = signContainer(secret, f);
        expect(verifyContainer(secret, f, token)).toBe(true);
        const forged = token.slice(0, at % 65) + ch + token.slice((at % 65) + 1);
        if (forged !== token) expect(verifyContainer(secret, f, forged)).toBe(false);
        if (typeof junk === "string") expect(verifyContainer(secret, f, junk)).toBe(false);
        expect(verifyAmToken(secret, junk, 0)).toBeUndefined();
        const am = {
          appId: f.appId.replace(/[^A-Za-z0-9_]/g, "") || "a",
          attempt: Math.abs(f.resource.memoryMb) % 1000,
          expiresMs: 1 + (at % 999_999_999_999),
        };
        const amToken = signAmToken(secret, am);
        expect(verifyAmToken(secret, amToken, 0)).toEqual(am);
        expect(verifyAmToken(secret, amToken, am.expiresMs)).toBeUndefined();
        const forgedAm = amToken.slice(0, at % amToken.length) + ch + amToken.slice((at % amToken.length) + 1);
        if (forgedAm !== amToken) expect(verifyAmToken(secret, forgedAm, 0)).toBeUndefined();
      }),
      fuzzParams(),
    );
  });

  it("verifies block and delegation tokens, refusing anything forged with a code (block) or undefined (delegation)", () => {
    const now = 1_700_000_000_000;
    const keys = new BlockKeyManager(() => now);
    const delegation = new DelegationTokens(Buffer.alloc(32, 7), 3_600_000);
    const access = fc.constantFrom<BlockAccess>("READ", "WRITE");
    const tokenText = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc
        .array(fc.oneof(fc.string({ maxLength: 12 }), fc.base64String({ maxLength: 40 })), { maxLength: 5 })
        .map((p) => p.join(".")),
    );
    fc.assert(
      fc.property(tokenText, fc.integer({ min: 0, max: 5 }), access, fc.nat(), (junk, blockId, mode, at) => {
        const token = keys.issue(blockId, mode, "alice");
        const keyMap = new Map(keys.keys().map((k) => [k.keyId, k]));
        expect(verifyBlockToken(token, keyMap, blockId, mode, now).blockId).toBe(blockId);
        const forged = token.slice(0, at % token.length) + "x" + token.slice((at % token.length) + 1);
        for (const t of [junk, forged].filter((t) => !sameToken(t, token))) {
          const err = catchError(() => verifyBlockToken(t, keyMap, blockId, mode, now));
          if (err !== undefined) expect(expectCodedError(err, "verifyBlockToken").code).toBe("DATANODE_BAD_TOKEN");
        }
        const { token: dt } = delegation.issue("alice", now);
        expect(delegation.verify(dt, now)?.owner).toBe("alice");
        expect(delegation.verify(junk, now)).toBeUndefined();
        const forgedDt = dt.slice(0, at % dt.length) + "x" + dt.slice((at % dt.length) + 1);
        if (!sameToken(forgedDt, dt)) expect(delegation.verify(forgedDt, now)).toBeUndefined();
      }),
      fuzzParams(),
    );
  });
});

/**
 * True when two dotted tokens carry the same bytes: base64url leaves the low bits of a last character unused, so one
 * token has several spellings (harmless: the signature bytes are what is checked).
 */
function sameToken(a: string, b: string): boolean {
  const pa = a.split(".");
  const pb = b.split(".");
  return (
    pa.length === pb.length && pa.every((p, i) => Buffer.from(p, "base64url").equals(Buffer.from(pb[i]!, "base64url")))
  );
}

/** The error `fn` throws, or undefined when it returns. */
function catchError(fn: () => unknown): unknown {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err;
  }
}

/**
 * Option fields whose resolver threw a TypeError for a value of the wrong type (found by this file): every
 * object-valued field given null, and the node manager's powerDomain given anything but a string.
 */
const WRONG_KIND_OPTIONS: Record<string, Record<string, (v: unknown) => boolean>> = {
  resourcemanager: Object.fromEntries(
    [
      "amResource",
      "jobManagerCommand",
      "classWeights",
      "jobTypes",
      "tenants",
      "lifetimes",
      "nodeChoiceOptions",
      "admissionOptions",
      "drain",
    ].map((k) => [k, (v: unknown) => v === null]),
  ),
  nodemanager: {
    capacity: (v) => v === null,
    capping: (v) => v === null,
    powerDomain: (v) => typeof v !== "string",
  },
  tenantRegistry: { classifier: (v) => v === null, criticality: (v) => v === null },
};
