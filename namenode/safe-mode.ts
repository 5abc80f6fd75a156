/**
 * The namenode's safe mode: after a start, mutations are refused until enough committed blocks are reported by the
 * datanodes (`safeModeThreshold`), and for `safeModeExtensionMs` after that; reads are answered throughout.
 */
import type { Clock } from "../common/clock.js";
import { HarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { SafeModeStatusOutput } from "../proto/generated/harvest/v1/SafeModeStatus.js";
import type { BlockManager } from "./block-manager.js";
import type { NameNodeOptions } from "./options.js";

/** Safe mode, left once and for all when enough blocks are reported. */
export class SafeMode {
  /** True while mutations are refused. */
  private onValue = true;
  private reachedMs: number | undefined;

  constructor(
    private readonly options: NameNodeOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly blocks: Pick<BlockManager, "reportedCounts">,
  ) {}

  /** True while mutations are refused (after a start, until enough blocks are reported). */
  get on(): boolean {
    return this.onValue;
  }

  /** Leaves safe mode once enough blocks are reported and the extension has passed. */
  check(): void {
    if (!this.on) return;
    const { total, reported } = this.blocks.reportedCounts();
    if (total > 0 && reported / total < this.options.safeModeThreshold) {
      this.reachedMs = undefined;
      return;
    }
    const now = this.clock.nowMs();
    this.reachedMs ??= now;
    if (now - this.reachedMs < this.options.safeModeExtensionMs) return;
    this.onValue = false;
    this.log.info("leaving safe mode", { blocksTotal: total, blocksReported: reported });
  }

  /** Throws NAMENODE_SAFE_MODE while mutations are refused. */
  checkWritable(): void {
    if (!this.on) return;
    const { total, reported } = this.blocks.reportedCounts();
    throw new HarvestError(
      "NAMENODE_SAFE_MODE",
      `the namenode is in safe mode: ${reported} of ${total} blocks reported, ` +
        `${Math.ceil(total * this.options.safeModeThreshold)} needed (threshold ${this.options.safeModeThreshold}); ` +
        "retry once the datanodes have reported",
      { details: { blocksReported: String(reported), blocksTotal: String(total) } },
    );
  }

  /** GetSafeMode's answer. */
  status(): SafeModeStatusOutput {
    const { total, reported } = this.blocks.reportedCounts();
    return {
      on: this.on,
      blocksTotal: total,
      blocksReported: reported,
      threshold: this.options.safeModeThreshold,
      reason: this.on ? `${reported} of ${total} blocks reported` : "",
    };
  }
}
