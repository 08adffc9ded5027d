import { defineConfig } from "vitest/config";

export default defineConfig({
  // graphql 16 ships CJS (main) and ESM (module) builds; Node loads the CJS one for Pothos and
  // yoga, so tests must too, or two copies of GraphQLObjectType meet in one schema.
  resolve: { alias: [{ find: /^graphql$/, replacement: "graphql/index.js" }] },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files run in parallel processes, each on its own databases (test/support/db.ts).
    pool: "forks",
    maxWorkers: 2,
    restoreMocks: true,
  },
});
