/**
 * An RM container's lifecycle (the `ContainerRef` an application keeps for reports) as one transition table;
 * app-allocations.ts routes every change of a reference's state through `CONTAINER_MACHINE`:
 *
 *   ALLOCATED --launched--> RUNNING --ended--> COMPLETE
 *   ALLOCATED --ended--> COMPLETE (released, lost or expired before its node reported it running)
 *
 * A container adopted after a restart starts RUNNING (its node reports it running).
 */
import { StateMachine } from "../common/state-machine.js";

/** The states a container reference is in (`ContainerState` on the wire). */
export type RmContainerState = "ALLOCATED" | "RUNNING" | "COMPLETE";

/** What happens to a container. */
export type RmContainerEvent = "launched" | "ended";

/** The container's transitions; refusals are STATE_INVALID_TRANSITION (machine `container`). */
export const CONTAINER_MACHINE = new StateMachine<RmContainerState, RmContainerEvent>(
  { name: "container", noun: "a container" },
  {
    ALLOCATED: { launched: "RUNNING", ended: "COMPLETE" },
    RUNNING: { ended: "COMPLETE" },
    // Ended once: its cause and counts are recorded once.
    COMPLETE: {},
  },
);
