/** Entry point of the resource manager daemon: `node dist/resourcemanager/main.js --config rm.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { HaResourceManager } from "./ha-resource-manager.js";
import { ResourceManager } from "./resource-manager.js";
import type { ResourceManagerOptions } from "./options.js";

runDaemon("rm", (config) => {
  const options = config as Partial<ResourceManagerOptions> & { dataDir: string };
  // With a coordination service: a standby that campaigns to become the active one (ha-resource-manager.ts).
  return options.haCoordination ? new HaResourceManager(options) : new ResourceManager(options);
});
