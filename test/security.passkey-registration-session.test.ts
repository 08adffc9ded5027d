// A passkey registration is finished by the session that started it (docs/authentication.md,
// "Passkeys"). Starting one needs a recent sign-in; the challenge was bound to the account only,
// so another of the account's sessions, a stale one included, could finish a registration
// started under someone else's recent sign-in.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { PASSKEY_ORIGIN } from "./support/passkeys.ts";

describe.each(backends)("a passkey registration's session on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const finish = (token: string, response: unknown) =>
    h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { __typename ... on Error { message } } }`, { r: response }, bearer(token));

  it("refuses another session of the account, and the starting session still finishes it", async () => {
    const starter = await h.signIn({ email: "starter@example.com" });
    const other = await h.signIn({ email: "starter@example.com" });
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(starter.token));
    const options = opts.body.data.startPasskeyRegistration.options;

    const refused = await finish(other.token, new SoftAuthenticator(PASSKEY_ORIGIN).create(options));
    expect(refused.body.data.finishPasskeyRegistration).toEqual({ __typename: "PasskeyInvalid", message: "that passkey challenge is unknown, used or expired; start again" });
    const done = await finish(starter.token, new SoftAuthenticator(PASSKEY_ORIGIN).create(options));
    expect(done.body.data.finishPasskeyRegistration.__typename).toBe("Passkey");
  });
});
