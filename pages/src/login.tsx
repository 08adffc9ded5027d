// /login: sign in with a passkey (discoverable: nothing to type), with one of the project's
// external identity providers ("Continue with …", which leaves for the provider and comes back
// here with ?code=), or with a code sent to an e-mail address or phone number; then on to
// /account (?return_to= may give its query). Opened by an app's OpenID Connect authorization
// (?interaction=…), it signs in for that app, asks for consent when the app is a third party's,
// and goes back to the app.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import {
  completeExternalSignIn,
  completeSignIn,
  confirmExternalSignIn,
  confirmExternalSignInWithPasskey,
  finishPasskeySignIn,
  goToProvider,
  loadProviders,
  publishableKey,
  reloadWhenBroughtBack,
  returnAddress,
  returnTo,
  startExternalSignIn,
  startPasskeySignIn,
  startSignIn,
  storedSession,
  takeExternalReturn,
  type EmailToProve,
  type ExternalProvider,
  type ExternalReturn,
  type ExternalStarted,
} from "./api.ts";
import {
  answerConsent,
  flowCompleteExternal,
  flowCompleteSignIn,
  flowConfirmExternal,
  flowConfirmExternalPasskey,
  flowPasskeyOptions,
  flowPasskeySignIn,
  flowProviders,
  flowStartExternal,
  flowStartSignIn,
  interactionId,
  SCOPE_WORDS,
  type Consent,
  type Outcome,
} from "./flow.ts";
import { isolated } from "../../ui/text.ts";
import { assertWithPasskey, passkeysSupported } from "./webauthn.ts";
import { Alert, CodeField, Field, Frame, message, NotConfigured, useAction, useFocusOnShow, usePageTitle } from "./ui.tsx";
import "./style.css";

const NOTICES: Record<string, string> = {
  ended: "Your session has ended. Sign in again.",
  "signed-out": "You are signed out.",
};

function LoginPage(props: { returned: ExternalReturn | null }) {
  const why = new URLSearchParams(location.search).get("why") ?? "";
  // own keys only: ?why=constructor found Object's
  const notice = Object.hasOwn(NOTICES, why) ? NOTICES[why] : undefined;
  return (
    <Frame title="sign in">
      {publishableKey() ? <SignInCard via={ON_ITS_OWN} returned={props.returned} notice={notice} onDone={() => location.assign(returnTo())} /> : <NotConfigured />}
    </Frame>
  );
}

type Step =
  | { kind: "identifier" }
  | { kind: "code"; identifier: string; stateId: string }
  | { kind: "returning"; provider: string; stateId: string; code: string }
  | { kind: "prove"; provider: string; proving: EmailToProve };

function firstStep(returned: ExternalReturn | null): Step {
  return returned && "code" in returned ? { kind: "returning", provider: returned.pending.provider, stateId: returned.pending.stateId, code: returned.code } : { kind: "identifier" };
}

/** The sign-in card, on its own or in an app's flow (`via` says which endpoints it uses). */
function SignInCard(props: { via: SignInWith; returned: ExternalReturn | null; notice?: string; onDone: (result: unknown) => void }) {
  const { via, onDone } = props;
  const [step, setStep] = useState<Step>(() => firstStep(props.returned));
  const [externalError, setExternalError] = useState<string | null>(props.returned && "error" in props.returned ? props.returned.error : null);
  // Back from the provider: the completion signs in, or asks for the code of the e-mail it named.
  useEffect(() => {
    if (step.kind !== "returning") return;
    via
      .completeExternal(step.stateId, step.code)
      .then((r) => ("prove" in r ? setStep({ kind: "prove", provider: step.provider, proving: r.prove }) : onDone(r.signedIn)))
      .catch((err: unknown) => {
        setExternalError(`Signing in with ${step.provider} did not work: ${message(err)}`);
        setStep({ kind: "identifier" });
      });
  }, [step.kind]);
  usePageTitle(STEP_TITLES[step.kind]);
  return (
    <div class="card narrow">
      <h1>Sign in</h1>
      {props.notice && step.kind === "identifier" && (
        <p class="notice-text" role="status">
          {props.notice}
        </p>
      )}
      {step.kind === "identifier" && (
        <>
          <PasskeySignIn onDone={onDone} via={via} />
          <ExternalButtons via={via} error={externalError} />
          <p class="or" aria-hidden="true">
            <span>or</span>
          </p>
          <CodeRequest via={via} onSent={(identifier, stateId) => setStep({ kind: "code", identifier, stateId })} />
        </>
      )}
      {step.kind === "code" && <CodeEntry via={via} identifier={step.identifier} stateId={step.stateId} onDone={onDone} onBack={() => setStep({ kind: "identifier" })} />}
      {step.kind === "returning" && (
        <p class="muted" role="status">
          Finishing your sign-in with {step.provider}…
        </p>
      )}
      {step.kind === "prove" && <ProveEmail via={via} provider={step.provider} proving={step.proving} onDone={onDone} onBack={() => setStep({ kind: "identifier" })} />}
    </div>
  );
}

