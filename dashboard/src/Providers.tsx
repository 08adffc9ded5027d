// Sign-in providers: the project's external identity providers (docs/external-identities.md), the
// "Continue with …" buttons of its sign-in pages. Add one from a preset (Google, Apple, Microsoft,
// GitLab, GitHub or any OpenID Connect provider) with the client id and secret the provider gave,
// edit or delete it; each shows the callback URL to register at the provider. The secret is
// stored sealed and never shown again.
import { useState } from "preact/hooks";
import { gql, isError, type ApiError } from "./api.ts";
import { OPERATIONS } from "./operations.ts";
import { Confirm, CopyButton, FieldError, FormActions, fmtTime, message, usePoll } from "./ui.tsx";

type Preset = "GOOGLE" | "APPLE" | "MICROSOFT" | "GITLAB" | "GITHUB" | "OIDC";
export type IdentityProvider = {
  id: string;
  slug: string;
  preset: Preset;
  displayName: string;
  issuer: string;
  clientId: string;
  scopes: string[];
  hasClientSecret: boolean;
  callbackUrl: string;
  sharedCallback: boolean;
  createdAt: string;
};
type Input = { preset?: Preset; slug?: string; displayName?: string; issuer?: string; clientId?: string; clientSecret?: string; scopes?: string[] };

/** What each preset asks of the issuer field: nothing (the preset's), optional (another instance), or required. */
const PRESETS: Record<Preset, { label: string; issuer: "none" | "optional" | "required"; issuerHint?: string }> = {
  GOOGLE: { label: "Google", issuer: "none" },
  APPLE: { label: "Apple", issuer: "none" },
  MICROSOFT: { label: "Microsoft", issuer: "required", issuerHint: "Your tenant's: https://login.microsoftonline.com/<tenant id>/v2.0" },
  GITLAB: { label: "GitLab", issuer: "optional", issuerHint: "Only for a self-managed GitLab: its URL. Empty: gitlab.com." },
  GITHUB: { label: "GitHub", issuer: "optional", issuerHint: "Only for GitHub Enterprise Server: its URL. Empty: github.com." },
  OIDC: { label: "Another OpenID Connect provider", issuer: "required", issuerHint: "The provider's issuer URL (https), to which /.well-known/openid-configuration is added; not that document's own URL." },
};

const loadProviders = async () => (await gql<{ identityProviders: IdentityProvider[] }>(OPERATIONS.IdentityProviders)).identityProviders;

type Saved = { provider: IdentityProvider; created: boolean };

