// The page: the API key gate, then the project's console: the webhook list beside the selected
// webhook (or the create form, or the project's delivery chart), and the users view for support
// staff, the sign-in apps (OpenID Connect clients) and the sign-in providers (external identity
// providers). Navigation is in the URL's hash (#/new, #/webhooks/<id>, #/users, #/users/<id>,
// #/apps, #/providers) so reloads and Back work.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import {
  AuthError,
  createWebhook,
  forgetKey,
  isError,
  isPublishableKey,
  loadOverview,
  MAX_PAGE,
  PublishableKeyError,
  SECRET_KEY_NEEDED,
  saveKey,
  setAuthLostHandler,
  storedKey,
  type Webhook,
} from "./api.ts";
import { Apps } from "./Apps.tsx";
import { Providers } from "./Providers.tsx";
import { DeliveryChartCard } from "./Chart.tsx";
import { Users } from "./Users.tsx";
import { WebhookDetail } from "./WebhookDetail.tsx";
import { WebhookForm } from "./WebhookForm.tsx";
import { FieldError, StateBadge, fmtRate, message, usePoll, type SecretNotice } from "./ui.tsx";

type Route = { kind: "home" } | { kind: "new" } | { kind: "webhook"; id: string } | { kind: "users"; accountId: string | null } | { kind: "apps" } | { kind: "providers" };

