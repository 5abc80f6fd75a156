#!/usr/bin/env node
/**
 * The `harvest` command's entry. A command that moves file data (`fs put`, `get`, `cat`) started without glibc's malloc
 * setting (localcluster/malloc-tunables.ts) or the data client's Node options (localcluster/node-options.ts) runs again with them, before
 * the commands are loaded, so that the second start costs a bare Node start, not the whole CLI's. Everything else is
 * cli/harvest-cli.ts.
 */
import { dataCommandRestartEnv, isDataCommand, runAgain } from "../localcluster/malloc-tunables.js";
import { missingClientNodeOptions } from "../localcluster/node-options.js";

const restartEnv = dataCommandRestartEnv(process.argv);
const nodeOptions = isDataCommand(process.argv) ? missingClientNodeOptions() : [];
if (restartEnv || nodeOptions.length > 0) runAgain(restartEnv ?? process.env, nodeOptions);
else await import("./harvest-cli.js");
