// The user object events carry (`data.user`), and which of an account's addresses it names. It
// lives with the events, below the services that emit them: the sign-in, linking and profile
// services (src/auth, src/linking) and the sample events of src/webhooks/samples.ts all build it here.
import type { Account, Identifier } from "../generated/prisma/client.ts";

/** An account's address of a kind that it shows: its own (signed up with it) first, else the oldest attached. */
export function preferred(ids: Pick<Identifier, "kind" | "origin" | "createdAt" | "value">[], kind: "email" | "phone") {
  const ofKind = ids.filter((i) => i.kind === kind).sort((a, b) => +a.createdAt - +b.createdAt);
  return ofKind.find((i) => i.origin === "own") ?? ofKind[0];
}

/** What the user object is made of (a sample event's user is made by the same function). */
export type UserObjectSource = Pick<Account, "id" | "projectId" | "name" | "status" | "createdAt" | "updatedAt" | "lastLoginAt"> & {
  identifiers: Pick<Identifier, "kind" | "origin" | "createdAt" | "value">[];
};

/**
 * The user object of events. link_user_object (src/linking/link-verify.sql) builds the same
 * object in SQL for the events link_verify writes; test/linking.user-object.test.ts compares the
 * two on both backends.
 */
export function userObject(account: UserObjectSource, status = account.status as string) {
  return {
    user_id: account.id,
    project_id: account.projectId,
    email: preferred(account.identifiers, "email")?.value ?? null,
    name: account.name,
    status,
    created_at: account.createdAt.toISOString(),
    updated_at: account.updatedAt.toISOString(),
    last_login: account.lastLoginAt?.toISOString() ?? null,
  };
}
