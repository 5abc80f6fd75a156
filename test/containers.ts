/**
 * Container specs for the tests that launch real container processes (container process, run-as, leftovers): task
 * containers of one made-up application, numbered in launch order, run as `account` in `workDir`.
 */
import type { ContainerSpec } from "../nodemanager/container.js";
import type { ContainerAccount } from "../nodemanager/run-as.js";

/** The application every test container belongs to. */
export const TEST_APP_ID = "application_1700000000000_0001";

let seq = 0;

/** A container id of `TEST_APP_ID`'s first attempt not handed out before in this test file. */
export function nextTestContainerId(): string {
  seq += 1;
  return `container_1700000000000_0001_01_${String(seq).padStart(6, "0")}`;
}

/** A task container (1 vcore, 256 MiB, no environment) running `argv`; `extra` overrides any field. */
export function testContainerSpec(
  containerId: string,
  argv: string[],
  account: ContainerAccount,
  workDir: string,
  extra: Partial<ContainerSpec> = {},
): ContainerSpec {
  return {
    containerId,
    appId: TEST_APP_ID,
    argv,
    env: {},
    vcoresMilli: 1000,
    memoryMb: 256,
    isAm: false,
    account,
    workDir,
    ...extra,
  };
}
