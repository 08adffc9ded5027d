// A machine whose clock is off the database's says so (docs/operations.md, "Clocks"): a worker
// signs webhooks with its own time, which receivers refuse more than 5 minutes off, and before
// this nothing in linkgate's logs said why every delivery failed.
import { describe, expect, it } from "vitest";
import { CLOCK_OFF_MS, clockIsOff, clockOffMessage, readClockOffset } from "../src/db/clock.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { eventually, newMasterKey } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [1_000], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };
const MINUTES = 60_000;

describe.each(backends)("the clock check, on %s", (backend) => {
  const world = deliveryWorld(backend);

  it("reads this machine's clock against the database's, to within half a round trip", async () => {
    const inStep = await readClockOffset(world.db);
    // the database runs on this machine: the same clock
    expect(Math.abs(inStep.offsetMs)).toBeLessThanOrEqual(inStep.uncertaintyMs + 5);
    expect(clockIsOff(inStep)).toBe(false);

    const behind = await readClockOffset(world.db, () => Date.now() - 3 * MINUTES);
    expect(Math.abs(behind.offsetMs + 3 * MINUTES)).toBeLessThanOrEqual(behind.uncertaintyMs + 5);
    expect(clockIsOff(behind)).toBe(true);
    expect(clockOffMessage(behind, "it matters")).toMatch(/^this machine's clock is 180 s behind the database's: it matters; /);
    expect(clockIsOff(await readClockOffset(world.db, () => Date.now() + CLOCK_OFF_MS / 2))).toBe(false);
  });

  it("a worker whose clock is off warns once, however often it checks, and says when it agrees again", async () => {
    let skew = 2 * MINUTES;
    let reads = 0;
    const clock = () => (reads++, Date.now() + skew);
    world.worker({ config: CONFIG, masterKey: newMasterKey(), logger: world.logger, maintenanceIntervalMs: 20, clock });
    const warned = () => world.logs.filter((l) => l.level === "warn" && /clock/.test(l.msg ?? ""));
    await eventually(async () => warned().length > 0, 10_000, "the clock warning");
    expect(warned()[0].msg).toMatch(/120 s ahead of the database's: webhook signatures carry this worker's time/);
    // five more checks (two clock reads each) say nothing more
    const seen = reads;
    await eventually(async () => reads >= seen + 10, 10_000, "five more checks");
    expect(warned()).toHaveLength(1);

    skew = 0;
    await eventually(async () => world.logs.some((l) => l.level === "info" && /agrees with the database's again/.test(l.msg ?? "")), 10_000, "the all-clear");
    expect(warned()).toHaveLength(1);
  });

  it("a worker whose clock agrees says nothing of it", async () => {
    let reads = 0;
    const clock = () => (reads++, Date.now());
    world.worker({ config: CONFIG, masterKey: newMasterKey(), logger: world.logger, maintenanceIntervalMs: 20, clock });
    await eventually(async () => reads >= 10, 10_000, "five checks");
    expect(world.logs.filter((l) => /clock/.test(l.msg ?? ""))).toEqual([]);
  });
});
