// For the tests of what gateways with clocks off the database's decide (docs/operations.md,
// "Clocks"): this process is the gateway; the database keeps the real time.
import { vi } from "vitest";
import type { Harness } from "./app.ts";

/** This gateway's clock, `offsetMs` away from the real time (the database's), still running; vi.useRealTimers() sets it right. */
export function gatewayClock(offsetMs: number): void {
  vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
  vi.setSystemTime(new Date(Date.now() + offsetMs));
}

/** The database's now(), in ms. */
export async function databaseNow(h: Harness): Promise<number> {
  return (await h.db.prisma.$queryRaw<{ now: Date }[]>`SELECT now() AS now`)[0].now.getTime();
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
