/** Small shared types of the resource manager. */

/** How a job ended (the wire enum's names). */
export type JobOutcome = "JOB_OUTCOME_UNSPECIFIED" | "JOB_SUCCEEDED" | "JOB_FAILED" | "JOB_KILLED";
