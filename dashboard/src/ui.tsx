// Small shared pieces: formatting, polling, badges and the shown-once secret.
import { useEffect, useRef, useState } from "preact/hooks";
import type { DeliveryStatus, Stats, Webhook } from "./api.ts";

export const fmtTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }) : "—";

export const fmtRate = (s: Stats) => (s.successRate === null ? "—" : `${Math.round(s.successRate * 1000) / 10} %`);

export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

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
