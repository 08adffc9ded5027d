// /account: the signed-in user's e-mail addresses and phone numbers, their sign-ins with external
// identity providers, the account merged into theirs and their passkeys, with everything linking
// offers: add one with a code or through the provider (the service decides attach or merge; the
// page says which), remove one, unmerge, and add, rename or remove passkeys.
import { render } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import {
  accountLabel,
  completeExternalReauthentication,
  completeReauthentication,
  endOtherSessions,
  endSession,
  revokeApp,
  type AuthorizedApp,
  finishPasskeyRegistration,
  goToProvider,
  loadProviders,
  loadViewer,
  loginUrl,
  reloadWhenBroughtBack,
  reachable,
  returnAddress,
  startExternalLink,
  startExternalReauthentication,
  takeExternalReturn,
  verifyExternalLink,
  type ExternalProvider,
  type ExternalReturn,
  publishableKey,
  reauthenticateWithPasskey,
  removeLink,
  removePasskey,
  renamePasskey,
  requestLink,
  SessionEnded,
  signOut,
  startPasskeyRegistration,
  startPasskeySignIn,
  startReauthentication,
  storedSession,
  unmerge,
  verifyLink,
  type AccountSession,
  type Identifier,
  type MergedAccount,
  type Passkey,
  type Viewer,
} from "./api.ts";
import { at } from "../../ui/base.ts";
import { isolated } from "../../ui/text.ts";
import { describeUserAgent } from "../../ui/user-agent.ts";
import { assertWithPasskey, createPasskey, passkeysSupported } from "./webauthn.ts";
import {
  Alert,
  Confirm,
  Done,
  CodeField,
  Field,
  Frame,
  NotConfigured,
  fmtAgo,
  fmtDate,
  message,
  setReauthenticationHandler,
  useAction,
  useFocusOnShow,
  usePageTitle,
  useReturnFocus,
} from "./ui.tsx";
import "./style.css";

function AccountPage() {
  const { busy, error, run } = useAction();
  if (!publishableKey()) return <Frame title="account">{<NotConfigured />}</Frame>;
  const out = () =>
    run(async () => {
      await signOut();
      location.assign(at("/login?why=signed-out"));
    });
  return (
    <Frame
      title="account"
      actions={
        <button type="button" onClick={out} disabled={busy}>
          {busy ? "Signing out…" : "Sign out"}
        </button>
      }
    >
      <Alert text={error} />
      <Account />
    </Frame>
  );
}

function Account() {
  const [viewer, setViewer] = useState<Viewer | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [reauth, setReauth] = useState<{ retry: () => Promise<void> } | null>(null);
  useEffect(() => {
    setReauthenticationHandler((retry) => setReauth({ retry }));
    return () => setReauthenticationHandler(null);
  }, []);
  const reload = async () => {
    const v = await loadViewer();
    setViewer(v);
    return v;
  };
  useEffect(() => {
    reload().catch((err) => {
      if (err instanceof SessionEnded) location.replace(loginUrl("ended"));
      else setLoadError(message(err));
    });
  }, []);
  const [confirmed, setConfirmed] = useState<string | null>(null);
  const [confirmError, setConfirmError] = useState<string | null>(reauthReturn && "error" in reauthReturn ? reauthReturn.error : null);
  useEffect(() => {
    if (!reauthReturn || !("code" in reauthReturn)) return;
    // the change that asked for it was left behind with the page: the user makes it again
    completeExternalReauthentication(reauthReturn.pending.stateId, reauthReturn.code).then(
      () => setConfirmed(`Confirmed with ${reauthReturn.pending.provider}: make your change again.`),
      (err) => setConfirmError(`Confirming with ${reauthReturn.pending.provider} did not work: ${message(err)}`),
    );
  }, []);

  if (loadError) return <Alert text={`Your account could not be loaded: ${loadError}`} />;
  if (!viewer) return <p class="muted">Loading your account…</p>;
  return (
    <>
      <h1 class="title">
        Your account <span class="value">{accountLabel(viewer)}</span>
      </h1>
      <Done text={confirmed} />
      <Alert text={confirmError} />
      <Identifiers viewer={viewer} reload={reload} />
      <ExternalSignIns viewer={viewer} reload={reload} />
      <Merged viewer={viewer} reload={reload} />
      <Passkeys passkeys={viewer.passkeys} secondary={viewer.mergedSecondary} reload={reload} />
      <Sessions sessions={viewer.sessions} reload={reload} />
      <Apps apps={viewer.authorizedApps} reload={reload} />
      {reauth && (
        <Reauthenticate
          viewer={viewer}
          onCancel={() => setReauth(null)}
          onConfirmed={() => {
            setReauth(null);
            void reauth.retry();
          }}
        />
      )}
    </>
  );
}

