// Users, for a project's support staff: look an account up by e-mail, phone or id, see what it is
// made of (identifiers, merge, passkeys, live sessions, recent events and their deliveries), end
// its sessions, and unmerge it on its user's behalf after a confirmation naming both accounts.
// The account shown is in the URL (#/users/<id>), so a reload or a link shows it again.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { isolated } from "../../ui/text.ts";
import { describeUserAgent } from "../../ui/user-agent.ts";
import {
  accountQueryOf,
  endAccountSessions,
  isError,
  lookupAccount,
  unmergeAccount,
  type Account,
  type AccountEvent,
  type Identifier,
} from "./api.ts";
import { Confirm, Envelope, FieldError, StatusBadge, fmtTime, message } from "./ui.tsx";

export function Users({ accountId }: { accountId: string | null }) {
  const [loaded, setLoaded] = useState<{ id: string; account: Account | null } | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [reloads, setReloads] = useState(0);

  useEffect(() => {
    if (!accountId) return;
    let current = true;
    setLoadError(null);
    lookupAccount({ accountId })
      .then((r) => {
        if (!current) return;
        if (isError(r)) setLoadError(r.message);
        else setLoaded({ id: accountId, account: r.account });
      })
      .catch((err) => current && setLoadError(message(err)));
    return () => {
      current = false;
    };
  }, [accountId, reloads]);

  const shown = accountId && loaded?.id === accountId ? loaded : null;
  return (
    <main class="users">
      <AccountSearch />
      {loadError && (
        <p class="field-error" role="alert">
          {loadError}
        </p>
      )}
      {accountId &&
        (!shown ? (
          !loadError && <p class="muted">Loading…</p>
        ) : shown.account ? (
          <AccountView key={shown.account.id} account={shown.account} onChanged={() => setReloads((n) => n + 1)} />
        ) : (
          <section class="card">
            <p>This project has no account {accountId}.</p>
          </section>
        ))}
    </main>
  );
}

