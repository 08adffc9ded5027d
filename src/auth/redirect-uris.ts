// Which redirect URIs only their own app receives (RFC 8252 section 8.6). An https URI is its
// site's, and a native app's claimed https link (Android App Links, Apple Universal Links) is
// that app's alone. A private-use scheme (com.example.app:/cb) can be claimed by any app on the
// device. A loopback address (http://127.0.0.1:8765/cb) can be listened on by any program on the
// machine: in production a stranger's, in development the app being built (the README's first
// steps), so it counts as the app's own there only. An http URI is a loopback one: clients
// register http on a loopback host only (src/oidc/clients.ts checkRedirectUris).

/** Whether a code sent to `uri` could be received by another app or program on the user's device. */
export function receivableByOthers(uri: string, production: boolean): boolean {
  if (!URL.canParse(uri)) return true;
  const { protocol } = new URL(uri);
  if (protocol === "https:") return false;
  return production || protocol !== "http:";
}
