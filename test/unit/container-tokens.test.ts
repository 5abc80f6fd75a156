/** A container's token file as its job manager and tasks read it (common/task-contract.ts). */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readContainerTokens } from "../../common/task-contract.js";
import { DfsClient } from "../../client/dfs-client.js";
import { jobManagerOptionsFromEnv } from "../../jobmanager/job-manager.js";
import { thrown } from "../error-code.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-tokens-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The environment of a container whose token file holds `text`. */
function withFile(name: string, text: string): NodeJS.ProcessEnv {
  const file = join(dir, name);
  writeFileSync(file, text, { mode: 0o600 });
  return { HARVEST_TOKEN_FILE: file };
}

describe("readContainerTokens", () => {
  it("reads the tokens by kind, and none without a token file", () => {
    const env = withFile("good", JSON.stringify({ "am-token": "a1", "dfs-token": "d1.x.y" }));
    expect(readContainerTokens(env)).toEqual({ "am-token": "a1", "dfs-token": "d1.x.y" });
    expect(readContainerTokens({})).toEqual({});
  });

  it.each([
    ["missing", undefined, /ENOENT/],
    ["not JSON", "{", /JSON/],
    ["an array", "[]", /not a JSON object/],
    ["an unknown kind", '{"root-key":"x"}', /"root-key" is not a token kind/],
    ["a token that is not a string", '{"dfs-token":7}', /"dfs-token" is not a token kind with a string value/],
  ])("refuses a file that is %s, naming it", (name, text, why) => {
    const env = text === undefined ? { HARVEST_TOKEN_FILE: join(dir, "absent") } : withFile(name, text);
    expect(() => readContainerTokens(env)).toThrow(why);
    expect(() => readContainerTokens(env)).toThrow(env["HARVEST_TOKEN_FILE"]!);
  });

  it("gives the job manager and a task's DFS client a coded error for a bad file", () => {
    const env = { ...withFile("bad", "{"), HARVEST_NN_ADDRESS: "127.0.0.1:1" };
    expect(thrown(() => jobManagerOptionsFromEnv(env)).code).toBe("CONFIG_INVALID");
    expect(thrown(() => DfsClient.fromTaskEnv(env)).code).toBe("CONFIG_INVALID");
  });
});
