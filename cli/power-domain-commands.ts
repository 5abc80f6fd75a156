/** `harvest power domains` and `harvest power set-budget` (placeholder until the power-domain work lands). */
import type { Command } from "commander";

/** Adds `domains` and `set-budget` to the `power` command. */
export function registerPowerDomainCommands(_power: Command): void {}
