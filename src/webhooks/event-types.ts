// The event types of docs/events.md. Subscriptions store canonical names, so the alias
// is resolved once, when a webhook is created or updated.
export const EVENT_TYPES = [
  "user.created",
  "user.updated",
  "user.deleted",
  "user.authentication.success",
  "user.passkey.registered",
  "user.passkey.login",
  "security.suspicious_activity",
  "user.identifier.linked",
  "user.identifier.unlinked",
  "user.merged",
  "user.unmerged",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

const ALIASES: Record<string, EventType> = { "auth.login.success": "user.authentication.success" };

/** The canonical name of an event type or alias; undefined for anything else. */
export function canonicalEventType(name: string): EventType | undefined {
  if ((EVENT_TYPES as readonly string[]).includes(name)) return name as EventType;
  // Own keys only: `ALIASES["constructor"]` is Object's constructor, which the fuzz test sent
  // as a delivery filter and got a 500 for.
  return Object.hasOwn(ALIASES, name) ? ALIASES[name] : undefined;
}

/**
 * The events of an identifier attached to an account, in order, each with its data beside the
 * user object (docs/events.md): the same whichever way the attach was proven (a code through
 * link_verify, src/linking/service.ts, or a provider's sign-in after the account's e-mail,
 * src/auth/external/sign-in.ts).
 */
export function attachedEvents(identifier: { kind: string; value: string }): Array<[EventType, object]> {
  return [
    ["user.identifier.linked", { identifier: { type: identifier.kind, value: identifier.value } }],
    ["user.updated", {}],
  ];
}
