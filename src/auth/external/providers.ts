// A project's external identity providers (docs/external-identities.md, "Providers"), managed
// with the secret key. The client secret is sealed with the master key and never returned;
// another project's provider is simply not found (the project is in every `where`).
import type { Actor, Deps } from "../../deps.ts";
import { seal, unseal } from "../../crypto.ts";
import { InvalidRequest, ProviderNotFound, Unauthenticated } from "../../errors.ts";
import type { IdentityProvider } from "../../generated/prisma/client.ts";
import { newId } from "../../ids.ts";
import type { Tx } from "../../db/client.ts";
import { lockAccounts, lockProject } from "../../db/locks.ts";
import { DecideAgain, transaction } from "../../db/transaction.ts";
import { assertSafeTarget, UnsafeWebhookTarget } from "../../webhooks/target-guard.ts";
import { charLength, isDisguising, nameText, unshowable } from "../../text.ts";
import { PRESETS, type Preset } from "./presets.ts";
import { forgetProvider, isDiscoveryUrl, type UpstreamProvider } from "./upstream.ts";

export type ProviderInput = {
  preset?: Preset | null;
  slug?: string | null;
  displayName?: string | null;
  issuer?: string | null;
  clientId?: string | null;
  clientSecret?: string | null;
  scopes?: readonly string[] | null;
  /** Only `false` on an update: moves a provider made before per-provider callbacks to its own. */
  sharedCallback?: boolean | null;
};

/** What an admin sees of a provider: everything but the secret, and where to send users back. */
export type ProviderView = Omit<IdentityProvider, "clientSecret"> & { hasClientSecret: boolean; callbackUrl: string };

const SLUG = /^[a-z0-9][a-z0-9-]{0,39}$/;

/** Where the providers made before per-provider callbacks still come back to. */
export const SHARED_CALLBACK_PATH = "/auth/external/callback";

/**
 * Each provider comes back to a path of its own, and a callback finishes only a flow of the
 * provider its path names: with one path for all, a provider an attacker controls could be sent
 * an honest provider's code (a mix-up, docs/external-identities.md "One callback per provider").
 * Not under the shared path: GitHub accepts any subdirectory of a registered callback URL, so a
 * provider still registered with the shared path could otherwise be sent to another one's path.
 */
export const callbackPath = (p: Pick<IdentityProvider, "id" | "sharedCallback">) =>
  p.sharedCallback ? SHARED_CALLBACK_PATH : `/auth/external/${p.id}/callback`;

export const callbackUrl = (deps: Deps, p: Pick<IdentityProvider, "id" | "sharedCallback">) =>
  `${deps.keys.issuer.replace(/\/+$/, "")}${callbackPath(p)}`;

function view(deps: Deps, p: IdentityProvider): ProviderView {
  const { clientSecret, ...rest } = p;
  return { ...rest, hasClientSecret: !!clientSecret, callbackUrl: callbackUrl(deps, p) };
}

/**
 * Told at every start while providers of any project still use the shared callback: among
 * themselves they can still be mixed up, and only their admins can move them (docs/external-identities.md).
 */
export async function warnSharedCallbacks(deps: Pick<Deps, "prisma" | "logger">): Promise<void> {
  const shared = await deps.prisma.identityProvider.count({ where: { sharedCallback: true } });
  if (shared > 0) {
    deps.logger.warn(
      { providers: shared },
      `${shared} identity provider(s) still use the shared callback /auth/external/callback, where providers can be sent each other's codes: register each one's own callbackUrl at the provider, then updateIdentityProvider(id: "idp_…", input: {sharedCallback: false})`,
    );
  }
}

/**
 * A provider on the shared callback stays the provider it was: pointed at another issuer (a host
 * its project controls) it would be sent the codes of every other provider still there, which a
 * mix-up turns into their users' accounts (eleventh review). Moving to its own callback first
 * (sharedCallback: false, in the same update or before) lifts this.
 */
function assertSameEndpoints(current: IdentityProvider, next: Pick<IdentityProvider, "preset" | "issuer" | "clientId">): void {
  if (next.preset !== current.preset || next.issuer !== current.issuer || next.clientId !== current.clientId) {
    throw new InvalidRequest("a provider on the shared callback keeps its preset, issuer and client id: move it to its own callback first (sharedCallback: false)");
  }
}

/** A provider leaves the shared callback for good: going back would reopen the mix-up for it. */
function sharedCallbackChange(input: ProviderInput): { sharedCallback?: false } {
  if (input.sharedCallback == null) return {};
  if (input.sharedCallback !== false) throw new InvalidRequest("sharedCallback can only be set to false: a provider does not go back to the shared callback");
  return { sharedCallback: false };
}

