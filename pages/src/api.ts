// The pages' way to the server: POST /graphql with the project's publishable key (from the
// page's own <meta>, written by the server) and, once signed in, the user's access token; the
// one public list GraphQL gives only to the secret key, the project's sign-in providers, is read
// from GET /auth/external/providers with the same key. The tokens live in sessionStorage:
// closing the browser signs the user out of these pages.
import { at } from "../../ui/base.ts";
import { dataOf, postGraphQL } from "../../ui/graphql.ts";
import { sentence } from "../../ui/text.ts";
import { OPERATIONS } from "./operations.ts";

// ---- configuration ------------------------------------------------------------------------------

/** Publishable keys are recognisable by their prefix; a secret key is never used here. */
const PUBLISHABLE = /^lg_pk_[\w-]+$/;

/** The project's publishable key, or null when the page is not configured (or given anything else). */
export function publishableKey(): string | null {
  const value = document.querySelector<HTMLMetaElement>('meta[name="linkgate-publishable-key"]')?.content.trim() ?? "";
  return PUBLISHABLE.test(value) ? value : null;
}

// ---- the signed-in session ----------------------------------------------------------------------

export type Session = { accessToken: string; idToken: string; accountId: string; expiresAt: number };

const SESSION = "linkgate.session";

export function storedSession(): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(SESSION) ?? "null") as Session | null;
    return s && typeof s.accessToken === "string" && s.expiresAt > Date.now() ? s : null;
  } catch {
    return null;
  }
}

export const forgetSession = () => sessionStorage.removeItem(SESSION);

/**
 * A page the browser keeps in its back/forward cache comes back as it was left, without running
 * its script again: after "Sign out", Back showed /account with the account's addresses, phone
 * numbers and sessions to whoever used the browser next, and /login with the address its code
 * went to; a page kept while its session ended elsewhere showed the account as it was. Brought
 * back, a page loads again: without a session, that is the sign-in page (docs/security.md,
 * "Input, tenants and pages").
 */
export function reloadWhenBroughtBack(): void {
  addEventListener("pageshow", (e) => {
    if (e.persisted) location.reload();
  });
}

function keepSession(t: SignInTokens) {
  const session: Session = { accessToken: t.accessToken, idToken: t.idToken, accountId: t.accountId, expiresAt: Date.now() + t.expiresIn * 1000 };
  sessionStorage.setItem(SESSION, JSON.stringify(session));
}

/**
 * Where to go after signing in: the /account page, with the query and fragment `?return_to=`
 * gives it (the account page sends its own address there when a session ends). Nothing else:
 * not another site (`//host`, `/\host`, another scheme, or `/.//host` and `/a/..//host`, whose
 * pathname `//host` is another site's address), and not another page of this one, some of which
 * redirect on (`/oauth/authorize` sends a stranger's registered client its answer).
 */
export function returnTo(search = location.search, origin = location.origin): string {
  const raw = new URLSearchParams(search).get("return_to");
  const account = at("/account");
  if (!raw) return account;
  try {
    const url = new URL(raw, origin);
    if (url.origin !== origin || url.pathname !== account) return account;
    return url.pathname + url.search + url.hash;
  } catch {
    return account;
  }
}

/** The sign-in page, coming back here afterwards; `why` is shown there. */
export function loginUrl(why?: "ended" | "signed-out") {
  const q = new URLSearchParams({ return_to: location.pathname + location.search });
  if (why) q.set("why", why);
  return at(`/login?${q}`);
}

// ---- calls --------------------------------------------------------------------------------------

/** The session was refused (expired, signed out elsewhere, merged away): sign in again. */
export class SessionEnded extends Error {}

/** A typed error result of a mutation (`__typename` names it, like the REST error). */
export class ApiError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const key = publishableKey();
  if (!key) throw new Error("This page is not configured with the project's publishable key.");
  const session = storedSession();
  const headers: Record<string, string> = { "x-api-key": key };
  if (session) headers.authorization = `Bearer ${session.accessToken}`;
  const answer = await postGraphQL<T>(headers, query, variables, "The server cannot be reached. Check your connection and try again.");
  const err = answer.error;
  if (err) {
    if (err.extensions?.code === "UNAUTHENTICATED" && session) {
      forgetSession();
      throw new SessionEnded("Your session has ended. Sign in again.");
    }
    throw new Error(sentence(err.message));
  }
  return dataOf(answer);
}

