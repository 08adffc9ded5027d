// Domain errors as typed results: every error src/errors.ts declares as a result becomes an
// object type of the same name implementing `interface Error { message: String! }`. Which of them
// a field returns is the operation's own error list, exported by its service.
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

export const ErrorInterface = builder.interfaceRef<Error>("Error").implement({
  description:
    "A domain error: the request was understood and refused, and nothing changed. Each implementing type names one reason, the same name as the REST API's `error`.",
  fields: (t) => ({ message: t.exposeString("message", { description: "What went wrong, in words for people; it may change, so branch on `__typename`." }) }),
});

/**
 * Every error declared as a typed result (src/errors.ts, `graphql: "result"`) becomes an object
 * type of its name, described by its declared meaning. RateLimited also says how long to wait.
 */
const RESULT_CLASSES = Object.values(E).filter(
  (cls): cls is typeof cls & { code: E.ErrorName; new (...args: never[]): E.DomainError } =>
    typeof cls === "function" && "code" in cls && Object.hasOwn(E.ERRORS, String(cls.code)) && E.ERRORS[cls.code as E.ErrorName].graphql === "result",
);

for (const cls of RESULT_CLASSES) {
  const code = cls.code;
  if (cls === E.RateLimited) continue;
  builder.objectType(cls, { name: code, description: E.ERRORS[code].meaning, interfaces: [ErrorInterface], isTypeOf: (v) => v instanceof cls, fields: () => ({}) });
}

builder.objectType(E.RateLimited, {
  name: "RateLimited",
  description: E.ERRORS.RateLimited.meaning,
  interfaces: [ErrorInterface],
  isTypeOf: (v) => v instanceof E.RateLimited,
  fields: (t) => ({ retryAfterSeconds: t.exposeInt("retryAfterSeconds", { description: "How many seconds to wait before trying again." }) }),
});

/** The options of a field's result union: what it is, for the union's description. */
export function resultOf(success: string) {
  return { description: `${success} when it worked; otherwise the domain error that refused it (each other member implements Error).` };
}
