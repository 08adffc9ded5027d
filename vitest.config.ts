import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files run in parallel processes, each on its own databases (test/support/db.ts).
    pool: "forks",
    maxWorkers: 2,
    restoreMocks: true,
  },
});
