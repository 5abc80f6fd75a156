/**
 * A node manager's fencing of resource managers (nodemanager/rm-follower.ts): it acts on no answer of an older term
 * than one it heard, keeps the highest term across its own restarts, and still works with a resource manager that is
 * not highly available (term 0).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Logger } from "../../common/log.js";
import { RmChannel } from "../../nodemanager/rm-follower.js";
import type { RmToNodeOutput } from "../../proto/generated/harvest/v1/RmToNode.js";

const log = new Logger("test", "error");
const registered = (epoch: number) => ({ registered: { epoch } }) as unknown as RmToNodeOutput;
const ack = (epoch: number) => ({ ack: { epoch } }) as unknown as RmToNodeOutput;

describe("a node manager's resource-manager terms", () => {
  const dirs: string[] = [];
  const channel = (dir?: string): RmChannel => {
    const d = dir ?? mkdtempSync(join(tmpdir(), "harvest-rmf-"));
    dirs.push(d);
    return new RmChannel("127.0.0.1:1,127.0.0.1:2", undefined, d, log);
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("refuses registration and heartbeat answers of an older term than one it heard, and takes newer ones", () => {
    const c = channel();
    expect(c.accept(registered(7))).toBe(true);
    expect(c.epoch).toBe(7);
    expect(c.accept(ack(5))).toBe(false);
    expect(c.accept(registered(6))).toBe(false);
    expect(c.accept(ack(7))).toBe(true);
    expect(c.accept(registered(9))).toBe(true);
    expect(c.accept(ack(7))).toBe(false);
    expect(c.epoch).toBe(9);
  });

  it("keeps the highest term across a restart", () => {
    const first = channel();
    first.accept(registered(12));
    const again = channel(dirs[0]);
    expect(again.epoch).toBe(12);
    expect(again.accept(ack(11))).toBe(false);
  });

  it("accepts a resource manager that is not highly available (term 0) without forgetting the highest term", () => {
    const c = channel();
    c.accept(registered(4));
    expect(c.accept(registered(0))).toBe(true);
    expect(c.accept(ack(0))).toBe(true);
    expect(c.epoch).toBe(4);
  });
});
