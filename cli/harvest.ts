#!/usr/bin/env node
/**
 * The `harvest` command's entry. A command that moves file data (`fs put`, `get`, `cat`) started without glibc's malloc
 * setting runs again with it (cli/malloc-tunables.ts), before the commands are loaded, so that the second start costs
 * a bare Node start, not the whole CLI's. Everything else is cli/harvest-cli.ts.
 */
import { dataCommandRestartEnv, runAgain } from "./malloc-tunables.js";

const restartEnv = dataCommandRestartEnv(process.argv);
if (restartEnv) runAgain(restartEnv);
else await import("./harvest-cli.js");
