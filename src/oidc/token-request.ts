// A token request that names another project's resource is refused before oidc-provider reads
// it. oidc-provider uses up (rotates) a refresh token before it judges `resource`, so a request
// refused for its resource had already spent the token: the client's next refresh with that same
// token then looked like a replay, and the user's grant and session were ended (docs/oidc.md,
// "Tokens"). One bad parameter must not sign a user out.
import type Provider from "oidc-provider";
import { projectOf } from "./client-metadata.ts";
import { secretMatches } from "./clients.ts";
import { resourceFor } from "./provider.ts";

type Credentials = { clientId: string | null; secret: string | null };

const formDecoded = (part: string) => decodeURIComponent(part.replace(/\+/g, " "));

/** The client's credentials as the request presents them: HTTP Basic (RFC 6749 §2.3.1, form-encoded parts) or the body's. */
function credentialsOf(params: URLSearchParams, authorization: string | null): Credentials {
  const basic = /^Basic\s+(\S+)$/i.exec(authorization ?? "")?.[1];
  if (!basic) return { clientId: params.get("client_id"), secret: params.get("client_secret") };
  const decoded = Buffer.from(basic, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return { clientId: null, secret: null };
  try {
    return { clientId: formDecoded(decoded.slice(0, colon)), secret: formDecoded(decoded.slice(colon + 1)) };
  } catch {
    return { clientId: null, secret: null };
  }
}

/**
 * Why a token request must be refused with invalid_target before oidc-provider sees it: it names
 * a resource that is not its client's project, and the client is who it says (a confidential
 * client's secret matches; a public client has none). Null for anything else, which oidc-provider
 * judges as it always does: an unknown client and a wrong secret are both invalid_client there,
 * so this answer never tells a stranger which client ids exist.
 */
export async function foreignResource(provider: Provider, body: Uint8Array, headers: Headers): Promise<string | null> {
  if (!headers.get("content-type")?.toLowerCase().startsWith("application/x-www-form-urlencoded")) return null;
  const params = new URLSearchParams(new TextDecoder().decode(body));
  const resources = params.getAll("resource");
  if (resources.length === 0) return null;
  const { clientId, secret } = credentialsOf(params, headers.get("authorization"));
  if (!clientId) return null;
  const client = await provider.Client.find(clientId).catch(() => undefined);
  if (!client) return null;
  const confidential = client.metadata().token_endpoint_auth_method !== "none";
  if (confidential && !(secret && secretMatches(client.metadata().client_secret as string | undefined, secret))) return null;
  const own = resourceFor(projectOf(client));
  return resources.some((r) => r !== own) ? "this client's tokens are for its own project only" : null;
}
