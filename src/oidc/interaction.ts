// A sign-in inside an OpenID Connect authorization: the hosted /login page signs the user in to
// the client's project with the ordinary sign-in services (same OTP limits, same events, sub is
// the primary), then linkgate answers oidc-provider's interaction: who signed in, when and how
// (auth_time, amr), and the grant, tied to the new linkgate session. First-party clients and
// answers the user gave before skip the consent page.
import type { IncomingMessage, ServerResponse } from "node:http";
import type Provider from "oidc-provider";
import type { Actor, Deps } from "../deps.ts";
import { consumePerAddress, type Limit } from "../rate-limit.ts";
import { assertLiveSession, endSessions } from "../auth/sessions.ts";
import type { Tx } from "../db/client.ts";
import { lockAccounts } from "../db/locks.ts";
import { transaction } from "../db/transaction.ts";
import type { TokenResponse } from "../auth/sign-in.ts";
import { InvalidRequest } from "../errors.ts";
import { bindGrantToSession, dropUnboundGrant } from "./adapter.ts";
import { isFirstParty, projectOf } from "./client-metadata.ts";
import { resourceFor, SCOPES } from "./provider.ts";

/** The browser's request and response, carrying the interaction cookie oidc-provider checks. */
export type InteractionHttp = { req: IncomingMessage; res: ServerResponse };
type SignedIn = { accountId: string; sessionId: string };
type Details = Awaited<ReturnType<Provider["interactionDetails"]>>;
type Client = NonNullable<Awaited<ReturnType<Provider["Client"]["find"]>>>;

export type InteractionView = { client: { name: string; firstParty: boolean }; scopes: string[] };
export type Outcome = { redirectTo: string } | { consent: InteractionView };

/**
 * Every authorization request stores an interaction (and the browser's cookie for it) before
 * anyone signed in, and a logout page without a session stores a provider session for its form:
 * both are bounded per client address, together. 60 in 10 minutes is far more than a person
 * going through sign-ins or an office behind one address starts, and keeps one client from
 * filling the table.
 */
export const PROVIDER_PAGES_PER_ADDRESS: Limit = { max: 60, windowSeconds: 600 };

/**
 * Counts a request for a provider page that stores state; throws RateLimited past the bound. A
 * request a browser makes for another site's page (`embedded`: an image, a frame, a fetch;
 * Sec-Fetch-Dest other than document) is counted apart from the pages a browser navigates to:
 * any web page can make its visitors' browsers send sixty of those, and counted together that
 * locked the visitor out of signing in to every app for ten minutes (30th review).
 */
export async function countProviderPage(deps: Deps, clientAddress: string, embedded: boolean): Promise<void> {
  await consumePerAddress(deps.db, embedded ? "embedded_provider_pages_per_address" : "provider_pages_per_address", clientAddress, PROVIDER_PAGES_PER_ADDRESS);
}

export class InteractionExpired extends InvalidRequest {
  constructor() {
    super("this sign-in has expired or was opened in another browser; go back to the app and start again");
  }
}

async function load(provider: Provider, http: InteractionHttp): Promise<{ details: Details; client: Client }> {
  const details = await provider.interactionDetails(http.req, http.res).catch(() => {
    throw new InteractionExpired();
  });
  const client = await provider.Client.find(String(details.params.client_id));
  if (!client) throw new InteractionExpired();
  return { details, client };
}

const requestedScopes = (details: Details) =>
  String(details.params.scope ?? "")
    .split(" ")
    .filter((s): s is (typeof SCOPES)[number] => (SCOPES as readonly string[]).includes(s));

const view = (client: Client, details: Details): InteractionView => ({
  client: { name: client.clientName ?? client.clientId, firstParty: isFirstParty(client) },
  scopes: requestedScopes(details),
});

export async function describeInteraction(provider: Provider, http: InteractionHttp): Promise<InteractionView> {
  const { details, client } = await load(provider, http);
  return view(client, details);
}

/** Who signs in inside this interaction: a user of the client's project, from this address. */
export async function interactionActor(provider: Provider, http: InteractionHttp, origin: { clientAddress: string; userAgent?: string }): Promise<Actor> {
  const { client } = await load(provider, http);
  return { projectId: projectOf(client), keyKind: "publishable", clientAddress: origin.clientAddress, userAgent: origin.userAgent };
}

/** After the sign-in services signed the user in: finish, or ask for consent first. */
export async function signedIn(deps: Deps, provider: Provider, http: InteractionHttp, tokens: TokenResponse): Promise<Outcome> {
  const { sid } = await deps.keys.verifyAccessToken(tokens.access_token);
  const user = { accountId: tokens.account_id, sessionId: sid };
  const { details, client } = await load(provider, http);
  const scopes = requestedScopes(details);
  if (isFirstParty(client) || (await consentCovers(deps.prisma, user.accountId, client.clientId, scopes))) {
    return { redirectTo: await finish(deps, provider, http, client, user, scopes) };
  }
  const interaction = await provider.Interaction.find(details.uid);
  if (!interaction) throw new InteractionExpired();
  interaction.result = { ...interaction.result, pendingSignIn: user };
  await interaction.persist();
  return { consent: view(client, details) };
}

