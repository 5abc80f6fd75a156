/** The logger (common/log.ts): JSON lines or text lines on pino, levels, children, one sink call per event. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { Logger, logFormatFromEnv, logLevelFromEnv } from "../../common/log.js";

/** A regular expression for the text line (time, level, [component], message, fields) that tools reading logs rely on. */
const TESTBED_LOG_LINE = /^(\S+) +[A-Z]+ +\[[^\]]*\] (.*?)(?: (\{.*\}))?$/;

function capture(level?: "debug" | "info" | "warn" | "error"): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: new Logger("rm", level, (l) => lines.push(l)), lines };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("the logger in JSON mode (HARVEST_LOG_FORMAT=json)", () => {
  it("writes one parseable JSON line per event with level, time, component, msg and the fields", () => {
    vi.stubEnv("HARVEST_LOG_FORMAT", "json");
    const { log, lines } = capture("info");
    log.info("node registered", { nodeId: "server-1", vcoresMilli: 4000, skipped: undefined });
    log.warn("no fields");
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(first).toEqual({
      level: "info",
      time: expect.any(String) as unknown,
      component: "rm",
      msg: "node registered",
      nodeId: "server-1",
      vcoresMilli: 4000,
    });
    expect(new Date(first["time"] as string).toISOString()).toBe(first["time"]);
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: "warn", component: "rm", msg: "no fields" });
    for (const l of lines) expect(l.endsWith("\n")).toBe(false);
  });

  it("keeps fields named like the line's own keys under a leading underscore", () => {
    vi.stubEnv("HARVEST_LOG_FORMAT", "json");
    const { log, lines } = capture("info");
    log.info("clash", { msg: "mine", level: 3, component: "x", time: 1 });
    const o = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(o).toMatchObject({ msg: "clash", level: "info", component: "rm", _msg: "mine", _level: 3, _time: 1 });
    expect(o["_component"]).toBe("x");
  });

  it("names a child logger <component>/<child> and shares its level and sink", () => {
    vi.stubEnv("HARVEST_LOG_FORMAT", "json");
    const { log, lines } = capture("warn");
    const child = log.child("scheduler").child("nilas");
    child.info("filtered out");
    child.error("placement failed", { appId: "application_1_0001" });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: "error",
      component: "rm/scheduler/nilas",
      appId: "application_1_0001",
    });
  });
});

describe("the logger in text mode (the default)", () => {
  it("writes the historical line that tools parse: time, padded level, [component], message, fields", () => {
    vi.stubEnv("HARVEST_LOG_FORMAT", "");
    const { log, lines } = capture("debug");
    log.info("cpu limits", { mode: "v2", detail: "cpu.max" });
    log.debug("tick");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO  \[rm\] cpu limits \{"mode":"v2","detail":"cpu\.max"\}$/,
    );
    expect(lines[1]).toMatch(/^\S+ DEBUG \[rm\] tick$/);
    const m = TESTBED_LOG_LINE.exec(lines[0]!);
    expect(m?.[2]).toBe("cpu limits");
    expect(JSON.parse(m?.[3] ?? "null")).toEqual({ mode: "v2", detail: "cpu.max" });
    expect(Number.isFinite(Date.parse(m?.[1] ?? ""))).toBe(true);
  });

  it("treats HARVEST_LOG_FORMAT=pretty as text", () => {
    vi.stubEnv("HARVEST_LOG_FORMAT", "pretty");
    const { log, lines } = capture("info");
    log.error("kept unfinished replicas", { replicas: 2 });
    expect(lines[0]).toMatch(/ ERROR \[rm\] kept unfinished replicas \{"replicas":2\}$/);
  });

  it("drops events below its level and reads the level from HARVEST_LOG_LEVEL by default", () => {
    vi.stubEnv("HARVEST_LOG_LEVEL", "warn");
    const { log, lines } = capture();
    log.debug("a");
    log.info("b");
    log.warn("c");
    log.error("d");
    expect(lines.map((l) => l.split(" ").slice(1).filter(Boolean).slice(0, 3).join(" "))).toEqual([
      "WARN [rm] c",
      "ERROR [rm] d",
    ]);
  });

  it("serializes what JSON.stringify cannot: bigints and circular references", () => {
    const { log, lines } = capture("info");
    const loop: Record<string, unknown> = { name: "loop" };
    loop["self"] = loop;
    log.info("odd fields", { big: 10n, loop });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('"big":10');
    expect(lines[0]).toContain('"self":"[Circular]"');
  });
});

describe("the environment variables", () => {
  it("choose JSON only for HARVEST_LOG_FORMAT=json and fall back to info for an unknown level", () => {
    expect(logFormatFromEnv({ HARVEST_LOG_FORMAT: "json" })).toBe("json");
    expect(logFormatFromEnv({ HARVEST_LOG_FORMAT: "JSON " })).toBe("json");
    expect(logFormatFromEnv({ HARVEST_LOG_FORMAT: "pretty" })).toBe("text");
    expect(logFormatFromEnv({})).toBe("text");
    expect(logLevelFromEnv({ HARVEST_LOG_LEVEL: "debug" })).toBe("debug");
    expect(logLevelFromEnv({ HARVEST_LOG_LEVEL: "verbose" })).toBe("info");
    expect(logLevelFromEnv({})).toBe("info");
  });
});