/** The window's title at each step (docs/pages.md, "Accessibility"). */
const STEP_TITLES: Record<Step["kind"], string> = {
  identifier: "Sign in",
  code: "Enter the code – Sign in",
  returning: "Finishing your sign-in – Sign in",
  prove: "Enter the code – Sign in",
};

type SignInWith = {
  startCode: (identifier: string) => Promise<string>;
  completeCode: (stateId: string, otp: string) => Promise<unknown>;
  passkey: () => Promise<unknown>;
  providers: () => Promise<ExternalProvider[]>;
  startExternal: (provider: string) => Promise<ExternalStarted>;
  completeExternal: (stateId: string, code: string) => Promise<{ prove: EmailToProve } | { signedIn: unknown }>;
  confirmExternal: (stateId: string, otp: string) => Promise<unknown>;
  confirmExternalPasskey: (stateId: string) => Promise<unknown>;
};

/** On its own, the page keeps the session for /account; in an app's flow, the server answers what's next. */
const ON_ITS_OWN: SignInWith = {
  startCode: startSignIn,
  completeCode: completeSignIn,
  passkey: async () => finishPasskeySignIn(await assertWithPasskey(await startPasskeySignIn())),
  providers: loadProviders,
  // back to this very page (its ?return_to= kept), which finishes the sign-in
  startExternal: (provider) => startExternalSignIn(provider, returnAddress()),
  completeExternal: async (stateId, code) => {
    const r = await completeExternalSignIn(stateId, code);
    return "prove" in r ? r : { signedIn: undefined };
  },
  confirmExternal: confirmExternalSignIn,
  confirmExternalPasskey: async (stateId) => confirmExternalSignInWithPasskey(stateId, await assertWithPasskey(await startPasskeySignIn())),
};
const IN_FLOW: SignInWith = {
  startCode: flowStartSignIn,
  completeCode: flowCompleteSignIn,
  passkey: async () => flowPasskeySignIn(await assertWithPasskey(await flowPasskeyOptions())),
  providers: flowProviders,
  startExternal: flowStartExternal,
  completeExternal: flowCompleteExternal,
  confirmExternal: flowConfirmExternal,
  confirmExternalPasskey: async (stateId) => flowConfirmExternalPasskey(stateId, await assertWithPasskey(await flowPasskeyOptions())),
};

/** "Continue with …" for each of the project's providers; none shown when it has none. */
function ExternalButtons(props: { via: SignInWith; error: string | null }) {
  const [providers, setProviders] = useState<ExternalProvider[]>([]);
  const [going, setGoing] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();
  useEffect(() => {
    props.via.providers().then(setProviders, () => setProviders([]));
  }, []);
  const go = (p: ExternalProvider) =>
    run(async () => {
      setGoing(p.slug);
      try {
        const started = await props.via.startExternal(p.slug);
        goToProvider({ stateId: started.stateId, purpose: "sign_in", provider: p.display_name }, started.authorizationUrl);
      } catch (err) {
        setGoing(null);
        throw err;
      }
    });
  const shown = error ?? props.error;
  if (!providers.length) return <Alert text={shown} />;
  return (
    <div class="external-signin">
      <p class="or" aria-hidden="true">
        <span>or</span>
      </p>
      <div class="choices">
        {providers.map((p) => (
          <button key={p.slug} type="button" class="wide" data-provider={p.slug} disabled={busy || going !== null} onClick={() => (setError(null), go(p))}>
            {going === p.slug ? `Going to ${p.display_name}…` : `Continue with ${p.display_name}`}
          </button>
        ))}
      </div>
      <Alert text={shown} />
    </div>
  );
}