/** The user's answer on the consent page; a yes is remembered for this client. */
export async function answerConsent(deps: Deps, provider: Provider, http: InteractionHttp, allow: boolean): Promise<{ redirectTo: string }> {
  const { details, client } = await load(provider, http);
  const pending = (details.result as { pendingSignIn?: SignedIn } | undefined)?.pendingSignIn;
  if (!pending) throw new InvalidRequest("sign in first");
  if (!allow) {
    await endSessions(deps.prisma, { id: pending.sessionId });
    return { redirectTo: resumePath(await provider.interactionResult(http.req, http.res, { error: "access_denied", error_description: "the user did not allow access" })) };
  }
  const scopes = requestedScopes(details);
  const projectId = projectOf(client);
  await transaction(deps.prisma, async (tx) => {
    // The page may have been answered long after the sign-in: an unmerge, a merge or a sign-out
    // that ended the session since withdrew the account's consents, and a yes written now put one
    // back, so that the owner's next sign-in skipped the page for an app the other person
    // allowed (32nd review). Checked under the account's lock, which those changes hold.
    await lockAccounts(tx, projectId, [pending.accountId]);
    await liveOrExpired(tx, projectId, pending);
    await rememberConsent(tx, projectId, pending.accountId, client.clientId, scopes);
  });
  return { redirectTo: await finish(deps, provider, http, client, pending, scopes) };
}

/** The interaction's session, still live (not ended, not expired, its account not merged away); else InteractionExpired. */
async function liveOrExpired(db: Deps["prisma"] | Tx, projectId: string, user: SignedIn): Promise<void> {
  await assertLiveSession(db, projectId, user.sessionId, user.accountId).catch(() => {
    throw new InteractionExpired();
  });
}

async function finish(deps: Deps, provider: Provider, http: InteractionHttp, client: Client, user: SignedIn, scopes: string[]): Promise<string> {
  await liveOrExpired(deps.prisma, projectOf(client), user);
  const session = await deps.prisma.session.findUnique({ where: { id: user.sessionId }, select: { authTime: true, authMethod: true } });
  if (!session) throw new InteractionExpired();
  const grant = new provider.Grant({ accountId: user.accountId, clientId: client.clientId });
  grant.addOIDCScope(scopes.join(" "));
  grant.addResourceScope(resourceFor(projectOf(client)), scopes.join(" "));
  const grantId = await grant.save();
  // Bound only while what let the app skip the page, or what the page was answered with, still
  // holds: the consent was read (remembered) or written (the Allow) before the grant was saved,
  // and a revokeOAuthConsent, an unmerge or the app's change to third-party committed in between
  // found no grant to end, so the one saved after it was live while "Apps you allowed" no longer
  // listed the app (docs/oidc.md, "Clients"). The client is taken first, as its change and
  // deletion take it before what they end; then the account, as a withdrawal and an unmerge do.
  const bound = await transaction(deps.prisma, async (tx) => {
    const [row] = await tx.$queryRaw<{ first_party: boolean }[]>`
      SELECT first_party FROM oauth_clients WHERE client_id = ${client.clientId} FOR SHARE`;
    if (!row) return false;
    await lockAccounts(tx, projectOf(client), [user.accountId]);
    await liveOrExpired(tx, projectOf(client), user);
    if (!row.first_party && !(await consentCovers(tx, user.accountId, client.clientId, scopes))) return false;
    return bindGrantToSession(tx, grantId, user.sessionId);
  }).catch(async (err) => {
    await dropUnboundGrant(deps, grantId);
    throw err;
  });
  if (!bound) {
    // the session was opened for this app's sign-in alone, and no tokens of it left linkgate
    await dropUnboundGrant(deps, grantId);
    await endSessions(deps.prisma, { id: user.sessionId });
    throw new InteractionExpired();
  }
  const result = {
    login: { accountId: user.accountId, amr: [session.authMethod], ts: Math.floor(session.authTime.getTime() / 1000), remember: true },
    consent: { grantId },
  };
  return resumePath(await provider.interactionResult(http.req, http.res, result, { mergeWithLastSubmission: false }));
}

/**
 * Where the page sends the browser to resume the authorization: a path (under the issuer's path),
 * taken on the host the browser is already on, where the resume cookie is. oidc-provider wrote
 * an absolute URL on the authorization request's Host header, which any client may set: the
 * answer named whatever host it was sent (`Host: evil.example`), not LINKGATE_ISSUER
 * (docs/operations.md, "Behind a reverse proxy": paths, or URLs under the issuer).
 */
function resumePath(url: string): string {
  const { pathname, search } = new URL(url);
  // one leading slash: "//…" would be another host's address
  return `/${pathname.replace(/^\/+/, "")}${search}`;
}

/** Whether the user's remembered yes to the client, not withdrawn, covers every scope asked. */
async function consentCovers(db: Deps["prisma"] | Tx, accountId: string, clientId: string, scopes: string[]): Promise<boolean> {
  const row = await db.oAuthConsent.findUnique({ where: { accountId_clientId: { accountId, clientId } } });
  return !!row && !row.revokedAt && scopes.every((s) => row.scopes.includes(s));
}

async function rememberConsent(tx: Tx, projectId: string, accountId: string, clientId: string, scopes: string[]): Promise<void> {
  const row = await tx.oAuthConsent.findUnique({ where: { accountId_clientId: { accountId, clientId } } });
  const all = [...new Set([...(row && !row.revokedAt ? row.scopes : []), ...scopes])];
  await tx.oAuthConsent.upsert({
    where: { accountId_clientId: { accountId, clientId } },
    create: { accountId, clientId, projectId, scopes: all },
    update: { scopes: all, revokedAt: null },
  });
}
