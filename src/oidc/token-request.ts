// A token request that names another project's resource is refused before oidc-provider reads
// it. oidc-provider uses up (rotates) a refresh token before it judges `resource`, so a request
// refused for its resource had already spent the token: the client's next refresh with that same
// token then looked like a replay, and the user's grant and session were ended (docs/oidc.md,
// "Tokens"). One bad parameter must not sign a user out.
import type Provider from "oidc-provider";
import { projectOf } from "./client-metadata.ts";
import { resourceFor } from "./provider.ts";

/** The client's id as the request authenticates it: HTTP Basic (RFC 6749 §2.3.1, form-encoded) or the body's client_id. */
function clientIdOf(params: URLSearchParams, authorization: string | null): string | null {
  const basic = /^Basic\s+(\S+)$/i.exec(authorization ?? "")?.[1];
  if (!basic) return params.get("client_id");
  const user = Buffer.from(basic, "base64").toString("utf8").split(":", 1)[0];
  try {
    return decodeURIComponent(user.replace(/\+/g, " "));
  } catch {
    return null;
  }
}

/**
 * Why a token request must be refused with invalid_target before oidc-provider sees it: it names
 * a resource that is not its client's project. Null for anything else, which oidc-provider
 * judges as it always does (an unknown client, a malformed body).
 */
export async function foreignResource(provider: Provider, body: Uint8Array, headers: Headers): Promise<string | null> {
  if (!headers.get("content-type")?.toLowerCase().startsWith("application/x-www-form-urlencoded")) return null;
  const params = new URLSearchParams(new TextDecoder().decode(body));
  const resources = params.getAll("resource");
  if (resources.length === 0) return null;
  const clientId = clientIdOf(params, headers.get("authorization"));
  if (!clientId) return null;
  const client = await provider.Client.find(clientId).catch(() => undefined);
  if (!client) return null;
  const own = resourceFor(projectOf(client));
  return resources.some((r) => r !== own) ? "this client's tokens are for its own project only" : null;
}
