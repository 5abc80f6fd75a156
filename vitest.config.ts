import { configDefaults, defineConfig } from "vitest/config";

/**
 * Unit tests that start processes and time them or measure the CPU they get (the throttlers, the primary monitor's
 * burner, the stall watch): they need the machine to themselves, so they run last, one file at a time.
 */
const CPU_MEASURING = [
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

/** Tests that replace a module with `vi.mock`: a shared module graph (isolate: false) would ignore their mocks. */
const MODULE_MOCKING = ["test/integration/cluster-port-race.test.ts"];

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
          exclude: [...configDefaults.exclude, ...CPU_MEASURING],
          maxWorkers: 2,
          // A worker runs its files one after another in one module graph, imported once (no test changes the
          // process's environment, timers or modules without restoring them).
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Real daemons and processes on loopback. They spend most of their time waiting (for heartbeats, expiries,
        // tasks that hold their containers), so two files run at a time, each with its own cluster and directories.
        test: {
          ...shared,
          name: "integration",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts", "test/fuzz/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...MODULE_MOCKING],
          maxWorkers: 2,
          isolate: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...shared,
          name: "serial",
          include: CPU_MEASURING,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
      {
        test: { ...shared, name: "isolated", include: MODULE_MOCKING, sequence: { groupOrder: 3 } },
      },
    ],
  },
});
