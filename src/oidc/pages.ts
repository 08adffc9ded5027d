// The few pages oidc-provider itself renders: an error that must not be redirected (unknown
// client, unregistered redirect URI), the logout confirmation and the signed-out page, and
// linkgate's own refusal of too many authorizations. Plain HTML, every value escaped, no
// script: each is served under pageSecurityHeaders, which allows nothing but its own style
// and, where there is a form, posting it to linkgate (docs/oidc.md, "Revocation and logout").
import { createHash } from "node:crypto";

const escape = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}
code{background:#f3f3f3;padding:0 .25rem}button{font:inherit;padding:.5rem 1rem;margin-right:.5rem}`;
const STYLE_HASH = `'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`;

/**
 * The pages' Content-Security-Policy and companions: nothing loads, nothing runs, the one
 * inline style is allowed by its hash, nobody frames the page, and a form posts only to this
 * origin — and to `formTargets`, where the confirmation redirects afterwards (browsers apply
 * form-action to the redirects that follow a submission): a client's post_logout_redirect_uri.
 */
/**
 * The policy for a page oidc-provider renders with an inline script (the page that submits the
 * logout of a previous user when another signs in on the same browser, and goes on to the
 * client): exactly its scripts run, allowed by their hashes, nothing else loads as a script or
 * plugin, and nobody frames it. Its form and the redirects after it keep their way to the
 * client. Such a page had no script policy at all before (32nd review).
 */
export function scriptPageSecurityHeaders(body: string): Record<string, string> {
  const hashes = [...body.matchAll(/<script>([\s\S]*?)<\/script>/gi)].map((m) => `'sha256-${createHash("sha256").update(m[1]).digest("base64")}'`);
  return {
    "content-security-policy": [`script-src ${hashes.length ? hashes.join(" ") : "'none'"}`, "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"].join("; "),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
  };
}

export function pageSecurityHeaders(formTargets: string[] = []): Record<string, string> {
  const sources = formTargets.flatMap((uri) => {
    if (!URL.canParse(uri)) return [];
    const url = new URL(uri);
    // an app's private-use scheme has no origin: its scheme is the source
    return [url.protocol === "https:" || url.protocol === "http:" ? url.origin : url.protocol];
  });
  return {
    "content-security-policy": [
      "default-src 'none'",
      `style-src ${STYLE_HASH}`,
      `form-action ${["'self'", ...new Set(sources)].join(" ")}`,
      "base-uri 'none'",
      "frame-ancestors 'none'",
    ].join("; "),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
  };
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>${STYLE}</style></head>
<body><main>${body}</main></body></html>`;
}

/**
 * Who a refused sign-in is down to, so the page tells the user whom to go to: the app (an
 * unknown client, a redirect URI it never registered, a malformed request), the browser's
 * journey (a sign-in that expired or continued in another browser), or linkgate itself.
 */
export type ErrorCause = "app" | "expired" | "ours" | "provider";

const CAUSES: Record<ErrorCause, string> = {
  app: "<p>The app that sent you here made a request we cannot accept, so you were not sent back to it.</p>",
  expired: "<p>This sign-in has expired, or it was started in another browser or tab.</p>",
  ours: "<p>Something went wrong on our side, not in the app you came from.</p>",
  provider: "<p>The answer of the provider you signed in with could not be read.</p>",
};
const NEXT: Record<ErrorCause, string> = {
  app: "<p>Go back to the app and try again; if it keeps happening, tell the app's makers.</p>",
  expired: "<p>Go back to the app and sign in again.</p>",
  ours: "<p>Go back to the app and try again in a moment.</p>",
  provider: "<p>Go back to the app and sign in again.</p>",
};

export function errorPage(error: string, description: string | undefined, cause: ErrorCause): string {
  return page(
    "Sign-in error",
    `<h1>This sign-in cannot continue</h1>${CAUSES[cause]}
<p><code>${escape(error)}</code>${description ? `: ${escape(description)}` : ""}</p>${NEXT[cause]}`,
  );
}

/** The cause of an oidc-provider error, from its class (its `error` code alone cannot tell). */
export function causeOf(err: unknown, error: string): ErrorCause {
  const name = (err as { name?: string } | null)?.name;
  if (name === "SessionNotFound" || name === "InteractionExpired") return "expired";
  if (error === "server_error" || error === "temporarily_unavailable" || !(err as { expose?: boolean } | null)?.expose) return "ours";
  return "app";
}

export function tooManyRequestsPage(retryAfterSeconds: number): string {
  const minutes = Math.max(1, Math.ceil(retryAfterSeconds / 60));
  return page(
    "Too many requests",
    `<h1>Too many requests from here</h1><p>This network opened more sign-in and sign-out pages than we allow in a short time.</p>
<p>Wait ${minutes} minute${minutes === 1 ? "" : "s"}, then go back to the app and try again.</p>`,
  );
}

/**
 * The form oidc-provider gives logoutSource, for the case where it renders none itself: with no
 * signed-in session it would answer a page that submits this form by inline script.
 */
export function logoutForm(action: string, xsrf: string): string {
  return `<form id="op.logoutForm" method="post" action="${escape(action)}"><input type="hidden" name="xsrf" value="${escape(xsrf)}"/></form>`;
}

/**
 * `form` is oidc-provider's own form (with its CSRF token); the buttons submit it, no script. Its
 * action is made a path: oidc-provider writes it on the request's Host header, which any client
 * may set, and a page sent with `Host: evil.example` posted the sign-out there (docs/security.md,
 * "Client addresses and trusted proxies").
 */
export function logoutPage(form: string): string {
  // one leading slash: "//…" would be another host's address
  const onThisHost = form.replace(/(<form\b[^>]*\baction=")[a-z][a-z0-9+.-]*:\/\/[^/"]*\/*/i, "$1/");
  return page(
    "Sign out",
    `${onThisHost}<h1>Sign out?</h1><p>This ends your session with this service and with the app that sent you here.</p>
<button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button>
<button type="submit" form="op.logoutForm">Stay signed in</button>`,
  );
}

export function signedOutPage(): string {
  return page("Signed out", `<h1>You are signed out</h1><p>You can close this window.</p>`);
}
