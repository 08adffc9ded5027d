import { completeReauthentication, REAUTHENTICATION_ERRORS, startReauthentication } from "../../auth/reauthenticate.ts";
import { endOtherSessionsOf, endSessionOf, liveSessionWhere, type AuthMethod as Method } from "../../auth/sessions.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { pageOf } from "./connections.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";
import { identifierArgs, StateIdPayload, TokenPayload } from "./sign-in.ts";

const AuthMethod = builder.enumType("AuthMethod", {
  description: "How a session signed in or last re-authenticated; the ID token's `amr` carries the same word.",
  values: {
    otp: { description: "a one-time code sent to an e-mail address or phone number" },
    passkey: { description: "a passkey" },
    fed: { description: "an external identity provider (Google, GitHub, …)" },
  } satisfies Record<Method, { description: string }>,
});

const Session = builder.prismaObject("Session", {
  description: "A signed-in session of the account: every access token carries its id as `sid`.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The session's id: the `sid` of its tokens." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it signed in." }),
    authTime: t.expose("authTime", { type: "DateTime", description: "Its last sign-in or re-authentication." }),
    authMethod: t.field({
      type: AuthMethod,
      description: "How it last authenticated.",
      select: { authMethod: true },
      // Written only through createSession and markReauthenticated, which take an AuthMethod.
      resolve: (s) => s.authMethod as Method,
    }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true, description: "Its last request, to the minute; null until then." }),
    clientAddress: t.exposeString("clientAddress", {
      nullable: true,
      description: "The client address it signed in from; null when none was known.",
    }),
    userAgent: t.exposeString("userAgent", { nullable: true, description: "The User-Agent it signed in with; null when none was sent." }),
    current: t.boolean({
      description: "Whether this is the session making the request.",
      select: { id: true },
      resolve: async (s, _, ctx) => s.id === (await ctx.user()).user.sessionId,
    }),
  }),
});

builder.prismaObjectFields("Account", (t) => ({
  sessions: t.relatedConnection(
    "sessions",
    {
      description:
        `The account's live sessions (neither ended nor expired), newest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE}).`,
      cursor: "id",
      maxSize: boundedPage,
      defaultSize: DEFAULT_PAGE,
      query: () => ({ where: liveSessionWhere(), orderBy: [{ createdAt: "desc" }, { id: "desc" }] }),
    },
    ...pageOf("the account's live sessions", "A session"),
  ),
}));

const EndSessionsPayload = builder.objectRef<{ ended: number }>("EndSessionsPayload").implement({
  description: "Sessions were ended: their tokens fail from their next request.",
  fields: (t) => ({ ended: t.exposeInt("ended", { description: "How many sessions ended (0 when there were none to end)." }) }),
});

builder.mutationFields((t) => ({
  startReauthentication: t.field({
    type: StateIdPayload,
    authScopes: { user: true },
    description: `Sends a code to one of the account's own addresses, to confirm it's the user before a sensitive change; completeReauthentication checks it. Any other address is refused and nothing is sent. ${NEEDS.user}`,
    args: identifierArgs("of this account to send the code to"),
    errors: { types: [...REAUTHENTICATION_ERRORS.start], union: resultOf("The OtpChallenge") },
    resolve: async (_, args, ctx) => startReauthentication(ctx.deps, await ctx.user(), args),
  }),
  completeReauthentication: t.field({
    type: TokenPayload,
    authScopes: { user: true },
    description: `Checks the code: the same session (same sid) with a new auth_time, and fresh tokens. Only the session that started it can complete it. ${NEEDS.user}`,
    args: {
      stateId: t.arg.string({ required: true, description: "The stateId startReauthentication returned." }),
      otp: t.arg.string({ required: true, description: "The 6-digit code that was sent." }),
    },
    errors: { types: [...REAUTHENTICATION_ERRORS.complete], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => completeReauthentication(ctx.deps, await ctx.user(), args),
  }),
  endSession: t.field({
    type: EndSessionsPayload,
    authScopes: { user: true },
    description: `Ends one of the account's sessions; its tokens fail on their next request. The current session may always end itself; ending another needs a recent sign-in or re-authentication. ${NEEDS.user}`,
    args: { id: t.arg.id({ required: true, description: "The session's id (Session.id)." }) },
    errors: { types: [E.NotFound, E.ReauthenticationRequired], union: resultOf("The EndSessionsPayload") },
    resolve: async (_, args, ctx) => endSessionOf(ctx.deps, await ctx.user(), String(args.id)),
  }),
  endOtherSessions: t.field({
    type: EndSessionsPayload,
    authScopes: { user: true },
    description: `Ends every session of the account but the one making the request. ${NEEDS.recentUser}`,
    errors: { types: [E.ReauthenticationRequired], union: resultOf("The EndSessionsPayload") },
    resolve: async (_, __, ctx) => endOtherSessionsOf(ctx.deps, await ctx.user()),
  }),
}));
