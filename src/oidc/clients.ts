// OpenID Connect clients of a project (docs/oidc.md), managed with the secret key. A
// confidential client's secret is shown once and kept as its SHA-256; another project's client
// is simply not found (the project is in every `where`).
import { randomBytes } from "node:crypto";
import { receivableByOthers } from "../auth/redirect-uris.ts";
import type { Actor, Deps } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { safeEqual, sha256Hex } from "../crypto.ts";
import { transaction } from "../db/transaction.ts";
import { InvalidRequest, NotFound } from "../errors.ts";
import type { OAuthClient } from "../generated/prisma/client.ts";
import { isNative } from "./client-metadata.ts";
import { endGrants } from "./grants.ts";
import { charLength, nameText, unshowable } from "../text.ts";

export type ClientType = "public" | "confidential";
export type ClientInput = { name?: string | null; redirectUris?: readonly string[] | null; type?: ClientType | null; firstParty?: boolean | null };
export type ClientWithSecret = { client: OAuthClient; clientSecret: string | null };

const MAX_REDIRECT_URIS = 20;
const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"];
const MAX_NAME = 100;
const NOT_FOUND = "no OAuth client with that id in this project";

const newClientId = () => `lgc_${randomBytes(16).toString("base64url")}`;
const newSecret = () => `lgcs_${randomBytes(32).toString("base64url")}`;
const newRowId = () => `oac_${randomBytes(12).toString("base64url")}`;

/** Whether `presented` is the client's secret, compared in constant time on the hashes. */
export function secretMatches(secretHash: string | null | undefined, presented: string): boolean {
  return !!secretHash && safeEqual(sha256Hex(presented), secretHash);
}

function checkName(name: unknown): string {
  // counted in characters as people count them, in NFC (src/text.ts)
  const n = typeof name === "string" ? nameText(name) : "";
  if (!n || charLength(n) > MAX_NAME) throw new InvalidRequest(`name must be 1 to ${MAX_NAME} characters`);
  // the consent page asks users "Allow <name>?": nothing that garbles, disguises or blanks it (src/text.ts)
  const why = unshowable(n);
  if (why) throw new InvalidRequest(`name ${why}`);
  return n;
}

/**
 * Redirect URIs are matched exactly, so they are stored exactly as given: absolute, no fragment,
 * no user or password, no `*`, https, or http only for a loopback host (RFC 8252 native apps
 * and local development), or a private-use scheme with a dot (com.example.app:/callback) for
 * mobile apps.
 */
export function checkRedirectUris(uris: unknown): string[] {
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS) {
    throw new InvalidRequest(`redirectUris needs 1 to ${MAX_REDIRECT_URIS} absolute URIs`);
  }
  const out = uris.map((raw) => {
    if (typeof raw !== "string" || charLength(raw) > 2048) throw new InvalidRequest("a redirect URI must be a string of at most 2048 characters");
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new InvalidRequest(`redirect URI ${JSON.stringify(raw)} is not an absolute URI`);
    }
    if (url.hash || raw.includes("#")) throw new InvalidRequest(`redirect URI ${raw} must not have a fragment`);
    // user:pw@ makes a URI whose host is not what a reader sees, and shows a secret to whoever
    // reads the client; a `*` is read as a wildcard by people and some libraries, never by the
    // exact match linkgate does (docs/oidc.md, "Clients")
    if (url.username || url.password || /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(raw)) {
      throw new InvalidRequest("a redirect URI must not carry a user or password");
    }
    if (raw.includes("*")) throw new InvalidRequest(`redirect URI ${raw} must not have a wildcard (*)`);
    const loopback = LOOPBACK_HOSTS.includes(url.hostname);
    const ok = url.protocol === "https:" || (url.protocol === "http:" && loopback) || /^[a-z][a-z0-9+-]*\.[a-z0-9.+-]+:$/.test(url.protocol);
    if (!ok) throw new InvalidRequest(`redirect URI ${raw} must be https (http only on a loopback host) or an app's private-use scheme`);
    return raw;
  });
  // An app's private-use scheme makes the client native (src/oidc/client-metadata.ts), and
  // oidc-provider refuses a native client with an https redirect URI on a loopback host (its
  // claimed https URIs must name a real host): such a client was registered, and then every
  // authorization, token and logout request of it failed with invalid_client_metadata.
  const loopbackHttps = isNative(out) ? out.find(isHttpsOnLoopback) : undefined;
  if (loopbackHttps) {
    throw new InvalidRequest(
      `redirect URI ${loopbackHttps} cannot be beside an app's private-use scheme: such a client is a native app, whose loopback redirect URIs are http (http://127.0.0.1:PORT/…)`,
    );
  }
  return [...new Set(out)];
}

function isHttpsOnLoopback(raw: string): boolean {
  const url = new URL(raw);
  return url.protocol === "https:" && LOOPBACK_HOSTS.includes(url.hostname);
}

function checkType(type: unknown): ClientType {
  if (type !== "public" && type !== "confidential") throw new InvalidRequest("type must be PUBLIC or CONFIDENTIAL");
  return type;
}

