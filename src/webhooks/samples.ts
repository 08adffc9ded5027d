// Sample payloads for test events: the same shapes real events carry, with obvious fake data.
import type { EventType } from "./event-types.ts";

export function sampleEventData(projectId: string, type: EventType): Record<string, unknown> {
  const at = new Date().toISOString();
  const user = {
    user_id: "acc_test_user",
    project_id: projectId,
    email: "test.user@example.com",
    name: "Test User",
    status: type === "user.deleted" ? "deleted" : "active",
    created_at: at,
    updated_at: at,
    last_login: at,
  };
  switch (type) {
    case "user.identifier.linked":
    case "user.identifier.unlinked":
      return { user, identifier: { type: "email", value: "second.address@example.com" } };
    case "user.merged":
    case "user.unmerged":
      return { user, primary_user_id: user.user_id, secondary_user_id: "acc_test_secondary" };
    case "security.suspicious_activity":
      return { reason: "otp_attempts_exhausted", purpose: "link", user_id: user.user_id };
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
