import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import {
  PowerModel,
  SEED_USAGE_FEATURES,
  fitNonNegative,
  resolvePowerModelOptions,
  solveNnlsGram,
  sumUsage,
} from "../../nodemanager/policy/power-model.js";
import type { EntityUsage, PowerEntity, UsageFeature } from "../../nodemanager/policy/power-model.js";
import { evaluatePowerModels, keplerDataDir, loadKeplerSamples } from "../../bench/powermodel.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

/** Watts per unit the synthetic server really draws. */
const TRUE_WATTS_PER_UNIT: Record<"cpuCores" | "memoryMb" | "diskBytesPerSec" | "netBytesPerSec", number> = {
  cpuCores: 9,
  memoryMb: 0.002,
  diskBytesPerSec: 4e-8,
  netBytesPerSec: 1.5e-7,
};

/** A random entity's usage: up to 8 cores, 16 GB, 200 MB/s of disk, 100 MB/s of network. */
function randomUsage(rng: SeededRng): EntityUsage {
  return {
    cpuCores: rng.next() * 8,
    memoryMb: rng.next() * 16_384,
    diskBytesPerSec: rng.next() < 0.5 ? 0 : rng.next() * 200e6,
    netBytesPerSec: rng.next() < 0.5 ? 0 : rng.next() * 100e6,
  };
}

function trueWatts(u: EntityUsage, perUnit: Partial<Record<UsageFeature, number>> = TRUE_WATTS_PER_UNIT): number {
  let w = 0;
  for (const [f, c] of Object.entries(perUnit)) w += c * (u[f as UsageFeature] ?? 0);
  return w;
}

/** A primary and 0..5 containers with random usage. */
function randomEntities(rng: SeededRng): PowerEntity[] {
  const n = 1 + rng.int(6);
  return Array.from({ length: n }, (_, i) => ({ id: i === 0 ? "primary" : `c${i}`, usage: randomUsage(rng) }));
}

describe("resolvePowerModelOptions", () => {
  it("fills the documented defaults", () => {
    expect(resolvePowerModelOptions()).toEqual({
      features: [...SEED_USAGE_FEATURES],
      windowSamples: 600,
      refitEverySamples: 30,
      minSamplesToFit: 20,
      ridge: 1e-6,
    });
  });

  it("names the field it rejects", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ features: [] }, "features"],
      [{ features: ["cpuCores", "gpuWatts"] }, "features"],
      [{ features: ["cpuCores", "cpuCores"] }, "features"],
      [{ windowSamples: 0 }, "windowSamples"],
      [{ refitEverySamples: -1 }, "refitEverySamples"],
      [{ minSamplesToFit: 700 }, "minSamplesToFit"],
      [{ ridge: -1 }, "ridge"],
    ];
    for (const [o, field] of bad) {
      const err = thrown(() => resolvePowerModelOptions(o));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(field);
    }
  });
});

