// The OpenID Connect endpoints (docs/oidc.md). oidc-provider (a Koa app) serves the
// protocol's own routes through the app's fetch handler, with the app's request id, logs and
// error policy; the interaction routes below are what the hosted /login page calls while a
// client waits for a code. Userinfo, JWKS and discovery are linkgate's own (routes/auth.ts).
import { publicPath } from "../../config.ts";
import { Hono, type Context } from "hono";
import type Provider from "oidc-provider";
import { toFetchResponse, toReqRes } from "fetch-to-node";
import { finishPasskeySignIn, startPasskeySignIn } from "../../auth/passkeys.ts";
import { completeSignIn, startSignIn } from "../../auth/sign-in.ts";
import { publicProviders } from "../../auth/external/providers.ts";
import { completeExternalSignIn, confirmExternalSignIn, confirmExternalSignInWithPasskey, startExternalSignIn } from "../../auth/external/sign-in.ts";
import { answerConsent, countProviderPage, describeInteraction, interactionActor, signedIn, type InteractionHttp } from "../../oidc/interaction.ts";
import { errorPage, logoutForm, logoutPage, pageSecurityHeaders, scriptPageSecurityHeaders, tooManyRequestsPage } from "../../oidc/pages.ts";
import { providerFor, ROUTES } from "../../oidc/provider.ts";
import { foreignResource } from "../../oidc/token-request.ts";
import { isPublicClientOrigin } from "../../oidc/clients.ts";
import { oidcRequest, type OidcRequest } from "../../oidc/request-context.ts";
import { jsonBody, readBody, str } from "../body.ts";
import { DomainError, RateLimited } from "../../errors.ts";
import { isStorableText } from "../../text.ts";
import { connectionHeaders, notFound, refuseHead, statusOf } from "../errors.ts";
import type { AppEnv } from "../env.ts";

type C = Context<AppEnv>;

/** Endpoints a public client calls from its own origin; they answer CORS per client (clientCors). */
export const CLIENT_CORS_PATHS = new Set([ROUTES.token, ROUTES.revocation]);

/**
 * Node's req/res for a fetch Request. There is no socket in app.fetch; Koa reads whether the
 * connection is TLS and the peer's address from one, so it gets what the app already resolved.
 * An https issuer is reached over TLS whatever the hop from the proxy was, as for the device
 * cookie (src/http/client-address.ts): behind a TLS-terminating proxy not listed in
 * LINKGATE_TRUSTED_PROXIES, oidc-provider's cookies lacked Secure and the sign-in's way back to
 * the app was an http:// URL, which the proxy's TLS port refused (docs/operations.md).
 */
function nodeReqRes(c: C, request: Request): InteractionHttp {
  const pair = toReqRes(request);
  // oidc-provider writes its own paths (the resume cookie's, its forms' actions) after the part of
  // originalUrl that url lacks: the issuer's path, which a proxy stripped (docs/operations.md)
  const prefix = publicPath(c.get("deps").keys.issuer);
  if (prefix) (pair.req as { originalUrl?: string }).originalUrl = `${prefix}${pair.req.url}`;
  const encrypted = new URL(request.url).protocol === "https:" || c.get("deps").keys.issuer.startsWith("https:");
  const socket = { encrypted, remoteAddress: c.get("clientAddress") };
  Object.defineProperty(pair.req, "socket", { value: socket, configurable: true });
  return pair;
}

/**
 * Koa only reads a body it is told the length of (a fetch Request built in-process often has no
 * Content-Length); the protocol's bodies are small forms, so it is read here first, within the
 * app's body limit.
 */
async function withLength(c: C): Promise<Request | Response> {
  const raw = c.req.raw;
  if (raw.method === "GET" || raw.method === "OPTIONS" || raw.method === "HEAD") return raw;
  let body: Uint8Array<ArrayBuffer>;
  try {
    body = await readBody(raw);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    return unreadBody(c, err);
  }
  const headers = new Headers(raw.headers);
  headers.set("content-length", String(body.byteLength));
  headers.delete("transfer-encoding");
  return new Request(raw.url, { method: raw.method, headers, body });
}

