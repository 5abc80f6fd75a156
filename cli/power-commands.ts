/**
 * `harvest power ...`: power domains and their budgets on a running cluster (`domains`, `set-budget`), and the
 * oversubscription planner over a history of draws (`plan`, offline).
 */
import type { Command } from "commander";
import { registerPowerDomainCommands } from "./power-domain-commands.js";
import { registerPowerPlanCommand } from "./power-plan-command.js";

/** Adds `harvest power` and its subcommands to `program`. */
export function registerPowerCommands(program: Command): void {
  const power = program
    .command("power")
    .description("power domains, budgets and capping on a cluster; the oversubscription planner");
  registerPowerDomainCommands(power);
  registerPowerPlanCommand(power);
}
