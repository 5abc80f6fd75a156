/** Entry point of the resource manager daemon: `node dist/resourcemanager/main.js --config rm.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { ResourceManager } from "./resource-manager.js";
import type { ResourceManagerOptions } from "./options.js";

runDaemon("rm", (config) => new ResourceManager(config as Partial<ResourceManagerOptions> & { dataDir: string }));
