// Sign-in apps: the project's OpenID Connect clients (docs/oidc.md). Register one, see its client
// id and redirect URIs, rotate a confidential client's secret; a secret is shown this once.
import { useState } from "preact/hooks";
import { gql, isError, type ApiError } from "./api.ts";
import { OPERATIONS } from "./operations.ts";
import { isolated } from "../../ui/text.ts";
import { FieldError, fmtTime, message, usePoll } from "./ui.tsx";

type ClientType = "PUBLIC" | "CONFIDENTIAL";
export type OAuthClient = { id: string; clientId: string; name: string; redirectUris: string[]; type: ClientType; firstParty: boolean; createdAt: string };
type WithSecret = { client: OAuthClient; clientSecret: string | null };
type Shown = { name: string; secret: string };

const loadClients = async () =>
  (await gql<{ oauthClients: { edges: { node: OAuthClient }[] } }>(OPERATIONS.OAuthClients, { first: 100 })).oauthClients.edges.map((e) => e.node);

function payload<T>(r: (T & { __typename: string }) | ApiError): T {
  if (isError(r)) throw new Error(r.message);
  return r as T;
}

export function Apps() {
  const [clients, setClients] = useState<OAuthClient[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [shown, setShown] = useState<Shown | null>(null);
  const refresh = async () => {
    try {
      setClients(await loadClients());
      setLoadError(null);
    } catch (err) {
      setLoadError(message(err));
    }
  };
  usePoll(refresh, 10_000, []);

  return (
    <main class="apps">
      <section class="card" aria-labelledby="apps-title">
        <h2 id="apps-title">Sign-in apps</h2>
        <p class="hint">
          Apps that sign your users in with OpenID Connect (authorization code with PKCE). Public apps (single-page, mobile) have no secret; a
          confidential app (a server) gets a secret, shown once.
        </p>
        {shown && <SecretShown shown={shown} onDismiss={() => setShown(null)} />}
        {loadError && (
          <p class="field-error" role="alert">
            {loadError}
          </p>
        )}
        {clients === null ? (
          <p class="muted">Loading…</p>
        ) : clients.length === 0 ? (
          <p class="muted">No apps yet.</p>
        ) : (
          <ul class="app-list">
            {clients.map((c) => (
              <AppItem key={c.id} client={c} onSecret={(secret) => setShown({ name: c.name, secret })} />
            ))}
          </ul>
        )}
      </section>
      <NewApp
        onCreated={(r) => {
          if (r.clientSecret) setShown({ name: r.client.name, secret: r.clientSecret });
          void refresh();
        }}
      />
    </main>
  );
}

function AppItem({ client, onSecret }: { client: OAuthClient; onSecret: (secret: string) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const rotate = async () => {
    if (!confirm(`Rotate the secret of ${isolated(client.name)}? The current secret stops working at once.`)) return;
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ rotateOAuthClientSecret: WithSecret & { __typename: string } }>(OPERATIONS.RotateOAuthClientSecret, { id: client.id });
      onSecret(payload<WithSecret>(d.rotateOAuthClientSecret).clientSecret!);
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <li class="app-item">
      <h3>{client.name}</h3>
      <dl>
        <dt>Client id</dt>
        <dd>
          <code>{client.clientId}</code>
        </dd>
        <dt>Type</dt>
        <dd>
          {client.type === "PUBLIC" ? "public (no secret)" : "confidential (with a secret)"}
          {client.firstParty ? ", first-party (no consent page)" : ", third-party (consent page)"}
        </dd>
        <dt>Redirect URIs</dt>
        <dd>
          <ul class="uris">
            {client.redirectUris.map((u) => (
              <li key={u}>
                <code>{u}</code>
              </li>
            ))}
          </ul>
        </dd>
        <dt>Registered</dt>
        <dd>{fmtTime(client.createdAt)}</dd>
      </dl>
      {client.type === "CONFIDENTIAL" && (
        <div class="actions">
          <button type="button" onClick={rotate} disabled={busy}>
            {busy ? "Rotating…" : `Rotate the secret of ${client.name}`}
          </button>
        </div>
      )}
      <FieldError id={`app-${client.id}-error`} text={error} />
    </li>
  );
}

function NewApp({ onCreated }: { onCreated: (r: WithSecret) => void }) {
  const [name, setName] = useState("");
  const [uris, setUris] = useState("");
  const [type, setType] = useState<ClientType>("PUBLIC");
  const [firstParty, setFirstParty] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const redirectUris = uris.split(/\s+/).filter(Boolean);
    if (!name.trim() || redirectUris.length === 0) return setError("Give the app a name and at least one redirect URI.");
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ createOAuthClient: WithSecret & { __typename: string } }>(OPERATIONS.CreateOAuthClient, {
        input: { name: name.trim(), redirectUris, type, firstParty },
      });
      onCreated(payload<WithSecret>(d.createOAuthClient));
      setName("");
      setUris("");
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="new-app-title">
      <h2 id="new-app-title">Register an app</h2>
      <div class="field">
        <label for="app-name">Name</label>
        <input id="app-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <p class="hint">Shown to users on the consent page.</p>
      </div>
      <div class="field">
        <label for="app-uris">Redirect URIs</label>
        <textarea id="app-uris" rows={3} value={uris} onInput={(e) => setUris(e.currentTarget.value)} aria-describedby="app-uris-hint" />
        <p class="hint" id="app-uris-hint">
          One per line, matched exactly: https, http only on localhost, or an app's own scheme (com.example.app:/callback).
        </p>
      </div>
      <fieldset class="field">
        <legend>Type</legend>
        <label class="check">
          <input type="radio" name="app-type" checked={type === "PUBLIC"} onChange={() => setType("PUBLIC")} /> Public: a single-page or mobile app
        </label>
        <label class="check">
          <input type="radio" name="app-type" checked={type === "CONFIDENTIAL"} onChange={() => setType("CONFIDENTIAL")} /> Confidential: a server, with a secret
        </label>
      </fieldset>
      <label class="check">
        <input type="checkbox" checked={firstParty} onChange={(e) => setFirstParty(e.currentTarget.checked)} /> Our own app (users are not asked for consent)
      </label>
      <FieldError id="new-app-error" text={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Registering…" : "Register the app"}
        </button>
      </div>
    </form>
  );
}

function SecretShown({ shown, onDismiss }: { shown: Shown; onDismiss: () => void }) {
  return (
    <section class="notice secret" aria-labelledby="app-secret-title">
      <h3 id="app-secret-title">Client secret of {shown.name}</h3>
      <p>Store it on the app's server now: it is shown only this once.</p>
      <label class="sr-only" for="app-secret-value">
        Client secret
      </label>
      <input id="app-secret-value" readOnly value={shown.secret} onFocus={(e) => e.currentTarget.select()} />
      <div class="actions">
        <button type="button" onClick={onDismiss}>
          I stored it
        </button>
      </div>
    </section>
  );
}