/**
 * A first-party client's tokens manage the account (docs/oidc.md, "What a token reaches"), and its
 * redirect URIs receive external sign-ins' results (src/auth/external/flows.ts), so it must be a
 * client nobody else can pose as. A public client cannot be one when its codes may land where
 * another program receives them: its client_id is public and it has no secret, so any app on the
 * device may claim its private-use scheme, show the user the genuine page and take the code with
 * its own PKCE verifier (RFC 8252 section 8.6; 23rd review). A loopback address is the same in
 * production, where any program on the user's machine may listen on its port (26th review); in
 * development it is the app being built (the README's first steps). A project's own native app
 * uses a claimed https redirect (Android App Links, Apple Universal Links), which only it receives.
 */
export function checkFirstParty(c: { firstParty: boolean; type: ClientType; redirectUris: readonly string[] }, production: boolean): boolean {
  if (!c.firstParty || c.type !== "public") return c.firstParty;
  const receivable = receivableRedirects(c.redirectUris, production);
  if (receivable.length) {
    throw new InvalidRequest(
      `a PUBLIC client cannot be first-party with ${receivable[0]}: another app or program on the device can receive its codes. Use claimed https redirect URIs (App Links, Universal Links), or a CONFIDENTIAL client for a server`,
    );
  }
  return c.firstParty;
}

/** A public client's redirect URIs another app or program on the device could receive codes at. */
const receivableRedirects = (uris: readonly string[], production: boolean) => uris.filter((u) => receivableByOthers(u, production));

/**
 * Told at every production start while first-party PUBLIC clients have redirect URIs another
 * program on the device can receive: made in development, or before the rule, they stay
 * first-party until changed (their migration could not tell production from development:
 * docs/operations.md, upgrade notes).
 */
export async function warnReceivableFirstParty(deps: Pick<Deps, "prisma" | "logger" | "config">): Promise<void> {
  if (!deps.config.production) return;
  const clients = await deps.prisma.oAuthClient.findMany({
    where: { firstParty: true, type: "public" },
    select: { clientId: true, projectId: true, redirectUris: true },
  });
  const receivable = clients.filter((c) => receivableRedirects(c.redirectUris, true).length);
  if (receivable.length) {
    deps.logger.warn(
      { clients: receivable.slice(0, 20).map((c) => ({ clientId: c.clientId, projectId: c.projectId })) },
      `${receivable.length} first-party PUBLIC client(s) have a redirect URI another app or program on the device can receive, and its codes would manage the account: give each claimed https redirect URIs, or make it third-party with updateOAuthClient(input: {firstParty: false})`,
    );
  }
}

export async function createClient(deps: Deps, actor: Actor, input: ClientInput): Promise<ClientWithSecret> {
  const name = checkName(input.name);
  const redirectUris = checkRedirectUris(input.redirectUris);
  const type = checkType(input.type);
  const firstParty = checkFirstParty({ firstParty: input.firstParty ?? false, type, redirectUris }, deps.config.production);
  const clientSecret = type === "confidential" ? newSecret() : null;
  const client = await deps.prisma.oAuthClient.create({
    data: {
      id: newRowId(),
      projectId: actor.projectId,
      clientId: newClientId(),
      name,
      redirectUris,
      type,
      secretHash: clientSecret ? sha256Hex(clientSecret) : null,
      firstParty,
    },
  });
  forgetClientOrigins(deps);
  return { client, clientSecret };
}

/** One of the project's clients, locked for the rest of the transaction; another project's is NotFound. */
async function lockedClient(tx: Tx, actor: Actor, id: string) {
  const [row] = await tx.$queryRaw<{ client_id: string; type: ClientType; redirect_uris: string[]; first_party: boolean }[]>`
    SELECT client_id, type::text AS type, redirect_uris, first_party FROM oauth_clients WHERE id = ${id} AND project_id = ${actor.projectId} FOR UPDATE`;
  if (!row) throw new NotFound(NOT_FOUND);
  return row;
}

/** Changes what was given; the type of a client is fixed at creation (its secret depends on it). */
export async function updateClient(deps: Deps, actor: Actor, id: string, input: ClientInput): Promise<OAuthClient> {
  if (input.type != null) throw new InvalidRequest("a client's type cannot change; create another client");
  const name = input.name != null ? checkName(input.name) : undefined;
  const redirectUris = input.redirectUris != null ? checkRedirectUris(input.redirectUris) : undefined;
  const updated = await transaction(deps.prisma, async (tx) => {
    // locked, so that two updates (one making it first-party, one adding an app's scheme) cannot
    // each pass the first-party rule on the row the other is changing
    const row = await lockedClient(tx, actor, id);
    const firstParty = checkFirstParty({
      firstParty: input.firstParty ?? row.first_party,
      type: row.type,
      redirectUris: redirectUris ?? row.redirect_uris,
    }, deps.config.production);
    // Made third-party: what it was given as a first-party app, where no consent page asked the
    // user, ends. Kept, its refresh tokens went on reading userinfo under an app the user never
    // approved as a third party, listed nowhere the user could withdraw it (31st review).
    if (row.first_party && !firstParty) await endGrants(tx, { clientId: row.client_id, unconsented: true });
    return tx.oAuthClient.update({ where: { id }, data: { ...(name ? { name } : {}), ...(redirectUris ? { redirectUris } : {}), firstParty } });
  });
  forgetClientOrigins(deps);
  return updated;
}

