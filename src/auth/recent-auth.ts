// Recent authentication (docs/security.md): a stolen access token is good for an hour, but
// it must not be enough to take an account over for good. Operations that change how the
// account can be signed into need the session's last sign-in or re-authentication to be
// recent; re-authenticating keeps the session and moves its auth_time.
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../webhooks/outbox.ts";
import type { Deps, UserActor } from "../deps.ts";
import { ReauthenticationRequired } from "../errors.ts";
import { countAll } from "../rate-limit.ts";

/** Refusals per session per window before they are worth a security event (once per window). */
const REFUSALS_BEFORE_ALARM = { max: 5, windowSeconds: 600 };

/**
 * Judged on the session's age by the database's clock, which wrote its auth_time (a sign-in, a
 * re-authentication): every gateway decides alike, whatever its own clock says
 * (docs/operations.md, "Clocks").
 */
export function isRecent(deps: Deps, actor: UserActor): boolean {
  return actor.user.authAgeMs <= deps.config.recentAuthSeconds * 1000;
}

/**
 * Throws ReauthenticationRequired for a session that authenticated too long ago. One refusal
 * is ordinary (the user comes back after lunch); many from one session in a short time look
 * like someone trying their luck with a stolen token, and emit one security event per window.
 */
export async function requireRecentAuth(deps: Deps, actor: UserActor): Promise<void> {
  if (isRecent(deps, actor)) return;
  const [counter] = await countAll(deps.db, { count: [{ key: `reauth:ses:${actor.user.sessionId}`, limit: REFUSALS_BEFORE_ALARM }] });
  if (counter?.tripped) {
    await transaction(deps.prisma, (tx) =>
      enqueue(tx, {
        projectId: actor.projectId,
        eventType: "security.suspicious_activity",
        data: {
          reason: "reauthentication_refused_repeatedly",
          user_id: actor.user.accountId,
          session_id: actor.user.sessionId,
          client_address: actor.clientAddress,
        },
      }),
    );
  }
  throw new ReauthenticationRequired();
}
