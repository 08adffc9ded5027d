// /login inside an OpenID Connect authorization (/login?interaction=…): the page signs the user
// in through the interaction's own endpoints, which act for the project of the app that asked
// (no publishable key needed) and answer where to go next: back to the app, or the consent page.
import { at } from "../../ui/base.ts";
import { sentence } from "../../ui/text.ts";
import { identifierInput, type EmailToProve, type ExternalProvider, type ExternalStarted } from "./api.ts";

export type Consent = { client: { name: string; firstParty: boolean }; scopes: string[] };
export type Outcome = { redirectTo: string } | { consent: Consent };

/** The interaction this page was opened for, if any. */
export function interactionId(search = location.search): string | null {
  const uid = new URLSearchParams(search).get("interaction");
  return uid && /^[\w-]{1,128}$/.test(uid) ? uid : null;
}

async function post<T>(path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(at(`/oauth/interaction/${interactionId()}/${path}`), {
      method: body === undefined ? "GET" : "POST",
      headers: body === undefined ? { accept: "application/json" } : { "content-type": "application/json", accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch {
    throw new Error("The server cannot be reached. Check your connection and try again.");
  }
  const data = (await res.json().catch(() => null)) as (T & { message?: string }) | null;
  if (!res.ok || !data) throw new Error(sentence(data?.message ?? `The server answered ${res.status}.`));
  return data;
}

export const flowStartSignIn = async (identifier: string) => (await post<{ state_id: string }>("otp/start", identifierInput(identifier))).state_id;
export const flowCompleteSignIn = (stateId: string, otp: string) => post<Outcome>("otp/verify", { state_id: stateId, otp: otp.trim() });
export const flowPasskeyOptions = () => post<unknown>("passkey/options", {});
export const flowPasskeySignIn = (response: unknown) => post<Outcome>("passkey/verify", { response });
/** The providers of the app's project; the flow comes back to this interaction's page. */
export const flowProviders = async () => (await post<{ providers: ExternalProvider[] }>("external/providers")).providers;
export const flowStartExternal = async (provider: string): Promise<ExternalStarted> => {
  const started = await post<{ state_id: string; authorization_url: string }>("external/start", { provider });
  return { stateId: started.state_id, authorizationUrl: started.authorization_url };
};
type Proving = { verification_required: "email"; state_id: string; destination: string };
export const flowCompleteExternal = async (stateId: string, code: string): Promise<{ prove: EmailToProve } | { signedIn: Outcome }> => {
  const answer = await post<Outcome | Proving>("external/complete", { state_id: stateId, code });
  return "verification_required" in answer ? { prove: { stateId: answer.state_id, destination: answer.destination } } : { signedIn: answer };
};
export const flowConfirmExternal = (stateId: string, otp: string) => post<Outcome>("external/confirm", { state_id: stateId, otp: otp.trim() });
export const flowConfirmExternalPasskey = (stateId: string, response: unknown) => post<Outcome>("external/confirm/passkey", { state_id: stateId, response });
export const answerConsent = (allow: boolean) => post<{ redirectTo: string }>("consent", { allow });

/** What each scope lets the app see, in the user's words. */
export const SCOPE_WORDS: Record<string, string> = {
  openid: "Know that it is you (your account id)",
  email: "Your e-mail address",
  phone: "Your phone number",
  profile: "Your name",
  offline_access: "Stay signed in when you are not using it",
};
