// One webhook's delivery log: filters, a search by event id, replay of failed deliveries since a
// time, and per delivery what was sent (the envelope, and the exact bytes signed), its attempts
// (status, duration, response excerpt, headers sent) and redelivery.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { DELIVERY_STATUSES, isError, redeliver, replayFailed, type Delivery, type DeliveryFilter, type DeliveryStatus } from "./api.ts";
import { Envelope, FieldError, StatusBadge, fmtTime, message } from "./ui.tsx";

/** The search the log shows, when it shows one: the event, and whether the project has it at all. */
export type Search = { eventId: string; eventExists: boolean };

/** `datetime-local` value for a Date, in local time. */
const localInput = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

export function DeliveryLog(props: {
  webhookId: string;
  eventTypes: string[];
  deliveries: Delivery[];
  hasNextPage: boolean;
  /** set when the filters looked through the webhook's newest deliveries only: how many */
  lookback: number | null;
  filter: DeliveryFilter;
  onFilter: (f: DeliveryFilter) => void;
  onMore: () => void;
  /** refresh now, after a change */
  onChanged: () => void;
  /** the event of the last test sent, highlighted */
  highlightEventId?: string;
  search: Search | null;
}) {
  const { filter } = props;
  const searching = !!filter.eventId;
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
          {searching ? "search by event id" : filter.status || filter.eventType ? "matching, newest first" : "newest first"} · updates every 2 s
        </span>
      </div>

      <EventSearch eventId={filter.eventId} onSearch={(eventId) => props.onFilter({ ...filter, eventId })} />

      <div class="toolbar">
        <div class="field inline">
          <label for="filter-status">Show status</label>
          <select id="filter-status" value={filter.status} disabled={searching} onChange={(e) => props.onFilter({ ...filter, status: e.currentTarget.value as DeliveryStatus | "" })}>
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
          <select id="filter-event" value={filter.eventType} disabled={searching} onChange={(e) => props.onFilter({ ...filter, eventType: e.currentTarget.value })}>
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
        <p class="empty" data-empty>
          {searching && props.search?.eventId === filter.eventId
            ? props.search.eventExists
              ? `Event ${filter.eventId} was not sent to this webhook.`
              : `This project has no event ${filter.eventId}.`
            : searching
              ? "Searching…"
              : filter.status || filter.eventType
                ? "No deliveries match these filters."
                : "No deliveries yet. Send a test event to see one here."}
        </p>
      ) : (
        <ul class="deliveries">
          {props.deliveries.map((d) => (
            <DeliveryItem key={d.id} delivery={d} highlight={d.eventId === props.highlightEventId} onChanged={props.onChanged} />
          ))}
        </ul>
      )}
      {props.lookback !== null && !searching && (
        <p class="muted" data-lookback>
          Filters look through the newest {props.lookback.toLocaleString("en")} deliveries only; search by event id for an older one.
        </p>
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
      <details class="payload">
        <summary>What was sent: the envelope and the exact bytes signed</summary>
        <Envelope body={d.body} eventId={d.eventId} idPrefix={d.id} />
      </details>
      <details class="log">
        <summary>Attempts, responses and headers sent</summary>
        <p class="muted">Event {d.eventId}</p>
        {d.attemptLog.length === 0 && <p class="muted">Not attempted yet.</p>}
        {d.attemptCount > d.attemptLog.length && (
          <p class="muted">
            The latest {d.attemptLog.length} of {d.attemptCount} attempts; earlier cycles' attempts are not shown.
          </p>
        )}
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
              {Object.entries(a.requestHeaders ?? {})
                .map(([k, v]) => `${k}: ${v}`)
                .join("\n")}
            </pre>
            {a.requestHeaders?.["webhook-timestamp"] && (
              <p class="hint">
                webhook-signature signed <code>{`${d.eventId}.${a.requestHeaders["webhook-timestamp"]}.`}</code> followed by the envelope's exact bytes;
                X-Service-Signature signed those bytes alone.
              </p>
            )}
          </details>
        ))}
      </details>
    </li>
  );
}

/** Finds one event's delivery in this log by the event's id (from a receiver's logs, or a customer). */
function EventSearch(props: { eventId: string; onSearch: (eventId: string) => void }) {
  const [value, setValue] = useState(props.eventId);
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);
  // Back to the field in the render that says what is wrong with it (see ui/focus.tsx).
  useLayoutEffect(() => {
    if (error) input.current?.focus();
  }, [error]);

  const submit = (e: Event) => {
    e.preventDefault();
    const id = value.trim();
    if (!id) return setError("Enter an event id (evt_…).");
    setError(null);
    props.onSearch(id);
  };
  const clear = () => {
    setValue("");
    setError(null);
    props.onSearch("");
    input.current?.focus();
  };

  return (
    <form class="search" role="search" aria-label="Find a delivery by event id" onSubmit={submit}>
      <label for="event-search">Find by event id</label>
      <div class="row">
        <input
          id="event-search"
          ref={input}
          type="search"
          autoComplete="off"
          spellcheck={false}
          placeholder="evt_…"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
          aria-invalid={error ? "true" : undefined}
          aria-describedby={error ? "event-search-error" : undefined}
        />
        <button type="submit">Find</button>
        {props.eventId && (
          <button type="button" onClick={clear}>
            Show all deliveries
          </button>
        )}
      </div>
      <FieldError id="event-search-error" text={error} />
      {props.eventId && (
        <p class="muted" role="status">
          Showing the delivery of event <code>{props.eventId}</code>.
        </p>
      )}
    </form>
  );
}