/** The union member `want`, or its error member thrown as an ApiError. */
function member<T>(result: { __typename: string; message?: string }, want: string): T {
  if (result.__typename === want) return result as T;
  throw new ApiError(result.__typename, sentence(result.message ?? result.__typename));
}

/** Changes to how the account signs in need a recent sign-in: the user confirms it is them, then the change goes ahead. */
export const needsReauthentication = (err: unknown) => err instanceof ApiError && err.type === "ReauthenticationRequired";

// ---- types of what the pages read ---------------------------------------------------------------

export type SignInTokens = { accessToken: string; idToken: string; accountId: string; expiresIn: number };
/** What an external identity provider said of the user; it decides nothing, it only names the sign-in. */
export type ExternalProfile = { providerName: string | null; email: string | null; name: string | null };
export type Identifier = {
  id: string;
  kind: "email" | "phone" | "external";
  value: string;
  origin: "own" | "attached";
  externalProfile: ExternalProfile | null;
  /** the viewer's only: added by way of the merged account, removed by the unmerge (docs/security.md, "Sessions") */
  leavesOnUnmerge?: boolean;
};
export type Passkey = { id: string; name: string; createdAt: string; lastUsedAt: string | null; backedUp: boolean };
type AccountBase = { id: string; name: string | null; email: string | null; phoneNumber: string | null; identifiers: Identifier[] };
/** The account merged into the viewer's: `passkeys`, its own, sign in to the viewer's too. */
export type MergedAccount = AccountBase & { mergedAt: string | null; passkeys: Passkey[] };
/** A signed-in session of the account (`current`: the one this page uses). */
export type AccountSession = {
  id: string;
  createdAt: string;
  authMethod: string;
  lastUsedAt: string | null;
  clientAddress: string | null;
  userAgent: string | null;
  current: boolean;
};
/** An app the user allowed on the consent page (OpenID Connect), with what it may read. */
export type AuthorizedApp = { clientId: string; name: string; scopes: string[]; allowedAt: string };
export type Viewer = AccountBase & { mergedSecondary: MergedAccount | null; passkeys: Passkey[]; sessions: AccountSession[]; authorizedApps: AuthorizedApp[] };

/** How an account is named to its user: its name, else its e-mail or phone. */
export const accountLabel = (a: Pick<AccountBase, "name" | "email" | "phoneNumber" | "id">) => a.name || a.email || a.phoneNumber || a.id;

/** Identifiers a code can be sent to (an external sign-in has no address of its own). */
export const reachable = (i: Pick<Identifier, "kind">) => i.kind === "email" || i.kind === "phone";

/** `{email}` or `{phone}` for what the user typed: an "@" makes it an e-mail. */
export function identifierInput(raw: string): { email: string } | { phone: string } {
  const value = raw.trim();
  return value.includes("@") ? { email: value } : { phone: value };
}

type Result = { __typename: string; message?: string };

// ---- sign-in ------------------------------------------------------------------------------------

export async function startSignIn(identifier: string): Promise<string> {
  const d = await gql<{ startSignIn: Result & { stateId?: string } }>(OPERATIONS.StartSignIn, identifierInput(identifier));
  return member<{ stateId: string }>(d.startSignIn, "OtpChallenge").stateId;
}

export async function completeSignIn(stateId: string, otp: string): Promise<void> {
  const d = await gql<{ completeSignIn: Result }>(OPERATIONS.CompleteSignIn, { stateId, otp: otp.trim() });
  keepSession(member<SignInTokens>(d.completeSignIn, "SignInTokens"));
}

export async function startPasskeySignIn(): Promise<unknown> {
  return (await gql<{ startPasskeySignIn: unknown }>(OPERATIONS.StartPasskeySignIn)).startPasskeySignIn;
}

export async function finishPasskeySignIn(response: unknown): Promise<void> {
  const d = await gql<{ finishPasskeySignIn: Result }>(OPERATIONS.FinishPasskeySignIn, { response });
  keepSession(member<SignInTokens>(d.finishPasskeySignIn, "SignInTokens"));
}