export function Providers() {
  const [providers, setProviders] = useState<IdentityProvider[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [saved, setSaved] = useState<Saved | null>(null);
  const refresh = async () => {
    try {
      setProviders(await loadProviders());
      setLoadError(null);
    } catch (err) {
      setLoadError(message(err));
    }
  };
  usePoll(refresh, 10_000, []);
  const onSaved = (s: Saved) => {
    setSaved(s);
    void refresh();
  };

  return (
    <main class="apps providers">
      <section class="card" aria-labelledby="providers-title">
        <h2 id="providers-title">Sign-in providers</h2>
        <p class="hint">
          The services your users can sign in with (“Continue with …” on the sign-in page). A user's sign-in there is an identifier of its own, never matched by
          e-mail address; register each provider's callback URL at the provider.
        </p>
        {saved && (
          <p class="notice-text" role="status">
            {saved.created ? "Added" : "Saved"} {saved.provider.displayName}. Register this callback URL at {PRESETS[saved.provider.preset].label}:{" "}
            <code>{saved.provider.callbackUrl}</code>
          </p>
        )}
        {loadError && (
          <p class="field-error" role="alert">
            {loadError}
          </p>
        )}
        {providers === null ? (
          <p class="muted">Loading…</p>
        ) : providers.length === 0 ? (
          <p class="muted">No sign-in providers yet.</p>
        ) : (
          <ul class="app-list">
            {providers.map((p) => (
              <ProviderItem key={p.id} provider={p} onSaved={onSaved} onDeleted={() => (setSaved(null), void refresh())} />
            ))}
          </ul>
        )}
      </section>
      <section class="card" aria-labelledby="new-provider-title">
        <h2 id="new-provider-title">Add a sign-in provider</h2>
        <ProviderForm idPrefix="new-provider" submitLabel="Add the provider" onSaved={(provider) => onSaved({ provider, created: true })} />
      </section>
    </main>
  );
}

function ProviderItem(props: { provider: IdentityProvider; onSaved: (s: Saved) => void; onDeleted: () => void }) {
  const { provider: p } = props;
  const [mode, setMode] = useState<"view" | "edit" | "confirm-delete">("view");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const remove = async () => {
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ deleteIdentityProvider: { __typename: string; message?: string } }>(OPERATIONS.DeleteIdentityProvider, { id: p.id });
      if (isError(d.deleteIdentityProvider)) throw new Error(d.deleteIdentityProvider.message);
      props.onDeleted();
    } catch (err) {
      setError(message(err));
      setBusy(false);
    }
  };
  return (
    <li class="app-item" data-provider={p.slug}>
      <h3>{p.displayName}</h3>
      <dl>
        <dt>Kind</dt>
        <dd>{PRESETS[p.preset].label}</dd>
        <dt>Slug</dt>
        <dd>
          <code>{p.slug}</code>
        </dd>
        <dt>Issuer</dt>
        <dd>
          <code>{p.issuer}</code>
        </dd>
        <dt>Client id</dt>
        <dd>
          <code>{p.clientId}</code>
        </dd>
        <dt>Client secret</dt>
        <dd>{p.hasClientSecret ? "set (never shown)" : "none"}</dd>
        <dt>Scopes</dt>
        <dd>
          <code>{p.scopes.join(" ")}</code>
        </dd>
        <dt>Callback URL</dt>
        <dd>
          <code>{p.callbackUrl}</code> <CopyButton text={p.callbackUrl} label={`Copy the callback URL of ${p.displayName}`} what="the callback URL" />
          {p.sharedCallback && (
            <p class="hint">
              The shared callback of providers added before each had its own: another provider of this gateway could be sent this one's codes. Register{" "}
              <code>{p.callbackUrl.replace(/\/auth\/external\/callback$/, `/auth/external/${p.id}/callback`)}</code> at {PRESETS[p.preset].label}, then move it with{" "}
              <code>updateIdentityProvider(id: "{p.id}", input: {"{"}sharedCallback: false{"}"})</code>.
            </p>
          )}
        </dd>
        <dt>Added</dt>
        <dd>{fmtTime(p.createdAt)}</dd>
      </dl>
      {mode === "view" && (
        <div class="actions">
          <button type="button" onClick={() => setMode("edit")} aria-label={`Edit ${p.displayName}`}>
            Edit
          </button>
          <button type="button" class="danger" onClick={() => setMode("confirm-delete")} aria-label={`Delete ${p.displayName}`}>
            Delete
          </button>
        </div>
      )}
      {mode === "edit" && (
        <ProviderForm
          idPrefix={`edit-${p.id}`}
          provider={p}
          submitLabel="Save changes"
          onCancel={() => setMode("view")}
          onSaved={(provider) => {
            setMode("view");
            props.onSaved({ provider, created: false });
          }}
        />
      )}
      {mode === "confirm-delete" && (
        <Confirm
          id={`delete-${p.id}`}
          text={`Delete ${p.displayName}? Its button leaves the sign-in page and its sign-ins in progress end; the sign-ins it added stay on their accounts but no longer sign in.`}
          action="Delete provider"
          danger
          busy={busy}
          onConfirm={remove}
          onCancel={() => setMode("view")}
        />
      )}
      <FieldError id={`provider-${p.id}-error`} text={error} />
    </li>
  );
}

