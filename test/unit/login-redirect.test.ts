/** Where the web UIs' `/login` sends a browser: only to a path on the same daemon, read as a browser reads it. */
import { describe, expect, it } from "vitest";
import { loginRedirectTarget } from "../../common/web-server.js";

describe("loginRedirectTarget", () => {
  it("keeps a path on this daemon, with its query and fragment", () => {
    expect(loginRedirectTarget("/jobs")).toBe("/jobs");
    expect(loginRedirectTarget("/jobs/application_1_0001?tab=tasks#t3")).toBe("/jobs/application_1_0001?tab=tasks#t3");
    expect(loginRedirectTarget(null)).toBe("/");
  });

  it("sends to / whatever a browser would read as another host or scheme", () => {
    for (const next of [
      "//evil.example",
      "/\\evil.example",
      "\\\\evil.example",
      "/\t/evil.example",
      "/\n/evil.example",
      "/.//evil.example",
      "/a/../..//evil.example",
      "https://evil.example/",
      "javascript:alert(1)",
      "evil.example",
      "",
    ])
      expect(loginRedirectTarget(next), JSON.stringify(next)).toBe("/");
  });

  it("sends back the parsed path, percent-encoded: no header can be split", () => {
    const target = loginRedirectTarget("/jobs\r\nSet-Cookie: x=1");
    expect(target).not.toMatch(/[\r\n]/);
    expect(target.startsWith("/jobs")).toBe(true);
  });
});
