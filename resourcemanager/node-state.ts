/**
 * A node's lifecycle as the resource manager tracks it, as one transition table; node-tracker.ts routes every change
 * of a node's state through `NODE_MACHINE`:
 *
 *   RUNNING --expired--> LOST (no heartbeat within the expiry)
 *   RUNNING/LOST --registered--> RUNNING (its node manager registers again)
 *
 * A node's first registration creates it RUNNING.
 */
import { StateMachine } from "../common/state-machine.js";

/** The states of a tracked node. */
export type NodeState = "RUNNING" | "LOST";

/** What happens to a node. */
export type NodeEvent = "registered" | "expired";

/** The node's transitions; refusals are STATE_INVALID_TRANSITION (machine `node`). */
export const NODE_MACHINE = new StateMachine<NodeState, NodeEvent>(
  { name: "node", noun: "a node" },
  {
    RUNNING: { registered: "RUNNING", expired: "LOST" },
    LOST: { registered: "RUNNING" },
  },
);
