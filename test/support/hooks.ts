// What a describe block starts in beforeAll and stops in afterAll, named where the block is
// declared, before it has started: a test file then says once what it runs against, instead of a
// `let`, two hooks and an assignment in each. No benchmark imports this (it needs vitest).
import { afterAll, beforeAll } from "vitest";
import { startHarness, type Harness } from "./app.ts";
import type { Backend } from "./db.ts";

/**
 * Registers `start` in the calling describe block's beforeAll and `stop` in its afterAll (only
 * when it started); the function returned gives what started, to hooks and tests.
 */
export function startedForBlock<T>(start: () => Promise<T>, stop: (started: T) => Promise<void>): () => T {
  let started: T | undefined;
  beforeAll(async () => {
    started = await start();
  });
  afterAll(async () => {
    if (started !== undefined) await stop(started);
  });
  return () => {
    if (started === undefined) throw new Error("started in beforeAll: use it in hooks and tests");
    return started;
  };
}

/**
 * A stand-in for what `get` gives, that a describe block can name and pass before there is
 * anything to give: each member read goes to the real one, and its methods run on it. Not for
 * what is looked up by identity (an openid-client Configuration keeps its state in a WeakMap).
 */
export function standIn<T extends object>(get: () => T): T {
  return new Proxy({} as T, {
    get(_, key) {
      const target = get();
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
    has: (_, key) => Reflect.has(get(), key),
    // spreading, toEqual and JSON.stringify see the real one's own members
    ownKeys: () => Reflect.ownKeys(get()),
    getOwnPropertyDescriptor(_, key) {
      const own = Reflect.getOwnPropertyDescriptor(get(), key);
      return own && { ...own, configurable: true };
    },
  });
}

/** A harness on `backend` (startHarness) for the calling describe block's tests. */
export function harnessFor(backend: Backend, opts?: Parameters<typeof startHarness>[1]): Harness {
  return standIn(startedForBlock(() => startHarness(backend, opts), (h) => h.close()));
}
