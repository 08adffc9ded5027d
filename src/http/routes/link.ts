import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { userActor } from "../credentials.ts";
import { LINK_ERRORS, removeLink, requestLink, unmerge, verifyLink } from "../../linking/service.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";
import { BODY_ERRORS, emptyBody, errorResponses, IDENTIFIER_OBJECTS, identifierBody, jsonBody as schemaBody, ok, otpBody, registerBodies, SECURITY, StateId, USER_ERRORS } from "../api-schemas.ts";

const user = userActor;

const LinkRequest = identifierBody("LinkRequestBody", "the identifier to add to the signed-in account");
const LinkVerify = otpBody("LinkVerifyBody", "the state_id from /users/link/request and the code sent to the identifier");
const LinkRemove = schemaBody(
  "LinkRemoveBody",
  z.union([
    ...IDENTIFIER_OBJECTS,
    z.strictObject({ external: z.string().openapi({ description: "an external sign-in, as viewer.identifiers lists its value: <issuer>#<subject>", example: "https://accounts.google.com#1234567890" }) }),
  ]),
  { required: true, description: "an identifier of the signed-in account, or of its merged secondary (which separates the two)" },
);
const Unmerge = emptyBody("UnmergeBody");

const tags = ["Linking"];
const recent = "Needs a recent sign-in or re-authentication (LINKGATE_RECENT_AUTH_SECONDS).";

const request = createRoute({
  tags,
  method: "post",
  path: "/users/link/request",
  operationId: "requestLink",
  summary: "Send a code to an identifier to link to the signed-in account",
  description: `${recent} Whether someone else holds the identifier is decided at verify, so this answer never reveals it.`,
  security: SECURITY.user,
  request: LinkRequest.request,
  responses: {
    ...ok(StateId, "the code was sent"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, LINK_ERRORS.request),
  },
});

const LinkVerified = z
  .object({
    message: z.literal("Account linked successfully"),
    outcome: z.enum(["attached", "merged"]).openapi({ description: "attached: a new identifier; merged: another account became this one's secondary" }),
  })
  .openapi("LinkVerified");

const verify = createRoute({
  tags,
  method: "post",
  path: "/users/link/verify",
  operationId: "verifyLink",
  summary: "Prove the code: the identifier is attached, or its account merged into this one",
  description: "A retry with the same state_id and code after a success answers the same success while the state lives.",
  security: SECURITY.user,
  request: LinkVerify.request,
  responses: {
    ...ok(LinkVerified, "linked"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, LINK_ERRORS.verify),
  },
});

const remove = createRoute({
  tags,
  method: "post",
  path: "/users/link/remove",
  operationId: "removeLink",
  summary: "Remove an identifier from the signed-in account",
  description: `${recent} Removing an identifier of the merged secondary separates the two accounts, like unmerge.`,
  security: SECURITY.user,
  request: LinkRemove.request,
  responses: {
    ...ok(z.object({ message: z.literal("Account unlinked successfully") }).openapi("LinkRemoved"), "removed"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, LINK_ERRORS.remove),
  },
});

const unmergeRoute = createRoute({
  tags,
  method: "post",
  path: "/users/link/unmerge",
  operationId: "unmerge",
  summary: "Separate the signed-in account from its merged secondary",
  description: `${recent} The secondary comes back exactly as it was: its id, identifiers, passkeys and profile.`,
  security: SECURITY.user,
  request: Unmerge.request,
  responses: {
    ...ok(z.object({ message: z.literal("Accounts unmerged successfully") }).openapi("Unmerged"), "unmerged"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, LINK_ERRORS.unmerge),
  },
});

export function linkRoutes() {
  const r = new OpenAPIHono<AppEnv>();
  registerBodies(r.openAPIRegistry, [LinkRequest, LinkVerify, LinkRemove, Unmerge]);

  r.openapi(request, async (c) => {
    const actor = await user(c);
    const { stateId } = await requestLink(c.get("deps"), actor, await jsonBody(c, LinkRequest.fields));
    return c.json({ state_id: stateId }, 200);
  });

  r.openapi(verify, async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, LinkVerify.fields);
    return c.json(await verifyLink(c.get("deps"), actor, { stateId: str(body, "state_id"), otp: str(body, "otp") }), 200);
  });

  r.openapi(remove, async (c) => {
    const actor = await user(c);
    return c.json(await removeLink(c.get("deps"), actor, await jsonBody(c, LinkRemove.fields)), 200);
  });

  r.openapi(unmergeRoute, async (c) => {
    const actor = await user(c);
    await jsonBody(c, Unmerge.fields);
    return c.json(await unmerge(c.get("deps"), actor), 200);
  });
  return r;
}