// ---- confirming it is the user before a sensitive change ----------------------------------------

type ReauthStep = { kind: "choose" } | { kind: "code"; to: Identifier; stateId: string };

/**
 * A modal dialog: the change the user asked for needs a recent sign-in. A passkey of this
 * account or a code sent to one of its addresses confirms it, and the change then goes ahead.
 */
function Reauthenticate(props: { viewer: Viewer; onCancel: () => void; onConfirmed: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  // Modal: focus moves in, Escape cancels, and closing gives the focus back to what had it.
  useLayoutEffect(() => {
    const d = dialog.current!;
    d.showModal();
    return () => d.close();
  }, []);
  const [step, setStep] = useState<ReauthStep>({ kind: "choose" });
  usePageTitle(step.kind === "code" ? "Enter the code – Confirm it's you – Your account" : "Confirm it's you – Your account");
  const [code, setCode] = useState("");
  const { busy, error, setError, run } = useAction();
  const codeInput = useFocusOnShow<HTMLInputElement>(`${step.kind}${error}`, false);
  const offerPasskey = passkeysSupported() && (props.viewer.passkeys.length > 0 || !!props.viewer.mergedSecondary);
  const addresses = props.viewer.identifiers.filter(reachable);
  const providers = useOwnProviders(props.viewer);

  const withProvider = (p: ExternalProvider) =>
    run(async () => {
      const started = await startExternalReauthentication(p.slug, returnAddress());
      goToProvider({ stateId: started.stateId, purpose: "reauth", provider: p.display_name }, started.authorizationUrl);
    });

  const withPasskey = () =>
    run(async () => {
      await reauthenticateWithPasskey(await assertWithPasskey(await startPasskeySignIn()));
      props.onConfirmed();
    });
  const sendCode = (to: Identifier) =>
    run(async () => {
      const stateId = await startReauthentication(to);
      setCode("");
      setStep({ kind: "code", to, stateId });
    });
  const checkCode = (e: Event) => {
    e.preventDefault();
    if (step.kind !== "code") return;
    if (!/^\d{6}$/.test(code.trim())) return setError("Enter the 6-digit code.");
    void run(async () => {
      await completeReauthentication(step.stateId, code);
      props.onConfirmed();
    });
  };

  return (
    <dialog
      ref={dialog}
      class="dialog"
      aria-labelledby="reauth-title"
      aria-describedby="reauth-why"
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <h2 id="reauth-title">Confirm it's you</h2>
      <p id="reauth-why">This change needs a recent sign-in. Confirm with {offerPasskey ? "a passkey or a code" : "a code"}, and it goes ahead.</p>
      {step.kind === "choose" ? (
        <div class="choices">
          {offerPasskey && (
            <button type="button" class="primary wide" onClick={withPasskey} disabled={busy}>
              {busy ? "Waiting…" : "Use a passkey"}
            </button>
          )}
          {!offerPasskey && !addresses.length && !providers.length && (
            <p class="hint">Add a passkey, an e-mail address or a phone number first: this account has nothing a code or passkey can confirm.</p>
          )}
          {providers.map((p) => (
            <button key={p.slug} type="button" class="wide" data-reauth-provider={p.slug} onClick={() => withProvider(p)} disabled={busy}>
              Sign in again with {p.display_name}
            </button>
          ))}
          {addresses.map((i) => (
            <button key={i.id} type="button" class="wide" onClick={() => sendCode(i)} disabled={busy}>
              Send a code to <span class="value">{i.value}</span>
            </button>
          ))}
        </div>
      ) : (
        <form onSubmit={checkCode} noValidate>
          <p id="reauth-code-sent">
            We sent a 6-digit code to <strong class="value">{step.to.value}</strong>.
          </p>
          <CodeField id="reauth-code" sentId="reauth-code-sent" value={code} onInput={setCode} inputRef={codeInput} error={error} />
          <button type="submit" class="primary" disabled={busy}>
            {busy ? "Checking…" : "Confirm"}
          </button>
        </form>
      )}
      {step.kind === "choose" && <Alert text={error} />}
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** The providers of the account's own external sign-ins (what a re-authentication can use). */
function useOwnProviders(viewer: Viewer): ExternalProvider[] {
  const [providers, setProviders] = useState<ExternalProvider[]>([]);
  const names = new Set(viewer.identifiers.flatMap((i) => (i.kind === "external" && i.externalProfile?.providerName ? [i.externalProfile.providerName] : [])));
  useEffect(() => {
    if (names.size) loadProviders().then((all) => setProviders(all.filter((p) => names.has(p.display_name))), () => setProviders([]));
  }, [viewer]);
  return providers;
}

type Reload = () => Promise<Viewer>;

const kindLabel = (i: Pick<Identifier, "kind" | "externalProfile">) =>
  i.kind === "email" ? "E-mail" : i.kind === "phone" ? "Phone" : `Sign-in with ${i.externalProfile?.providerName ?? "a provider that was removed"}`;

/** An external sign-in is shown by what the provider said of the user (the value is the provider's user id). */
const shownValue = (i: Pick<Identifier, "value" | "externalProfile">) => i.externalProfile?.email ?? i.externalProfile?.name ?? i.value;

/** "the account of bob@example.com": how the pages name another account, inside a sentence of ours. */
const theAccountOf = (a: Pick<MergedAccount, "name" | "email" | "phoneNumber" | "id">) => `the account of ${isolated(accountLabel(a))}`;

// ---- e-mail addresses and phone numbers ---------------------------------------------------------

function Identifiers(props: { viewer: Viewer; reload: Reload }) {
  const [done, setDone] = useState<string | null>(null);
  return (
    <section class="card" aria-labelledby="identifiers-title">
      <h2 id="identifiers-title">E-mail addresses and phone numbers</h2>
      <p class="hint">Each of them signs in to this account with a code.</p>
      <ul class="items">
        {props.viewer.identifiers.filter(reachable).map((i) => (
          <IdentifierRow key={i.id} identifier={i} only={props.viewer.identifiers.length === 1} reload={props.reload} onDone={setDone} />
        ))}
      </ul>
      <Done text={done} />
      <AddIdentifier reload={props.reload} onDone={setDone} />
    </section>
  );
}

/** `only`: the account's last identifier, which cannot be removed (an account keeps one to sign in with a code). */
function IdentifierRow(props: { identifier: Identifier; only: boolean; reload: Reload; onDone: (text: string) => void }) {
  const { identifier: i } = props;
  const [asking, setAsking] = useState(false);
  const opener = useReturnFocus<HTMLButtonElement>(asking);
  const { busy, error, setError, run } = useAction();
  const ask = (open: boolean) => {
    setError(null);
    setAsking(open);
  };
  const remove = () =>
    run(async () => {
      await removeLink(i);
      setAsking(false);
      await props.reload();
      props.onDone(`${i.kind === "external" ? `${kindLabel(i)} (${isolated(shownValue(i))})` : isolated(i.value)} was removed from your account.`);
    });
  return (
    <li class="item" data-identifier={i.value}>
      <div class="item-main">
        <span class="value">{shownValue(i)}</span>
        <span class="meta">
          {kindLabel(i)} · <span class={`badge ${i.origin}`}>{i.origin === "own" ? "signed up with it" : "added later"}</span>
        </span>
      </div>
      {props.only && <span class="hint">{i.kind === "external" ? "Add another way to sign in before removing this one." : "Add another address before removing this one."}</span>}
      {!asking && !props.only && (
        <button type="button" class="small" ref={opener} onClick={() => ask(true)} aria-label={`Remove ${i.kind === "external" ? kindLabel(i) : i.value}`}>
          Remove
        </button>
      )}
      {asking && (
        <Confirm
          id={`remove-${i.id}`}
          text={
            <>
              Remove <strong class="value">{i.kind === "external" ? `${kindLabel(i)} (${shownValue(i)})` : i.value}</strong> from your account? It will no longer sign in here.
            </>
          }
          action="Remove"
          busy={busy}
          onConfirm={remove}
          onCancel={() => ask(false)}
        />
      )}
      <Alert text={error} />
    </li>
  );
}

type LinkStep = { kind: "identifier" } | { kind: "code"; identifier: string; stateId: string };

function AddIdentifier(props: { reload: Reload; onDone: (text: string) => void }) {
  const [step, setStep] = useState<LinkStep>({ kind: "identifier" });
  const [value, setValue] = useState("");
  const [code, setCode] = useState("");
  const { busy, error, setError, run } = useAction();
  // The page opens on the account, not in this field: the focus moves only once the user acts.
  const input = useFocusOnShow<HTMLInputElement>(`${step.kind}${error}`, false);

  const request = (e: Event) => {
    e.preventDefault();
    const identifier = value.trim();
    if (!identifier) return setError("Enter an e-mail address or phone number.");
    void run(async () => {
      const stateId = await requestLink(identifier);
      setCode("");
      setStep({ kind: "code", identifier, stateId });
    });
  };

  const verify = (e: Event) => {
    e.preventDefault();
    if (step.kind !== "code") return;
    if (!/^\d{6}$/.test(code.trim())) return setError("Enter the 6-digit code.");
    void run(async () => {
      const outcome = await verifyLink(step.stateId, code);
      const viewer = await props.reload();
      setValue("");
      setStep({ kind: "identifier" });
      props.onDone(
        outcome === "merged" && viewer.mergedSecondary
          ? `Merged: ${theAccountOf(viewer.mergedSecondary)} is now part of yours. Its e-mail addresses, phone numbers and passkeys sign in here.`
          : `${isolated(step.identifier)} is now attached to your account.`,
      );
    });
  };

  return (
    <div class="subsection">
      <h3 id="add-title">Add an e-mail address or phone number</h3>
      {step.kind === "identifier" ? (
        <form onSubmit={request} aria-labelledby="add-title" noValidate>
          <Field
            id="link-identifier"
            label="E-mail or phone number"
            value={value}
            onInput={setValue}
            inputRef={input}
            maxLength={320}
            hint="We send it a code to prove it is yours. If another account signed up with it, that account is merged into yours."
            error={error}
          />
          <button type="submit" disabled={busy}>
            {busy ? "Sending…" : "Send a code"}
          </button>
        </form>
      ) : (
        <form onSubmit={verify} aria-labelledby="add-title" noValidate>
          <p id="link-code-sent">
            We sent a 6-digit code to <strong class="value">{step.identifier}</strong>.
          </p>
          <CodeField id="link-code" sentId="link-code-sent" value={code} onInput={setCode} inputRef={input} error={error} />
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              {busy ? "Checking…" : "Verify and add"}
            </button>
            <button type="button" onClick={() => setStep({ kind: "identifier" })}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </div>
  );
}

// ---- sign-ins with external identity providers -----------------------------------------------------

/** Back from the provider after "Add …" or "Sign in again with …" (read once, when the page opens). */
const externalReturn: ExternalReturn | null = takeExternalReturn("link", "reauth");
const reauthReturn = externalReturn?.pending?.purpose === "reauth" ? externalReturn : null;
const linkReturn = reauthReturn ? null : externalReturn;

function ExternalSignIns(props: { viewer: Viewer; reload: Reload }) {
  const [providers, setProviders] = useState<ExternalProvider[]>([]);
  const [done, setDone] = useState<string | null>(null);
  const [returnError, setReturnError] = useState<string | null>(linkReturn && "error" in linkReturn ? linkReturn.error : null);
  const { busy, error, run } = useAction();
  const external = props.viewer.identifiers.filter((i) => i.kind === "external");
  useEffect(() => {
    loadProviders().then(setProviders, () => setProviders([]));
    if (!linkReturn || !("code" in linkReturn)) return;
    const { pending, code } = linkReturn;
    // once: the flow is used by its first verify
    (async () => {
      try {
        const outcome = await verifyExternalLink(pending.stateId, code);
        const viewer = await props.reload();
        setDone(
          outcome === "merged" && viewer.mergedSecondary
            ? `Merged: ${theAccountOf(viewer.mergedSecondary)} is now part of yours. Its sign-ins and passkeys sign in here.`
            : `Your ${pending.provider} sign-in is now attached to your account.`,
        );
      } catch (err) {
        if (err instanceof SessionEnded) return location.replace(loginUrl("ended"));
        setReturnError(`Adding ${pending.provider} did not work: ${message(err)}`);
      }
    })();
  }, []);
  if (!external.length && !providers.length) return null;
  const add = (p: ExternalProvider) =>
    run(async () => {
      setReturnError(null);
      const started = await startExternalLink(p.slug, returnAddress());
      goToProvider({ stateId: started.stateId, purpose: "link", provider: p.display_name }, started.authorizationUrl);
    });
  return (
    <section class="card" aria-labelledby="external-title">
      <h2 id="external-title">Sign-ins with other services</h2>
      <p class="hint">Each of them signs in to this account.</p>
      {external.length > 0 && (
        <ul class="items">
          {external.map((i) => (
            <IdentifierRow key={i.id} identifier={i} only={props.viewer.identifiers.length === 1} reload={props.reload} onDone={setDone} />
          ))}
        </ul>
      )}
      <Done text={done} />
      <Alert text={returnError} />
      {providers.length > 0 && (
        <div class="subsection">
          <h3 id="add-external-title">Add a sign-in</h3>
          <p class="hint">You sign in there to prove it is yours. If another account signed up with it, that account is merged into yours.</p>
          <div class="actions">
            {providers.map((p) => (
              <button key={p.slug} type="button" data-provider={p.slug} disabled={busy} onClick={() => add(p)}>
                Add {p.display_name}
              </button>
            ))}
          </div>
          <Alert text={error} />
        </div>
      )}
    </section>
  );
}

// ---- the merged account -------------------------------------------------------------------------

/**
 * What the unmerge removes from this account: what was added while signed in with the other
 * account's addresses, which the other person may hold (docs/security.md, "Sessions").
 */
function Removed(props: { identifiers: Identifier[] }) {
  if (props.identifiers.length === 0) return null;
  return (
    <>
      {" "}
      Added while signed in with its addresses, these are removed from your account, with any passkey added that way:{" "}
      {props.identifiers.map((i, n) => (
        <span key={i.id}>
          {n > 0 ? ", " : ""}
          <strong class="value">{shownValue(i)}</strong>
        </span>
      ))}
      .
    </>
  );
}

function Merged(props: { viewer: Viewer; reload: Reload }) {
  const secondary = props.viewer.mergedSecondary;
  const [asking, setAsking] = useState(false);
  const opener = useReturnFocus<HTMLButtonElement>(asking);
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();
  const ask = (open: boolean) => {
    setError(null);
    setAsking(open);
  };
  const separate = (other: MergedAccount) =>
    run(async () => {
      await unmerge();
      setAsking(false);
      await props.reload();
      setDone(`Unmerged: ${theAccountOf(other)} is an account of its own again, with its e-mail addresses, phone numbers and passkeys.`);
    });
  return (
    <section class="card" aria-labelledby="merged-title">
      <h2 id="merged-title">Merged account</h2>
      {secondary ? (
        <>
          <p>
            <strong class="value">{accountLabel(secondary)}</strong> is merged into your account{secondary.mergedAt ? ` since ${fmtDate(secondary.mergedAt)}` : ""}. Its e-mail
            addresses, phone numbers and passkeys sign in here.
          </p>
          <ul class="items" aria-label={`Identifiers of ${theAccountOf(secondary)}`}>
            {secondary.identifiers.map((i) => (
              <li key={i.id} class="item" data-identifier={i.value}>
                <div class="item-main">
                  <span class="value">{shownValue(i)}</span>
                  <span class="meta">{kindLabel(i)}</span>
                </div>
              </li>
            ))}
          </ul>
          {asking ? (
            <Confirm
              id="unmerge-question"
              text={
                <>
                  Separate <strong class="value">{accountLabel(secondary)}</strong> from your account <strong class="value">{accountLabel(props.viewer)}</strong>?{" "}
                  <span class="value">{accountLabel(secondary)}</span> becomes an account of its own again: its e-mail addresses, phone numbers and passkeys will sign in there, not here.
                  <Removed identifiers={props.viewer.identifiers.filter((i) => i.leavesOnUnmerge)} />
                </>
              }
              action="Unmerge"
              busy={busy}
              onConfirm={() => separate(secondary)}
              onCancel={() => ask(false)}
            />
          ) : (
            <button type="button" class="danger" ref={opener} onClick={() => ask(true)}>
              Unmerge…
            </button>
          )}
        </>
      ) : (
        <p class="muted">No other account is merged into yours. Adding an e-mail address or phone number that another account signed up with merges that account into yours.</p>
      )}
      <Alert text={error} />
      <Done text={done} />
    </section>
  );
}

// ---- sessions ----------------------------------------------------------------------------------

/** This device first, then the others newest first (the server's order). */
const thisDeviceFirst = (sessions: AccountSession[]) => [...sessions.filter((s) => s.current), ...sessions.filter((s) => !s.current)];

function Sessions(props: { sessions: AccountSession[]; reload: Reload }) {
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const others = props.sessions.filter((s) => !s.current).length;

  // The button pressed goes away with its session: the section's heading keeps the keyboard here.
  const ended = async (text: string) => {
    heading.current?.focus();
    await props.reload();
    setDone(text);
  };
  const endOne = (s: AccountSession) =>
    run(async () => {
      await endSession(s.id);
      await ended(`The session of ${isolated(describeUserAgent(s.userAgent))} ended: it is signed out on its next request.`);
    });
  const endOthers = () =>
    run(async () => {
      const n = await endOtherSessions();
      await ended(n === 1 ? "1 other session ended: it is signed out on its next request." : `${n} other sessions ended: they are signed out on their next request.`);
    });

  return (
    <section class="card" aria-labelledby="sessions-title">
      <h2 id="sessions-title" ref={heading} tabIndex={-1}>
        Where you're signed in
      </h2>
      <p class="hint">End a session you don't recognise, then remove any e-mail address or phone number you didn't add.</p>
      <ul class="items">
        {thisDeviceFirst(props.sessions).map((s) => (
          <SessionRow key={s.id} session={s} busy={busy} onEnd={() => endOne(s)} />
        ))}
      </ul>
      <Done text={done} />
      <Alert text={error} />
      {others > 0 ? (
        <div class="actions">
          <button type="button" class="danger" onClick={endOthers} disabled={busy}>
            End all other sessions
          </button>
        </div>
      ) : (
        <p class="muted">You are signed in on this device only.</p>
      )}
    </section>
  );
}

function SessionRow(props: { session: AccountSession; busy: boolean; onEnd: () => void }) {
  const { session: s } = props;
  const device = describeUserAgent(s.userAgent);
  return (
    <li class="item" data-session={s.id}>
      <div class="item-main">
        <span class="value">
          <span class="device">{device}</span>
          {s.current && (
            <>
              {" "}
              <span class="badge current">this device</span>
            </>
          )}
        </span>
        <span class="meta">
          signed in {fmtDate(s.createdAt)} · last used {fmtAgo(s.lastUsedAt ?? s.createdAt)} · from <span class="value">{s.clientAddress ?? "an unknown address"}</span>
        </span>
      </div>
      {!s.current && (
        <button type="button" class="small" onClick={props.onEnd} disabled={props.busy} aria-label={`End the session of ${device}, signed in ${fmtDate(s.createdAt)}`}>
          End
        </button>
      )}
    </li>
  );
}

// ---- apps the user allowed ----------------------------------------------------------------------

/** What each scope lets an app read, in the consent page's words. */
const SCOPE_WORDS: Record<string, string> = { email: "your e-mail address", phone: "your phone number", profile: "your name", offline_access: "access while you're away" };

/** Apps allowed on the consent page: withdrawing one ends its sessions and it asks again. Shown only when there are any. */
function Apps(props: { apps: AuthorizedApp[]; reload: Reload }) {
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  if (!props.apps.length && !done) return null;
  const remove = (app: AuthorizedApp) =>
    run(async () => {
      await revokeApp(app.clientId);
      // the button pressed goes away with its app: the section's heading keeps the keyboard
      // here, and the section stays (said first) when that was the last app
      heading.current?.focus();
      setDone(`${isolated(app.name)} can no longer use your account: it is signed out, and asks again if you use it.`);
      await props.reload();
    });
  return (
    <section class="card" aria-labelledby="apps-title">
      <h2 id="apps-title" ref={heading} tabIndex={-1}>
        Apps you allowed
      </h2>
      <p class="hint">Apps that sign you in with this account and read what you allowed. Remove one you no longer use or don't recognise.</p>
      {props.apps.length ? (
        <ul class="items">
          {props.apps.map((app) => {
            const reads = app.scopes.map((s) => SCOPE_WORDS[s]).filter(Boolean);
            return (
              <li class="item" key={app.clientId} data-app={app.clientId}>
                <div class="item-main">
                  <span class="value">{app.name}</span>
                  <span class="meta">
                    allowed {fmtDate(app.allowedAt)} · reads {reads.length ? reads.join(", ") : "only that it's you"}
                  </span>
                </div>
                <button type="button" class="small danger" onClick={() => remove(app)} disabled={busy} aria-label={`Remove ${app.name}`}>
                  Remove
                </button>
              </li>
            );
          })}
        </ul>
      ) : (
        <p class="muted">No apps.</p>
      )}
      <Done text={done} />
      <Alert text={error} />
    </section>
  );
}

// ---- passkeys -----------------------------------------------------------------------------------

/**
 * The account's passkeys, and its merged secondary's, which sign in here too: listed with where
 * they come from, so the user sees every key to the account and can remove one without unmerging.
 */
function Passkeys(props: { passkeys: Passkey[]; secondary: MergedAccount | null; reload: Reload }) {
  const [done, setDone] = useState<string | null>(null);
  const { secondary } = props;
  const merged = secondary?.passkeys ?? [];
  return (
    <section class="card" aria-labelledby="passkeys-title">
      <h2 id="passkeys-title">Passkeys</h2>
      <p class="hint">Sign in with your device's fingerprint, face or screen lock instead of a code. Your e-mail addresses and phone numbers stay the way back in.</p>
      {props.passkeys.length + merged.length ? (
        <ul class="items">
          {props.passkeys.map((p) => (
            <PasskeyRow key={p.id} passkey={p} reload={props.reload} onDone={setDone} />
          ))}
          {secondary &&
            merged.map((p) => <PasskeyRow key={p.id} passkey={p} from={theAccountOf(secondary)} reload={props.reload} onDone={setDone} />)}
        </ul>
      ) : (
        <p class="muted">No passkeys yet.</p>
      )}
      <Done text={done} />
      <AddPasskey reload={props.reload} onDone={setDone} />
    </section>
  );
}

/** `from`: the merged account the passkey belongs to, when not this one's own. */
function PasskeyRow(props: { passkey: Passkey; from?: string; reload: Reload; onDone: (text: string) => void }) {
  const { passkey: p } = props;
  const [mode, setMode] = useState<"view" | "rename" | "remove">("view");
  const [name, setName] = useState(p.name);
  const { busy, error, setError, run } = useAction();
  const nameInput = useFocusOnShow<HTMLInputElement>(mode, false);
  const renameOpener = useReturnFocus<HTMLButtonElement>(mode === "rename");
  const removeOpener = useReturnFocus<HTMLButtonElement>(mode === "remove");
  const show = (next: typeof mode) => {
    setError(null);
    setMode(next);
  };

  const rename = (e: Event) => {
    e.preventDefault();
    if (!name.trim()) return setError("Give the passkey a name.");
    void run(async () => {
      await renamePasskey(p.id, name.trim());
      setMode("view");
      await props.reload();
      props.onDone(`The passkey is now called “${isolated(name.trim())}”.`);
    });
  };
  const remove = () =>
    run(async () => {
      await removePasskey(p.id);
      await props.reload();
      props.onDone(`The passkey “${isolated(p.name)}” was removed. Your device may still list it; it no longer signs in here.`);
    });

  return (
    <li class="item" data-passkey={p.name}>
      <div class="item-main">
        <span class="value">{p.name}</span>
        <span class="meta">
          added {fmtDate(p.createdAt)} · last used {fmtDate(p.lastUsedAt)}
          {p.backedUp ? " · synced" : ""}
          {props.from ? ` · from ${props.from}, merged into yours` : ""}
        </span>
      </div>
      {mode === "view" && (
        <div class="actions tight">
          <button type="button" class="small" ref={renameOpener} onClick={() => (setName(p.name), show("rename"))} aria-label={`Rename ${p.name}`}>
            Rename
          </button>
          <button type="button" class="small" ref={removeOpener} onClick={() => show("remove")} aria-label={`Remove ${p.name}`}>
            Remove
          </button>
        </div>
      )}
      {mode === "rename" && (
        <form class="inline-form" onSubmit={rename} noValidate>
          <Field id={`rename-${p.id}`} label={`New name for “${isolated(p.name)}”`} value={name} onInput={setName} inputRef={nameInput} error={error} />
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              Save
            </button>
            <button type="button" onClick={() => show("view")}>
              Cancel
            </button>
          </div>
        </form>
      )}
      {mode === "remove" && (
        <Confirm
          id={`remove-${p.id}`}
          text={
            <>
              Remove the passkey <strong class="value">{p.name}</strong>? It will no longer sign in to your account
              {props.from ? `, and unmerging will not give it back to ${props.from}` : ""}.
            </>
          }
          action="Remove passkey"
          busy={busy}
          onConfirm={remove}
          onCancel={() => show("view")}
        />
      )}
      {mode !== "rename" && <Alert text={error} />}
    </li>
  );
}

function AddPasskey(props: { reload: Reload; onDone: (text: string) => void }) {
  const [name, setName] = useState("");
  const { busy, error, run } = useAction();
  if (!passkeysSupported()) return <p class="muted">This browser does not support passkeys.</p>;
  const add = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      const options = await startPasskeyRegistration();
      const passkey = await finishPasskeyRegistration(await createPasskey(options), name.trim() || "Passkey");
      setName("");
      await props.reload();
      props.onDone(`Passkey “${isolated(passkey.name)}” added: you can sign in with it now.`);
    });
  };
  return (
    <form class="subsection" onSubmit={add} aria-labelledby="add-passkey-title" noValidate>
      <h3 id="add-passkey-title">Add a passkey</h3>
      <Field id="passkey-name" label="Name for the new passkey" value={name} onInput={setName} hint="So you can tell your passkeys apart, e.g. “Work laptop”." />
      <button type="submit" disabled={busy}>
        {busy ? "Waiting for your device…" : "Add a passkey"}
      </button>
      <Alert text={error} />
    </form>
  );
}

reloadWhenBroughtBack();
if (publishableKey() && !storedSession()) location.replace(loginUrl());
else render(<AccountPage />, document.getElementById("app")!);
