// Descriptions of the types a Relay connection makes for itself (its page and its edge), given
// after a connection field's own options. PageInfo, `cursor`, `node` and the page arguments are
// described once for all connections, in root.ts.

/**
 * Whether a page's cursor names a row its list holds (`holds` counts the rows of the list with
 * that id), or there is none. Prisma places a page after a cursor by finding the cursor's row
 * by id alone, outside the page's `where`: another project's id, put in a forged cursor, placed
 * the page and so told whether that id exists and when it was made (22nd review). A cursor the
 * list does not hold names no row: the page is empty, as for an id that does not exist.
 */
export async function cursorHeld(query: { cursor?: { id?: string } }, holds: (id: string) => Promise<number>): Promise<boolean> {
  const id = query.cursor?.id;
  return id === undefined || (await holds(id)) > 0;
}

/** `[connection options, edge options]` for a connection of `list` whose items are `item`s. */
export function pageOf(list: string, item: string) {
  return [
    { description: `A page of ${list}.` },
    { description: `${item}, with its place in the list.` },
  ] as const;
}
