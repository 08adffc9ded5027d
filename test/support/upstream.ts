// Real upstream identity providers on loopback for the external-identity tests (issue 27):
// linkgate's relying party (openid-client) talks to them over real HTTP, with real discovery,
// PKCE, ID tokens and JWKS, so the tests exercise what production does. HTTP on 127.0.0.1 only.
//
// startUpstreamOidc: an oidc-provider instance acting as "Google" or any OpenID Connect provider.
// startUpstreamGithub (upstream-github.ts): GitHub's OAuth 2.0 endpoints and user API.
//
// The test controls who signs in: the upstream's sign-in finishes by itself for the chosen
// user, with consent given, so a plain HTTP client (followAuthorization) and Chromium alike just
// follow redirects from the authorization URL to the app's callback.
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK, type JWTPayload } from "jose";
import { followOnUpstream, formPostOnUpstream, startLoopbackServer, type UpstreamControls } from "./upstream-server.ts";

export { startUpstreamGithub, type GithubEmail, type GithubUser, type UpstreamGithub } from "./upstream-github.ts";

export type UpstreamUser = { sub: string; email?: string; email_verified?: boolean; name?: string };

export type UpstreamOidc = UpstreamControls & {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Registers the app's callback (known only once linkgate runs); anything else is refused like a real provider does. */
  addRedirectUri(url: string): void;
  /** Replaces the users; a changed e-mail or name shows in the next sign-in's claims. */
  setUsers(users: UpstreamUser[]): void;
  /** Who signs in from now on (until changed); by default the first user of setUsers. */
  nextLogin(sub: string): void;
  /** Adds the user (or replaces the one with its sub) and makes it the one who signs in. */
  loginAs(user: UpstreamUser): void;
  /** The next sign-in is cancelled by the user: the app's callback gets error=access_denied. */
  refuseNextLogin(): void;
  /** See followOnUpstream: the app's callback URL (code, state, iss) the upstream redirects to. */
  followAuthorization(authorizationUrl: string | URL): Promise<URL>;
  /** See formPostOnUpstream: for response_mode=form_post, the form the upstream's last page posts to the app's callback. */
  formPostAuthorization(authorizationUrl: string | URL): Promise<{ action: URL; fields: URLSearchParams }>;
  /**
   * Rotates the signing key. By default the way Google and Microsoft do it: the new key was
   * published in the JWKS before it signs, so a relying party's cached JWKS already has it.
   * `unannounced`: the new key was never published, so only a relying party that fetches the
   * JWKS again on an unknown `kid` validates. Retired keys stay published either way.
   */
  rotateKeys(opts?: { unannounced?: boolean }): Promise<void>;
  /**
   * From now on (until called with false) the JWKS no longer lists the key ID tokens are signed
   * with: to a relying party that checks signatures this is a forged ID token from the token
   * endpoint itself. Use a fresh upstream, as a relying party may have cached the JWKS.
   */
  signWithUnpublishedKey(on: boolean): void;
  /** The `kid` the upstream signs ID tokens with now. */
  currentKid(): string;
  /**
   * An ID token the test writes itself (forged or replayed ID tokens): signed with the upstream's
   * current key, or with `key: "unknown"`, a key the JWKS never had. Defaults: iss, aud = the
   * client, iat now, exp in 10 minutes.
   */
  mintIdToken(claims: JWTPayload & { sub: string }, opts?: { key?: "current" | "unknown" }): Promise<string>;
};

type Options = {
  /** "RS256" like Google (and openid-client's default expectation), or "ES256" */
  alg?: "RS256" | "ES256";
  users?: UpstreamUser[];
  redirectUris?: string[];
  /** More fields in the discovery document (oidc-provider's `discovery` option) */
  discovery?: Record<string, unknown>;
};

// oidc-provider ships no types; src/oidc/oidc-provider.d.ts declares the part linkgate uses.
// The fixture needs a little more of the documented API, typed here for this file alone.
type ProviderInstance = {
  Client: { prototype: { redirectUriAllowed(uri: string): boolean } };
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ prompt: { name: string } }>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, opts: { mergeWithLastSubmission: boolean }): Promise<void>;
};
type OidcModule = {
  default: new (issuer: string, configuration: Record<string, unknown>) => ProviderInstance;
};