/**
 * A body refused before oidc-provider sees it (too large, compressed, cut off) is answered as the
 * protocol answers: a page where a browser posts (authorization, logout), OAuth's error object
 * (RFC 6749 5.2) where a client does, instead of the REST API's shape. No CORS headers: they
 * name the client, which is in the body that was not read.
 */
function unreadBody(c: C, err: DomainError): Response {
  const status = statusOf(err.code) as 400;
  const headers = { "cache-control": "no-store", ...connectionHeaders(err) };
  if (c.req.path === ROUTES.authorization || c.req.path === ROUTES.end_session) {
    return c.html(errorPage(err.code, err.message, "app"), status, { ...headers, ...pageSecurityHeaders() });
  }
  return c.json({ error: "invalid_request", error_description: err.message }, status, headers);
}

/** What of oidc-provider's Koa context its pages are decided by, once the request is served. */
type ServedContext = {
  status?: number;
  oidc?: {
    route?: string;
    client?: unknown;
    params?: { post_logout_redirect_uri?: unknown };
    session?: { accountId?: string; state?: { secret?: string } };
    urlFor?(name: string): string;
  };
};

/** Hands the request to oidc-provider inside the app's request context. */
async function serveProtocol(c: C): Promise<Response> {
  const request = await withLength(c);
  if (request instanceof Response) return request;
  if (c.req.path === ROUTES.authorization && (await otherResponseMode(request))) {
    return c.html(errorPage("invalid_request", "response_mode must be query, the only mode this server answers in", "app"), 400, {
      "cache-control": "no-store",
      ...pageSecurityHeaders(),
    });
  }
  const unstorable = c.req.path === ROUTES.end_session ? unstorableParam(request) : undefined;
  if (unstorable !== undefined) {
    return c.html(errorPage("invalid_request", `${unstorable} contains a character that cannot be accepted`, "app"), 400, {
      "cache-control": "no-store",
      ...pageSecurityHeaders(),
    });
  }
  return handOver(c, await providerFor(c.get("deps")), request);
}

/**
 * A logout request's parameter that Postgres cannot store (a NUL: `state=%00`). oidc-provider
 * keeps the logout's `state` in the browser's session, saved after its own error handling, so the
 * refused row was a 500, and the storage's refusal (src/oidc/adapter.ts) a bare text answer:
 * refused here on the error page of docs/oidc.md, "Errors". An authorization's parameters are
 * refused by the storage, as the request's invalid_request sent back to the client.
 */
function unstorableParam(request: Request): string | undefined {
  for (const [key, value] of new URL(request.url).searchParams) {
    if (!isStorableText(key)) return "a parameter name";
    if (!isStorableText(value)) return key;
  }
  return undefined;
}

/**
 * An authorization request asking for an answer other than in the query. oidc-provider refuses
 * it, but answers the refusal in the mode asked for: form_post's page posts itself to the client
 * by inline script, so anyone's link made a visitor's browser post a form to an app with a state
 * of the link's choosing, from a page of this origin with no script policy (32nd review). Refused
 * here as a page of our own (docs/oidc.md, "Flow"), in either method.
 */
async function otherResponseMode(request: Request): Promise<boolean> {
  const query = new URL(request.url).searchParams.get("response_mode");
  if (query !== null && query !== "query") return true;
  if (request.method !== "POST") return false;
  const form = new URLSearchParams(await request.clone().text()).get("response_mode");
  return form !== null && form !== "query";
}

