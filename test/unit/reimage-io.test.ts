import { describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { parseReimageText } from "../../common/reimage-io.js";

function lineOf(text: string): string | undefined {
  try {
    parseReimageText(text, "r.csv");
    return undefined;
  } catch (err) {
    expect(isHarvestError(err, "TRACE_MALFORMED")).toBe(true);
    return (err as { details: Record<string, string> }).details["line"];
  }
}

describe("reimage history files", () => {
  it("reads time_s,server rows into times in ms, in file order", () => {
    expect(parseReimageText("time_s,server\n100,s1\n50.5,s-2\n\n", "r.csv")).toEqual([
      { server: "s1", atMs: 100_000 },
      { server: "s-2", atMs: 50_500 },
    ]);
  });

  it("names the line of the first bad row, or the header", () => {
    expect(lineOf("")).toBe("1");
    expect(lineOf("time,server\n1,s1\n")).toBe("1");
    expect(lineOf("time_s,server\n1,s1\n2\n")).toBe("3");
    expect(lineOf("time_s,server\n1,s1\n-4,s2\n")).toBe("3");
    expect(lineOf("time_s,server\n1,s1\n\n2,s2\n")).toBe("3");
    expect(lineOf("time_s,server\n1,../etc\n")).toBe("2");
  });
});
