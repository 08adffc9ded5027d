// Read models of an account: the user object events carry and the OIDC claims tokens and
// userinfo carry. Both describe the account given, which callers resolve to the primary.
import type { Db, Tx } from "../db/client.ts";
import type { Account, Identifier } from "../generated/prisma/client.ts";
import { preferred, userObject } from "../webhooks/user-object.ts";

// the user object is defined with the events; the account's services find it here too
export { preferred, userObject, type UserObjectSource } from "../webhooks/user-object.ts";

type AccountWithIds = Account & { identifiers: Identifier[] };

export async function loadAccount(db: Db | Tx, projectId: string, accountId: string): Promise<AccountWithIds | null> {
  return db.account.findFirst({ where: { id: accountId, projectId }, include: { identifiers: true } });
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
  return claimsOf({
    id: account.id,
    name: account.name,
    updatedAtMs: account.updatedAt.getTime(),
    email: preferred(account.identifiers, "email")?.value ?? null,
    phone: preferred(account.identifiers, "phone")?.value ?? null,
  });
}

/** What the claims are made of: the account, its preferred e-mail and phone (preferred()). */
export type ClaimsSource = { id: string; name: string | null; updatedAtMs: number; email: string | null; phone: string | null };

/** oidcClaims from facts a statement read (src/auth/sign-in.sql returns them with the sign-in). */
export function claimsOf(a: ClaimsSource) {
  return {
    sub: a.id,
    ...(a.email != null ? { email: a.email, email_verified: true } : {}),
    ...(a.phone != null ? { phone_number: a.phone, phone_number_verified: true } : {}),
    name: a.name,
    updated_at: Math.floor(a.updatedAtMs / 1000),
  };
}

export async function userEventData(db: Db | Tx, projectId: string, accountId: string, extra: object = {}) {
  const account = await loadAccount(db, projectId, accountId);
  return { user: account ? userObject(account) : { user_id: accountId, project_id: projectId }, ...extra };
}
