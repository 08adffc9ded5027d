// Parsers for command-line values. Each throws commander's InvalidArgumentError, which commander
// turns into a one-line usage error (exit code 2) naming the option.
import { InvalidArgumentError } from "commander";
import { projectName } from "../auth/projects.ts";
import { InvalidRequest } from "../errors.ts";
import { isIdShaped, type IdPrefix } from "../ids.ts";

const DURATION = /^(\d{1,6})(s|m|h|d|w)$/;
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
// A date, or a date-time that names its zone: a zone-less time would silently mean the local
// time of whichever machine runs the command.
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** `--since`: an ISO 8601 time with a zone, a date (UTC midnight), or a duration back from now. */
export function parseSince(value: string, now: () => number = Date.now): Date {
  const v = value.trim();
  const duration = DURATION.exec(v);
  const at = duration ? new Date(now() - Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS]) : dateOf(v);
  // a day that does not exist (2026-02-31 rolled over to March 3) or a time the database cannot
  // hold (999999w back, year 0) was taken, and the second failed in the database (fourteenth review)
  if (at && at.getUTCFullYear() >= 1 && at.getUTCFullYear() <= 9999) return at;
  throw new InvalidArgumentError("Use a time with a zone (2026-11-20T09:30:00Z), a date (2026-11-20, UTC) or a duration back from now (90m, 24h, 7d), from the years 1 to 9999");
}

function dateOf(v: string): Date | null {
  if (!ISO_DATE.test(v) && !ISO_DATE_TIME.test(v)) return null;
  const at = new Date(ISO_DATE.test(v) ? `${v}T00:00:00Z` : v);
  if (Number.isNaN(at.getTime())) return null;
  // the calendar day as written, in the zone written: what the date rolled over to is another day
  const [, y, m, d] = /^(\d{4})-(\d{2})-(\d{2})/.exec(v)!;
  const zone = /(Z|[+-]\d{2}:\d{2})$/.exec(v)?.[1] ?? "Z";
  const offsetMs = zone === "Z" ? 0 : (zone[0] === "-" ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  const local = new Date(at.getTime() + offsetMs);
  const sameDay = local.getUTCFullYear() === Number(y) && local.getUTCMonth() + 1 === Number(m) && local.getUTCDate() === Number(d);
  return sameDay ? at : null;
}

/** A project name by createProject's own rule (projectName), refused as a usage error before any database is opened. */
export function parseProjectName(value: string): string {
  try {
    return projectName(value);
  } catch (err) {
    throw err instanceof InvalidRequest ? new InvalidArgumentError(err.message) : err;
  }
}

/** An id with the given prefix (`prj`, `key`, `wh`): catches a project id passed as a key id. */
export function idOf(prefix: IdPrefix): (value: string) => string {
  return (value) => {
    if (!isIdShaped(value, prefix)) throw new InvalidArgumentError(`Expected an id like ${prefix}_…`);
    return value;
  };
}

export function parsePositiveInt(max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < 1 || n > max) throw new InvalidArgumentError(`Expected a whole number from 1 to ${max}`);
    return n;
  };
}