function text(value: unknown, field: string, max: number, opts: { name?: boolean } = {}): string {
  // counted in characters as people count them (src/text.ts), once trimmed, as stored; a name
  // shown to people is stored in NFC, a value another party compares (an issuer, a client id
  // or secret) exactly as given
  const trimmed = typeof value !== "string" ? "" : opts.name ? nameText(value) : value.trim();
  if (!trimmed || charLength(trimmed) > max) throw new InvalidRequest(`${field} must be 1 to ${max} characters`);
  // the display name goes into pages and the subject of mail to users, where a control or a
  // bidirectional override character would garble or disguise it; no field has a use for one
  // inside it (a pasted secret's trailing newline is trimmed, as before), and a name must show
  const why = opts.name ? unshowable(trimmed) : isDisguising(trimmed) ? "must not contain control characters" : null;
  if (why) throw new InvalidRequest(`${field} ${why}`);
  return trimmed;
}

/** An issuer is an absolute https URL without a fragment (OpenID Connect Discovery §2), whose host is public. */
async function checkIssuer(deps: Deps, raw: unknown): Promise<string> {
  const issuer = text(raw, "issuer", 2048).replace(/\/+$/, "");
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new InvalidRequest("issuer must be an absolute URL");
  }
  if (issuer.includes("#") || url.search || url.username || url.password) throw new InvalidRequest("issuer must have no query, fragment, user or password");
  // the document's URL would be fetched as it is and its issuer taken unchecked (upstream.ts, isDiscoveryUrl)
  if (isDiscoveryUrl(issuer)) throw new InvalidRequest("issuer must be the issuer itself, not a discovery document's URL (/.well-known/…)");
  try {
    await assertSafeTarget(issuer, { allowPrivate: deps.config.webhookAllowPrivate, signal: AbortSignal.timeout(deps.config.upstreamTimeoutMs) });
  } catch (err) {
    if (err instanceof UnsafeWebhookTarget) throw new InvalidRequest(err.message.replace(/webhook (URL|host)/g, "issuer"));
    throw err;
  }
  // Stored as its URL spells it (a host in lower case, no default port): a GitHub identity is
  // <the issuer as stored>#<user id>, so a provider added again after a deletion, spelled
  // otherwise, made its users' sign-ins new accounts, where the same issuer's provider signs them
  // in again (docs/external-identities.md, "Removing and unmerging"). OpenID Connect discovery
  // compares issuers as URLs, so this changes nothing for the other presets.
  const spelled = url.href.replace(/\/+$/, "");
  // percent-encoding can lengthen it: an identity's issuer is at most 2048 characters (upstream.ts)
  if (charLength(spelled) > 2048) throw new InvalidRequest("issuer must be 1 to 2048 characters");
  return spelled;
}

function checkScopes(preset: Preset, scopes: readonly string[] | null | undefined): string {
  if (!scopes) return PRESETS[preset].scopes;
  if (scopes.length > 20 || scopes.some((s) => typeof s !== "string" || !/^[\x21\x23-\x5b\x5d-\x7e]{1,100}$/.test(s))) {
    throw new InvalidRequest("scopes must be at most 20 scope tokens (RFC 6749 §3.3)");
  }
  if (preset !== "github" && !scopes.includes("openid")) throw new InvalidRequest("an OpenID Connect provider's scopes must include openid");
  return [...new Set(scopes)].join(" ");
}

function checkPreset(value: unknown): Preset {
  if (typeof value !== "string" || !(value in PRESETS)) throw new InvalidRequest(`preset must be one of ${Object.keys(PRESETS).join(", ")}`);
  return value as Preset;
}

async function providerData(deps: Deps, preset: Preset, input: ProviderInput) {
  const issuerRaw = input.issuer ?? PRESETS[preset].issuer;
  if (!issuerRaw) throw new InvalidRequest(preset === "microsoft" ? "issuer is needed: https://login.microsoftonline.com/<tenant id>/v2.0" : "issuer is needed for a generic OpenID Connect provider");
  const slug = input.slug ?? preset;
  if (typeof slug !== "string" || !SLUG.test(slug)) throw new InvalidRequest("slug must be 1 to 40 characters: a-z, 0-9 and -, starting with a letter or digit");
  return {
    slug,
    displayName: text(input.displayName ?? PRESETS[preset].displayName, "displayName", 60, { name: true }),
    issuer: await checkIssuer(deps, issuerRaw),
    clientId: text(input.clientId, "clientId", 512),
    scopes: checkScopes(preset, input.scopes),
  };
}