/** The provider named an e-mail address an account here holds: its code proves it, then the provider is connected to that account. */
function ProveEmail(props: { via: SignInWith; provider: string; proving: EmailToProve; onDone: (result: unknown) => void; onBack: () => void }) {
  const [code, setCode] = useState("");
  const { busy, error, setError, run } = useAction();
  const input = useFocusOnShow<HTMLInputElement>(error);
  const submit = (e: Event) => {
    e.preventDefault();
    if (!/^\d{6}$/.test(code.trim())) return setError("Enter the 6-digit code.");
    void run(async () => props.onDone(await props.via.confirmExternal(props.proving.stateId, code)));
  };
  const withPasskey = () => run(async () => props.onDone(await props.via.confirmExternalPasskey(props.proving.stateId)));
  return (
    <form onSubmit={submit} noValidate>
      <p id="code-sent">
        {props.provider} gave the e-mail address <strong class="value">{props.proving.destination}</strong>, which already has an account here. To sign in to that account and
        connect {props.provider} to it, enter the 6-digit code we sent to that address.
      </p>
      <CodeField id="code" sentId="code-sent" value={code} onInput={setCode} inputRef={input} error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
        {passkeysSupported() && (
          <button type="button" onClick={withPasskey} disabled={busy}>
            Use a passkey of that account
          </button>
        )}
        <button type="button" onClick={props.onBack}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function PasskeySignIn(props: { onDone: (result: unknown) => void; via?: SignInWith }) {
  const { busy, error, run } = useAction();
  if (!passkeysSupported()) return <p class="muted">This browser does not support passkeys; use a code instead.</p>;
  const go = () =>
    run(async () => {
      props.onDone(await (props.via ?? ON_ITS_OWN).passkey());
    });
  return (
    <div class="passkey-signin">
      <button type="button" class="primary wide" onClick={go} disabled={busy} aria-describedby="passkey-hint">
        {busy ? "Waiting for your passkey…" : "Sign in with a passkey"}
      </button>
      <p class="hint" id="passkey-hint">
        Your device asks which passkey to use; nothing to type.
      </p>
      <Alert text={error} />
    </div>
  );
}

function CodeRequest(props: { onSent: (identifier: string, stateId: string) => void; via?: SignInWith }) {
  const [value, setValue] = useState("");
  const { busy, error, setError, run } = useAction();
  const input = useFocusOnShow<HTMLInputElement>(error);
  const submit = (e: Event) => {
    e.preventDefault();
    const identifier = value.trim();
    if (!identifier) return setError("Enter your e-mail address or phone number.");
    void run(async () => props.onSent(identifier, await (props.via ?? ON_ITS_OWN).startCode(identifier)));
  };
  return (
    <form onSubmit={submit} noValidate>
      <Field
        id="identifier"
        label="E-mail or phone number"
        value={value}
        onInput={setValue}
        inputRef={input}
        autoComplete="username"
        maxLength={320}
        hint="Phone numbers start with + and the country code, e.g. +44 20 7946 0958."
        error={error}
      />
      <button type="submit" class="wide" disabled={busy}>
        {busy ? "Sending…" : "Send me a code"}
      </button>
    </form>
  );
}

function CodeEntry(props: { identifier: string; stateId: string; onDone: (result: unknown) => void; onBack: () => void; via?: SignInWith }) {
  const [code, setCode] = useState("");
  const { busy, error, setError, run } = useAction();
  const input = useFocusOnShow<HTMLInputElement>(error);
  const submit = (e: Event) => {
    e.preventDefault();
    if (!/^\d{6}$/.test(code.trim())) return setError("Enter the 6-digit code.");
    void run(async () => {
      props.onDone(await (props.via ?? ON_ITS_OWN).completeCode(props.stateId, code));
    });
  };
  return (
    <form onSubmit={submit} noValidate>
      <p id="code-sent">
        We sent a 6-digit code to <strong class="value">{props.identifier}</strong>. It is valid for 10 minutes.
      </p>
      <CodeField id="code" sentId="code-sent" value={code} onInput={setCode} inputRef={input} error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
        <button type="button" onClick={props.onBack}>
          Use another e-mail or phone
        </button>
      </div>
    </form>
  );
}

// ---- inside an app's OpenID Connect flow ------------------------------------------------------

function FlowPage(props: { returned: ExternalReturn | null }) {
  const [consent, setConsent] = useState<Consent | null>(null);
  const next = (result: unknown) => {
    const outcome = result as Outcome;
    if ("redirectTo" in outcome) location.assign(outcome.redirectTo);
    else setConsent(outcome.consent);
  };
  return <Frame title="sign in">{consent ? <ConsentCard consent={consent} /> : <SignInCard via={IN_FLOW} returned={props.returned} onDone={next} />}</Frame>;
}

/** A third party's app asks: the user sees who and what, and the answer is remembered. */
function ConsentCard({ consent }: { consent: Consent }) {
  const { busy, error, run } = useAction();
  const answer = (allow: boolean) => run(async () => location.assign((await answerConsent(allow)).redirectTo));
  usePageTitle(`Allow ${isolated(consent.client.name)}? – Sign in`);
  // The code field that had the focus is gone: the question takes it, so it is read out first.
  const heading = useFocusOnShow<HTMLHeadingElement>();
  return (
    <div class="card narrow">
      <h1 ref={heading} tabIndex={-1}>
        Allow <span class="value">{consent.client.name}</span>?
      </h1>
      <p>It will be able to see:</p>
      <ul class="scopes">
        {consent.scopes.map((s) => (
          <li key={s}>{SCOPE_WORDS[s] ?? s}</li>
        ))}
      </ul>
      <p class="hint">We remember your answer for this app.</p>
      <Alert text={error} />
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => answer(true)}>
          Allow
        </button>
        <button type="button" disabled={busy} onClick={() => answer(false)}>
          Deny
        </button>
      </div>
    </div>
  );
}

reloadWhenBroughtBack();
// Inside an app's flow the page always signs in for that app; on its own, already signed in: straight
// on, unless the user is back from a provider to finish signing in.
const returned = takeExternalReturn("sign_in");
if (interactionId()) render(<FlowPage returned={returned} />, document.getElementById("app")!);
else if (publishableKey() && storedSession() && !returned) location.replace(returnTo());
else render(<LoginPage returned={returned} />, document.getElementById("app")!);
