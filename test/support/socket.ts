// A harness served on a real socket for a describe block's tests (what only the adapter does:
// socket addresses, how a body is framed, the headers it writes). Apart from app.ts, which
// benchmarks import outside vitest.
import { afterAll, beforeAll } from "vitest";
import { onSocket, startHarness, type Harness, type Socket } from "./app.ts";
import type { Backend } from "./db.ts";

/** A harness on `backend` served on a socket (onSocket), for the calling describe block's tests. */
export function harnessOnSocket(backend: Backend): { readonly h: Harness; readonly socket: Socket } {
  let h: Harness | undefined;
  let socket: Socket | undefined;
  beforeAll(async () => {
    h = await startHarness(backend);
    socket = await onSocket(h);
  });
  afterAll(async () => {
    await socket?.close();
    await h?.close();
  });
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error("the harness starts in beforeAll: use it in hooks and tests");
    return v;
  };
  return {
    get h() {
      return started(h);
    },
    get socket() {
      return started(socket);
    },
  };
}