let loaded: Promise<OidcModule> | undefined;
/** As src/oidc/provider.ts does: the library warns about Node 20 on import, wrongly (it runs here). */
function loadOidcProvider(): Promise<OidcModule> {
  loaded ??= (async () => {
    const warn = console.warn;
    console.warn = (...args: unknown[]) => {
      if (!String(args[0]).includes("Unsupported runtime")) warn(...args);
    };
    try {
      return (await import("oidc-provider")) as unknown as OidcModule;
    } finally {
      console.warn = warn;
    }
  })();
  return loaded;
}

const SESSION_COOKIE = "upstream_session";

/**
 * The upstream forgets browsers: every authorization signs in the user the test chose, also in a
 * browser where another user signed in before (oidc-provider would first make that browser sign
 * its previous user out, a page of its own, and sign the same user in silently otherwise).
 */
function forgetSession(req: IncomingMessage) {
  const kept = req.headers.cookie?.split(/;\s*/).filter((c) => !c.startsWith(`${SESSION_COOKIE}=`) && !c.startsWith(`${SESSION_COOKIE}.`));
  if (kept) req.headers.cookie = kept.join("; ");
}

async function newKey(alg: "RS256" | "ES256"): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomBytes(8).toString("hex"), alg, use: "sig" };
}

/**
 * oidc-provider's own storage, one per upstream: the library's default memory adapter is shared
 * by every instance in the process, and two upstreams must not redeem each other's codes. It also
 * outlives a key rotation, which builds a new Provider (below).
 */
function memoryAdapter() {
  const store = new Map<string, { payload: Record<string, any>; expiresAt?: number }>();
  const live = (key: string) => {
    const e = store.get(key);
    if (e?.expiresAt && e.expiresAt < Date.now()) store.delete(key);
    return store.get(key)?.payload;
  };
  return class {
    constructor(private readonly name: string) {}
    key = (id: string) => `${this.name}:${id}`;
    async upsert(id: string, payload: Record<string, any>, expiresIn?: number) {
      store.set(this.key(id), { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : undefined });
    }
    async find(id: string) {
      return live(this.key(id));
    }
    async findByUid(uid: string) {
      for (const [k, e] of store) if (k.startsWith(`${this.name}:`) && e.payload.uid === uid) return live(k);
      return undefined;
    }
    async findByUserCode(userCode: string) {
      for (const [k, e] of store) if (k.startsWith(`${this.name}:`) && e.payload.userCode === userCode) return live(k);
      return undefined;
    }
    async consume(id: string) {
      const p = live(this.key(id));
      if (p) p.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [k, e] of store) if (e.payload.grantId === grantId) store.delete(k);
    }
  };
}

