// Pieces both pages share: the frame, messages, and a busy-aware action runner. What the
// dashboard shares too (focus, the confirmation, error words) is in ui/ at the repository root.
import type { ComponentChildren, Ref } from "preact";
import { useLayoutEffect, useState } from "preact/hooks";
import { Confirm as SharedConfirm } from "../../ui/focus.tsx";
import { message } from "../../ui/text.ts";
import { loginUrl, needsReauthentication, SessionEnded } from "./api.ts";

export { message };
export { useFocusOnShow, useReturnFocus } from "../../ui/focus.tsx";

export const fmtDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }) : "never");

const AGO: [Intl.RelativeTimeFormatUnit, number][] = [
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
];

/** "just now", "5 minutes ago", "yesterday"; a full date beyond a month. */
export function fmtAgo(iso: string): string {
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (seconds < 60) return "just now";
  if (seconds >= 30 * 86400) return fmtDate(iso);
  const [unit, size] = AGO.find(([, size]) => seconds >= size)!;
  return new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }).format(-Math.floor(seconds / size), unit);
}

export function Frame(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <>
      <header class="top">
        <p class="brand">
          linkgate <span>{props.title}</span>
        </p>
        {props.actions}
      </header>
      <main class="page">{props.children}</main>
    </>
  );
}

// The window's title names the state the page is in (WCAG 2.4.2): a screen reader says it on
// arrival and a user with many tabs finds the page by it. While an error shows it starts with
// "Error: " (docs/accessibility.md), so the refusal is heard even where the focus is not.
let titleBase = typeof document === "undefined" ? "" : document.title;
let errorsShown = 0;
const showTitle = () => {
  document.title = `${errorsShown ? "Error: " : ""}${titleBase}`;
};

/** The window's title while the calling component shows (the one before it when it goes). */
export function usePageTitle(title: string) {
  useLayoutEffect(() => {
    const before = titleBase;
    titleBase = title;
    showTitle();
    return () => {
      titleBase = before;
      showTitle();
    };
  }, [title]);
}

/** The page cannot work without the project's publishable key: say so, and who can fix it. */
export function NotConfigured() {
  usePageTitle("This page is not configured");
  return (
    <div class="card" role="alert">
      <h1>This page is not configured</h1>
      <p>
        It needs the project's <strong>publishable</strong> key (<code>lg_pk_…</code>). The operator sets <code>LINKGATE_PAGES_PUBLISHABLE_KEY</code> (or{" "}
        <code>LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY</code>) and restarts linkgate. A secret key is never used here.
      </p>
    </div>
  );
}

/** An error for the whole form, announced when it appears. */
export function Alert({ text, id }: { text: string | null; id?: string }) {
  const shown = !!text;
  useLayoutEffect(() => {
    if (!shown) return;
    errorsShown++;
    showTitle();
    return () => {
      errorsShown--;
      showTitle();
    };
  }, [shown]);
  return text ? (
    <p class="field-error" role="alert" id={id}>
      {text}
    </p>
  ) : null;
}

/** A success, announced politely. */
export function Done({ text }: { text: string | null }) {
  return (
    <p class="ok" role="status" aria-live="polite">
      {text}
    </p>
  );
}

type Retry = () => Promise<void>;
let confirmIdentity: ((retry: Retry) => void) | null = null;

/**
 * Who asks the user to confirm it is them when an action needs a recent sign-in (the account
 * page's dialog); `retry` repeats the action afterwards.
 */
export const setReauthenticationHandler = (fn: ((retry: Retry) => void) | null) => {
  confirmIdentity = fn;
};

/**
 * Runs one action at a time: `busy` while it runs, its error (in words) afterwards. An action
 * returns normally on success; what it throws is shown.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (fn: () => Promise<void>) => {
    if (busy) return;
    // The button that started it is disabled while it runs, which takes the focus from it (to
    // the page itself, so the next Tab starts at the top): it gets it back when it is enabled,
    // unless something else (an error's field, a dialog) took it meanwhile.
    const started = document.activeElement;
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      // A refused session cannot be fixed on this page: sign in again and come back.
      if (err instanceof SessionEnded) return location.replace(loginUrl("ended"));
      if (needsReauthentication(err) && confirmIdentity) {
        confirmIdentity(() => run(fn));
        return setError("Confirm it is you to go on.");
      }
      setError(message(err));
    } finally {
      setBusy(false);
      // after the render that enables it again (Preact renders in a microtask)
      setTimeout(() => {
        const lost = !document.activeElement || document.activeElement === document.body;
        if (lost && started instanceof HTMLElement && started !== document.body && started.isConnected) started.focus();
      });
    }
  };
  return { busy, error, setError, run };
}

/** A question before something that cannot be undone (the pages ask only those). */
export const Confirm = (props: { id: string; text: ComponentChildren; action: string; busy: boolean; onConfirm: () => void; onCancel: () => void }) => (
  <SharedConfirm {...props} danger />
);

/**
 * The field a 6-digit code is typed into, described by the sentence that says where the code
 * went (`sentId`): numeric keyboards, and the code offered by the device's autofill.
 */
export function CodeField(props: { id: string; sentId: string; value: string; onInput: (v: string) => void; inputRef?: Ref<HTMLInputElement>; error?: string | null }) {
  return (
    <Field
      id={props.id}
      label="Code"
      value={props.value}
      onInput={props.onInput}
      inputRef={props.inputRef}
      inputMode="numeric"
      autoComplete="one-time-code"
      maxLength={6}
      describedBy={props.sentId}
      error={props.error}
    />
  );
}

/** One labelled text field. */
export function Field(props: {
  id: string;
  label: string;
  value: string;
  onInput: (v: string) => void;
  hint?: string;
  /** the id of text elsewhere that the field's description starts with (where a code was sent) */
  describedBy?: string;
  error?: string | null;
  inputRef?: Ref<HTMLInputElement>;
  inputMode?: "numeric" | "email" | "text";
  autoComplete?: string;
  maxLength?: number;
}) {
  const described = [props.describedBy, props.hint && `${props.id}-hint`, props.error && `${props.id}-error`].filter(Boolean).join(" ") || undefined;
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        ref={props.inputRef}
        type="text"
        inputMode={props.inputMode}
        autoComplete={props.autoComplete ?? "off"}
        spellcheck={false}
        maxLength={props.maxLength}
        value={props.value}
        onInput={(e) => props.onInput(e.currentTarget.value)}
        aria-invalid={props.error ? "true" : undefined}
        aria-describedby={described}
      />
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      <Alert id={`${props.id}-error`} text={props.error ?? null} />
    </div>
  );
}
