// This machine's clock against the database's (docs/operations.md, "Clocks"). Webhook signatures
// carry the sending worker's time, and receivers refuse one more than 5 minutes off; tokens carry
// the gateway's, and OpenID Connect clients refuse an id_token issued in the future. A machine
// whose clock drifted failed every delivery at every receiver, or every sign-in at every app,
// with nothing in linkgate's own logs to say why. Every gateway and worker shares one database,
// so its clock is the reference they are compared with.
import type { Database } from "./client.ts";

/** Past this, a process says its clock is off: a sixth of the 5 minutes receivers allow. */
export const CLOCK_OFF_MS = 50_000;

export type ClockReading = {
  /** This machine's clock minus the database's: positive when this machine is ahead. */
  offsetMs: number;
  /** Half the round trip: the reading is known only to within it. */
  uncertaintyMs: number;
};

/** One reading: the database's clock_timestamp() against the middle of the round trip that read it. */
export async function readClockOffset(db: Pick<Database, "prisma">, clock: () => number = Date.now): Promise<ClockReading> {
  const before = clock();
  const [row] = await db.prisma.$queryRaw<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
  const after = clock();
  return { offsetMs: Math.round((before + after) / 2 - Number(row.ms)), uncertaintyMs: Math.ceil((after - before) / 2) };
}

/** Whether a reading shows the clock off by more than CLOCK_OFF_MS, whatever the round trip hid. */
export function clockIsOff(r: ClockReading): boolean {
  return Math.abs(r.offsetMs) - r.uncertaintyMs > CLOCK_OFF_MS;
}

/** What an operator reads when the clock is off, and what it breaks (`breaks`, the caller's). */
export function clockOffMessage(r: ClockReading, breaks: string): string {
  const seconds = Math.round(Math.abs(r.offsetMs) / 1000);
  return `this machine's clock is ${seconds} s ${r.offsetMs > 0 ? "ahead of" : "behind"} the database's: ${breaks}; set its time (NTP)`;
}

type Warner = { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };

/**
 * Reads the clock now and on every check(), and says so once when it goes off and once when it
 * is back, so that a worker checking every minute does not repeat itself.
 */
export function watchClock(db: Pick<Database, "prisma">, log: Warner, breaks: string, clock: () => number = Date.now) {
  let off = false;
  return {
    async check(): Promise<ClockReading> {
      const reading = await readClockOffset(db, clock);
      const nowOff = clockIsOff(reading);
      if (nowOff && !off) log.warn({ clockOffsetMs: reading.offsetMs }, clockOffMessage(reading, breaks));
      if (!nowOff && off) log.info({ clockOffsetMs: reading.offsetMs }, "this machine's clock agrees with the database's again");
      off = nowOff;
      return reading;
    },
  };
}