/** A hash segment as written, or null when it is not valid percent-encoding (a crafted link blanked the console). */
function segment(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function parseRoute(): Route {
  const h = location.hash.replace(/^#/, "");
  if (h === "/new") return { kind: "new" };
  if (h === "/users") return { kind: "users", accountId: null };
  if (h === "/apps") return { kind: "apps" };
  if (h === "/providers") return { kind: "providers" };
  const user = /^\/users\/([^/]+)$/.exec(h);
  const accountId = user ? segment(user[1]) : null;
  if (accountId !== null) return { kind: "users", accountId };
  const m = /^\/webhooks\/([^/]+)$/.exec(h);
  const id = m ? segment(m[1]) : null;
  return id !== null ? { kind: "webhook", id } : { kind: "home" };
}

function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute);
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

export function App() {
  const [key, setKey] = useState(() => {
    const stored = storedKey();
    return stored && !isPublishableKey(stored) ? stored : null;
  });
  const [notice, setNotice] = useState<string | null>(null);

  // While signed in, a refused key (revoked meanwhile) leads back to the key form.
  useEffect(() => {
    if (!key) return;
    setAuthLostHandler((msg) => {
      forgetKey();
      setNotice(msg === SECRET_KEY_NEEDED ? msg : `The API key was refused (${msg}). Enter it again.`);
      setKey(null);
    });
    return () => setAuthLostHandler(null);
  }, [key]);

  const route = useRoute();
  return (
    <>
      <header class="top">
        <h1>
          linkgate <span>console</span>
        </h1>
        {key && (
          <nav class="sections" aria-label="Sections">
            <a href="#/" aria-current={route.kind !== "users" && route.kind !== "apps" && route.kind !== "providers" ? "page" : undefined}>
              Webhooks
            </a>
            <a href="#/users" aria-current={route.kind === "users" ? "page" : undefined}>
              Users
            </a>
            <a href="#/apps" aria-current={route.kind === "apps" ? "page" : undefined}>
              Sign-in apps
            </a>
            <a href="#/providers" aria-current={route.kind === "providers" ? "page" : undefined}>
              Sign-in providers
            </a>
          </nav>
        )}
        {key && (
          <button
            type="button"
            onClick={() => {
              forgetKey();
              setNotice(null);
              setKey(null);
            }}
          >
            Forget API key
          </button>
        )}
      </header>
      {key ? (
        route.kind === "users" ? (
          <Users accountId={route.accountId} />
        ) : route.kind === "apps" ? (
          <Apps />
        ) : route.kind === "providers" ? (
          <Providers />
        ) : (
          <Dashboard route={route} />
        )
      ) : (
        <KeyForm
          notice={notice}
          onDone={(k) => {
            setNotice(null);
            setKey(k);
          }}
        />
      )}
    </>
  );
}

function KeyForm(props: { notice: string | null; onDone: (key: string) => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  // Back to the field in the render that shows why (see Confirm in WebhookDetail).
  useLayoutEffect(() => input.current?.focus(), [error]);

  const submit = async (e: Event) => {
    e.preventDefault();
    const key = value.trim();
    if (!key) return setError("Enter the project's API key.");
    if (isPublishableKey(key)) return setError(SECRET_KEY_NEEDED);
    setBusy(true);
    setError(null);
    saveKey(key);
    try {
      await loadOverview(1); // checks the key
      props.onDone(key);
    } catch (err) {
      forgetKey();
      if (err instanceof PublishableKeyError) setError(err.message);
      else setError(err instanceof AuthError ? `This API key was not accepted: ${err.message}` : message(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="gate">
      <form class="card" onSubmit={submit}>
        <h2>Sign in with your project's API key</h2>
        {props.notice && <p class="notice-text">{props.notice}</p>}
        <div class="field">
          <label for="api-key">Project API key</label>
          <input
            id="api-key"
            ref={input}
            type="password"
            autoComplete="off"
            spellcheck={false}
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            aria-invalid={error ? "true" : undefined}
            aria-describedby={`api-key-hint${error ? " api-key-error" : ""}`}
          />
          <p class="hint" id="api-key-hint">
            The project's secret key (lg_sk_…). Kept in this browser tab's session only; closing the browser forgets it.
          </p>
          <FieldError id="api-key-error" text={error} />
        </div>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Checking…" : "Continue"}
        </button>
      </form>
    </main>
  );
}

function Dashboard({ route }: { route: Exclude<Route, { kind: "users" } | { kind: "apps" } | { kind: "providers" }> }) {
  const [eventTypes, setEventTypes] = useState<string[]>([]);
  const [webhooks, setWebhooks] = useState<Webhook[] | null>(null);
  const [shown, setShown] = useState(MAX_PAGE);
  const [hasMore, setHasMore] = useState(false);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [secret, setSecret] = useState<SecretNotice | null>(null);

  const refresh = async () => {
    try {
      const d = await loadOverview(shown);
      setEventTypes(d.eventTypes);
      setWebhooks(d.webhooks);
      setHasMore(d.hasMoreWebhooks);
      setLoadError(null);
    } catch (err) {
      setLoadError(message(err));
    }
  };
  usePoll(refresh, 5000, [shown]);

  const selected = route.kind === "webhook" ? route.id : null;
  return (
    <main class="layout" data-view={route.kind}>
      <aside class="list" aria-labelledby="list-title">
        <div class="section-head">
          <h2 id="list-title">Webhooks</h2>
          <a class="button primary" href="#/new">
            New webhook
          </a>
        </div>
        {loadError && (
          <p class="field-error" role="alert">
            {loadError}
          </p>
        )}
        {webhooks === null ? (
          <p class="muted">Loading…</p>
        ) : webhooks.length === 0 ? (
          <p class="empty">No webhooks yet.</p>
        ) : (
          <ul class="webhooks">
            {webhooks.map((w) => (
              <li key={w.id}>
                <a href={`#/webhooks/${encodeURIComponent(w.id)}`} aria-current={w.id === selected ? "page" : undefined} data-webhook-id={w.id}>
                  <span class="url">{w.url}</span>
                  {w.description && <span class="desc">{w.description}</span>}
                  <span class="meta">
                    <StateBadge webhook={w} />
                    <span>
                      success rate <strong>{fmtRate(w.stats)}</strong>
                    </span>
                  </span>
                  {!w.enabled && w.disabledReason && <span class="reason">{w.disabledReason}</span>}
                </a>
              </li>
            ))}
          </ul>
        )}
        {hasMore && (
          <button type="button" class="more" onClick={() => setShown((n) => n + MAX_PAGE)}>
            Show more webhooks
          </button>
        )}
      </aside>

      {route.kind === "new" ? (
        <section class="detail" aria-labelledby="new-title">
          <a class="back" href="#/">
            ← All webhooks
          </a>
          <div class="card">
            <h2 id="new-title">New webhook</h2>
            {eventTypes.length > 0 && (
              <WebhookForm
                idPrefix="new"
                eventTypes={eventTypes}
                initial={{ url: "", events: [], description: "" }}
                submitLabel="Create webhook"
                onCancel={() => (location.hash = "#/")}
                onSubmit={async (input) => {
                  const r = await createWebhook(input);
                  if (isError(r)) return r;
                  setSecret({ webhookId: r.webhook.id, secret: r.secret });
                  setWebhooks((cur) => [...(cur ?? []), r.webhook]);
                  location.hash = `#/webhooks/${encodeURIComponent(r.webhook.id)}`;
                  return null;
                }}
              />
            )}
          </div>
        </section>
      ) : selected ? (
        <WebhookDetail
          key={selected}
          id={selected}
          eventTypes={eventTypes}
          secret={secret}
          onSecret={setSecret}
          onChanged={refresh}
          onLoaded={(w) => setWebhooks((cur) => cur?.map((x) => (x.id === w.id ? w : x)) ?? null)}
          onDeleted={() => {
            setSecret(null);
            setWebhooks((cur) => cur?.filter((w) => w.id !== selected) ?? null);
            location.hash = "#/";
            void refresh();
          }}
        />
      ) : (
        <section class="detail intro" aria-labelledby="intro-title">
          <div class="card">
            <h2 id="intro-title">Webhooks send your project's events to your servers</h2>
            <p>
              Choose a webhook to see its deliveries, send a test event or rotate its secret, or <a href="#/new">create a webhook</a>.
            </p>
          </div>
          <DeliveryChartCard webhookId={null} title="Delivery attempts across all webhooks" idPrefix="project-chart" />
        </section>
      )}
    </main>
  );
}
