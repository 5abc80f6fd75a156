/**
 * JSON lines between a benchmark and its helper processes: the helper writes one JSON object per line on stdout and
 * reads one-word commands on stdin; the parent spawns it, sends commands and awaits messages by type.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/** A message from a helper: a JSON object with a `type`. */
export interface HelperMessage {
  type: string;
  [field: string]: unknown;
}

/** The parent's end: a spawned helper whose stdout carries JSON lines (stderr passes through). */
export class HelperProcess {
  private readonly child: ChildProcess;
  private readonly queue: HelperMessage[] = [];
  private waiter: (() => void) | undefined;
  private exitInfo: string | undefined;
  private readonly exited: Promise<void>;

  constructor(entry: string, args: readonly string[], execArgv: readonly string[] = []) {
    this.child = spawn(process.execPath, [...execArgv, entry, ...args], { stdio: ["pipe", "pipe", "inherit"] });
    const lines = createInterface({ input: this.child.stdout! });
    lines.on("line", (line) => {
      if (!line.startsWith("{")) return;
      try {
        this.queue.push(JSON.parse(line) as HelperMessage);
      } catch {
        return;
      }
      this.waiter?.();
    });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        this.exitInfo = `exited with code ${code ?? "-"}${signal ? `, signal ${signal}` : ""}`;
        this.waiter?.();
        resolve();
      });
      this.child.once("error", (err) => {
        this.exitInfo = `could not start: ${err.message}`;
        this.waiter?.();
        resolve();
      });
    });
  }

  /** The next message of `type` (earlier messages of other types are dropped); rejects on exit or timeout. */
  async next<T extends HelperMessage>(type: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.queue.length > 0) {
        const msg = this.queue.shift()!;
        if (msg.type === "error") throw new Error(`helper failed: ${String(msg["message"])}`);
        if (msg.type === type) return msg as T;
      }
      if (this.exitInfo) throw new Error(`helper ${this.exitInfo} before sending ${type}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`helper sent no ${type} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waiter = undefined;
    }
  }

  /** Sends one command line. */
  send(command: string): void {
    this.child.stdin?.write(command + "\n");
  }

  /** Waits for the helper to exit, killing it after `timeoutMs`. */
  async close(timeoutMs = 5_000): Promise<void> {
    if (this.exitInfo) return;
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** The helper's end: writes a message as one JSON line on stdout. */
export function emit(msg: HelperMessage): void {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

/** The helper's end: calls `onCommand` for every line on stdin and `onEnd` when the parent closes stdin. */
export function onCommands(onCommand: (command: string) => void, onEnd: () => void): void {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => onCommand(line.trim()));
  lines.on("close", onEnd);
}
