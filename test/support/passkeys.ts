// Passkeys as a user's browser uses them through GraphQL, with the software authenticator:
// register one on a signed-in session, and sign in with it under the publishable key.
import type { Harness } from "./app.ts";
import type { SoftAuthenticator } from "./authenticator.ts";

/** The harness's default issuer: its passkeys are for "localhost". */
export const PASSKEY_ORIGIN = "http://localhost:4000";

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Registers a new passkey of `auth` on the token's account; its id. */
export async function registerPasskey(h: Harness, token: string, auth: SoftAuthenticator): Promise<string> {
  const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(token));
  const r = await h.gql(
    `mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { ... on Passkey { id } } }`,
    { r: auth.create(opts.body.data.startPasskeyRegistration.options) },
    bearer(token),
  );
  return r.body.data.finishPasskeyRegistration.id;
}

/** An assertion by `auth`'s newest passkey for fresh sign-in options (finishPasskeySignIn, reauthenticateWithPasskey). */
export async function passkeyAssertion(h: Harness, auth: SoftAuthenticator): Promise<unknown> {
  const opts = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
  return auth.get(opts.body.data.startPasskeySignIn, auth.credentials[auth.credentials.length - 1]);
}

/** Signs in with `auth`'s newest passkey; the access token. */
export async function signInWithPasskey(h: Harness, auth: SoftAuthenticator): Promise<string> {
  const r = await h.gql(
    `mutation($r: JSON!) { finishPasskeySignIn(response: $r) { ... on SignInTokens { accessToken } } }`,
    { r: await passkeyAssertion(h, auth) },
    { "x-api-key": h.publishableKey },
  );
  return r.body.data.finishPasskeySignIn.accessToken;
}
