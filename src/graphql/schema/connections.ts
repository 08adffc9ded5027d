// Descriptions of the types a Relay connection makes for itself (its page and its edge), given
// after a connection field's own options. PageInfo, `cursor`, `node` and the page arguments are
// described once for all connections, in root.ts.

/** `[connection options, edge options]` for a connection of `list` whose items are `item`s. */
export function pageOf(list: string, item: string) {
  return [
    { description: `A page of ${list}.` },
    { description: `${item}, with its place in the list.` },
  ] as const;
}