export async function startUpstreamOidc(opts: Options = {}): Promise<UpstreamOidc> {
  const oidc = await loadOidcProvider();
  const alg = opts.alg ?? "RS256";
  const clientId = `client-${randomBytes(6).toString("hex")}`;
  const clientSecret = randomBytes(24).toString("base64url");
  const redirectUris = new Set(opts.redirectUris ?? []);
  let users = opts.users ?? [];
  let chosen: string | undefined;
  let refuseNext = false;
  let hideCurrentKey = false;
  const [current, next] = await Promise.all([newKey(alg), newKey(alg)]);
  const keys = { current, next, retired: [] as JWK[] };
  // Made when a test first asks for it: an RSA key costs a noticeable part of a second of CPU
  // on a slow machine, and only the test of a key the JWKS never had signs with this one.
  let unknownKey: Promise<JWK> | undefined;
  const Adapter = memoryAdapter();
  const cookieKey = randomBytes(32).toString("base64url");

  let provider: ProviderInstance;
  let dispatch: (req: IncomingMessage, res: ServerResponse) => void;
  const server = await startLoopbackServer((req, res) => {
    forgetSession(req);
    if (req.url?.startsWith("/interaction/")) return finishInteraction(req, res);
    if (hideCurrentKey && req.url === "/jwks") return publishedWithoutCurrent(res);
    dispatch(req, res);
  });
  const issuer = server.origin;

  /** The upstream's sign-in page, answered at once for the chosen user with consent given. */
  async function finishInteraction(req: IncomingMessage, res: ServerResponse) {
    const details = await provider.interactionDetails(req, res);
    if (refuseNext) {
      refuseNext = false;
      return provider.interactionFinished(req, res, { error: "access_denied", error_description: "The user cancelled the sign-in" }, { mergeWithLastSubmission: false });
    }
    const sub = chosen ?? users[0]?.sub;
    if (details.prompt.name !== "login" || !sub) throw new Error(`upstream fixture: no user to sign in (prompt ${details.prompt.name})`);
    await provider.interactionFinished(req, res, { login: { accountId: sub } }, { mergeWithLastSubmission: false });
  }

  function publishedWithoutCurrent(res: ServerResponse) {
    const pub = [keys.next, ...keys.retired].map(({ kty, n, e, crv, x, y, kid, alg, use }) => ({ kty, n, e, crv, x, y, kid, alg, use }));
    res.writeHead(200, { "content-type": "application/jwk-set+json; charset=utf-8" }).end(JSON.stringify({ keys: pub }));
  }

  /** A Provider for the current keys: oidc-provider reads its JWKS once, from its configuration. */
  function build() {
    const p = new oidc.default(issuer, {
      adapter: Adapter,
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          // The real list is `redirectUris`, consulted by redirectUriAllowed below.
          redirect_uris: ["http://127.0.0.1/registered-later"],
          // client_secret_post also accepts HTTP Basic in oidc-provider, as Google accepts both.
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["authorization_code"],
          response_types: ["code"],
          id_token_signed_response_alg: alg,
        },
      ],
      jwks: { keys: [keys.current, keys.next, ...keys.retired] }, // the first key signs
      ...(opts.discovery ? { discovery: opts.discovery } : {}),
      cookies: { keys: [cookieKey], names: { session: SESSION_COOKIE } },
      scopes: ["openid", "email", "profile"],
      claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
      // Google puts email and name in the ID token too, not only behind userinfo.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      features: { devInteractions: { enabled: false } },
      interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
      findAccount: (_ctx: unknown, sub: string) => {
        const user = users.find((u) => u.sub === sub);
        return user && { accountId: sub, claims: () => ({ ...user }) };
      },
      // Consent is given: every authorization gets a grant of the scopes this upstream knows,
      // for the account that just signed in (never a previous user's grant from the same browser).
      loadExistingGrant: async (ctx: any) => {
        const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
        grant.addOIDCScope("openid email profile");
        await grant.save();
        return grant;
      },
      // Like a real provider's error page; the library's default prints a notice on every use.
      renderError: (ctx: any, out: { error: string; error_description?: string }) => {
        ctx.type = "html";
        ctx.body = `<!doctype html><title>Error</title><p>${escapeHtml(`${out.error}: ${out.error_description ?? ""}`)}</p>`;
      },
      ttl: { AuthorizationCode: 60, AccessToken: 600, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 },
    });
    p.Client.prototype.redirectUriAllowed = (uri: string) => redirectUris.has(uri);
    provider = p;
    dispatch = p.callback();
  }
  build();

  return {
    ...server,
    issuer,
    clientId,
    clientSecret,
    addRedirectUri: (url) => void redirectUris.add(url),
    setUsers(next) {
      users = next;
    },
    nextLogin(sub) {
      if (!users.some((u) => u.sub === sub)) throw new Error(`upstream fixture: no user ${sub}`);
      chosen = sub;
    },
    loginAs(user) {
      users = [...users.filter((u) => u.sub !== user.sub), user];
      chosen = user.sub;
    },
    refuseNextLogin() {
      refuseNext = true;
    },
    followAuthorization: (url) => followOnUpstream(issuer, url),
    formPostAuthorization: (url) => formPostOnUpstream(issuer, url),
    async rotateKeys({ unannounced = false } = {}) {
      keys.retired.unshift(keys.current);
      if (unannounced) keys.current = await newKey(alg);
      else [keys.current, keys.next] = [keys.next, await newKey(alg)];
      build();
    },
    signWithUnpublishedKey(on) {
      hideCurrentKey = on;
    },
    currentKid: () => keys.current.kid!,
    async mintIdToken(claims, { key = "current" } = {}) {
      const jwk = key === "current" ? keys.current : await (unknownKey ??= newKey(alg));
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, aud: clientId, iat: now, exp: now + 600, ...claims })
        .setProtectedHeader({ alg, kid: jwk.kid, typ: "JWT" })
        .sign(await importJWK(jwk, alg));
    },
  };
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
