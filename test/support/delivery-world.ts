// What every file of delivery-worker tests sets up around its tests, on one backend: the file's
// own database (db.ts), and the workers and receivers a test starts, stopped after that test so
// that none claims, sends or answers during the next one. An error a worker logs through
// `logger` fails the test it happened in, even when the test's own assertions passed.
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { startWorker, type DeliveryWorker, type Logger, type WorkerOptions } from "../../src/delivery/worker.ts";
import { openTestDatabase, type Backend, type TestDatabase } from "./db.ts";
import { TestReceiver, type Behaviour } from "./receiver.ts";

export type LogLine = { level: "info" | "warn" | "error"; obj: Record<string, unknown>; msg?: string };

export type DeliveryWorld = {
  /** The file's database: open from the suite's beforeAll to its afterAll. */
  readonly db: TestDatabase;
  /** For the workers whose logs a test reads or must be free of errors. */
  readonly logger: Logger;
  /** What went through `logger` during the current test. */
  readonly logs: LogLine[];
  /** A worker on `db`, stopped after the test. */
  worker(opts: Omit<WorkerOptions, "db">): DeliveryWorker;
  /** A receiver, closed after the test. */
  receiver(fallback?: Behaviour): Promise<TestReceiver>;
  /** Closes `server` after the test, with the receivers. */
  closeAfterTest<T extends { close(): Promise<void> }>(server: T): T;
};

/**
 * Registers the hooks in the calling describe block. `afterTest` is the file's own clearing up
 * after each test; it runs once the test's workers have stopped, so none of them is still
 * recording into what it clears.
 */
export function deliveryWorld(backend: Backend, opts: { afterTest?: (db: TestDatabase) => Promise<void> } = {}): DeliveryWorld {
  let db: TestDatabase | undefined;
  const workers: DeliveryWorker[] = [];
  const servers: { close(): Promise<void> }[] = [];
  const logs: LogLine[] = [];
  const record = (level: LogLine["level"]) => (obj: object, msg?: string) => void logs.push({ level, obj: obj as Record<string, unknown>, msg });

  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });
  afterEach(async () => {
    // Workers first: a stopping worker still waits for its sends to be answered.
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await Promise.all(servers.splice(0).map((s) => s.close()));
    await opts.afterTest?.(world.db);
    const errors = logs.splice(0).filter((l) => l.level === "error");
    expect(errors, JSON.stringify(errors)).toEqual([]);
  });

  const world: DeliveryWorld = {
    get db() {
      if (!db) throw new Error("the test database opens in beforeAll: use it in hooks and tests");
      return db;
    },
    logger: { debug() {}, info: record("info"), warn: record("warn"), error: record("error") },
    logs,
    worker(o) {
      const w = startWorker({ db: world.db, ...o });
      workers.push(w);
      return w;
    },
    async receiver(fallback) {
      return world.closeAfterTest(await TestReceiver.start(fallback));
    },
    closeAfterTest(server) {
      servers.push(server);
      return server;
    },
  };
  return world;
}
