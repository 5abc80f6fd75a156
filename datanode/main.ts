/** Entry point of a datanode daemon: `node dist/datanode/main.js --config dn.json [--ready-file f]`. */
import { runDaemon } from "../common/daemon-main.js";
import { DataNode } from "./datanode.js";
import type { DataNodeOptionsInput } from "./options.js";

runDaemon("dn", (config) => new DataNode(config as DataNodeOptionsInput));
