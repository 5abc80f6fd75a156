import { defineConfig } from "vitest/config";

/**
 * Long tests, run by `npm run test:long` (and by CI after `npm test`), not by `npm test`: what does not fit in the
 * default suite's ten minutes (the validation testbed: a real cluster under two policies, then the simulator;
 * deployment, the multi-host cluster, the web UIs in a real browser, a short soak, and the slower integration tests).
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
