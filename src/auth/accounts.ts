// Read models of an account: the user object events carry and the OIDC claims tokens and
// userinfo carry. Both describe the account given, which callers resolve to the primary.
import type { Db, Tx } from "../db/client.ts";
import type { Account, Identifier } from "../generated/prisma/client.ts";

type AccountWithIds = Account & { identifiers: Identifier[] };

export function preferred(ids: Pick<Identifier, "kind" | "origin" | "createdAt" | "value">[], kind: "email" | "phone") {
  const ofKind = ids.filter((i) => i.kind === kind).sort((a, b) => +a.createdAt - +b.createdAt);
  return ofKind.find((i) => i.origin === "own") ?? ofKind[0];
}

export async function loadAccount(db: Db | Tx, projectId: string, accountId: string): Promise<AccountWithIds | null> {
  return db.account.findFirst({ where: { id: accountId, projectId }, include: { identifiers: true } });
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

/**
 * The user claims each OpenID Connect scope grants (OIDC Core 5.4). The provider's ID tokens and
 * linkgate's userinfo both read this table, so a token reaches the same claims everywhere.
 */
export const SCOPE_CLAIMS = {
  openid: ["sub"],
  email: ["email", "email_verified"],
  phone: ["phone_number", "phone_number_verified"],
  profile: ["name", "updated_at"],
} as const satisfies Record<string, readonly string[]>;

/**
 * Only the claims of the granted scopes (`openid` alone: `sub`). No `scopes` means a token of
 * linkgate's own sign-in, which describes the whole account.
 */
export function claimsForScopes<C extends Record<string, unknown>>(claims: C, scopes: readonly string[] | undefined): Partial<C> {
  if (!scopes) return claims;
  const allowed = new Set<string>(scopes.flatMap((s) => (Object.hasOwn(SCOPE_CLAIMS, s) ? SCOPE_CLAIMS[s as keyof typeof SCOPE_CLAIMS] : [])));
  return Object.fromEntries(Object.entries(claims).filter(([k]) => allowed.has(k))) as Partial<C>;
}

export function oidcClaims(account: AccountWithIds) {
  const email = preferred(account.identifiers, "email");
  const phone = preferred(account.identifiers, "phone");
  return {
    sub: account.id,
    ...(email ? { email: email.value, email_verified: true } : {}),
    ...(phone ? { phone_number: phone.value, phone_number_verified: true } : {}),
    name: account.name,
    updated_at: Math.floor(account.updatedAt.getTime() / 1000),
  };
}

export async function userEventData(db: Db | Tx, projectId: string, accountId: string, extra: object = {}) {
  const account = await loadAccount(db, projectId, accountId);
  return { user: account ? userObject(account) : { user_id: accountId, project_id: projectId }, ...extra };
}