/** Ends the session on the server, then forgets it here (even if the server already had). */
export async function signOut(): Promise<void> {
  try {
    if (storedSession()) await gql<{ signOut: boolean }>(OPERATIONS.SignOut);
  } catch (err) {
    if (!(err instanceof SessionEnded)) throw err;
  } finally {
    forgetSession();
  }
}

// ---- re-authentication: the same session, a new auth_time, fresh tokens ----------------------------

export async function startReauthentication(identifier: Pick<Identifier, "kind" | "value">): Promise<string> {
  const d = await gql<{ startReauthentication: Result }>(OPERATIONS.StartReauthentication, { [identifier.kind]: identifier.value });
  return member<{ stateId: string }>(d.startReauthentication, "OtpChallenge").stateId;
}

export async function completeReauthentication(stateId: string, otp: string): Promise<void> {
  const d = await gql<{ completeReauthentication: Result }>(OPERATIONS.CompleteReauthentication, { stateId, otp: otp.trim() });
  keepSession(member<SignInTokens>(d.completeReauthentication, "SignInTokens"));
}

/** `response`: an assertion made with options from startPasskeySignIn. */
export async function reauthenticateWithPasskey(response: unknown): Promise<void> {
  const d = await gql<{ reauthenticateWithPasskey: Result }>(OPERATIONS.ReauthenticateWithPasskey, { response });
  keepSession(member<SignInTokens>(d.reauthenticateWithPasskey, "SignInTokens"));
}

/** Re-authenticating by signing in again at the provider of one of the account's external sign-ins. */
export async function startExternalReauthentication(provider: string, redirectUri: string): Promise<ExternalStarted> {
  const d = await gql<{ startExternalReauthentication: Result }>(OPERATIONS.StartExternalReauthentication, { provider, redirectUri });
  return member<ExternalStarted>(d.startExternalReauthentication, "ExternalStart");
}

export async function completeExternalReauthentication(stateId: string, code: string): Promise<void> {
  const d = await gql<{ completeExternalReauthentication: Result }>(OPERATIONS.CompleteExternalReauthentication, { stateId, code });
  keepSession(member<SignInTokens>(d.completeExternalReauthentication, "SignInTokens"));
}

// ---- the account --------------------------------------------------------------------------------

type Connection<T> = { edges: { node: T }[] };

export async function loadViewer(): Promise<Viewer> {
  type ReadMerged = Omit<MergedAccount, "passkeys"> & { passkeys: Connection<Passkey> };
  type Read = Omit<Viewer, "passkeys" | "sessions" | "mergedSecondary"> & {
    passkeys: Connection<Passkey>;
    sessions: Connection<AccountSession>;
    mergedSecondary: ReadMerged | null;
  };
  const d = await gql<{ viewer: Read }>(OPERATIONS.Viewer);
  const nodes = <T>(c: Connection<T>) => c.edges.map((e) => e.node);
  const secondary = d.viewer.mergedSecondary;
  return {
    ...d.viewer,
    passkeys: nodes(d.viewer.passkeys),
    sessions: nodes(d.viewer.sessions),
    mergedSecondary: secondary && { ...secondary, passkeys: nodes(secondary.passkeys) },
  };
}

export async function requestLink(identifier: string): Promise<string> {
  const d = await gql<{ requestLink: Result }>(OPERATIONS.RequestLink, identifierInput(identifier));
  return member<{ stateId: string }>(d.requestLink, "OtpChallenge").stateId;
}

export async function verifyLink(stateId: string, otp: string): Promise<"attached" | "merged"> {
  const d = await gql<{ verifyLink: Result }>(OPERATIONS.VerifyLink, { stateId, otp: otp.trim() });
  return member<{ outcome: "attached" | "merged" }>(d.verifyLink, "VerifyLinkPayload").outcome;
}

export async function removeLink(identifier: Pick<Identifier, "kind" | "value">): Promise<void> {
  const d = await gql<{ removeLink: Result }>(OPERATIONS.RemoveLink, { [identifier.kind]: identifier.value });
  member(d.removeLink, "MessagePayload");
}

