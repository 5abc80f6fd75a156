/** Entry point of the resource manager daemon: `node dist/resourcemanager/main.js --config rm.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { ResourceManagerDaemon } from "./ha-resource-manager.js";
import type { ResourceManagerOptions } from "./options.js";

// With haCoordination: a standby that campaigns to become the active one (ha-resource-manager.ts).
runDaemon("rm", (config) => new ResourceManagerDaemon(config as Partial<ResourceManagerOptions> & { dataDir: string }));