/** Deleting a client ends what it was given: its codes, tokens, remembered consents and sessions. */
export async function deleteClient(deps: Deps, actor: Actor, id: string): Promise<{ id: string }> {
  const deleted = await transaction(deps.prisma, async (tx) => {
    // Locked as it is read: read without the lock, a client another request deleted meanwhile
    // was found, then had no row left for Prisma's delete, which throws; the second of two
    // deletions answered a fault instead of NotFound.
    const client = await lockedClient(tx, actor, id);
    await tx.oAuthClient.delete({ where: { id } });
    await tx.oAuthConsent.deleteMany({ where: { clientId: client.client_id } });
    await endGrants(tx, { clientId: client.client_id });
    return { id };
  });
  forgetClientOrigins(deps);
  return deleted;
}

/** A new secret for a confidential client; the old one stops working at once. */
export async function rotateClientSecret(deps: Deps, actor: Actor, id: string): Promise<ClientWithSecret> {
  const client = await deps.prisma.oAuthClient.findFirst({ where: { id, projectId: actor.projectId } });
  if (!client) throw new NotFound(NOT_FOUND);
  if (client.type !== "confidential") throw new InvalidRequest("a public client has no secret to rotate");
  const clientSecret = newSecret();
  // Conditional on the secret read, as a webhook's rotation is (docs/oidc.md, "Clients"): with
  // Prisma's update, a client deleted meanwhile answered a fault, and of two rotations at the
  // same moment both answered a secret, the first already replaced by the second: its caller
  // deployed a secret that was invalid_client from the start.
  const [updated] = await deps.prisma.oAuthClient.updateManyAndReturn({
    where: { id, projectId: actor.projectId, secretHash: client.secretHash },
    data: { secretHash: sha256Hex(clientSecret) },
  });
  if (!updated) {
    if (!(await deps.prisma.oAuthClient.count({ where: { id, projectId: actor.projectId } }))) throw new NotFound(NOT_FOUND);
    throw new InvalidRequest("the client's secret was rotated by another request at the same moment; rotate again");
  }
  return { client: updated, clientSecret };
}

/** The client by its public client_id, whatever its project: oidc-provider's lookup. */
export function findByClientId(deps: Deps, clientId: string): Promise<OAuthClient | null> {
  return deps.prisma.oAuthClient.findUnique({ where: { clientId } });
}

/**
 * How long a gateway answers CORS preflights from the public clients' origins it last read. A
 * preflight needs no credential, so reading the clients for each one let anyone make the
 * database read every public client's redirect URIs as often as they liked; read at most this
 * often, a flood of preflights costs a Set lookup each. A client added, changed or deleted
 * through this gateway is seen at once; through another, within this time (docs/oidc.md, "CORS").
 */
export const CLIENT_ORIGINS_TTL_MS = 60_000;

type ClientOrigins = { readAt: number; origins: Promise<Set<string>> };
const clientOrigins = new WeakMap<object, ClientOrigins>();

/** The web origins of every public client's redirect URIs, as browsers send them (URL.origin: lower case, no default port, Unicode hosts in punycode). */
async function readPublicClientOrigins(deps: Pick<Deps, "prisma">): Promise<Set<string>> {
  const rows = await deps.prisma.$queryRaw<{ uri: string }[]>`
    SELECT DISTINCT u AS uri FROM oauth_clients c, unnest(c.redirect_uris) AS u WHERE c.type = 'public'`;
  const origins = new Set<string>();
  for (const { uri } of rows) {
    const origin = URL.canParse(uri) ? new URL(uri).origin : "null";
    if (origin !== "null") origins.add(origin);
  }
  return origins;
}

/** Drops this gateway's copy of the public clients' origins after a client changed. */
function forgetClientOrigins(deps: Pick<Deps, "prisma">): void {
  clientOrigins.delete(deps.prisma);
}

/**
 * Whether `origin` is the web origin of a redirect URI of some public client, of any project. A
 * CORS preflight to the token or revocation endpoint names no client (a browser sends no body
 * with it), so it is answered for these origins only; the request that follows is answered by
 * its own client's origins (docs/oidc.md, "CORS").
 */
export async function isPublicClientOrigin(deps: Pick<Deps, "prisma">, origin: string): Promise<boolean> {
  if (!URL.canParse(origin) || new URL(origin).origin !== origin || !/^https?:/.test(origin)) return false;
  let known = clientOrigins.get(deps.prisma);
  if (!known || Date.now() - known.readAt > CLIENT_ORIGINS_TTL_MS) {
    known = { readAt: Date.now(), origins: readPublicClientOrigins(deps) };
    clientOrigins.set(deps.prisma, known);
    // a failed read is not kept: the next preflight reads again
    known.origins.catch(() => forgetClientOrigins(deps));
  }
  return (await known.origins).has(origin);
}