export async function unmerge(): Promise<void> {
  member((await gql<{ unmerge: Result }>(OPERATIONS.Unmerge)).unmerge, "MessagePayload");
}

export async function startPasskeyRegistration(): Promise<unknown> {
  const d = await gql<{ startPasskeyRegistration: Result }>(OPERATIONS.StartPasskeyRegistration);
  return member<{ options: unknown }>(d.startPasskeyRegistration, "PasskeyCreationOptions").options;
}

export async function finishPasskeyRegistration(response: unknown, name: string): Promise<Passkey> {
  const d = await gql<{ finishPasskeyRegistration: Result }>(OPERATIONS.FinishPasskeyRegistration, { response, name });
  return member<Passkey>(d.finishPasskeyRegistration, "Passkey");
}

export async function renamePasskey(id: string, name: string): Promise<void> {
  member((await gql<{ renamePasskey: Result }>(OPERATIONS.RenamePasskey, { id, name })).renamePasskey, "Passkey");
}

/** Ends another session of the account: its tokens fail on their next request. */
export async function endSession(id: string): Promise<void> {
  member((await gql<{ endSession: Result }>(OPERATIONS.EndSession, { id })).endSession, "EndSessionsPayload");
}

/** Withdraws what the user allowed an app: its sessions and refresh tokens end, and it asks again. */
export async function revokeApp(clientId: string): Promise<void> {
  member((await gql<{ revokeOAuthConsent: Result }>(OPERATIONS.RevokeOAuthConsent, { clientId })).revokeOAuthConsent, "RevokeOAuthConsentPayload");
}

/** Ends every session of the account but this one; returns how many ended. */
export async function endOtherSessions(): Promise<number> {
  return member<{ ended: number }>((await gql<{ endOtherSessions: Result }>(OPERATIONS.EndOtherSessions)).endOtherSessions, "EndSessionsPayload").ended;
}

export async function removePasskey(id: string): Promise<void> {
  member((await gql<{ removePasskey: Result }>(OPERATIONS.RemovePasskey, { id })).removePasskey, "RemovePasskeyPayload");
}

// ---- external identity providers ("Continue with …") --------------------------------------------

export type ExternalProvider = { slug: string; display_name: string };
export type ExternalStarted = { stateId: string; authorizationUrl: string };
/** The provider named an e-mail address an account holds: its code proves it first. */
export type EmailToProve = { stateId: string; destination: string };

/** The project's providers, for the sign-in buttons. */
export async function loadProviders(): Promise<ExternalProvider[]> {
  const key = publishableKey();
  if (!key) return [];
  let res: Response;
  try {
    res = await fetch(at("/auth/external/providers"), { headers: { "x-api-key": key, accept: "application/json" } });
  } catch {
    throw new Error("The server cannot be reached. Check your connection and try again.");
  }
  const body = (await res.json().catch(() => null)) as { providers?: ExternalProvider[]; message?: string } | null;
  if (!res.ok || !body?.providers) throw new Error(sentence(body?.message ?? `The server answered ${res.status}.`));
  return body.providers;
}

export async function startExternalSignIn(provider: string, redirectUri: string): Promise<ExternalStarted> {
  const d = await gql<{ startExternalSignIn: Result }>(OPERATIONS.StartExternalSignIn, { provider, redirectUri });
  return member<ExternalStarted>(d.startExternalSignIn, "ExternalStart");
}

/** Signed in (the session is kept), or the e-mail to prove first. */
export async function completeExternalSignIn(stateId: string, code: string): Promise<{ prove: EmailToProve } | { signedIn: true }> {
  type Outcome = { tokens: SignInTokens | null; emailVerification: EmailToProve | null };
  const d = await gql<{ completeExternalSignIn: Result }>(OPERATIONS.CompleteExternalSignIn, { stateId, code });
  const outcome = member<Outcome>(d.completeExternalSignIn, "ExternalSignInOutcome");
  if (outcome.emailVerification) return { prove: outcome.emailVerification };
  keepSession(outcome.tokens!);
  return { signedIn: true };
}

export async function confirmExternalSignIn(stateId: string, otp: string): Promise<void> {
  const d = await gql<{ confirmExternalSignIn: Result }>(OPERATIONS.ConfirmExternalSignIn, { stateId, otp: otp.trim() });
  keepSession(member<SignInTokens>(d.confirmExternalSignIn, "SignInTokens"));
}

