import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The long tests run by `npm run test:long` (vitest.long.config.ts), not by `npm test`.
    exclude: [...configDefaults.exclude, "test/long/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real daemons and processes; on a 2-core machine they are steadier one file at a time.
    fileParallelism: false,
    reporters: ["default"],
  },
});
