// Page sizes of the Relay connections. Pothos would clamp a `first` over the bound to it; a
// client asking for more than it may have is told so instead (BAD_USER_INPUT), so that nobody
// reads a short page as the end of the list.
import { createGraphQLError } from "graphql-yoga";

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 100;

export function badUserInput(message: string): Error {
  return createGraphQLError(message, { extensions: { code: "BAD_USER_INPUT" } });
}

/** The `maxSize` of a connection: refuses a `first` or `last` over MAX_PAGE. */
export function boundedPage(args: { first?: number | null; last?: number | null }): number {
  for (const [name, size] of [
    ["first", args.first],
    ["last", args.last],
  ] as const) {
    if (size != null && size > MAX_PAGE) throw badUserInput(`${name} must be at most ${MAX_PAGE}`);
  }
  return MAX_PAGE;
}
