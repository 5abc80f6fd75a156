import { describe, expect, it } from "vitest";
import { HarvestError } from "../../common/errors.js";
import { containerIdParts, formatAppId, formatContainerId, isContainerId, parseAppId } from "../../common/ids.js";

describe("application ids", () => {
  it("formats an id the way YARN does, with a zero-padded sequence", () => {
    expect(formatAppId(1700000000000, 7)).toBe("application_1700000000000_0007");
    expect(formatAppId(1700000000000, 12345)).toBe("application_1700000000000_12345");
  });

  it("parses an id back into its cluster timestamp and sequence", () => {
    expect(parseAppId("application_1700000000000_0007")).toEqual({
      clusterTs: 1700000000000,
      seq: 7,
    });
    expect(parseAppId("application_1700000000000_12345")).toEqual({
      clusterTs: 1700000000000,
      seq: 12345,
    });
  });

  it.each([
    ["a parent-directory escape", "../x"],
    ["the empty string", ""],
    ["a path with a slash", "application_1700000000000_0001/../../etc"],
    ["a path with a leading slash", "/application_1700000000000_0001"],
    ["a backslash path", "application_1700000000000_0001\\x"],
    ["a trailing newline", "application_1700000000000_0001\n"],
    ["surrounding spaces", " application_1700000000000_0001 "],
    ["a too-short sequence", "application_1700000000000_001"],
    ["a non-numeric timestamp", "application_abc_0001"],
    ["a container id", "container_1_0001_01_000001"],
  ])("rejects %s as an application id", (_what, id) => {
    let caught: unknown;
    try {
      parseAppId(id);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(HarvestError);
    expect((caught as HarvestError).code).toBe("INVALID_ARGUMENT");
    expect((caught as HarvestError).details).toEqual({ field: "appId" });
  });
});

describe("container ids", () => {
  it("formats an id with padded application sequence, attempt and container sequence", () => {
    expect(formatContainerId(1700000000000, 3, 1, 42)).toBe("container_1700000000000_0003_01_000042");
  });

  it("accepts the ids it formats", () => {
    expect(isContainerId(formatContainerId(1700000000000, 3, 1, 42))).toBe(true);
    expect(isContainerId(formatContainerId(0, 12345, 123, 1234567))).toBe(true);
  });

  it.each([
    "",
    "..",
    "../container_1700000000000_0003_01_000042",
    "container_1700000000000_0003_01_000042/..",
    "container_1700000000000_0003_01_000042/../../etc/passwd",
    "container_1700000000000_0003_01_000042\n",
    "container_1700000000000_0003_01_00004",
    "container_1700000000000_0003_1_000042",
    "application_1700000000000_0003",
    "CONTAINER_1700000000000_0003_01_000042",
  ])("rejects %j", (id) => {
    expect(isContainerId(id)).toBe(false);
  });
});

describe("container id parts", () => {
  it("reads back the epoch, job, attempt and number a container id was made from", () => {
    expect(containerIdParts(formatContainerId(1700000000123, 42, 3, 7))).toEqual({
      epoch: 1700000000123,
      appSeq: 42,
      attempt: 3,
      seq: 7,
    });
  });

  it("refuses what is not a container id", () => {
    for (const bad of ["", "container_1_0001_01", "container_x_0001_01_000001", "../container_1_0001_01_000001"])
      expect(containerIdParts(bad)).toBeUndefined();
  });
});
