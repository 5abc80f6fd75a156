import { configDefaults, defineConfig } from "vitest/config";

/**
 * Unit tests that start processes or measure CPU time: steadier with the machine to themselves, so they run with the
 * integration tests, one file at a time.
 */
const SERIAL_UNIT = [
  "test/unit/cgroup-cpu.test.ts",
  "test/unit/container-leftovers.test.ts",
  "test/unit/container-process.test.ts",
  "test/unit/example-tasks.test.ts",
  "test/unit/primary-monitor.test.ts",
  "test/unit/proc-stats.test.ts",
  "test/unit/run-as.test.ts",
  "test/unit/stall-watch.test.ts",
  "test/unit/throttler.test.ts",
];

const shared = { testTimeout: 60_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    reporters: ["default"],
    // The long tests run by `npm run test:long` (vitest.long.config.ts), not by `npm test`.
    projects: [
      {
        // Pure code (policies, parsers, the simulator): two files at a time, first.
        test: {
          ...shared,
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...SERIAL_UNIT],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Integration tests start real daemons and processes; on a 2-core machine they are steadier one file at a time.
        test: {
          ...shared,
          name: "serial",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts", "test/fuzz/**/*.test.ts", ...SERIAL_UNIT],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
