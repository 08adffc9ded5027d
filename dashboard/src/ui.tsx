// Small shared pieces: formatting, polling, badges, confirmations, copying and the shown-once
// secret. What the hosted pages share too (focus, the confirmation, error words) is in ui/ at the
// repository root.
import type { ComponentChild } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { Confirm as SharedConfirm } from "../../ui/focus.tsx";
import type { DeliveryStatus, Stats, Webhook } from "./api.ts";

export { message } from "../../ui/text.ts";

export const fmtTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }) : "—";

export { fmtRate } from "./rate.ts";

export const fmtCount = (n: number) => n.toLocaleString();

export const fmtMs = (ms: number | null) => (ms === null ? "—" : `${ms.toLocaleString()} ms`);

/** A short local time for chart axes: "14:00", or "Tue 14:00" when `day` is asked for. */
export const fmtClock = (iso: string, day = false) =>
  new Date(iso).toLocaleString(undefined, day ? { weekday: "short", hour: "2-digit", minute: "2-digit" } : { hour: "2-digit", minute: "2-digit" });

/**
 * Runs `fn` now, then `ms` after each run finishes (never two at once), while the tab is
 * visible; starts over when `deps` change.
 */
export function usePoll(fn: () => Promise<void>, ms: number, deps: unknown[]) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      if (!document.hidden) await latest.current().catch(() => {});
      if (!stopped) timer = setTimeout(tick, ms);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
}

export function StateBadge({ webhook }: { webhook: Pick<Webhook, "enabled"> }) {
  return <span class={`badge ${webhook.enabled ? "ok" : "off"}`}>{webhook.enabled ? "enabled" : "disabled"}</span>;
}

export function StatusBadge({ status }: { status: DeliveryStatus }) {
  return <span class={`badge status-${status}`}>{status}</span>;
}

/** An error message tied to a form control through its id (`aria-describedby`). */
export function FieldError({ id, text }: { id: string; text?: string | null }) {
  return text ? (
    <p class="field-error" id={id}>
      {text}
    </p>
  ) : null;
}

/** A form's submit button ("Saving…" while busy) and, when the form can be left, Cancel. */
export function FormActions(props: { busy: boolean; submitLabel: string; onCancel?: () => void }) {
  return (
    <div class="actions">
      <button type="submit" class="primary" disabled={props.busy}>
        {props.busy ? "Saving…" : props.submitLabel}
      </button>
      {props.onCancel && (
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      )}
    </div>
  );
}

export type SecretNotice = { webhookId: string; secret: string; transitionEndsAt?: string };

/** A new signing secret, shown this once, with a copy button. */
export function SecretBox({ notice, onDismiss }: { notice: SecretNotice; onDismiss: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(notice.secret);
      setCopied("Copied to the clipboard.");
    } catch {
      input.current?.select();
      setCopied(document.execCommand("copy") ? "Copied to the clipboard." : "Select the secret and copy it yourself.");
    }
  };
  return (
    <section class="notice secret" aria-labelledby="secret-title">
      <h3 id="secret-title">{notice.transitionEndsAt ? "New signing secret" : "Signing secret"}</h3>
      <p>Store it with your receiver now: it is shown only this once.</p>
      <div class="secret-row">
        <label class="sr-only" for="secret-value">
          Signing secret
        </label>
        <input id="secret-value" ref={input} readOnly value={notice.secret} onFocus={(e) => e.currentTarget.select()} spellcheck={false} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p class="muted" aria-live="polite">
        {copied}
      </p>
      {notice.transitionEndsAt && (
        <p>
          The previous secret keeps verifying deliveries until <time dateTime={notice.transitionEndsAt}>{fmtTime(notice.transitionEndsAt)}</time>.
        </p>
      )}
      <button type="button" onClick={onDismiss}>
        I have stored it
      </button>
    </section>
  );
}

/** A question in place of the button that asked it; `id` (default "confirm") prefixes its text's id. */
export const Confirm = (props: { id?: string; text: string; action: string; danger?: boolean; busy: boolean; onConfirm: () => void; onCancel: () => void }) => (
  <SharedConfirm {...props} id={`${props.id ?? "confirm"}-text`} danger={!!props.danger} />
);

/** Puts text on the clipboard; where the Clipboard API is refused, through a selected text area. */
async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.className = "sr-only";
    area.setAttribute("readonly", "");
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

