// One webhook's delivery log: filters, replay of failed deliveries since a time, and per
// delivery its attempts (status, duration, response excerpt, headers sent) and redelivery.
import { useEffect, useState } from "preact/hooks";
import { DELIVERY_STATUSES, isError, redeliver, replayFailed, type Delivery, type DeliveryFilter, type DeliveryStatus } from "./api.ts";
import { FieldError, StatusBadge, fmtTime, message } from "./ui.tsx";

/** `datetime-local` value for a Date, in local time. */
const localInput = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

export function DeliveryLog(props: {
  webhookId: string;
  eventTypes: string[];
  deliveries: Delivery[];
  totalCount: number;
  hasNextPage: boolean;
  filter: DeliveryFilter;
  onFilter: (f: DeliveryFilter) => void;
  onMore: () => void;
  /** refresh now, after a change */
  onChanged: () => void;
  /** the event of the last test sent, highlighted */
  highlightEventId?: string;
}) {
  const { filter } = props;
  const [since, setSince] = useState(() => localInput(new Date(Date.now() - 24 * 3600_000)));
  const [replay, setReplay] = useState<{ ok?: string; error?: string }>({});

  const submitReplay = async (e: Event) => {
    e.preventDefault();
    setReplay({});
    const when = new Date(since);
    if (!since || Number.isNaN(when.getTime())) return setReplay({ error: "Enter a date and time." });
    try {
      const r = await replayFailed(props.webhookId, when.toISOString());
      if (isError(r)) setReplay({ error: r.message });
      else setReplay({ ok: r.count === 1 ? "1 failed delivery queued again." : `${r.count} failed deliveries queued again.` });
      props.onChanged();
    } catch (err) {
      setReplay({ error: message(err) });
    }
  };

  return (
    <section class="card" aria-labelledby="log-title">
      <div class="section-head">
        <h3 id="log-title">Deliveries</h3>
        <span class="muted" aria-live="off">
          {props.totalCount} {filter.status || filter.eventType ? "matching" : "in all"} · updates every 2 s
        </span>
      </div>

      <div class="toolbar">
        <div class="field inline">
          <label for="filter-status">Show status</label>
          <select id="filter-status" value={filter.status} onChange={(e) => props.onFilter({ ...filter, status: e.currentTarget.value as DeliveryStatus | "" })}>
            <option value="">All statuses</option>
            {DELIVERY_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div class="field inline">
          <label for="filter-event">Show event type</label>
          <select id="filter-event" value={filter.eventType} onChange={(e) => props.onFilter({ ...filter, eventType: e.currentTarget.value })}>
            <option value="">All event types</option>
            {props.eventTypes.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </div>
        <form class="field inline replay" onSubmit={submitReplay}>
          <label for="replay-since">Replay failed since</label>
          <div class="row">
            <input
              id="replay-since"
              type="datetime-local"
              value={since}
              onInput={(e) => setSince(e.currentTarget.value)}
              aria-invalid={replay.error ? "true" : undefined}
              aria-describedby={replay.error ? "replay-error" : undefined}
            />
            <button type="submit">Replay failed</button>
          </div>
          <FieldError id="replay-error" text={replay.error} />
          <p class="ok" role="status">
            {replay.ok}
          </p>
        </form>
      </div>

      {props.deliveries.length === 0 ? (
        <p class="empty">{filter.status || filter.eventType ? "No deliveries match these filters." : "No deliveries yet. Send a test event to see one here."}</p>
      ) : (
        <ul class="deliveries">
          {props.deliveries.map((d) => (
            <DeliveryItem key={d.id} delivery={d} highlight={d.eventId === props.highlightEventId} onChanged={props.onChanged} />
          ))}
        </ul>
      )}
      {props.hasNextPage && (
        <button type="button" class="more" onClick={props.onMore}>
          Show more
        </button>
      )}
    </section>
  );
}

function DeliveryItem({ delivery: d, highlight, onChanged }: { delivery: Delivery; highlight: boolean; onChanged: () => void }) {
  const [note, setNote] = useState<{ ok?: string; error?: string }>({});
  useEffect(() => {
    if (!note.ok) return;
    const t = setTimeout(() => setNote({}), 4000);
    return () => clearTimeout(t);
  }, [note]);
  const last = d.attemptLog[d.attemptLog.length - 1];

  const again = async () => {
    setNote({});
    try {
      const r = await redeliver(d.id);
      setNote(isError(r) ? { error: r.message } : { ok: "Queued for redelivery." });
      onChanged();
    } catch (err) {
      setNote({ error: message(err) });
    }
  };

  return (
    <li class={`delivery${highlight ? " highlight" : ""}`} data-delivery-id={d.id} data-event-id={d.eventId} data-status={d.status}>
      <div class="delivery-row">
        <StatusBadge status={d.status} />
        <span class="etype">{d.eventType}</span>
        <span class="muted">
          {d.attempts} {d.attempts === 1 ? "attempt" : "attempts"}
        </span>
        {last && (
          <span class="muted">
            {last.statusCode !== null ? `HTTP ${last.statusCode}` : "no answer"} · {last.durationMs} ms
          </span>
        )}
        <time class="muted" dateTime={d.createdAt}>
          {fmtTime(d.createdAt)}
        </time>
        <button type="button" class="small" onClick={again} aria-label={`Redeliver ${d.eventType} event ${d.eventId}`}>
          Redeliver
        </button>
      </div>
      {d.status === "pending" && d.attempts > 0 && <p class="muted">Next attempt {fmtTime(d.nextAttemptAt)}.</p>}
      {d.lastError && d.status !== "succeeded" && <p class="error-text">{d.lastError}</p>}
      {note.error && (
        <p class="field-error" role="alert">
          {note.error}
        </p>
      )}
      {note.ok && (
        <p class="ok" role="status">
          {note.ok}
        </p>
      )}
      <details class="log">
        <summary>Attempts, responses and headers sent</summary>
        <p class="muted">Event {d.eventId}</p>
        {d.attemptLog.length === 0 && <p class="muted">Not attempted yet.</p>}
        {[...d.attemptLog].reverse().map((a, i) => (
          <details class="attempt" key={a.id} open={i === 0 ? true : undefined}>
            <summary>
              Attempt {a.attempt} · {fmtTime(a.startedAt)} · {a.statusCode !== null ? `HTTP ${a.statusCode}` : "no answer"} · {a.durationMs} ms
            </summary>
            {a.error && <p class="error-text">{a.error}</p>}
            <h5>Response (first 1 KiB)</h5>
            <pre>{a.responseExcerpt || "(empty)"}</pre>
            <h5>Headers sent</h5>
            <pre>
              {Object.entries(a.requestHeaders)
                .map(([k, v]) => `${k}: ${v}`)
                .join("\n")}
            </pre>
          </details>
        ))}
      </details>
    </li>
  );
}
