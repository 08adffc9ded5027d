// Imports every part of the schema, in dependency order, and builds it.
import { builder } from "../builder.ts";
import type { GraphQLContext } from "../context.ts";
import "./root.ts";
import "./errors.ts";
import "./sign-in.ts";
import "./viewer.ts";
import "./passkey.ts";
import "./session.ts";
import "./linking.ts";
import "./identity-provider.ts";
import "./webhook.ts";
import "./oauth-client.ts";
import "./delivery.ts";
import "./admin.ts";
import "./dashboard.ts";

export const schema = builder.toSchema({ sortSchema: true });

/**
 * Each root field of a mutation reads its credentials afresh (they are read once per field, not
 * once per request): a document's first field may end the session (signOut, endSession,
 * deleteAccount, revoking a key), and the fields after it ran on what was read at the start
 * (31st review: `mutation { signOut requestLink(…) }` still sent a code, and endOtherSessions
 * still ended sessions). A document of one field reads them once, as before.
 */
for (const field of Object.values(schema.getMutationType()!.getFields())) {
  const resolve = field.resolve!;
  field.resolve = (source, args, context: GraphQLContext, info) => {
    context.afresh();
    return resolve(source, args, context, info);
  };
}
