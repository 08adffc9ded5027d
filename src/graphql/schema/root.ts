import { DateTimeResolver, EmailAddressResolver, JSONResolver, PhoneNumberResolver, URLResolver } from "graphql-scalars";
import { builder } from "../builder.ts";

// The relay plugin makes PageInfo, every edge's `cursor` and the page arguments itself, and takes
// their descriptions from its builder options only. They are filled in here, before any
// connection is built (the plugin reads them while building the schema), so that the schema's
// words stay with the schema.
Object.assign(builder.options.relay ?? {}, {
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
} satisfies Partial<NonNullable<typeof builder.options.relay>>);

/** What each scope of credentials needs, ending the description of every query and mutation. */
export const NEEDS = {
  nothing: "Needs no credentials.",
  project: "Needs an API key of either kind.",
  user: "Needs an API key and the access token.",
  recentUser: "Needs an API key, the access token, and a recent sign-in or re-authentication.",
  secret: "Needs the project's secret key.",
  admin: "Needs the admin token (X-Admin-Token).",
};

builder.queryType({ description: "Everything there is to read. Each field's description says which credentials it needs." });
builder.mutationType({
  description:
    "Everything there is to change. A mutation that can fail in a domain way returns a union of its payload and its error types (each implements Error): ask for `__typename`.",
});

builder.addScalarType("DateTime", DateTimeResolver);
builder.addScalarType("EmailAddress", EmailAddressResolver);
builder.addScalarType("PhoneNumber", PhoneNumberResolver);
builder.addScalarType("URL", URLResolver);
builder.addScalarType("JSON", JSONResolver);