/** Create (no `provider`) or edit: an edit sends only what changed, and the secret only when a new one is typed. */
function ProviderForm(props: { idPrefix: string; provider?: IdentityProvider; submitLabel: string; onSaved: (p: IdentityProvider) => void; onCancel?: () => void }) {
  const { idPrefix: f, provider: old } = props;
  const [preset, setPreset] = useState<Preset>(old?.preset ?? "GOOGLE");
  const [displayName, setDisplayName] = useState(old?.displayName ?? "");
  const [slug, setSlug] = useState(old?.slug ?? "");
  const [issuer, setIssuer] = useState(old && PRESETS[old.preset].issuer !== "none" ? old.issuer : "");
  const [clientId, setClientId] = useState(old?.clientId ?? "");
  const [clientSecret, setClientSecret] = useState("");
  const [scopes, setScopes] = useState(old?.scopes.join(" ") ?? "");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const kind = PRESETS[preset];

  const input = (): Input => {
    const changed = <T,>(value: T, before: T | undefined) => (old && value === before ? undefined : value);
    const scopeList = scopes.split(/[\s,]+/).filter(Boolean);
    return {
      preset: old ? undefined : preset,
      displayName: displayName.trim() ? changed(displayName.trim(), old?.displayName) : undefined,
      slug: slug.trim() ? changed(slug.trim(), old?.slug) : undefined,
      issuer: kind.issuer !== "none" && issuer.trim() ? changed(issuer.trim(), old?.issuer) : undefined,
      clientId: changed(clientId.trim(), old?.clientId),
      clientSecret: clientSecret || undefined,
      scopes: scopeList.length && scopeList.join(" ") !== old?.scopes.join(" ") ? scopeList : undefined,
    };
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!clientId.trim()) return setError("Enter the client id the provider gave you.");
    if (kind.issuer === "required" && !issuer.trim()) return setError(`Enter the issuer URL of ${kind.label}.`);
    setBusy(true);
    setError(null);
    try {
      type R = IdentityProvider & { __typename: string };
      const r = old
        ? (await gql<{ updateIdentityProvider: R | ApiError }>(OPERATIONS.UpdateIdentityProvider, { id: old.id, input: input() })).updateIdentityProvider
        : (await gql<{ createIdentityProvider: R | ApiError }>(OPERATIONS.CreateIdentityProvider, { input: input() })).createIdentityProvider;
      if (isError(r)) throw new Error(r.message);
      props.onSaved(r as IdentityProvider);
      if (!old) {
        setDisplayName("");
        setSlug("");
        setIssuer("");
        setClientId("");
        setScopes("");
      }
      setClientSecret("");
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  };
  const text = (id: string, label: string, value: string, set: (v: string) => void, hint?: string, type: "text" | "password" = "text") => (
    <div class="field">
      <label for={`${f}-${id}`}>{label}</label>
      <input
        id={`${f}-${id}`}
        type={type as "text"}
        autoComplete="off"
        spellcheck={false}
        value={value}
        onInput={(e) => set(e.currentTarget.value)}
        aria-describedby={hint ? `${f}-${id}-hint` : undefined}
      />
      {hint && (
        <p class="hint" id={`${f}-${id}-hint`}>
          {hint}
        </p>
      )}
    </div>
  );
  return (
    <form onSubmit={submit} noValidate aria-label={old ? `Edit ${old.displayName}` : "Add a sign-in provider"}>
      {!old && (
        <div class="field">
          <label for={`${f}-preset`}>Provider</label>
          <select id={`${f}-preset`} value={preset} onChange={(e) => setPreset(e.currentTarget.value as Preset)}>
            {(Object.keys(PRESETS) as Preset[]).map((p) => (
              <option key={p} value={p}>
                {PRESETS[p].label}
              </option>
            ))}
          </select>
        </div>
      )}
      {text("name", "Button name", displayName, setDisplayName, "What the button says after “Continue with”. Empty: the preset's name.")}
      {text("slug", "Slug", slug, setSlug, "Its name in the API (a-z, 0-9 and -). Empty: the preset's name.")}
      {kind.issuer !== "none" && text("issuer", kind.issuer === "required" ? "Issuer URL" : "Issuer URL (optional)", issuer, setIssuer, kind.issuerHint)}
      {text("client-id", "Client id", clientId, setClientId)}
      {text("client-secret", "Client secret", clientSecret, setClientSecret, old?.hasClientSecret ? "Stored sealed and never shown. Empty: keep the current one." : "Stored sealed and never shown again.", "password")}
      {text("scopes", "Scopes", scopes, setScopes, "Separated by spaces. Empty: the preset's (an OpenID Connect provider's must include openid).")}
      <FieldError id={`${f}-error`} text={error} />
      <FormActions busy={busy} submitLabel={props.submitLabel} onCancel={props.onCancel} />
    </form>
  );
}
