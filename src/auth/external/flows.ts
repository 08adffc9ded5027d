// One trip to an external identity provider and back (docs/external-identities.md, "The flow"):
//
//   start     the app (or the hosted /login page) asks for an authorization URL and keeps the
//             `state_id` it gets; PKCE, state and nonce stay here.
//   callback  the provider sends the browser to its own /auth/external/<id>/callback; the code exchange and
//             the ID token's checks happen here, and the browser goes on to the app's
//             redirect_uri with a one-time `code`.
//   complete  the app sends `state_id` and `code` together. Only the browser that started the
//             flow has the first, only the browser the provider came back to has the second: a
//             link or sign-in started by an attacker and finished in a victim's browser (login
//             CSRF, the account-linking kind included) has one half only and does nothing.
//
// redirect_uri must be the hosted pages of this gateway or registered on one of the project's
// first-party OAuth clients, so a code is never sent where the project did not say.
import { publicPath } from "../../config.ts";
import type { Actor, Deps } from "../../deps.ts";
import type { Db, Tx } from "../../db/client.ts";
import { randomToken, safeEqual, sha256Hex } from "../../crypto.ts";
import { DomainError, InvalidRedirectUri, InvalidRequest, OTPInvalid, ProviderNotFound } from "../../errors.ts";
import { Prisma, type ExternalFlow } from "../../generated/prisma/client.ts";
import { newId } from "../../ids.ts";
import { charLength, isStorableText } from "../../text.ts";
import { consumePerAddress, type Limit } from "../../rate-limit.ts";
import { receivableByOthers } from "../redirect-uris.ts";
import { callbackUrl, upstreamProvider } from "./providers.ts";
import { authorizationUrl, exchangeCode } from "./upstream.ts";

export type FlowPurpose = "sign_in" | "link" | "reauth";
export type StartInput = { provider?: unknown; redirectUri?: unknown };
export type Started = { state_id: string; authorization_url: string };

/** As long as a sign-in code lives: time to sign in at the provider, and back. */
const FLOW_TTL_MS = 10 * 60 * 1000;
/**
 * A flow lives FLOW_TTL_MS by the database's clock, written and checked there: it starts on one
 * gateway and comes back to any, and with their own clocks one running ahead and one behind kept
 * a flow (and a link started on a recent sign-in) minutes past its end (docs/operations.md, "Clocks").
 */
const EXPIRES_AT = Prisma.sql`(now() + make_interval(secs => ${FLOW_TTL_MS / 1000}::int)) AT TIME ZONE 'UTC'`;
const LIVE = Prisma.sql`expires_at > now()`;
/**
 * Starts store state: bounded per client address, like the provider's own pages. Callbacks are
 * not counted: any web page can make its visitors' browsers call one (an image per made-up
 * state), and counted against the starts' budget that locked the visitor out of external sign-in
 * (30th review). A callback finds its flow or stores nothing, and each flow's callback happens
 * once, so the starts bound them.
 */
export const EXTERNAL_FLOWS_PER_ADDRESS: Limit = { max: 60, windowSeconds: 600 };

const hashOf = (secret: string) => sha256Hex(secret);
/** The code hash of a flow whose callback is exchanging its code: no code hashes to it. */
const EXCHANGING = "exchanging";

/** The hosted pages of this gateway, which may always be returned to. */
function hostedPage(deps: Deps, url: URL): boolean {
  const own = new URL(deps.keys.issuer);
  const prefix = publicPath(deps.keys.issuer);
  return url.origin === own.origin && [`${prefix}/login`, `${prefix}/account`].includes(url.pathname);
}

async function checkRedirectUri(deps: Deps, projectId: string, raw: unknown): Promise<string> {
  if (typeof raw !== "string" || charLength(raw) > 2048) throw new InvalidRedirectUri();
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidRedirectUri();
  }
  if (url.hash) throw new InvalidRedirectUri("redirect_uri must not have a fragment");
  if (hostedPage(deps, url)) return raw;
  // Finishing a flow takes only its state_id (which the starter holds), the code the redirect
  // brings and a publishable key: a program that can receive the redirect can run the whole
  // flow itself and sign in as whoever signs in at the provider, whether or not the client that
  // registered the URI is confidential (30th review).
  if (receivableByOthers(raw, deps.config.production)) {
    throw new InvalidRedirectUri(
      deps.config.production
        ? "an external sign-in returns only to https redirect URIs: another app or program on the device could receive this one"
        : "an external sign-in returns only to https or loopback redirect URIs: another app on the device could receive this one",
    );
  }
  const registered = await deps.prisma.oAuthClient.count({ where: { projectId, firstParty: true, redirectUris: { has: raw } } });
  if (!registered) throw new InvalidRedirectUri();
  return raw;
}

