// Sample payloads for test events: the same shapes real events carry, with obvious fake data.
import { userObject } from "./user-object.ts";
import type { EventType } from "./event-types.ts";

export function sampleEventData(projectId: string, type: EventType): Record<string, unknown> {
  const now = new Date();
  const at = now.toISOString();
  // made by the events' own userObject, so a sample has the real user object's shape
  const user = userObject(
    {
      id: "acc_test_user",
      projectId,
      name: "Test User",
      status: "active",
      createdAt: now,
      updatedAt: now,
      // as in the real one: a user.created goes out just before the sign-in completes
      lastLoginAt: type === "user.created" ? null : now,
      identifiers: [{ kind: "email", origin: "own", createdAt: now, value: "test.user@example.com" }],
    },
    type === "user.deleted" ? "deleted" : "active",
  );
  switch (type) {
    case "user.identifier.linked":
    case "user.identifier.unlinked":
      return { user, identifier: { type: "email", value: "second.address@example.com" } };
    case "user.merged":
    case "user.unmerged":
      return { user, primary_user_id: user.user_id, secondary_user_id: "acc_test_secondary" };
    case "security.suspicious_activity":
      return { reason: "otp_attempts_exhausted", purpose: "link", state_id: "otp_test_state", client_address: "203.0.113.7", user_id: user.user_id };
    case "user.authentication.success":
      return { user, method: "otp", identifier_type: "email" };
    case "user.passkey.registered":
      return { user, passkey: { id: "psk_test_passkey", name: "Test passkey", created_at: at } };
    case "user.passkey.login":
      return { user, passkey: { id: "psk_test_passkey", name: "Test passkey" } };
    default:
      return { user };
  }
}