describe("the power regression", () => {
  it("recovers the watts per unit of CPU, memory, disk and network from noisy server totals", () => {
    const rng = new SeededRng(7);
    const model = new PowerModel({ windowSamples: 600, refitEverySamples: 0 });
    for (let i = 0; i < 600; i++) {
      const usage = sumUsage(randomEntities(rng));
      model.observe({ timeMs: i * 1000, dynamicWatts: trueWatts(usage) + rng.normal(0, 3), usage });
    }
    expect(model.coefficients()).toBeUndefined();
    expect(model.refit()).toBe(true);
    const c = model.coefficients()!;
    for (const [f, w] of Object.entries(TRUE_WATTS_PER_UNIT))
      expect(Math.abs(c.wattsPerUnit[f as UsageFeature]! / w - 1)).toBeLessThan(0.05);
    expect(c.samples).toBe(600);
    expect(c.fittedAtMs).toBe(599_000);
    expect(c.rmseWatts).toBeGreaterThan(2);
    expect(c.rmseWatts).toBeLessThan(4);
  });

  it("never gives a feature negative watts, even where the data pulls it below zero", () => {
    const rng = new SeededRng(11);
    // Network traffic that "saves" power, and memory that only adds noise.
    const perUnit = { cpuCores: 10, netBytesPerSec: -2e-7 };
    const model = new PowerModel({ refitEverySamples: 0 });
    for (let i = 0; i < 400; i++) {
      const usage = sumUsage(randomEntities(rng));
      model.observe({ timeMs: i, dynamicWatts: trueWatts(usage, perUnit) + rng.normal(0, 5), usage });
    }
    model.refit();
    const c = model.coefficients()!.wattsPerUnit;
    for (const f of SEED_USAGE_FEATURES) expect(c[f]!).toBeGreaterThanOrEqual(0);
    expect(c.netBytesPerSec).toBe(0);
    expect(c.cpuCores!).toBeGreaterThan(5);
    for (let i = 0; i < 100; i++) expect(model.predictDynamicWatts(randomUsage(rng))).toBeGreaterThanOrEqual(0);
  });

  it("gives a feature that never varies no weight (the Kepler data has no disk or network)", () => {
    const rng = new SeededRng(3);
    const model = new PowerModel({ refitEverySamples: 0 });
    for (let i = 0; i < 100; i++) {
      const cores = rng.next() * 16;
      model.observe({ timeMs: i, dynamicWatts: 7 * cores, usage: { cpuCores: cores } });
    }
    model.refit();
    expect(model.coefficients()!.wattsPerUnit).toEqual({
      cpuCores: expect.closeTo(7, 4) as number,
      memoryMb: 0,
      diskBytesPerSec: 0,
      netBytesPerSec: 0,
    });
  });

  it("refits by itself every refitEverySamples once the window holds minSamplesToFit, and follows a change", () => {
    const model = new PowerModel({
      features: ["cpuCores"],
      windowSamples: 50,
      refitEverySamples: 10,
      minSamplesToFit: 20,
    });
    const feed = (from: number, to: number, wattsPerCore: number): void => {
      for (let i = from; i < to; i++) {
        const cores = 1 + (i % 7);
        model.observe({ timeMs: i, dynamicWatts: wattsPerCore * cores, usage: { cpuCores: cores } });
      }
    };
    feed(0, 19, 5);
    expect(model.coefficients()).toBeUndefined(); // the refit at 10 samples had too few
    feed(19, 20, 5);
    expect(model.coefficients()!.wattsPerUnit.cpuCores).toBeCloseTo(5, 4);
    // The server's frequency rises: after a full window of new samples, only the new behaviour is left.
    feed(20, 70, 8);
    expect(model.sampleCount).toBe(50);
    expect(model.coefficients()!.wattsPerUnit.cpuCores).toBeCloseTo(8, 4);
  });

  it("rejects a sample it cannot use", () => {
    const model = new PowerModel();
    expect(thrown(() => model.observe({ timeMs: 0, dynamicWatts: Number.NaN, usage: {} })).code).toBe(
      "INVALID_ARGUMENT",
    );
    const err = thrown(() => model.observe({ timeMs: 0, dynamicWatts: 1, usage: { cpuCores: -1 } }));
    expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("cpuCores");
    expect(model.sampleCount).toBe(0);
  });
});