/** A copy button that says, for screen readers too, whether it worked. */
export function CopyButton(props: { text: string; label: string; what: string }) {
  const [said, setSaid] = useState<string | null>(null);
  useEffect(() => {
    if (!said) return;
    const t = setTimeout(() => setSaid(null), 4000);
    return () => clearTimeout(t);
  }, [said]);
  return (
    <span class="copy">
      <button
        type="button"
        class="small"
        aria-label={props.label}
        onClick={async () => setSaid((await copyText(props.text)) ? `Copied ${props.what}.` : `Select ${props.what} and copy it yourself.`)}
      >
        Copy
      </button>
      <span class="muted" role="status">
        {said}
      </span>
    </span>
  );
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * JSON, pretty-printed, each object and array a disclosure that folds (open to start with): the
 * summary names the key and how many entries it holds.
 */
export function JsonView({ value }: { value: unknown }) {
  return (
    <div class="json" data-json>
      <JsonNode value={value as Json} name={null} last />
    </div>
  );
}

function JsonNode({ value, name, last }: { value: Json; name: string | null; last: boolean }) {
  const key = name === null ? null : <span class="json-key">{JSON.stringify(name)}: </span>;
  const comma = last ? "" : ",";
  if (value === null || typeof value !== "object") {
    const kind = value === null ? "null" : typeof value;
    return (
      <div class="json-line">
        {key}
        <span class={`json-${kind}`}>{kind === "string" ? <QuotedString json={JSON.stringify(value)} /> : JSON.stringify(value)}</span>
        {comma}
      </div>
    );
  }
  const entries: [string | null, Json][] = Array.isArray(value) ? value.map((v) => [null, v]) : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) {
    return (
      <div class="json-line">
        {key}
        {open + close}
        {comma}
      </div>
    );
  }
  const count = `${entries.length} ${Array.isArray(value) ? (entries.length === 1 ? "item" : "items") : entries.length === 1 ? "key" : "keys"}`;
  return (
    <details class="json-node" open>
      <summary>
        {key}
        {open}
        <span class="json-count"> {count} </span>
        <span class="json-folded">…{close}{comma}</span>
      </summary>
      <div class="json-children">
        {entries.map(([k, v], i) => (
          <JsonNode key={k ?? i} value={v} name={k} last={i === entries.length - 1} />
        ))}
      </div>
      <div class="json-line">
        {close}
        {comma}
      </div>
    </details>
  );
}

/**
 * A JSON string as written (quotes and escapes included), its content isolated: the strings of an
 * envelope hold values strangers chose (an identity provider's user id, names stored by earlier
 * builds), and a right-to-left override in one drew the rest of the line, or of the whole raw
 * envelope, reversed (docs/security.md, "Input, tenants and pages"). Elements add no characters:
 * what is selected and copied stays the exact bytes.
 */
function QuotedString({ json }: { json: string }) {
  return (
    <>
      "<span class="value">{json.slice(1, -1)}</span>"
    </>
  );
}

/** JSON text as sent, each of its strings isolated (see QuotedString). */
function RawJson({ text }: { text: string }) {
  const parts: ComponentChild[] = [];
  let at = 0;
  for (const m of text.matchAll(/"(?:[^"\\]|\\.)*"/g)) {
    parts.push(text.slice(at, m.index), <QuotedString key={m.index} json={m[0]} />);
    at = m.index + m[0].length;
  }
  parts.push(text.slice(at));
  return <>{parts}</>;
}

/** The envelope as sent: pretty and foldable, with a copy of the exact bytes. */
export function Envelope(props: { body: string; eventId: string; idPrefix: string }) {
  let parsed: unknown;
  let readable = true;
  try {
    parsed = JSON.parse(props.body);
  } catch {
    readable = false;
  }
  const bytes = new TextEncoder().encode(props.body).length;
  return (
    <div class="envelope">
      <div class="section-head">
        <h5 id={`${props.idPrefix}-envelope`}>Envelope</h5>
        <CopyButton text={props.body} label={`Copy the envelope of event ${props.eventId}`} what="the envelope's exact bytes" />
      </div>
      {readable ? <JsonView value={parsed} /> : <pre>{props.body}</pre>}
      <details class="signed">
        <summary>Exact bytes signed ({bytes.toLocaleString()} bytes)</summary>
        <p class="hint">
          X-Service-Signature is the HMAC-SHA256 of exactly these bytes (UTF-8, as sent, nothing re-serialized); webhook-signature signs{" "}
          <code>{props.eventId}.</code>
          <code>&lt;webhook-timestamp&gt;</code>
          <code>.</code> followed by them (each attempt's timestamp is in its headers).
        </p>
        <pre class="raw" data-signed-bytes>
          {readable ? <RawJson text={props.body} /> : props.body}
        </pre>
      </details>
    </div>
  );
}
