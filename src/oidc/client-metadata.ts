// A client row as oidc-provider client metadata. Every client: the code flow only, PKCE (the
// provider requires it for all), ES256 ID tokens with auth_time. A confidential client's
// `client_secret` here is the secret's hash; src/oidc/provider.ts compares presented secrets
// against it in constant time.
import type { ClientMetadata } from "oidc-provider";
import type { OAuthClient } from "../generated/prisma/client.ts";

/** Extra metadata every client carries, read back with projectOf / isFirstParty. */
export const EXTRA_METADATA = ["project_id", "first_party"];

const isWebUri = (u: string) => u.startsWith("https:") || u.startsWith("http:");

/** A client with an app's private-use scheme among its redirect URIs is a native client (RFC 8252). */
export const isNative = (redirectUris: readonly string[]) => !redirectUris.every(isWebUri);

export function clientMetadata(c: OAuthClient): ClientMetadata {
  return {
    client_id: c.clientId,
    client_name: c.name,
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.redirectUris,
    response_types: ["code"],
    // what discovery says: the answer in the query only (oidc-provider also took fragment and
    // form_post, whose page this gateway's CSP was never checked against: eleventh review)
    response_modes: ["query"],
    grant_types: ["authorization_code", "refresh_token"],
    // an app's private-use scheme makes it a native client; otherwise matching is exact
    application_type: isNative(c.redirectUris) ? "native" : "web",
    token_endpoint_auth_method: c.type === "public" ? "none" : "client_secret_basic",
    ...(c.type === "confidential" && c.secretHash ? { client_secret: c.secretHash } : {}),
    id_token_signed_response_alg: "ES256",
    require_auth_time: true,
    project_id: c.projectId,
    first_party: c.firstParty,
  };
}

type WithMetadata = { metadata(): Record<string, unknown> };

export const projectOf = (client: WithMetadata) => String(client.metadata().project_id);
export const isFirstParty = (client: WithMetadata) => client.metadata().first_party === true;