/** One field for an e-mail address, a phone number or an account id; a match opens #/users/<id>. */
function AccountSearch() {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [notFound, setNotFound] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  // Back to the field in the render that says why (see ui/focus.tsx).
  useLayoutEffect(() => {
    if (error) input.current?.focus();
  }, [error]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNotFound(null);
    if (!value.trim()) return setError("Enter an e-mail address, a phone number or an account id.");
    setBusy(true);
    try {
      const r = await lookupAccount(accountQueryOf(value));
      if (isError(r)) setError(r.message);
      else if (!r.account) setNotFound(`No account of this project has ${value.trim()}.`);
      else location.hash = `#/users/${encodeURIComponent(r.account.id)}`;
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card" aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <p class="hint">For support: find a user's account, see what it is made of, end its sessions or separate merged accounts for the user.</p>
      <form class="search" role="search" aria-label="Look up an account" onSubmit={submit}>
        <label for="account-search">E-mail address, phone number or account id</label>
        <div class="row">
          <input
            id="account-search"
            ref={input}
            type="search"
            autoComplete="off"
            spellcheck={false}
            placeholder="ada@example.com, +44 20 7946 0000 or acc_…"
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            aria-invalid={error ? "true" : undefined}
            aria-describedby={`account-search-hint${error ? " account-search-error" : ""}`}
          />
          <button type="submit" class="primary" disabled={busy}>
            Look up
          </button>
        </div>
        <p class="hint" id="account-search-hint">
          Phone numbers with + and the country code.
        </p>
        <FieldError id="account-search-error" text={error} />
        <p class="muted" role="status">
          {notFound}
        </p>
      </form>
    </section>
  );
}

const kindName = (i: Pick<Identifier, "kind">) => (i.kind === "email" ? "E-mail" : "Phone");

/** How an account is named to a person: its e-mail or phone, and its id. */
function nameOf(a: { id: string; identifiers: Identifier[] }) {
  const first = a.identifiers[0]?.value;
  return first ? `${a.id} (${isolated(first)})` : a.id;
}

function AccountView({ account: a, onChanged }: { account: Account; onChanged: () => void }) {
  const root = useRef<HTMLElement>(null);
  const [mode, setMode] = useState<"view" | "confirm-unmerge" | "confirm-end">("view");
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ ok?: string; error?: string }>({});
  const [focusNext, setFocusNext] = useState<string | null>(null);

  // Shown for this account (keyed by id): the focus moves here, as in a webhook's view.
  useEffect(() => root.current?.focus(), []);
  // After a question closes, the focus goes where the person expects it: back to the button that
  // asked, or to what the action did. In the same render, before a key can land elsewhere.
  useLayoutEffect(() => {
    if (!focusNext) return;
    root.current?.querySelector<HTMLElement>(`[data-focus="${focusNext}"]`)?.focus();
    setFocusNext(null);
  }, [focusNext, mode, note]);
  const cancel = (opener: string) => {
    setMode("view");
    setFocusNext(opener);
  };

  const act = async (fn: () => Promise<string>) => {
    setBusy(true);
    setNote({});
    try {
      setNote({ ok: await fn() });
      setMode("view");
      onChanged();
    } catch (err) {
      setNote({ error: message(err) });
    } finally {
      setFocusNext("note");
      setBusy(false);
    }
  };

  const endAll = () =>
    act(async () => {
      const r = await endAccountSessions(a.id);
      if (isError(r)) throw new Error(r.message);
      return r.ended === 1 ? "1 session ended: it is signed out on its next request." : `${r.ended} sessions ended: they are signed out on their next request.`;
    });

  const partner = a.mergePartner;
  const unmerge = () =>
    act(async () => {
      const r = await unmergeAccount(a.id, partner!.id);
      if (isError(r)) throw new Error(r.message);
      return `Accounts separated: ${r.primaryId} and ${r.secondaryId} each sign in on their own again. Both were told, and user.unmerged records that support did it.`;
    });

  return (
    <section class="account" ref={root} tabIndex={-1} aria-labelledby="account-title" data-account-id={a.id}>
      <div class="card">
        <h2 id="account-title">{a.name || a.email || a.identifiers[0]?.value || "Account"}</h2>
        <p class="url">{a.id}</p>
        <dl class="facts">
          <div>
            <dt>Status</dt>
            <dd>
              <span class={`badge ${a.status === "active" ? "ok" : "off"}`}>{a.status}</span>
            </dd>
          </div>
          <div>
            <dt>Created</dt>
            <dd>{fmtTime(a.createdAt)}</dd>
          </div>
          <div>
            <dt>Last sign-in</dt>
            <dd>{fmtTime(a.lastLoginAt)}</dd>
          </div>
          <div>
            <dt>Changed</dt>
            <dd>{fmtTime(a.updatedAt)}</dd>
          </div>
        </dl>
        {note.ok && (
          <p class="ok" role="status" tabIndex={-1} data-focus="note">
            {note.ok}
          </p>
        )}
        {note.error && (
          <p class="field-error" role="alert" tabIndex={-1} data-focus="note">
            {note.error}
          </p>
        )}
      </div>

      <section class="card" aria-labelledby="identifiers-title">
        <h3 id="identifiers-title">Identifiers</h3>
        <IdentifierList identifiers={a.identifiers} />
      </section>

      <section class="card" aria-labelledby="merge-title">
        <h3 id="merge-title">Merge</h3>
        {!partner ? (
          <p class="muted">Not merged with another account.</p>
        ) : (
          <>
            <p>
              {a.mergeRole === "primary"
                ? "This account is the primary: the other account was merged into it, and its addresses and passkeys sign in here."
                : "This account is the secondary: it was merged into the other account, where its addresses and passkeys sign in."}{" "}
              Merged {fmtTime(a.mergedAt)}.
            </p>
            <p>
              {a.mergeRole === "primary" ? "Secondary" : "Primary"}:{" "}
              <a href={`#/users/${encodeURIComponent(partner.id)}`} class="url">
                {partner.id}
              </a>
              {partner.name && (
                <span>
                  {" · "}
                  <span class="value">{partner.name}</span>
                </span>
              )}
            </p>
            <IdentifierList identifiers={partner.identifiers} />
            {mode === "confirm-unmerge" ? (
              <Confirm
                id="unmerge"
                text={`Separate ${nameOf(a)} from ${nameOf(partner)}? Each account signs in on its own again, with its own addresses and passkeys; both are told by e-mail or text, and the webhooks get user.unmerged saying that support did it.`}
                action="Unmerge the accounts"
                danger
                busy={busy}
                onConfirm={unmerge}
                onCancel={() => cancel("unmerge")}
              />
            ) : (
              <div class="actions">
                <button type="button" class="danger" data-focus="unmerge" onClick={() => setMode("confirm-unmerge")} disabled={busy}>
                  Unmerge…
                </button>
              </div>
            )}
          </>
        )}
      </section>

      <section class="card" aria-labelledby="sessions-title">
        <div class="section-head">
          <h3 id="sessions-title">Live sessions</h3>
          <span class="muted">{a.sessions.length}</span>
        </div>
        {a.sessions.length === 0 ? (
          <p class="muted">No live sessions: nobody is signed in to this account.</p>
        ) : (
          <>
            <ul class="plain">
              {a.sessions.map((s) => (
                <li key={s.id}>
                  <strong class="value">{describeUserAgent(s.userAgent)}</strong>
                  <span class="muted">
                    {" "}
                    · signed in {fmtTime(s.createdAt)} · last used {fmtTime(s.lastUsedAt)} · from {s.clientAddress ?? "an unknown address"}
                  </span>
                </li>
              ))}
            </ul>
            {mode === "confirm-end" ? (
              <Confirm
                id="end-sessions"
                text={`End all ${a.sessions.length} sessions of ${nameOf(a)}? Each is signed out on its next request and has to sign in again.`}
                action="End all sessions"
                danger
                busy={busy}
                onConfirm={endAll}
                onCancel={() => cancel("end-sessions")}
              />
            ) : (
              <div class="actions">
                <button type="button" data-focus="end-sessions" onClick={() => setMode("confirm-end")} disabled={busy}>
                  End all sessions…
                </button>
              </div>
            )}
          </>
        )}
      </section>

      <section class="card" aria-labelledby="passkeys-title">
        <h3 id="passkeys-title">Passkeys</h3>
        {a.passkeys.length === 0 ? (
          <p class="muted">No passkeys.</p>
        ) : (
          <ul class="plain">
            {a.passkeys.map((k) => (
              <li key={k.id}>
                <strong class="value">{k.name}</strong>
                <span class="muted">
                  {" "}
                  · {k.deviceType === "multiDevice" ? "synced" : "one device"} · added {fmtTime(k.createdAt)} · last used {fmtTime(k.lastUsedAt)}
                </span>
              </li>
            ))}
          </ul>
        )}
      </section>

      <section class="card" aria-labelledby="events-title">
        <h3 id="events-title">Recent events</h3>
        {a.recentEvents.length === 0 ? (
          <p class="muted">No events.</p>
        ) : (
          <ul class="events">
            {a.recentEvents.map((e) => (
              <EventItem key={e.id} event={e} />
            ))}
          </ul>
        )}
      </section>
    </section>
  );
}