const sealSecret = (deps: Deps, secret: string | null | undefined) =>
  secret == null ? null : seal(deps.master, text(secret, "clientSecret", 8192));

async function uniqueSlug<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if ((err as { code?: string }).code === "P2002") throw new InvalidRequest("another provider of this project has that slug");
    throw err;
  }
}

/**
 * A project holds at most LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT providers (20 unless
 * configured; docs/external-identities.md, "Providers"). Every sign-in page's button list
 * (/auth/external/providers, the hosted /login, an app's authorization) and the dashboard read
 * all of a project's providers, unpaged, and the discovery cache is shared by every project
 * (500 providers per process): with no bound one secret key could add providers without end,
 * making each of those reads larger and pushing every other project's discovery out of the
 * cache. Counted and added under the project's lock, as webhooks are, so two adds at once
 * cannot both take the last place.
 */
export async function createProvider(deps: Deps, actor: Actor, input: ProviderInput): Promise<ProviderView> {
  const preset = checkPreset(input.preset);
  sharedCallbackChange(input);
  const data = await providerData(deps, preset, input);
  const clientSecret = sealSecret(deps, input.clientSecret);
  const row = await uniqueSlug(() =>
    transaction(deps.prisma, async (tx) => {
      if (!(await lockProject(tx, actor.projectId))) throw new Unauthenticated();
      const most = deps.config.identityProvidersPerProject;
      if ((await tx.identityProvider.count({ where: { projectId: actor.projectId } })) >= most) {
        throw new InvalidRequest(`a project holds at most ${most} identity providers; delete one first`);
      }
      return tx.identityProvider.create({ data: { id: newId("idp"), projectId: actor.projectId, preset, ...data, clientSecret } });
    }),
  );
  return view(deps, row);
}

/** Fields left out keep their value; `clientSecret: null` keeps the secret too (it cannot be read back to resend). */
export async function updateProvider(deps: Deps, actor: Actor, id: string, input: ProviderInput): Promise<ProviderView> {
  const current = await deps.prisma.identityProvider.findFirst({ where: { id, projectId: actor.projectId } });
  if (!current) throw new ProviderNotFound();
  const preset = input.preset == null ? current.preset : checkPreset(input.preset);
  const data = await providerData(deps, preset, {
    slug: input.slug ?? current.slug,
    displayName: input.displayName ?? current.displayName,
    issuer: input.issuer ?? current.issuer,
    clientId: input.clientId ?? current.clientId,
    scopes: input.scopes ?? current.scopes.split(" "),
  });
  // The same URL spelled otherwise (a host in capitals, an explicit :443) is the same issuer, and
  // keeps the spelling stored: a GitHub identity is <the issuer as stored>#<user id> (no ID token
  // says its `iss`), so a new spelling made its users' next sign-ins new accounts, while their
  // identities, not detached below, still counted as a way their accounts sign in
  // (docs/external-identities.md, "Removing and unmerging").
  if (new URL(data.issuer).href === new URL(current.issuer).href) data.issuer = current.issuer;
  const secret = input.clientSecret == null ? {} : { clientSecret: sealSecret(deps, input.clientSecret) };
  const moved = sharedCallbackChange(input);
  if (current.sharedCallback && moved.sharedCallback !== false) assertSameEndpoints(current, { preset, ...data });
  const row = await uniqueSlug(() =>
    transaction(deps.prisma, async (tx) => {
      // Pointed at another issuer, it signs in that issuer's users: the identities it signed in
      // before (<issuer>#<subject>) no longer sign in with it, so they stop counting as a way
      // their accounts sign in, as if it had been deleted (docs/external-identities.md,
      // "Removing and unmerging"). Counted still, an account's last address could be removed on
      // their strength, and the account could no longer be signed in to at all. Compared as
      // URLs: an ID token's `iss` is the discovered issuer, which may differ from the one stored
      // by a trailing slash, so other updates leave the identities alone.
      const detaches = new URL(data.issuer).href !== new URL(current.issuer).href;
      if (detaches) {
        // its sign-ins in progress end, as a deletion ends them: one at the old issuer finished
        // afterwards put the provider back on its identity, which then counted again (saveClaims)
        await tx.externalFlow.deleteMany({ where: { providerId: current.id } });
        await lockHolders(tx, actor.projectId, current.id);
      }
      // Conditional, not Prisma's update, which throws when no row matches: a provider deleted
      // by another request after it was read above answered a fault, not ProviderNotFound.
      const [updated] = await tx.identityProvider.updateManyAndReturn({
        where: { id: current.id, projectId: actor.projectId },
        data: { preset, ...data, ...secret, ...moved },
      });
      if (!updated) throw new ProviderNotFound();
      if (detaches) await tx.externalIdentity.updateMany({ where: { providerId: current.id }, data: { providerId: null } });
      return updated;
    }),
  );
  forgetProvider(row.id);
  return view(deps, row);
}

