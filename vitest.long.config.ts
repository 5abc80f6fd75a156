import { defineConfig } from "vitest/config";

/**
 * Long tests, run by `npm run test:long`, not by `npm test`: end-to-end runs of experiments whose size cannot shrink
 * below what keeps the default suite under ten minutes (the validation testbed: a real cluster under two policies, then
 * the simulator).
 */
export default defineConfig({
  test: {
    include: ["test/long/**/*.test.ts"],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    reporters: ["default"],
  },
});
