import { completeReauthentication, startReauthentication } from "../../auth/reauthenticate.ts";
import { endOtherSessions, endOwnSession } from "../../auth/sessions.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { identifierErrors } from "./errors.ts";
import { StateIdPayload, TokenPayload } from "./sign-in.ts";

const Session = builder.prismaObject("Session", {
  description: "A signed-in session of the account: every access token carries its id as `sid`.",
  fields: (t) => ({
    id: t.exposeID("id"),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "when it signed in" }),
    authTime: t.expose("authTime", { type: "DateTime", description: "its last sign-in or re-authentication" }),
    authMethod: t.exposeString("authMethod", { description: "how it last authenticated: otp or passkey" }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true, description: "its last request, to the minute; null until then" }),
    clientAddress: t.exposeString("clientAddress", { nullable: true, description: "the client address it signed in from" }),
    userAgent: t.exposeString("userAgent", { nullable: true, description: "the User-Agent it signed in with" }),
    current: t.boolean({
      description: "whether this is the session making the request",
      select: { id: true },
      resolve: async (s, _, ctx) => s.id === (await ctx.user()).user.sessionId,
    }),
  }),
});

builder.prismaObjectFields("Account", (t) => ({
  sessions: t.relatedConnection("sessions", {
    description: "the account's live sessions, newest first",
    cursor: "id",
    maxSize: 50,
    defaultSize: 20,
    query: () => ({ where: { endedAt: null, expiresAt: { gt: new Date() } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }),
  }),
}));

const EndSessionsPayload = builder.objectRef<{ ended: number }>("EndSessionsPayload").implement({
  fields: (t) => ({ ended: t.exposeInt("ended", { description: "how many sessions ended" }) }),
});

builder.mutationFields((t) => ({
  startReauthentication: t.field({
    type: StateIdPayload,
    authScopes: { user: true },
    description: "sends a code to one of the account's own addresses, to confirm it's the user before a sensitive change",
    args: { email: t.arg.string(), phone: t.arg.string() },
    errors: { types: [...identifierErrors, E.IdentifierNotLinked] },
    resolve: async (_, args, ctx) => startReauthentication(ctx.deps, await ctx.user(), args),
  }),
  completeReauthentication: t.field({
    type: TokenPayload,
    authScopes: { user: true },
    description: "checks the code: the same session (same sid) with a new auth_time, and fresh tokens",
    args: { stateId: t.arg.string({ required: true }), otp: t.arg.string({ required: true }) },
    errors: { types: [E.OTPInvalid, E.RateLimited] },
    resolve: async (_, args, ctx) => completeReauthentication(ctx.deps, await ctx.user(), args),
  }),
  endSession: t.field({
    type: EndSessionsPayload,
    authScopes: { user: true },
    description: "ends one of the account's sessions; its tokens fail on their next request",
    args: { id: t.arg.id({ required: true }) },
    errors: { types: [E.NotFound] },
    resolve: async (_, args, ctx) => {
      const { projectId, user } = await ctx.user();
      await endOwnSession(ctx.deps.prisma, { projectId, accountId: user.accountId }, String(args.id));
      return { ended: 1 };
    },
  }),
  endOtherSessions: t.field({
    type: EndSessionsPayload,
    authScopes: { user: true },
    description: "ends every session of the account but this one",
    resolve: async (_, __, ctx) => {
      const { projectId, user } = await ctx.user();
      return { ended: await endOtherSessions(ctx.deps.prisma, { projectId, accountId: user.accountId }, user.sessionId) };
    },
  }),
}));
