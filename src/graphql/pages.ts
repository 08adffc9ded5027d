// Page sizes and cursors of the Relay connections. Pothos would clamp a `first` over the bound
// to it; a client asking for more than it may have is told so instead (BAD_USER_INPUT), so that
// nobody reads a short page as the end of the list. A cursor is opaque to clients but not to
// whoever forges one: it must decode to something shaped like an id before it reaches SQL.
import { parsePrismaCursor } from "@pothos/plugin-prisma";
import { createGraphQLError } from "graphql-yoga";
import { isIdShaped } from "../ids.ts";

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 100;

export function badUserInput(message: string): Error {
  return createGraphQLError(message, { extensions: { code: "BAD_USER_INPUT" } });
}

function assertIdCursor(name: string, cursor: string): void {
  let id: unknown;
  try {
    id = parsePrismaCursor(cursor);
  } catch {
    throw badUserInput(`${name} is not a cursor from this list`);
  }
  if (typeof id !== "string" || !isIdShaped(id)) throw badUserInput(`${name} is not a cursor from this list`);
}

type PageArgs = { first?: number | null; last?: number | null; after?: string | null; before?: string | null };

/**
 * The `maxSize` of a connection whose cursor is the row's id, called with the page arguments
 * before Pothos reads them: refuses a `first` or `last` over MAX_PAGE and a forged cursor.
 */
export function boundedPage(args: PageArgs): number {
  for (const [name, size] of [
    ["first", args.first],
    ["last", args.last],
  ] as const) {
    if (size != null && size > MAX_PAGE) throw badUserInput(`${name} must be at most ${MAX_PAGE}`);
  }
  if (args.after != null) assertIdCursor("after", args.after);
  if (args.before != null) assertIdCursor("before", args.before);
  return MAX_PAGE;
}

/**
 * The `last` of a list that shows a record's latest rows (a delivery's attempt log): from 1 to
 * MAX_PAGE, else BAD_USER_INPUT; null (sent as such) is the field's default.
 */
export function boundedLast(last: number | null | undefined, byDefault: number): number {
  if (last == null) return byDefault;
  if (last < 1 || last > MAX_PAGE) throw badUserInput(`last must be between 1 and ${MAX_PAGE}`);
  return last;
}
