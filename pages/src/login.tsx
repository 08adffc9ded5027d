// /login: sign in with a passkey (discoverable: nothing to type) or with a code sent to an
// e-mail address or phone number; then on to ?return_to= (a path on this site) or /account.
import { render } from "preact";
import { useState } from "preact/hooks";
import { completeSignIn, finishPasskeySignIn, publishableKey, returnTo, startPasskeySignIn, startSignIn, storedSession } from "./api.ts";
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

function PasskeySignIn(props: { onDone: () => void }) {
  const { busy, error, run } = useAction();
  if (!passkeysSupported()) return <p class="muted">This browser does not support passkeys; use a code instead.</p>;
  const go = () =>
    run(async () => {
      const options = await startPasskeySignIn();
      await finishPasskeySignIn(await assertWithPasskey(options));
      props.onDone();
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

function CodeRequest(props: { onSent: (identifier: string, stateId: string) => void }) {
  const [value, setValue] = useState("");
  const { busy, error, setError, run } = useAction();
  const input = useFocusOnShow<HTMLInputElement>(error);
  const submit = (e: Event) => {
    e.preventDefault();
    const identifier = value.trim();
    if (!identifier) return setError("Enter your e-mail address or phone number.");
    void run(async () => props.onSent(identifier, await startSignIn(identifier)));
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

function CodeEntry(props: { identifier: string; stateId: string; onDone: () => void; onBack: () => void }) {
  const [code, setCode] = useState("");
  const { busy, error, setError, run } = useAction();
  const input = useFocusOnShow<HTMLInputElement>(error);
  const submit = (e: Event) => {
    e.preventDefault();
    if (!/^\d{6}$/.test(code.trim())) return setError("Enter the 6-digit code.");
    void run(async () => {
      await completeSignIn(props.stateId, code);
      props.onDone();
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

// Already signed in: straight on.
if (publishableKey() && storedSession()) location.replace(returnTo());
else render(<LoginPage />, document.getElementById("app")!);