/** An authorization URL at the provider, for a sign-in or (with `user`) a link of the signed-in account. */
export async function startFlow(deps: Deps, actor: Actor, input: StartInput, purpose: FlowPurpose): Promise<Started> {
  const provider = await upstreamProvider(deps, actor.projectId, { slug: input.provider });
  const redirectUri = await checkRedirectUri(deps, actor.projectId, input.redirectUri);
  await consumePerAddress(deps.db, "external_flows_per_address", actor.clientAddress, EXTERNAL_FLOWS_PER_ADDRESS);
  const state = randomToken();
  const secrets = { state, nonce: randomToken(), codeVerifier: randomToken(48) };
  const url = await authorizationUrl(deps, provider, { ...secrets, redirectUri: callbackUrl(deps, provider) });
  const id = newId("xfl");
  // Written only while the provider is there, key-share locked as its foreign key would lock it:
  // one the project deleted since it was read above (the discovery fetch in between may take
  // seconds) is ProviderNotFound, where the foreign key check's failure was a 500.
  const written = await deps.prisma.$executeRaw`
    INSERT INTO external_flows (id, project_id, provider_id, purpose, account_id, session_id, redirect_uri, state_hash, nonce, code_verifier, created_at, expires_at)
    SELECT ${id}, ${actor.projectId}, p.id, ${purpose}, ${actor.user?.accountId ?? null}, ${actor.user?.sessionId ?? null}, ${redirectUri},
           ${hashOf(state)}, ${secrets.nonce}, ${secrets.codeVerifier}, now() AT TIME ZONE 'UTC', ${EXPIRES_AT}
    FROM identity_providers p WHERE p.id = ${provider.id} AND p.project_id = ${actor.projectId}
    FOR KEY SHARE`;
  if (!written) throw new ProviderNotFound();
  return { state_id: id, authorization_url: url };
}

/** Where the callback sends the browser, or the page it shows when there is nowhere safe to send it. */
export type CallbackAnswer = { redirect: string } | { page: { status: 400; title: string; message: string } };

const EXPIRED: CallbackAnswer = {
  page: { status: 400, title: "This sign-in has expired", message: "This sign-in link has expired or was already used. Go back to the app and start again." },
};

function withParams(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.href;
}

/** Which callback the answer came to: a provider's own (its id), or the shared one (null). */
const cameTo = (providerId: string | null) => (providerId ? { id: providerId, sharedCallback: false } : { sharedCallback: true });

/**
 * The provider's answer (query or form fields): exchanged and checked here, then the browser
 * goes back to the app with a one-time code (or with `error`). The flow's callback happens once:
 * a replayed callback finds it used and gets the expired page. `providerId` is the provider the
 * callback's path names (null for the shared path): a flow of another provider is not found, so
 * a code is only ever sent to the provider whose callback it came to (docs/external-identities.md,
 * "One callback per provider").
 */
