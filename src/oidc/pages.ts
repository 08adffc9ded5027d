// The few pages oidc-provider itself renders: an error that must not be redirected (unknown
// client, unregistered redirect URI), the logout confirmation and the signed-out page. Plain
// HTML, every value escaped, no script.
const escape = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}
code{background:#f3f3f3;padding:0 .25rem}button{font:inherit;padding:.5rem 1rem;margin-right:.5rem}</style></head>
<body><main>${body}</main></body></html>`;
}

export function errorPage(error: string, description?: string): string {
  return page(
    "Sign-in error",
    `<h1>This sign-in cannot continue</h1><p>The app that sent you here made a request we cannot accept, so you were not sent back to it.</p>
<p><code>${escape(error)}</code>${description ? `: ${escape(description)}` : ""}</p><p>Go back to the app and try again; if it keeps happening, tell the app's makers.</p>`,
  );
}

/** `form` is oidc-provider's own form (with its CSRF token); the buttons submit it. */
export function logoutPage(form: string): string {
  return page(
    "Sign out",
    `${form}<h1>Sign out?</h1><p>This ends your session with this service and with the app that sent you here.</p>
<button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button>
<button type="submit" form="op.logoutForm">Stay signed in</button>`,
  );
}

export function signedOutPage(): string {
  return page("Signed out", `<h1>You are signed out</h1><p>You can close this window.</p>`);
}