/** `response`: an assertion made with options from startPasskeySignIn, by a passkey of the e-mail's account. */
export async function confirmExternalSignInWithPasskey(stateId: string, response: unknown): Promise<void> {
  const d = await gql<{ confirmExternalSignInWithPasskey: Result }>(OPERATIONS.ConfirmExternalSignInWithPasskey, { stateId, response });
  keepSession(member<SignInTokens>(d.confirmExternalSignInWithPasskey, "SignInTokens"));
}

export async function startExternalLink(provider: string, redirectUri: string): Promise<ExternalStarted> {
  const d = await gql<{ startExternalLink: Result }>(OPERATIONS.StartExternalLink, { provider, redirectUri });
  return member<ExternalStarted>(d.startExternalLink, "ExternalStart");
}

export async function verifyExternalLink(stateId: string, code: string): Promise<"attached" | "merged"> {
  const d = await gql<{ verifyExternalLink: Result }>(OPERATIONS.VerifyExternalLink, { stateId, code });
  return member<{ outcome: "attached" | "merged" }>(d.verifyExternalLink, "VerifyLinkPayload").outcome;
}

// ---- the trip to the provider and back ------------------------------------------------------------

/** A trip to a provider under way: the page that started keeps state_id, the return brings the code. */
export type PendingExternal = { stateId: string; purpose: "sign_in" | "link" | "reauth"; provider: string; startedAt: number };
const PENDING = "linkgate.external";
/** As long as the server keeps the flow. */
const PENDING_TTL_MS = 10 * 60 * 1000;
const RETURN_PARAMS = ["code", "error", "error_description", "state", "iss"];

/** Keeps the flow and leaves for the provider's sign-in page. */
export function goToProvider(pending: Omit<PendingExternal, "startedAt">, authorizationUrl: string): void {
  sessionStorage.setItem(PENDING, JSON.stringify({ ...pending, startedAt: Date.now() }));
  location.assign(authorizationUrl);
}

/** This page's address without what a return from a provider added: where a provider sends the user back. */
export function returnAddress(): string {
  const url = new URL(location.href);
  for (const p of RETURN_PARAMS) url.searchParams.delete(p);
  url.hash = "";
  return url.href;
}

export type ExternalReturn = { pending: PendingExternal; code: string } | { pending: PendingExternal | null; error: string };

/** What the page says for a return with ?error=, by its code. */
const RETURN_ERRORS: Record<string, string> = {
  UpstreamUnavailable: "The other service did not answer. Try again in a moment.",
};
const RETURN_FAILED = "The sign-in at the other service did not succeed. Try again.";

/**
 * The words shown for a return with ?error=. Its description is shown only for a trip this tab
 * started: anyone can send a link to /login?error=…&error_description=<their words> (eleventh review).
 */
export function returnError(error: string, description: string | null): string {
  if (description) return sentence(description.slice(0, 300));
  // own keys only: ?error=toString found Object's
  return Object.hasOwn(RETURN_ERRORS, error) ? RETURN_ERRORS[error] : RETURN_FAILED;
}

/**
 * The provider sent the user back here (?code= or ?error=): the flow this tab started, once.
 * The address loses those parameters, so a reload does not try again. Null when not a return.
 */
export function takeExternalReturn(...purposes: PendingExternal["purpose"][]): ExternalReturn | null {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  const error = params.get("error");
  if (!code && !error) return null;
  history.replaceState(null, "", returnAddress());
  let pending: PendingExternal | null = null;
  try {
    pending = JSON.parse(sessionStorage.getItem(PENDING) ?? "null") as PendingExternal | null;
  } catch {}
  sessionStorage.removeItem(PENDING);
  if (pending && (!purposes.includes(pending.purpose) || typeof pending.stateId !== "string" || Date.now() - pending.startedAt > PENDING_TTL_MS)) pending = null;
  if (error) return { pending, error: returnError(error, pending ? params.get("error_description") : null) };
  if (!pending) return { pending: null, error: "This sign-in was started in another tab or has expired. Start again." };
  return { pending, code: code! };
}
