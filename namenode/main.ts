/** Entry point of the namenode daemon: `node dist/namenode/main.js --config nn.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { NameNode } from "./namenode.js";
import type { NameNodeOptions } from "./options.js";

runDaemon("nn", (config) => new NameNode(config as Partial<NameNodeOptions> & { dataDir: string }));
