// The browser's side of the passkey ceremonies (@simplewebauthn/browser, bundled: no third-party
// script), with the browser's refusals put in words.
import {
  browserSupportsWebAuthn,
  startAuthentication,
  startRegistration,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
} from "@simplewebauthn/browser";

export const passkeysSupported = () => browserSupportsWebAuthn();

/** What the browser said, for a person: a cancelled prompt is the usual case. */
function inWords(err: unknown, registering: boolean): Error {
  const name = err instanceof Error ? err.name : "";
  const code = (err as { code?: string } | null)?.code ?? "";
  if (code === "ERROR_AUTHENTICATOR_PREVIOUSLY_REGISTERED" || name === "InvalidStateError")
    return new Error("This device already holds a passkey for your account.");
  if (name === "NotAllowedError" || name === "AbortError")
    return new Error(registering ? "No passkey was created: the request was cancelled or timed out." : "No passkey was used: the request was cancelled or timed out.");
  if (name === "SecurityError") return new Error("This site's address does not allow passkeys here. Ask the operator to check the passkey settings.");
  return new Error(`The browser could not ${registering ? "create" : "use"} a passkey${err instanceof Error && err.message ? `: ${err.message}` : "."}`);
}

export async function createPasskey(options: unknown) {
  try {
    return await startRegistration({ optionsJSON: options as PublicKeyCredentialCreationOptionsJSON });
  } catch (err) {
    throw inWords(err, true);
  }
}

export async function assertWithPasskey(options: unknown) {
  try {
    return await startAuthentication({ optionsJSON: options as PublicKeyCredentialRequestOptionsJSON });
  } catch (err) {
    throw inWords(err, false);
  }
}