/** The token endpoint, which first refuses a resource that is not the client's project's (src/oidc/token-request.ts). */
async function serveToken(c: C): Promise<Response> {
  const request = await withLength(c);
  if (request instanceof Response) return request;
  const provider = await providerFor(c.get("deps"));
  if (request.method === "POST") {
    const refusal = await foreignResource(provider, new Uint8Array(await request.clone().arrayBuffer()), request.headers);
    if (refusal) return c.json({ error: "invalid_target", error_description: refusal }, 400, { "cache-control": "no-store" });
  }
  return handOver(c, provider, request);
}

/**
 * The token and revocation endpoints answer CORS per client (docs/oidc.md, "CORS"): a request
 * from a browser is readable only from the origin of one of its public client's redirect URIs.
 * A preflight names no client (a browser sends it without the body), so it is answered only for
 * the origin of some public client's redirect URI; oidc-provider answered every origin's. Any
 * other OPTIONS is what an unrouted method is, as for the API (docs/security.md, "CORS").
 */
function clientCors(serve: (c: C) => Promise<Response>) {
  return async (c: C): Promise<Response> => {
    if (c.req.method !== "OPTIONS") return serve(c);
    const origin = c.req.header("origin");
    if (origin && c.req.header("access-control-request-method") && (await isPublicClientOrigin(c.get("deps"), origin))) return serve(c);
    const refused = notFound(c, `no route for OPTIONS ${c.req.path}`);
    refused.headers.append("Vary", "Origin");
    return refused;
  };
}

async function handOver(c: C, provider: Provider, request: Request): Promise<Response> {
  const { req, res } = nodeReqRes(c, request);
  const context: OidcRequest = { log: c.get("log"), clientAddress: c.get("clientAddress") };
  const handled = oidcRequest.run(context, () => provider.callback()(req, res));
  handled.catch((err: unknown) => c.get("log").error({ err }, "OpenID Connect provider failed"));
  const response = await toFetchResponse(res);
  const served = context.koa as ServedContext | undefined;
  // A method or path oidc-provider has no route for (GET /oauth/token, POST /oauth/logout/success)
  // was Koa's bare text "Not Found"; it is the API's 404 like any other (docs/rest.md).
  if (response.status === 404 && !served?.oidc) return notFound(c, `no route for ${c.req.method} ${c.req.path}`);
  // oidc-provider allows the request's origin until the client is known, and then keeps it only
  // when clientBasedCORS (src/oidc/provider.ts) says it is the client's: an answer given before
  // any client was found (no client_id, an unknown one, a malformed Authorization) carried the
  // origin of any page that sent it, which could read it and tell which client ids exist.
  if (CLIENT_CORS_PATHS.has(c.req.path) && c.req.method !== "OPTIONS") {
    if (!served?.oidc?.client) response.headers.delete("access-control-allow-origin");
    if (!response.headers.has("access-control-allow-origin")) response.headers.delete("access-control-expose-headers");
  }
  if (!response.headers.get("content-type")?.startsWith("text/html")) return response;
  return securePage(response, context.koa as ServedContext | undefined);
}

/**
 * Its pages are never framed by another site. The logout pages and the errors run no script
 * and get the strict policy of pageSecurityHeaders (docs/oidc.md, "Revocation and logout"):
 * with no signed-in session oidc-provider would answer logout with a page that submits itself
 * by inline script, so that one is replaced by the confirmation page. A page of oidc-provider's
 * own with an inline script (it submits the previous user's logout when another signs in on the
 * browser) runs that script only, by its hash; a form_post answer to a client is refused before
 * the request is handed over.
 */