export async function finishCallback(deps: Deps, response: URLSearchParams, providerId: string | null): Promise<CallbackAnswer> {
  const state = response.get("state");
  if (!state || state.length > 200) return EXPIRED;
  // the path's id is a stranger's text too: a NUL in it reached the query as a 500 (eleventh review)
  if (providerId !== null && (providerId.length > 100 || !isStorableText(providerId))) return EXPIRED;
  const flow = await deps.prisma.externalFlow.findFirst({
    where: { stateHash: hashOf(state), codeHash: null, consumedAt: null, provider: cameTo(providerId) },
  });
  if (!flow) return EXPIRED;
  // The callback takes its flow before the code goes to the provider: a callback repeated while
  // the first is still exchanging (a reload, a form posted twice) finds it taken, where both sent
  // the provider the same code and the loser's failure cancelled the winner's sign-in (30th review).
  const taken = await deps.prisma.$executeRaw`
    UPDATE external_flows SET code_hash = ${EXCHANGING} WHERE id = ${flow.id} AND code_hash IS NULL AND consumed_at IS NULL AND ${LIVE}`;
  if (taken !== 1) return EXPIRED;
  const failed = async (error: string, description: string): Promise<CallbackAnswer> => {
    await deps.prisma.externalFlow.updateMany({ where: { id: flow.id, consumedAt: null }, data: { consumedAt: new Date() } });
    return { redirect: withParams(flow.redirectUri, { error, error_description: description }) };
  };
  if (response.get("error")) return failed("ExternalSignInFailed", "the sign-in at the other service was cancelled or refused");
  let identity;
  try {
    const provider = await upstreamProvider(deps, flow.projectId, { id: flow.providerId });
    identity = await exchangeCode(deps, provider, { redirectUri: callbackUrl(deps, provider), state, nonce: flow.nonce, codeVerifier: flow.codeVerifier }, response);
  } catch (err) {
    if (err instanceof DomainError) return failed(err.code, err.message);
    throw err;
  }
  const code = randomToken();
  const { count } = await deps.prisma.externalFlow.updateMany({
    where: { id: flow.id, codeHash: EXCHANGING, consumedAt: null },
    data: { codeHash: hashOf(code), issuer: identity.issuer, subject: identity.subject, email: identity.email, emailVerified: identity.emailVerified, name: identity.name },
  });
  if (count !== 1) return EXPIRED;
  return { redirect: withParams(flow.redirectUri, { code }) };
}

export type CompleteInput = { stateId?: unknown; code?: unknown };
export type ProvenFlow = ExternalFlow & { issuer: string; subject: string };

function checkInput(input: CompleteInput): { stateId: string; code: string } {
  const { stateId, code } = input;
  if (typeof stateId !== "string" || typeof code !== "string" || !stateId || !code || stateId.length > 100 || code.length > 100) {
    throw new InvalidRequest("send the state_id from the start and the code the redirect brought");
  }
  return { stateId, code };
}

/**
 * The flow `state_id` names, when `code` is its one-time code: proven by the callback, of this
 * project, purpose and (for a link) account, not expired. `used` says whether a completion
 * already took it (its stored result is the answer to a retry). Anything else is OTPInvalid.
 */
export async function provenFlow(deps: Deps, actor: Actor, input: CompleteInput, purpose: FlowPurpose): Promise<ProvenFlow> {
  const { stateId, code } = checkInput(input);
  const flow = await deps.prisma.externalFlow.findFirst({
    where: { id: stateId, projectId: actor.projectId, purpose, accountId: actor.user?.accountId ?? null },
  });
  if (!flow || !(await isLive(deps.prisma, flow.id))) throw new OTPInvalid();
  if (!flow.codeHash || !flow.issuer || !flow.subject || !safeEqual(flow.codeHash, hashOf(code))) throw new OTPInvalid();
  return flow as ProvenFlow;
}

async function isLive(db: Db, flowId: string): Promise<boolean> {
  const [row] = await db.$queryRaw<{ live: boolean }[]>`SELECT ${LIVE} AS live FROM external_flows WHERE id = ${flowId}`;
  return row?.live === true;
}

/** The provider's latest profile claims on an external identifier (profile only: they decide nothing). */
/**
 * The identity is tied to the flow's provider, and so counts as a way its account signs in, only
 * while the flow is still there, read under its row lock: deleting the provider, or pointing it
 * at another issuer, ends its flows before it detaches their identities (providers.ts). A flow
 * finished after that (a link's claims written after its verify, an e-mail confirmation that
 * read its flow before) put the provider back on an identity it no longer signs in, and the
 * account's last address could then be removed on its strength (docs/external-identities.md,
 * "Removing and unmerging").
 */
export async function saveClaims(tx: Tx, identifierId: string, flow: ProvenFlow): Promise<void> {
  const [live] = await tx.$queryRaw<{ live: number }[]>`SELECT 1 AS live FROM external_flows WHERE id = ${flow.id} FOR KEY SHARE`;
  const claims = { providerId: live ? flow.providerId : null, email: flow.email, emailVerified: flow.emailVerified, name: flow.name };
  await tx.externalIdentity.upsert({ where: { identifierId }, create: { identifierId, ...claims }, update: claims });
}
