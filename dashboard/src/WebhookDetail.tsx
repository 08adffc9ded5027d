// One webhook: its state and health, edit, disable/enable, rotate, delete, test events and the
// live delivery log (polled every 2 s).
import { useEffect, useRef, useState } from "preact/hooks";
import {
  deleteWebhook,
  isError,
  loadWebhook,
  rotateSecret,
  sendTest,
  updateWebhook,
  type Delivery,
  type DeliveryFilter,
  type Webhook,
} from "./api.ts";
import { DeliveryChartCard } from "./Chart.tsx";
import { DeliveryLog, type Search } from "./DeliveryLog.tsx";
import { WebhookForm } from "./WebhookForm.tsx";
import { Confirm, FieldError, SecretBox, StateBadge, fmtRate, fmtTime, message, usePoll, type SecretNotice } from "./ui.tsx";

const PAGE = 20;
type Mode = "view" | "edit" | "confirm-delete" | "confirm-rotate";
type Loaded = Webhook & { deliveries: Delivery[]; hasNextPage: boolean; lookback: number | null; search: Search | null };

export function WebhookDetail(props: {
  id: string;
  eventTypes: string[];
  secret: SecretNotice | null;
  onSecret: (n: SecretNotice | null) => void;
  /** the webhook list should refresh */
  onChanged: () => void;
  /** fresh state of this webhook, for the list */
  onLoaded: (w: Webhook) => void;
  onDeleted: () => void;
}) {
  const { id } = props;
  const [data, setData] = useState<Loaded | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [filter, setFilter] = useState<DeliveryFilter>({ status: "", eventType: "", eventId: "" });
  const [first, setFirst] = useState(PAGE);
  const [mode, setMode] = useState<Mode>("view");
  const [actionError, setActionError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const seq = useRef(0);
  const root = useRef<HTMLElement>(null);

  const [highlight, setHighlight] = useState<string | undefined>(undefined);

  // Mounted per webhook (keyed by id): move the focus here.
  useEffect(() => root.current?.focus(), []);

  const load = async () => {
    const n = ++seq.current;
    try {
      const loaded = await loadWebhook(id, first, filter);
      if (n !== seq.current) return; // a newer request was made meanwhile
      setLoadError(null);
      if (!loaded) return setData(null);
      props.onLoaded(loaded.webhook);
      setData({ ...loaded.webhook, deliveries: loaded.deliveries, hasNextPage: loaded.hasNextPage, lookback: loaded.lookback, search: loaded.search });
    } catch (err) {
      if (n === seq.current) setLoadError(message(err));
    }
  };
  usePoll(load, 2000, [id, first, filter.status, filter.eventType, filter.eventId]);

  const changed = () => {
    void load();
    props.onChanged();
  };

  /** Runs an action, showing its error (from the API or the network) under the actions. */
  const act = async (fn: () => Promise<string | null | void>) => {
    setBusy(true);
    setActionError(null);
    try {
      const err = await fn();
      if (err) setActionError(err);
    } catch (err) {
      setActionError(message(err));
    } finally {
      setBusy(false);
    }
  };

  const setEnabled = (enabled: boolean) =>
    act(async () => {
      const r = await updateWebhook(id, { enabled });
      if (isError(r)) return r.message;
      changed();
    });

  const rotate = () =>
    act(async () => {
      const r = await rotateSecret(id);
      if (isError(r)) return r.message;
      setMode("view");
      props.onSecret({ webhookId: id, secret: r.newSecret, transitionEndsAt: r.transitionEndsAt });
      changed();
    });

  const remove = () =>
    act(async () => {
      const r = await deleteWebhook(id);
      if (isError(r)) return r.message;
      props.onDeleted();
    });

  if (data === undefined) {
    return (
      <section class="detail" ref={root} tabIndex={-1} aria-busy="true">
        {loadError ? <p class="field-error" role="alert">{loadError}</p> : <p class="muted">Loading…</p>}
      </section>
    );
  }
  if (data === null) {
    return (
      <section class="detail" ref={root} tabIndex={-1}>
        <p>This webhook does not exist (any more).</p>
        <a href="#/">All webhooks</a>
      </section>
    );
  }

  const w = data;
  return (
    <section class="detail" ref={root} tabIndex={-1} aria-labelledby="detail-title">
      <a class="back" href="#/">
        ← All webhooks
      </a>
      <div class="card">
        <h2 id="detail-title" class="url">
          {w.url}
        </h2>
        {w.description && <p>{w.description}</p>}
        <p class="state">
          <StateBadge webhook={w} />
          {!w.enabled && w.disabledReason && <span class="reason">{w.disabledReason}</span>}
        </p>
        <dl class="facts">
          <div>
            <dt>Success rate (24 h)</dt>
            <dd class="rate">{fmtRate(w.stats)}</dd>
          </div>
          <div>
            <dt>Succeeded · failed · pending</dt>
            <dd>
              {w.stats.succeeded} · {w.stats.failed + w.stats.gone} · {w.stats.pending}
              {w.stats.pendingCapped ? "+" : ""}
            </dd>
          </div>
          <div>
            <dt>Last success</dt>
            <dd>{fmtTime(w.stats.lastSuccessAt)}</dd>
          </div>
          {w.transitionEndsAt && (
            <div>
              <dt>Previous secret valid until</dt>
              <dd>{fmtTime(w.transitionEndsAt)}</dd>
            </div>
          )}
        </dl>
        <p class="chips" aria-label="Subscribed event types">
          {w.events.map((e) => (
            <span class="chip" key={e}>
              {e}
            </span>
          ))}
        </p>

        {mode === "edit" ? (
          <>
            <h3>Edit webhook</h3>
            <WebhookForm
              idPrefix="edit"
              eventTypes={props.eventTypes}
              initial={{ url: w.url, events: w.events, description: w.description }}
              submitLabel="Save changes"
              onCancel={() => setMode("view")}
              onSubmit={async (input) => {
                const r = await updateWebhook(id, input);
                if (isError(r)) return r;
                setMode("view");
                changed();
                return null;
              }}
            />
          </>
        ) : (
          <div class="actions">
            <button type="button" onClick={() => setMode("edit")} disabled={busy}>
              Edit
            </button>
            <button type="button" onClick={() => setEnabled(!w.enabled)} disabled={busy}>
              {w.enabled ? "Disable" : "Enable"}
            </button>
            <button type="button" onClick={() => (w.transitionEndsAt ? setMode("confirm-rotate") : rotate())} disabled={busy}>
              Rotate secret
            </button>
            <button type="button" class="danger" onClick={() => setMode("confirm-delete")} disabled={busy}>
              Delete
            </button>
          </div>
        )}

        {mode === "confirm-delete" && (
          <Confirm
            text={`Delete this webhook? Nothing more is sent to ${w.url}, and its delivery log is deleted too.`}
            action="Delete webhook"
            danger
            busy={busy}
            onConfirm={remove}
            onCancel={() => setMode("view")}
          />
        )}
        {mode === "confirm-rotate" && (
          <Confirm
            text="A rotation is still in its transition: rotating again stops the previous secret from verifying right away."
            action="Rotate anyway"
            busy={busy}
            onConfirm={rotate}
            onCancel={() => setMode("view")}
          />
        )}
        {actionError && (
          <p class="field-error" role="alert">
            {actionError}
          </p>
        )}
      </div>

      {props.secret?.webhookId === id && <SecretBox notice={props.secret} onDismiss={() => props.onSecret(null)} />}

      <DeliveryChartCard
        webhookId={id}
        title="Delivery attempts"
        idPrefix="webhook-chart"
        refreshKey={w.deliveries.map((d) => `${d.id}:${d.status}:${d.attempts}`).join(" ")}
      />

      <TestEvent
        id={id}
        eventTypes={props.eventTypes}
        subscribed={w.events}
        onSent={(eventId) => {
          setHighlight(eventId);
          void load();
        }}
      />

      {loadError && (
        <p class="field-error" role="alert">
          Could not refresh: {loadError}
        </p>
      )}
      <DeliveryLog
        webhookId={id}
        eventTypes={props.eventTypes}
        deliveries={w.deliveries}
        hasNextPage={w.hasNextPage}
        lookback={w.lookback}
        search={w.search}
        filter={filter}
        onFilter={(f) => {
          setFilter(f);
          setFirst(PAGE);
        }}
        onMore={() => setFirst((n) => n + PAGE)}
        onChanged={changed}
        highlightEventId={highlight}
      />
    </section>
  );
}

function TestEvent(props: { id: string; eventTypes: string[]; subscribed: string[]; onSent: (eventId: string) => void }) {
  const [type, setType] = useState(props.subscribed[0] ?? props.eventTypes[0] ?? "");
  const [result, setResult] = useState<{ ok?: string; error?: string }>({});
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setResult({});
    try {
      const r = await sendTest(props.id, type);
      if (isError(r)) setResult({ error: r.message });
      else {
        setResult({ ok: `Test event ${r.eventId} (${r.eventType}) queued: its delivery appears in the log below.` });
        props.onSent(r.eventId);
      }
    } catch (err) {
      setResult({ error: message(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card" aria-labelledby="test-title">
      <h3 id="test-title">Send a test event</h3>
      <form class="row wrap" onSubmit={submit}>
        <label for="test-type">Event type</label>
        <select
          id="test-type"
          value={type}
          onChange={(e) => setType(e.currentTarget.value)}
          aria-invalid={result.error ? "true" : undefined}
          aria-describedby={result.error ? "test-error" : undefined}
        >
          {props.eventTypes.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <button type="submit" class="primary" disabled={busy || !type}>
          Send test event
        </button>
      </form>
      <FieldError id="test-error" text={result.error} />
      <p class="ok" role="status" data-test-result>
        {result.ok}
      </p>
    </section>
  );
}
