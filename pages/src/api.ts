// The pages' only way to the server: POST /graphql with the project's publishable key (from the
// page's own <meta>, written by the server) and, once signed in, the user's access token. The
// tokens live in sessionStorage: closing the browser signs the user out of these pages.
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

function keepSession(t: SignInTokens) {
  const session: Session = { accessToken: t.accessToken, idToken: t.idToken, accountId: t.accountId, expiresAt: Date.now() + t.expiresIn * 1000 };
  sessionStorage.setItem(SESSION, JSON.stringify(session));
}

/**
 * Where to go after signing in: a path on this site from `?return_to=`, else /account. Anything
 * that could leave the site (`//host`, `/\host`, another scheme) is ignored.
 */
export function returnTo(search = location.search): string {
  const raw = new URLSearchParams(search).get("return_to");
  if (!raw || !raw.startsWith("/") || raw.startsWith("//") || raw.startsWith("/\\")) return "/account";
  try {
    const url = new URL(raw, location.origin);
    if (url.origin !== location.origin || url.pathname === "/login") return "/account";
    return url.pathname + url.search + url.hash;
  } catch {
    return "/account";
  }
}

/** The sign-in page, coming back here afterwards; `why` is shown there. */
export function loginUrl(why?: "ended" | "signed-out") {
  const q = new URLSearchParams({ return_to: location.pathname + location.search });
  if (why) q.set("why", why);
  return `/login?${q}`;
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
export type Identifier = { id: string; kind: "email" | "phone"; value: string; origin: "own" | "attached" };
export type Passkey = { id: string; name: string; createdAt: string; lastUsedAt: string | null; backedUp: boolean };
type AccountBase = { id: string; name: string | null; email: string | null; phoneNumber: string | null; identifiers: Identifier[] };
export type MergedAccount = AccountBase & { mergedAt: string | null };
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
export type Viewer = AccountBase & { mergedSecondary: MergedAccount | null; passkeys: Passkey[]; sessions: AccountSession[] };

/** How an account is named to its user: its name, else its e-mail or phone. */
export const accountLabel = (a: Pick<AccountBase, "name" | "email" | "phoneNumber" | "id">) => a.name || a.email || a.phoneNumber || a.id;

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

// ---- the account --------------------------------------------------------------------------------

type Connection<T> = { edges: { node: T }[] };

export async function loadViewer(): Promise<Viewer> {
  type Read = Omit<Viewer, "passkeys" | "sessions"> & { passkeys: Connection<Passkey>; sessions: Connection<AccountSession> };
  const d = await gql<{ viewer: Read }>(OPERATIONS.Viewer);
  const nodes = <T>(c: Connection<T>) => c.edges.map((e) => e.node);
  return { ...d.viewer, passkeys: nodes(d.viewer.passkeys), sessions: nodes(d.viewer.sessions) };
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

/** Ends every session of the account but this one; returns how many ended. */
export async function endOtherSessions(): Promise<number> {
  return member<{ ended: number }>((await gql<{ endOtherSessions: Result }>(OPERATIONS.EndOtherSessions)).endOtherSessions, "EndSessionsPayload").ended;
}

export async function removePasskey(id: string): Promise<void> {
  member((await gql<{ removePasskey: Result }>(OPERATIONS.RemovePasskey, { id })).removePasskey, "RemovePasskeyPayload");
}
