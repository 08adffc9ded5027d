// An imitation of GitHub for linkgate's GitHub preset, which cannot use OpenID Connect: GitHub
// has none. It serves exactly what the preset calls, with GitHub's paths and response shapes
// (docs.github.com: "Authorizing OAuth apps", REST "Users" and "Emails"):
//   GET  <base>/login/oauth/authorize      -> 302 <redirect_uri>?code&state
//   POST <base>/login/oauth/access_token   -> the token (JSON with Accept: application/json)
//   GET  <api>/user, GET <api>/user/emails
// laid out as GitHub Enterprise Server is (https://HOST/login/oauth/..., https://HOST/api/v3/user):
// base is the server's origin and api is <base>/api/v3. github.com is the same with
// base https://github.com and api https://api.github.com.
//
// GitHub's quirks are kept on purpose, since the preset must cope with them: a failed code
// exchange is HTTP 200 with an `error` member, the token response is form-encoded unless JSON is
// asked for, the API refuses a request without User-Agent, and /user/emails is 404 without the
// user:email scope.
import { randomBytes, createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { followOnUpstream, startLoopbackServer, type UpstreamControls } from "./upstream-server.ts";

export type GithubEmail = { email: string; primary: boolean; verified: boolean; visibility: "public" | "private" | null };
/** `email` is the public profile e-mail (null when the user keeps it private, GitHub's default). */
export type GithubUser = { id: number; login: string; name: string | null; email: string | null; emails: GithubEmail[] };

export type UpstreamGithub = UpstreamControls & {
  /** the "issuer" to configure: GitHub Enterprise Server's base URL */
  baseUrl: string;
  /** <baseUrl>/api/v3 */
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  /** The OAuth app's callback URL(s); GitHub also accepts a path below a registered one. */
  addRedirectUri(url: string): void;
  setUsers(users: GithubUser[]): void;
  /** Who signs in from now on; by default the first user. */
  nextLogin(id: number): void;
  /** Adds the user (or replaces the one with its id) and makes it the one who signs in. */
  loginAs(user: GithubUser): void;
  /** The user clicks "Cancel" on GitHub's authorize page. */
  refuseNextLogin(): void;
  followAuthorization(authorizationUrl: string | URL): Promise<URL>;
};

const DOCS = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors";
const TOKEN_ERRORS = {
  incorrect_client_credentials: "The client_id and/or client_secret passed are incorrect.",
  redirect_uri_mismatch: "The redirect_uri MUST match the registered callback URL for this application.",
  bad_verification_code: "The code passed is incorrect or expired.",
} as const;

type Code = { userId: number; redirectUri: string; scopes: string[]; challenge?: string; expiresAt: number };

export async function startUpstreamGithub(opts: { users?: GithubUser[]; redirectUris?: string[] } = {}): Promise<UpstreamGithub> {
  // GitHub's own formats: OAuth app client ids start with Ov23li, user tokens with gho_.
  const clientId = `Ov23li${randomBytes(7).toString("hex")}`;
  const clientSecret = randomBytes(20).toString("hex");
  const callbacks: string[] = [...(opts.redirectUris ?? [])];
  let users = opts.users ?? [];
  let chosen: number | undefined;
  let refuseNext = false;
  const codes = new Map<string, Code>();
  const tokens = new Map<string, { userId: number; scopes: string[] }>();

  const server = await startLoopbackServer(async (req, res) => {
    const url = new URL(req.url ?? "/", server.origin);
    if (req.method === "GET" && url.pathname === "/login/oauth/authorize") return authorize(url, res);
    if (req.method === "POST" && url.pathname === "/login/oauth/access_token") return accessToken(req, res);
    if (req.method === "GET" && url.pathname === "/api/v3/user") return api(req, res, (u) => profile(u));
    if (req.method === "GET" && url.pathname === "/api/v3/user/emails") return api(req, res, (u, scopes) => (hasScope(scopes, "user:email") ? u.emails : undefined));
    send(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest" });
  });
  const base = server.origin;
  const apiUrl = `${base}/api/v3`;

  const allowedCallback = (uri: string) =>
    callbacks.some((cb) => {
      const [a, b] = [new URL(cb), URL.canParse(uri) ? new URL(uri) : undefined];
      return !!b && a.origin === b.origin && (b.pathname === a.pathname || b.pathname.startsWith(a.pathname.replace(/\/?$/, "/")));
    });

  function authorize(url: URL, res: ServerResponse) {
    const q = url.searchParams;
    if (q.get("client_id") !== clientId) return page(res, 404, "Not Found");
    const redirectUri = q.get("redirect_uri") ?? callbacks[0];
    if (!redirectUri) return page(res, 400, "The OAuth app has no callback URL");
    const back = (params: Record<string, string>) => backTo(res, redirectUri, { ...params, state: q.get("state") });
    if (!allowedCallback(redirectUri)) {
      // GitHub sends the error to the registered callback, not to the unregistered URI.
      if (!callbacks[0]) return page(res, 400, "redirect_uri_mismatch");
      return backTo(res, callbacks[0], { error: "redirect_uri_mismatch", error_description: TOKEN_ERRORS.redirect_uri_mismatch, state: q.get("state") });
    }
    if (refuseNext) {
      refuseNext = false;
      return back({ error: "access_denied", error_description: "The user has denied your application access.", error_uri: `${DOCS}#access-denied` });
    }
    const userId = chosen ?? users[0]?.id;
    if (userId === undefined) return page(res, 500, "upstream fixture: no user to sign in");
    const challenge = q.get("code_challenge") ?? undefined;
    if (challenge && q.get("code_challenge_method") !== "S256") return back({ error: "invalid_request", error_description: "code_challenge_method must be S256" });
    const code = randomBytes(10).toString("hex");
    // GitHub accepts scopes separated by spaces or commas.
    const scopes = (q.get("scope") ?? "").split(/[ ,]+/).filter(Boolean);
    codes.set(code, { userId, redirectUri, scopes, challenge, expiresAt: Date.now() + 10 * 60_000 });
    back({ code });
  }

  async function accessToken(req: IncomingMessage, res: ServerResponse) {
    const p = await readParams(req);
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
    // RFC 6749 2.3.1: Basic credentials are form-encoded before base64.
    const [id, secret] = basic ? Buffer.from(basic, "base64").toString().split(":").map((x) => decodeURIComponent(x.replace(/\+/g, " "))) : [p.client_id, p.client_secret];
    const json = /application\/json/.test(req.headers.accept ?? "");
    const reply = (body: Record<string, string>) =>
      json ? send(res, 200, body) : res.writeHead(200, { "content-type": "application/x-www-form-urlencoded; charset=utf-8" }).end(new URLSearchParams(body).toString());
    const fail = (error: keyof typeof TOKEN_ERRORS) => reply({ error, error_description: TOKEN_ERRORS[error], error_uri: `${DOCS}#${error.replaceAll("_", "-")}` });
    if (id !== clientId || secret !== clientSecret) return fail("incorrect_client_credentials");
    const code = codes.get(p.code ?? "");
    codes.delete(p.code ?? ""); // single use, whatever the outcome
    if (!code || code.expiresAt < Date.now()) return fail("bad_verification_code");
    if (p.redirect_uri !== undefined && p.redirect_uri !== code.redirectUri) return fail("redirect_uri_mismatch");
    if (code.challenge && createHash("sha256").update(p.code_verifier ?? "").digest("base64url") !== code.challenge) return fail("bad_verification_code");
    const token = `gho_${randomBytes(18).toString("base64url").replace(/[-_]/g, "a")}`;
    tokens.set(token, { userId: code.userId, scopes: code.scopes });
    reply({ access_token: token, token_type: "bearer", scope: code.scopes.join(",") });
  }

  function api(req: IncomingMessage, res: ServerResponse, body: (u: GithubUser, scopes: string[]) => unknown) {
    if (!req.headers["user-agent"]) {
      return page(res, 403, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).");
    }
    const token = /^(?:Bearer|token) (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
    const grant = token ? tokens.get(token) : undefined;
    const user = grant && users.find((u) => u.id === grant.userId);
    if (!grant || !user) return send(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" });
    const out = body(user, grant.scopes);
    if (out === undefined) return send(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest/users/emails#list-email-addresses-for-the-authenticated-user", status: "404" });
    send(res, 200, out, { "x-oauth-scopes": grant.scopes.join(", ") });
  }

  const profile = (u: GithubUser) => ({
    login: u.login,
    id: u.id,
    node_id: Buffer.from(`04:User${u.id}`).toString("base64"),
    avatar_url: `${base}/avatars/u/${u.id}`,
    url: `${apiUrl}/users/${u.login}`,
    html_url: `${base}/${u.login}`,
    type: "User",
    site_admin: false,
    name: u.name,
    company: null,
    blog: "",
    location: null,
    email: u.email,
    bio: null,
    created_at: "2020-01-01T00:00:00Z",
    updated_at: "2024-01-01T00:00:00Z",
  });

  return {
    ...server,
    baseUrl: base,
    apiUrl,
    clientId,
    clientSecret,
    addRedirectUri: (url) => void callbacks.push(url),
    setUsers(next) {
      users = next;
    },
    nextLogin(id) {
      if (!users.some((u) => u.id === id)) throw new Error(`upstream fixture: no GitHub user ${id}`);
      chosen = id;
    },
    loginAs(user) {
      users = [...users.filter((u) => u.id !== user.id), user];
      chosen = user.id;
    },
    refuseNextLogin() {
      refuseNext = true;
    },
    followAuthorization: (url) => followOnUpstream(base, url),
  };
}

/** `user` (all profile data) includes `user:email`, as on GitHub. */
const hasScope = (scopes: string[], scope: string) => scopes.includes(scope) || scopes.includes("user");

function backTo(res: ServerResponse, uri: string, params: Record<string, string | null>) {
  const to = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== null) to.searchParams.set(k, v);
  res.writeHead(302, { location: to.toString() }).end();
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers }).end(JSON.stringify(body));
}

function page(res: ServerResponse, status: number, text: string) {
  res.writeHead(status, { "content-type": "text/html; charset=utf-8" }).end(`<!doctype html><title>GitHub</title><p>${text}</p>`);
}

/** The token request's parameters: GitHub takes them form-encoded, as JSON, or in the query. */
async function readParams(req: IncomingMessage): Promise<Record<string, string | undefined>> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  const query = Object.fromEntries(new URL(req.url ?? "/", "http://x").searchParams);
  if (/application\/json/.test(req.headers["content-type"] ?? "")) return { ...query, ...(JSON.parse(raw || "{}") as Record<string, string>) };
  return { ...query, ...Object.fromEntries(new URLSearchParams(raw)) };
}
