import { DateTimeResolver, EmailAddressResolver, JSONResolver, PhoneNumberResolver, URLResolver } from "graphql-scalars";
import { builder } from "../builder.ts";

builder.queryType({});
builder.mutationType({});

builder.addScalarType("DateTime", DateTimeResolver);
builder.addScalarType("EmailAddress", EmailAddressResolver);
builder.addScalarType("PhoneNumber", PhoneNumberResolver);
builder.addScalarType("URL", URLResolver);
builder.addScalarType("JSON", JSONResolver);
