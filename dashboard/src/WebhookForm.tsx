// Create and edit: URL, event types (from the API's eventTypes), description. The API's
// errors are shown next to the field they concern, which then gets the focus.
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import type { ApiError, WebhookInput } from "./api.ts";
import { FieldError, FormActions, message } from "./ui.tsx";

type Field = "url" | "events" | "description" | "form";
type Errors = Partial<Record<Field, string>>;

function fieldOf(err: ApiError): Field {
  switch (err.__typename) {
    case "InvalidWebhookUrl":
      return "url";
    case "InvalidEventType":
      return "events";
    case "InvalidRequest":
      if (/description/i.test(err.message)) return "description";
      if (/\burl\b/i.test(err.message)) return "url";
      if (/event/i.test(err.message)) return "events";
      return "form";
    default:
      return "form";
  }
}

export function WebhookForm(props: {
  idPrefix: string;
  eventTypes: string[];
  initial?: { url: string; events: string[]; description: string };
  submitLabel: string;
  /** resolves with the API's error, or null when done */
  onSubmit: (input: Required<Pick<WebhookInput, "url" | "events" | "description">>) => Promise<ApiError | null>;
  onCancel?: () => void;
}) {
  const { idPrefix: p, eventTypes } = props;
  const [url, setUrl] = useState(props.initial?.url ?? "");
  const [events, setEvents] = useState<string[]>(props.initial?.events ?? []);
  const [description, setDescription] = useState(props.initial?.description ?? "");
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const form = useRef<HTMLFormElement>(null);

  // Focus the first field with an error, in the render that shows the error (see Confirm).
  useLayoutEffect(() => {
    const first = (["url", "events", "description", "form"] as Field[]).find((f) => errors[f]);
    if (first) form.current?.querySelector<HTMLElement>(`[data-field="${first}"]`)?.focus();
  }, [errors]);

  const toggle = (type: string, on: boolean) => setEvents((cur) => (on ? [...cur.filter((e) => e !== type), type] : cur.filter((e) => e !== type)));

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    try {
      // Keep the API's order of event types.
      const err = await props.onSubmit({ url: url.trim(), events: eventTypes.filter((t) => events.includes(t)), description });
      if (err) setErrors({ [fieldOf(err)]: err.message });
    } catch (err) {
      setErrors({ form: message(err) });
    } finally {
      setBusy(false);
    }
  };

  const describedBy = (f: Field, hint?: string) => [hint, errors[f] ? `${p}-${f}-error` : undefined].filter(Boolean).join(" ") || undefined;

  return (
    <form class="webhook-form" ref={form} onSubmit={submit} noValidate>
      <div class="field">
        <label for={`${p}-url`}>Endpoint URL</label>
        <input
          id={`${p}-url`}
          data-field="url"
          type="url"
          inputMode="url"
          autoComplete="off"
          placeholder="https://example.com/webhooks/linkgate"
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-invalid={errors.url ? "true" : undefined}
          aria-describedby={describedBy("url", `${p}-url-hint`)}
        />
        <p class="hint" id={`${p}-url-hint`}>
          An https:// address your receiver listens on.
        </p>
        <FieldError id={`${p}-url-error`} text={errors.url} />
      </div>

      <fieldset class="field" data-field="events" tabIndex={-1} aria-invalid={errors.events ? "true" : undefined} aria-describedby={describedBy("events")}>
        <legend>Event types</legend>
        <div class="select-all">
          <button type="button" class="link" onClick={() => setEvents([...eventTypes])}>
            Select all
          </button>
          <button type="button" class="link" onClick={() => setEvents([])}>
            Clear
          </button>
        </div>
        <div class="checks">
          {eventTypes.map((t) => (
            <label key={t} class="check">
              <input type="checkbox" name="events" value={t} checked={events.includes(t)} onChange={(e) => toggle(t, e.currentTarget.checked)} />
              <span>{t}</span>
            </label>
          ))}
        </div>
        <FieldError id={`${p}-events-error`} text={errors.events} />
      </fieldset>

      <div class="field">
        <label for={`${p}-description`}>
          Description <span class="muted">(optional)</span>
        </label>
        <input
          id={`${p}-description`}
          data-field="description"
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
          aria-invalid={errors.description ? "true" : undefined}
          aria-describedby={describedBy("description")}
        />
        <FieldError id={`${p}-description-error`} text={errors.description} />
      </div>

      {errors.form && (
        <p class="field-error" role="alert" data-field="form" tabIndex={-1}>
          {errors.form}
        </p>
      )}
      <FormActions busy={busy} submitLabel={props.submitLabel} onCancel={props.onCancel} />
    </form>
  );
}
