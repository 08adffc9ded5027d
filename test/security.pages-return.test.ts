// Where the hosted /login page sends the browser after a sign-in, and what it says on a return
// from a provider (eleventh review): `?return_to=/.//evil.example` passed the check of the raw
// text (it starts with one slash) and parsed to the pathname `//evil.example`, which the browser
// then took as another site's address: an open redirect right after a real sign-in. And
// `?error=…&error_description=<anything>` put a stranger's words on the genuine sign-in page.
// The twelfth review found same-site pages that redirect on (`/oauth/authorize` with any
// registered client's redirect URI): only /account is a place to go back to now.
import { describe, expect, it } from "vitest";
import { returnError, returnTo } from "../pages/src/api.ts";

const ORIGIN = "https://auth.example.com";
const to = (value: string) => returnTo(`?${new URLSearchParams({ return_to: value })}`, ORIGIN);

describe("the page to go back to after signing in", () => {
  it.each([
    "//evil.example/steal",
    "/\\evil.example",
    "/.//evil.example/phish",
    "/..//evil.example/phish",
    "/a/..//evil.example/phish",
    "/%2e//evil.example",
    "/a/%2e%2e//evil.example",
    "/./\\evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "/login",
    "/oauth/authorize?client_id=c&redirect_uri=https://evil.example/cb&prompt=none",
    "/auth/external/callback?state=x",
    "/dashboard",
    "",
  ])("%j stays on the site: /account", (value) => {
    expect(to(value)).toBe("/account");
  });

  it("a path of this site is kept, with its query and fragment", () => {
    expect(to("/account?tab=passkeys#add")).toBe("/account?tab=passkeys#add");
    expect(to("/account")).toBe("/account");
    expect(returnTo("", ORIGIN)).toBe("/account");
    // whatever it is, the browser is never sent to an address that starts with two slashes
    for (const value of ["/.//x", "/x/../..//y", "/x/./..//y"]) expect(new URL(to(value), ORIGIN).origin).toBe(ORIGIN);
  });
});

describe("the words for a return from a provider with ?error=", () => {
  it("a link with a description, to a tab that started no trip, shows the fixed words of its code", () => {
    expect(returnError("ExternalSignInFailed", null)).toBe("The sign-in at the other service did not succeed. Try again.");
    expect(returnError("UpstreamUnavailable", null)).toBe("The other service did not answer. Try again in a moment.");
    expect(returnError("Your account is suspended. Call +1 900 555 0100", null)).toBe("The sign-in at the other service did not succeed. Try again.");
    // 32nd review: a code named like an object's own property showed "[object Undefined]" or nothing
    for (const code of ["toString", "constructor", "__proto__", "hasOwnProperty"]) {
      expect(returnError(code, null), code).toBe("The sign-in at the other service did not succeed. Try again.");
    }
  });

  it("the tab's own trip shows the gateway's description", () => {
    expect(returnError("ExternalSignInFailed", "the sign-in at the other service was cancelled or refused")).toBe("The sign-in at the other service was cancelled or refused.");
  });
});