describe("attribution of the dynamic power", () => {
  function fittedModel(): PowerModel {
    const rng = new SeededRng(5);
    const model = new PowerModel({ refitEverySamples: 0 });
    for (let i = 0; i < 300; i++) {
      const usage = sumUsage(randomEntities(rng));
      model.observe({ timeMs: i, dynamicWatts: trueWatts(usage) + rng.normal(0, 2), usage });
    }
    model.refit();
    return model;
  }

  it("splits a reading over the primary and the containers so that the shares sum to the dynamic power", () => {
    const model = fittedModel();
    const rng = new SeededRng(99);
    for (let trial = 0; trial < 50; trial++) {
      const entities = randomEntities(rng);
      const dynamicWatts = trueWatts(sumUsage(entities)) * (0.8 + 0.4 * rng.next());
      const a = model.attribute(entities, dynamicWatts);
      expect(a.basis).toBe("model");
      expect(a.entities.map((e) => e.id)).toEqual(entities.map((e) => e.id));
      const sum = a.entities.reduce((s, e) => s + e.watts, 0);
      expect(Math.abs(sum - dynamicWatts)).toBeLessThanOrEqual(1e-9 * dynamicWatts);
      for (const e of a.entities) {
        expect(e.watts).toBeGreaterThanOrEqual(0);
        // Proportional to the model's prediction.
        expect(e.watts / dynamicWatts).toBeCloseTo(e.predictedWatts / a.predictedWatts, 9);
      }
    }
  });

  it("gives an idle container nothing and a busier one more", () => {
    const model = fittedModel();
    const a = model.attribute(
      [
        { id: "primary", usage: { cpuCores: 4, memoryMb: 8000 } },
        { id: "busy", usage: { cpuCores: 8, memoryMb: 2000 } },
        { id: "idle", usage: {} },
      ],
      100,
    );
    const w = Object.fromEntries(a.entities.map((e) => [e.id, e.watts]));
    expect(w["idle"]).toBe(0);
    expect(w["busy"]!).toBeGreaterThan(w["primary"]!);
    expect(w["primary"]! + w["busy"]!).toBeCloseTo(100, 9);
  });

  it("falls back to CPU cores before a fit, then to an even split, and attributes noise below idle as zero", () => {
    const model = new PowerModel();
    const byCpu = model.attribute(
      [
        { id: "a", usage: { cpuCores: 1 } },
        { id: "b", usage: { cpuCores: 3 } },
      ],
      40,
    );
    expect(byCpu.basis).toBe("cpu");
    expect(byCpu.entities.map((e) => e.watts)).toEqual([10, 30]);
    const even = model.attribute(
      [
        { id: "a", usage: {} },
        { id: "b", usage: { memoryMb: 100 } },
      ],
      40,
    );
    expect(even.basis).toBe("even");
    expect(even.entities.map((e) => e.watts)).toEqual([20, 20]);
    const below = fittedModel().attribute([{ id: "a", usage: { cpuCores: 2 } }], -3);
    expect(below.dynamicWatts).toBe(0);
    expect(below.entities[0]!.watts).toBe(0);
    expect(model.attribute([], 50)).toEqual({ basis: "none", dynamicWatts: 50, predictedWatts: 0, entities: [] });
  });
});

describe("the NNLS solver", () => {
  it("solves a small problem with an active constraint", () => {
    // min 1/2 x'x - h'x with h = (1, -1): the unconstrained optimum (1, -1) is clipped to (1, 0).
    expect(
      Array.from(
        solveNnlsGram(
          [
            [1, 0],
            [0, 1],
          ],
          [1, -1],
        ),
      ),
    ).toEqual([1, 0]);
    // Correlated: G = [[2, 1], [1, 2]], h = (3, 0): unconstrained (2, -1); with x2 = 0, x1 = 1.5.
    const x = solveNnlsGram(
      [
        [2, 1],
        [1, 2],
      ],
      [3, 0],
    );
    expect(x[0]).toBeCloseTo(1.5, 12);
    expect(x[1]).toBe(0);
  });

  it("copes with exactly collinear features", () => {
    const rows = Array.from({ length: 30 }, (_, i) => [i, 2 * i]);
    const y = rows.map((r) => 6 * r[0]!);
    const c = fitNonNegative(rows, y, 0);
    expect(c[0]! + 2 * c[1]!).toBeCloseTo(6, 9);
    expect(Math.min(c[0]!, c[1]!)).toBeGreaterThanOrEqual(0);
  });
});

const keplerDir = keplerDataDir();

describe.skipIf(keplerDir === undefined)("the regression on the Kepler nx12 stress-ng data", () => {
  it("estimates whole-server watts on held-back time ranges within 8 % MAPE, better than CPU alone", () => {
    const samples = loadKeplerSamples(keplerDir!);
    expect(samples).toHaveLength(2175);
    const e = evaluatePowerModels(samples, { folds: 5, trainShare: 0.7, windowSamples: 600, refitEverySamples: 10 });
    const byName = Object.fromEntries(e.models.map((m) => [m.name, m]));
    const counters = byName["nnls-counters"]!;
    expect(counters.holdout.mapePct).toBeLessThan(8);
    expect(counters.kfoldPooled.mapePct).toBeLessThan(8);
    expect(counters.kfoldPooled.mapePct).toBeLessThan(byName["ols-cpu"]!.kfoldPooled.mapePct);
    expect(byName["nnls-seed"]!.kfoldPooled.mapePct).toBeLessThan(11);
    const online = e.online.find((o) => o.name === "online nnls-counters")!;
    expect(online.figures.mapePct).toBeLessThan(7);
    for (const c of Object.values(e.fullFit.wattsPerUnit)) expect(c).toBeGreaterThanOrEqual(0);
  });
});
