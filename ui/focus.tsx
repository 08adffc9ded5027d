// Both front ends move the focus the same way: into what a render shows, in that same render
// (useLayoutEffect, not useEffect), so keys typed meanwhile land there and not on the button
// that opened it; and back to that button when it closes. Confirm is the question both ask
// before something that cannot be undone.
import type { ComponentChildren } from "preact";
import { useLayoutEffect, useRef } from "preact/hooks";

/**
 * Focuses the element when `key` changes (and when it first appears, unless `onMount` is false),
 * in the same render, so keys typed meanwhile land in it.
 */
export function useFocusOnShow<T extends HTMLElement>(key?: unknown, onMount = true) {
  const ref = useRef<T>(null);
  const mounted = useRef(false);
  useLayoutEffect(() => {
    if (mounted.current || onMount) ref.current?.focus();
    mounted.current = true;
  }, [key]);
  return ref;
}

/** The button that opened a question or form gets the focus back when it closes. */
export function useReturnFocus<T extends HTMLElement>(open: boolean) {
  const ref = useRef<T>(null);
  const wasOpen = useRef(open);
  useLayoutEffect(() => {
    if (wasOpen.current && !open) ref.current?.focus();
    wasOpen.current = open;
  }, [open]);
  return ref;
}

/**
 * A question in place of the button that asked it, with the safe choice (Cancel) focused in the
 * render that shows it. `id` names the question's text, which labels the group; `danger` marks
 * an action that cannot be undone (else it is the primary one).
 */
export function Confirm(props: {
  id: string;
  text: ComponentChildren;
  action: string;
  danger: boolean;
  busy: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const cancel = useFocusOnShow<HTMLButtonElement>();
  return (
    <div class="confirm" role="group" aria-labelledby={props.id}>
      <p id={props.id}>{props.text}</p>
      <div class="actions">
        <button type="button" class={props.danger ? "danger" : "primary"} onClick={props.onConfirm} disabled={props.busy}>
          {props.action}
        </button>
        <button type="button" ref={cancel} onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}
