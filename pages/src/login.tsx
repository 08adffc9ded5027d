// /login: sign in with a passkey (discoverable: nothing to type) or with a code sent to an
// e-mail address or phone number; then on to ?return_to= (a path on this site) or /account.
// Opened by an app's OpenID Connect authorization (?interaction=…), it signs in for that app,
// asks for consent when the app is a third party's, and goes back to the app.
import { render } from "preact";
import { useState } from "preact/hooks";
import { completeSignIn, finishPasskeySignIn, publishableKey, returnTo, startPasskeySignIn, startSignIn, storedSession } from "./api.ts";
import { answerConsent, flowCompleteSignIn, flowPasskeyOptions, flowPasskeySignIn, flowStartSignIn, interactionId, SCOPE_WORDS, type Consent, type Outcome } from "./flow.ts";
import { assertWithPasskey, passkeysSupported } from "./webauthn.ts";
import { Alert, Field, Frame, NotConfigured, useAction, useFocusOnShow } from "./ui.tsx";
import "./style.css";

const NOTICES: Record<string, string> = {
  ended: "Your session has ended. Sign in again.",
  "signed-out": "You are signed out.",
};

function LoginPage() {
  return <Frame title="sign in">{publishableKey() ? <SignIn /> : <NotConfigured />}</Frame>;
}

type Step = { kind: "identifier" } | { kind: "code"; identifier: string; stateId: string };

function SignIn() {
  const [step, setStep] = useState<Step>({ kind: "identifier" });
  const notice = NOTICES[new URLSearchParams(location.search).get("why") ?? ""];
  const signedIn = () => location.assign(returnTo());
  return (
    <div class="card narrow">
      <h1>Sign in</h1>
      {notice && step.kind === "identifier" && (
        <p class="notice-text" role="status">
          {notice}
        </p>
      )}
      {step.kind === "identifier" ? (
        <>
          <PasskeySignIn onDone={signedIn} />
          <p class="or" aria-hidden="true">
            <span>or</span>
          </p>
          <CodeRequest onSent={(identifier, stateId) => setStep({ kind: "code", identifier, stateId })} />
        </>
      ) : (
        <CodeEntry identifier={step.identifier} stateId={step.stateId} onDone={signedIn} onBack={() => setStep({ kind: "identifier" })} />
      )}
    </div>
  );
}

type SignInWith = {
  startCode: (identifier: string) => Promise<string>;
  completeCode: (stateId: string, otp: string) => Promise<unknown>;
  passkey: () => Promise<unknown>;
};

/** On its own, the page keeps the session for /account; in an app's flow, the server answers what's next. */
const ON_ITS_OWN: SignInWith = {
  startCode: startSignIn,
  completeCode: completeSignIn,
  passkey: async () => finishPasskeySignIn(await assertWithPasskey(await startPasskeySignIn())),
};
const IN_FLOW: SignInWith = {
  startCode: flowStartSignIn,
  completeCode: flowCompleteSignIn,
  passkey: async () => flowPasskeySignIn(await assertWithPasskey(await flowPasskeyOptions())),
};

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
      <p>
        We sent a 6-digit code to <strong class="value">{props.identifier}</strong>. It is valid for 10 minutes.
      </p>
      <Field
        id="code"
        label="Code"
        value={code}
        onInput={setCode}
        inputRef={input}
        inputMode="numeric"
        autoComplete="one-time-code"
        maxLength={6}
        error={error}
      />
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

function FlowPage() {
  const [step, setStep] = useState<Step>({ kind: "identifier" });
  const [consent, setConsent] = useState<Consent | null>(null);
  const next = (result: unknown) => {
    const outcome = result as Outcome;
    if ("redirectTo" in outcome) location.assign(outcome.redirectTo);
    else setConsent(outcome.consent);
  };
  return (
    <Frame title="sign in">
      {consent ? (
        <ConsentCard consent={consent} />
      ) : (
        <div class="card narrow">
          <h1>Sign in</h1>
          {step.kind === "identifier" ? (
            <>
              <PasskeySignIn onDone={next} via={IN_FLOW} />
              <p class="or" aria-hidden="true">
                <span>or</span>
              </p>
              <CodeRequest via={IN_FLOW} onSent={(identifier, stateId) => setStep({ kind: "code", identifier, stateId })} />
            </>
          ) : (
            <CodeEntry via={IN_FLOW} identifier={step.identifier} stateId={step.stateId} onDone={next} onBack={() => setStep({ kind: "identifier" })} />
          )}
        </div>
      )}
    </Frame>
  );
}

/** A third party's app asks: the user sees who and what, and the answer is remembered. */
function ConsentCard({ consent }: { consent: Consent }) {
  const { busy, error, run } = useAction();
  const answer = (allow: boolean) => run(async () => location.assign((await answerConsent(allow)).redirectTo));
  return (
    <div class="card narrow">
      <h1>
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

// Inside an app's flow the page always signs in for that app; on its own, already signed in: straight on.
if (interactionId()) render(<FlowPage />, document.getElementById("app")!);
else if (publishableKey() && storedSession()) location.replace(returnTo());
else render(<LoginPage />, document.getElementById("app")!);