/**
 * The accounts holding identities of the provider, row-locked (in id order, lockAccounts), then
 * the provider's row: what is done next stops those identities counting as a way in
 * (docs/external-identities.md, "Removing and unmerging"), and a removal decides from that count
 * under its account's lock (src/linking/service.ts, removeLink). Without these locks a removal
 * that ran while the provider was being deleted counted its identity still, and left an
 * account whose only sign-in was an identity of the deleted provider; now one of the two goes
 * first and the other sees what it did. Accounts before the provider, as a sign-in or a link
 * takes them (its account, then the provider an identity names). With the provider's row
 * locked no identity can join it; one that joined between the first read and the lock makes
 * the whole transaction run again (DecideAgain).
 */
async function lockHolders(tx: Tx, projectId: string, providerId: string): Promise<void> {
  const holders = async () =>
    (
      await tx.$queryRaw<{ account_id: string }[]>`
        SELECT DISTINCT i.account_id FROM external_identities e JOIN identifiers i ON i.id = e.identifier_id
        WHERE e.provider_id = ${providerId} AND i.project_id = ${projectId}`
    ).map((r) => r.account_id);
  const locked = new Set((await lockAccounts(tx, projectId, await holders())).map((a) => a.id));
  await tx.$queryRaw`SELECT 1 FROM identity_providers WHERE id = ${providerId} FOR UPDATE`;
  if ((await holders()).some((id) => !locked.has(id))) throw new DecideAgain("an identity joined the provider meanwhile");
}

/** Its identities stay on their accounts (they no longer sign in); its flows in progress end. */
export async function deleteProvider(deps: Deps, actor: Actor, id: string): Promise<ProviderView> {
  const current = await transaction(deps.prisma, async (tx) => {
    const found = await tx.identityProvider.findFirst({ where: { id, projectId: actor.projectId } });
    if (!found) throw new ProviderNotFound();
    // its flows first: a sign-in finishing holds its flow, then takes its account's lock
    await tx.externalFlow.deleteMany({ where: { providerId: found.id } });
    await lockHolders(tx, actor.projectId, found.id);
    // Read unlocked above: another deletion committed meanwhile leaves nothing to delete, and
    // this one answered that it had deleted the provider too; the second of two is
    // ProviderNotFound, as an update of a deleted provider is (docs/external-identities.md).
    const { count } = await tx.identityProvider.deleteMany({ where: { id: found.id, projectId: actor.projectId } });
    if (!count) throw new ProviderNotFound();
    return found;
  });
  forgetProvider(current.id);
  return view(deps, current);
}

export async function listProviders(deps: Deps, actor: Actor): Promise<ProviderView[]> {
  const rows = await deps.prisma.identityProvider.findMany({ where: { projectId: actor.projectId }, orderBy: { createdAt: "asc" } });
  return rows.map((r) => view(deps, r));
}

/** What a sign-in page shows: the buttons, nothing about the configuration. */
export async function publicProviders(deps: Deps, actor: Actor): Promise<Array<{ slug: string; display_name: string; preset: Preset }>> {
  const rows = await deps.prisma.identityProvider.findMany({
    where: { projectId: actor.projectId },
    orderBy: { createdAt: "asc" },
    select: { slug: true, displayName: true, preset: true },
  });
  return rows.map((r) => ({ slug: r.slug, display_name: r.displayName, preset: r.preset }));
}

/** A provider by slug (or id), with its secret unsealed for one call. */
export async function upstreamProvider(
  deps: Deps,
  projectId: string,
  by: { slug?: unknown; id?: string },
): Promise<UpstreamProvider & { slug: string; displayName: string; sharedCallback: boolean }> {
  if (by.slug !== undefined && (typeof by.slug !== "string" || !SLUG.test(by.slug))) throw new ProviderNotFound();
  const row = await deps.prisma.identityProvider.findFirst({
    where: { projectId, ...(by.id ? { id: by.id } : { slug: by.slug as string }) },
  });
  if (!row) throw new ProviderNotFound();
  const clientSecret = row.clientSecret ? unseal(deps.master, row.clientSecret) : null;
  return { ...row, clientSecret };
}
