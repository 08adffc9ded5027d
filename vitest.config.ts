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
    // Each worker process keeps its modules from one file to the next: importing the app (Prisma's
    // client, the GraphQL schema, PGlite) for every file took 112 s of the suite's 475 s on this
    // kind of machine, 11 s without. Every app, database and receiver is made by the file that
    // uses it; the state modules keep for the process (the metrics counters, the fast path's
    // statement registry) is read by tests only as a change within one test, or per label.
    isolate: false,
    restoreMocks: true,
    // How long expect.poll waits for its condition, which it checks every 50 ms and passes as soon
    // as it holds. Vitest's default of 1 s failed a browser flow (a page waiting on the gateway)
    // while the rest of the suite kept both cores busy.
    expect: { poll: { timeout: 15_000 } },
  },
});
