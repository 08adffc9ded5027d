// "If this was not you…" notices after a merge, remove or unmerge. They are sent after the
// change committed; a transport failure is logged, never undoes the change.
import type { Identifier } from "../auth/identifiers.ts";
import type { Deps } from "../deps.ts";

export type Notice = { to: Identifier; subject: string };

export async function notify(deps: Deps, notices: Notice[]): Promise<void> {
  await Promise.all(
    notices.map((n) =>
      deps.messenger
        .send({ ...n, text: `${n.subject}. If this was not you, contact support right away.` })
        .catch((err) => deps.logger.warn({ err: String(err), kind: n.to.kind }, "notice not sent")),
    ),
  );
}