async function securePage(response: Response, koa: ServedContext | undefined): Promise<Response> {
  const oidc = koa?.oidc;
  let body = await response.text();
  if (oidc?.route === "end_session" && koa?.status === 200 && !oidc.session?.accountId && oidc.session?.state?.secret && oidc.urlFor) {
    body = logoutPage(logoutForm(oidc.urlFor("end_session_confirm"), oidc.session.state.secret));
  }
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  const target = oidc?.route === "end_session" ? oidc.params?.post_logout_redirect_uri : undefined;
  const policy = /<script[\s>]/i.test(body) ? scriptPageSecurityHeaders(body) : pageSecurityHeaders(typeof target === "string" ? [target] : []);
  for (const [k, v] of Object.entries(policy)) headers.set(k, v);
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/** The interaction's cookie travels on the browser's request; its body is read by Hono. */
function interactionHttp(c: C): InteractionHttp {
  return nodeReqRes(c, new Request(c.req.url, { method: "GET", headers: c.req.raw.headers }));
}

const origin = (c: C) => ({ clientAddress: c.get("clientAddress"), userAgent: c.req.header("user-agent") });

/**
 * An authorization request, or a logout page shown without a session, stores state before anyone
 * signed in: it is counted per client address first. It is a browser's page, so a refusal is a
 * page too (never a redirect to the client, which would hand a stranger's throttling to the app
 * as its own error).
 */
async function boundedPage(c: C): Promise<Response> {
  if (c.req.method === "GET" || (c.req.method === "POST" && c.req.path === ROUTES.authorization)) {
    try {
      const dest = c.req.header("sec-fetch-dest");
      await countProviderPage(c.get("deps"), c.get("clientAddress"), dest !== undefined && dest !== "document");
    } catch (err) {
      if (!(err instanceof RateLimited)) throw err;
      return c.html(tooManyRequestsPage(err.retryAfterSeconds), 429, {
        "retry-after": String(err.retryAfterSeconds),
        "cache-control": "no-store",
        ...pageSecurityHeaders(),
      });
    }
  }
  return serveProtocol(c);
}

export function oauthRoutes() {
  const r = new Hono<AppEnv>();
  // oidc-provider serves a HEAD as the GET: an authorization stored an interaction (uncounted,
  // boundedPage counts GETs), a resume finished the sign-in, a logout page stored a session
  for (const path of [ROUTES.authorization, `${ROUTES.authorization}/:uid`, ROUTES.end_session, `${ROUTES.end_session}/success`]) r.get(path, refuseHead("GET"));
  for (const path of [ROUTES.authorization, ROUTES.end_session]) r.on(["GET", "POST", "OPTIONS"], path, boundedPage);
  for (const path of [`${ROUTES.authorization}/*`, `${ROUTES.end_session}/*`]) {
    r.on(["GET", "POST", "OPTIONS"], path, serveProtocol);
  }
  r.on(["GET", "POST", "OPTIONS"], ROUTES.revocation, clientCors(serveProtocol));
  r.on(["GET", "POST", "OPTIONS"], ROUTES.token, clientCors(serveToken));

  // oidc-provider scopes the interaction cookie to this path; the page lives at /login.
  r.get("/oauth/interaction/:uid", (c) => c.redirect(`${publicPath(c.get("deps").keys.issuer)}/login?interaction=${encodeURIComponent(c.req.param("uid"))}`, 303));

  r.get("/oauth/interaction/:uid/details", async (c) => {
    const provider = await providerFor(c.get("deps"));
    return c.json(await describeInteraction(provider, interactionHttp(c)), 200, { "cache-control": "no-store" });
  });

  r.post("/oauth/interaction/:uid/otp/start", async (c) => {
    const provider = await providerFor(c.get("deps"));
    const actor = await interactionActor(provider, interactionHttp(c), origin(c));
    const { stateId } = await startSignIn(c.get("deps"), actor, await jsonBody(c, ["email", "phone"]));
    return c.json({ state_id: stateId }, 200);
  });

  r.post("/oauth/interaction/:uid/otp/verify", async (c) => {
    const deps = c.get("deps");
    const provider = await providerFor(deps);
    const http = interactionHttp(c);
    const actor = await interactionActor(provider, http, origin(c));
    const body = await jsonBody(c, ["state_id", "otp"]);
    const tokens = await completeSignIn(deps, actor, { stateId: str(body, "state_id") ?? "", otp: str(body, "otp") ?? "" });
    return c.json(await signedIn(deps, provider, http, tokens), 200);
  });

  r.post("/oauth/interaction/:uid/passkey/options", async (c) => {
    const provider = await providerFor(c.get("deps"));
    const actor = await interactionActor(provider, interactionHttp(c), origin(c));
    return c.json(await startPasskeySignIn(c.get("deps"), actor), 200);
  });

  r.post("/oauth/interaction/:uid/passkey/verify", async (c) => {
    const deps = c.get("deps");
    const provider = await providerFor(deps);
    const http = interactionHttp(c);
    const actor = await interactionActor(provider, http, origin(c));
    const body = await jsonBody(c, ["response"]);
    const tokens = await finishPasskeySignIn(deps, actor, { response: body.response });
    return c.json(await signedIn(deps, provider, http, tokens), 200);
  });

  externalSignInRoutes(r);

  r.post("/oauth/interaction/:uid/consent", async (c) => {
    const deps = c.get("deps");
    const provider = await providerFor(deps);
    const body = await jsonBody(c, ["allow"]);
    return c.json(await answerConsent(deps, provider, interactionHttp(c), body.allow === true), 200);
  });
  return r;
}

/**
 * "Continue with …" inside an app's authorization: the providers of the app's project (not the
 * hosted pages' own project), and a flow that comes back to this interaction's /login page, then
 * finishes the interaction as a code or passkey sign-in does (docs/external-identities.md).
 */
function externalSignInRoutes(r: Hono<AppEnv>) {
  const actorOf = async (c: C) => {
    const provider = await providerFor(c.get("deps"));
    const http = interactionHttp(c);
    return { provider, http, actor: await interactionActor(provider, http, origin(c)) };
  };
  r.get("/oauth/interaction/:uid/external/providers", async (c) => {
    const { actor } = await actorOf(c);
    return c.json({ providers: await publicProviders(c.get("deps"), actor) }, 200, { "cache-control": "no-store" });
  });
  r.post("/oauth/interaction/:uid/external/start", async (c) => {
    const deps = c.get("deps");
    const { actor } = await actorOf(c);
    const body = await jsonBody(c, ["provider"]);
    // back to this interaction's sign-in page, which finishes the flow below
    const login = new URL(`${deps.keys.issuer}/login`);
    login.searchParams.set("interaction", c.req.param("uid"));
    return c.json(await startExternalSignIn(deps, actor, { provider: body.provider, redirectUri: login.href }), 200);
  });
  r.post("/oauth/interaction/:uid/external/complete", async (c) => {
    const deps = c.get("deps");
    const { provider, http, actor } = await actorOf(c);
    const body = await jsonBody(c, ["state_id", "code"]);
    const outcome = await completeExternalSignIn(deps, actor, { stateId: str(body, "state_id") ?? "", code: str(body, "code") ?? "" });
    if ("verification_required" in outcome) return c.json(outcome, 200);
    return c.json(await signedIn(deps, provider, http, outcome), 200);
  });
  r.post("/oauth/interaction/:uid/external/confirm", async (c) => {
    const deps = c.get("deps");
    const { provider, http, actor } = await actorOf(c);
    const body = await jsonBody(c, ["state_id", "otp"]);
    const tokens = await confirmExternalSignIn(deps, actor, { stateId: str(body, "state_id") ?? "", otp: str(body, "otp") ?? "" });
    return c.json(await signedIn(deps, provider, http, tokens), 200);
  });
  // the e-mail's account proven by one of its passkeys (options from passkey/options above)
  r.post("/oauth/interaction/:uid/external/confirm/passkey", async (c) => {
    const deps = c.get("deps");
    const { provider, http, actor } = await actorOf(c);
    const body = await jsonBody(c, ["state_id", "response"]);
    const tokens = await confirmExternalSignInWithPasskey(deps, actor, { stateId: body.state_id, response: body.response });
    return c.json(await signedIn(deps, provider, http, tokens), 200);
  });
}
