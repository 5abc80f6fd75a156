/** Entry point of a node manager daemon: `node dist/nodemanager/main.js --config nm.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { NodeManager } from "./node-manager.js";
import type { NodeManagerOptions } from "./options.js";

runDaemon(
  "nm",
  (config) =>
    new NodeManager(config as Partial<NodeManagerOptions> & { nodeId: string; rmAddress: string; dataDir: string }),
);
