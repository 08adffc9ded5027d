import { DateTimeResolver, EmailAddressResolver, JSONResolver, PhoneNumberResolver, URLResolver } from "graphql-scalars";
import { builder } from "../builder.ts";

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