function IdentifierList({ identifiers }: { identifiers: Identifier[] }) {
  return (
    <ul class="plain identifiers">
      {identifiers.map((i) => (
        <li key={`${i.kind}:${i.value}`}>
          <span class="muted">{kindName(i)}</span> <span class="url">{i.value}</span>{" "}
          <span class={`badge ${i.origin === "own" ? "ok" : "off"}`} title={i.origin === "own" ? "signed up with it" : "added by linking"}>
            {i.origin}
          </span>
          <span class="muted"> · since {fmtTime(i.createdAt)}</span>
        </li>
      ))}
    </ul>
  );
}

function EventItem({ event: e }: { event: AccountEvent }) {
  return (
    <li class="event" data-event-id={e.id}>
      <div class="delivery-row">
        <span class="etype">{e.eventType}</span>
        <time class="muted" dateTime={e.createdAt}>
          {fmtTime(e.createdAt)}
        </time>
        <span class="muted url">{e.id}</span>
      </div>
      {e.deliveries.length === 0 ? (
        <p class="muted">No webhook takes this type: nothing was sent.</p>
      ) : (
        <ul class="plain">
          {e.deliveries.map((d) => (
            <li key={d.id}>
              <StatusBadge status={d.status} />{" "}
              <a href={`#/webhooks/${encodeURIComponent(d.webhook.id)}`} class="url">
                {d.webhook.url}
              </a>
              <span class="muted">
                {" "}
                · {d.attempts} {d.attempts === 1 ? "attempt" : "attempts"}
                {d.lastStatus !== null && ` · HTTP ${d.lastStatus}`}
              </span>
            </li>
          ))}
        </ul>
      )}
      <details class="payload">
        <summary>Envelope</summary>
        <Envelope body={e.body} eventId={e.id} idPrefix={e.id} />
      </details>
    </li>
  );
}
