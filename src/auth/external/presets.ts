// What each kind of external identity provider needs besides a client id and secret
// (docs/external-identities.md, "Providers"). Every preset but GitHub is plain OpenID Connect:
// discovery at the issuer, the ID token names the user. GitHub has no OpenID Connect for users,
// so it is OAuth 2.0 plus its REST API (the user's id, and its verified e-mail addresses).

export type Preset = "oidc" | "google" | "apple" | "microsoft" | "gitlab" | "github";

type PresetSpec = {
  displayName: string;
  /** the default issuer; null: the operator must give one */
  issuer: string | null;
  scopes: string;
  /** Apple answers with a POST (form_post) when a name or e-mail is asked for */
  responseMode?: "form_post";
};

export const PRESETS: Record<Preset, PresetSpec> = {
  oidc: { displayName: "OpenID Connect", issuer: null, scopes: "openid email profile" },
  google: { displayName: "Google", issuer: "https://accounts.google.com", scopes: "openid email profile" },
  apple: { displayName: "Apple", issuer: "https://appleid.apple.com", scopes: "openid email name", responseMode: "form_post" },
  // Microsoft's multi-tenant endpoints (common, organizations) publish an issuer template that
  // no ID token matches: the operator names the tenant, https://login.microsoftonline.com/<tenant id>/v2.0.
  microsoft: { displayName: "Microsoft", issuer: null, scopes: "openid email profile" },
  gitlab: { displayName: "GitLab", issuer: "https://gitlab.com", scopes: "openid email profile" },
  // the issuer of a GitHub identity is the web base URL; GitHub Enterprise Server has its own
  github: { displayName: "GitHub", issuer: "https://github.com", scopes: "read:user user:email" },
};

/** GitHub's endpoints under a web base URL: github.com's API has its own host, Enterprise Server's is /api/v3. */
export function githubEndpoints(base: string) {
  const web = base.replace(/\/+$/, "");
  const api = web === "https://github.com" ? "https://api.github.com" : `${web}/api/v3`;
  return {
    authorization: `${web}/login/oauth/authorize`,
    token: `${web}/login/oauth/access_token`,
    user: `${api}/user`,
    emails: `${api}/user/emails`,
  };
}
