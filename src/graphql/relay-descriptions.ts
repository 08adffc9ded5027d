// The relay plugin makes PageInfo, every edge's `cursor` and the page arguments itself, and takes
// their descriptions from its builder options only: they are given to the builder here.
export const RELAY_DESCRIPTIONS = {
  pageInfoTypeOptions: {
    description: "Where a page sits in its list: whether there are items on either side of it, and the cursors to continue from.",
  },
  hasNextPageFieldOptions: { description: "Whether items follow this page: read them with `after: endCursor`." },
  hasPreviousPageFieldOptions: { description: "Whether items come before this page: read them with `last` and `before: startCursor`." },
  startCursorFieldOptions: { description: "The cursor of the page's first item; null when the page is empty." },
  endCursorFieldOptions: { description: "The cursor of the page's last item; null when the page is empty." },
  pageInfoFieldOptions: { description: "Where this page sits in the list, with the cursors to continue from." },
  edgesFieldOptions: { description: "The page's items in the list's order, each with its cursor; empty when there are none." },
  nodeFieldOptions: { description: "The item itself." },
  cursorFieldOptions: { description: "This item's place in the list, opaque: pass it as `after` (or `before`) to page on from it." },
  firstArgOptions: {
    description: "How many items to return from the start (after `after`, if given). The field's description gives its default and its most.",
  },
  afterArgOptions: { description: "A cursor from this list: the page starts just after that item. A cursor the list did not issue is refused." },
  lastArgOptions: { description: "How many items to return from the end (before `before`, if given), bounded as `first` is." },
  beforeArgOptions: { description: "A cursor from this list: the page ends just before that item. A cursor the list did not issue is refused." },
};

