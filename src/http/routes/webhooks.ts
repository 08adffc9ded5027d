import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { authenticateProject, bearerToken } from "../../auth/authenticate.ts";
import { requireSecretKey } from "../../deps.ts";
import { Unauthenticated } from "../../errors.ts";
import { ROTATE_SECRET_ERRORS, rotateWebhookSecret } from "../../webhooks/service.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";
import { BODY_ERRORS, errorResponses, jsonBody as describeBody, ok, registerBodies, SECURITY } from "../api-schemas.ts";

const RotateSecret = describeBody("RotateSecretBody", z.strictObject({ webhook_id: z.string().openapi({ description: "the webhook's id (wh_…)" }) }), {
  required: true,
  description: "the webhook whose secret to rotate",
});

const Rotated = z
  .object({
    success: z.literal(true),
    webhook_id: z.string(),
    new_secret: z.string().openapi({ description: "whsec_ and the base64 of 32 random bytes; shown only here", example: "whsec_EMxRy2O/CiwfeN0GkWfFBLhdMTnB9r9l6Gi/VSSun7A=" }),
    transition_ends_at: z.iso.datetime().openapi({ description: "until then the previous secret keeps verifying (7 days)" }),
  })
  .openapi("RotatedSecret");

const rotate = createRoute({
  tags: ["Webhooks"],
  method: "post",
  path: "/api/v1/webhooks/rotate-secret",
  operationId: "rotateWebhookSecret",
  summary: "Rotate a webhook's signing secret",
  description:
    "The new secret signs from now on; the previous one keeps verifying for 7 days. Rotating again during a transition drops the oldest secret and starts a new 7 days.",
  // either one: the documented bearer, or X-API-Key like every other route
  security: [...SECURITY.secretKeyBearer, ...SECURITY.apiKey],
  request: RotateSecret.request,
  responses: {
    ...ok(Rotated, "rotated"),
    ...errorResponses(["Unauthenticated", "SecretKeyRequired", "ServiceUnavailable"], BODY_ERRORS, ROTATE_SECRET_ERRORS),
  },
});

export function webhookRoutes() {
  const r = new OpenAPIHono<AppEnv>();
  registerBodies(r.openAPIRegistry, [RotateSecret]);
  // Legacy clients send the project API key as a bearer token on this route; X-API-Key, as on
  // every other route, is taken too, so the habit of the rest of the API does not end in a 401.
  // A bearer shaped like a JWT is a user's access token sent out of habit, not the key.
  r.openapi(rotate, async (c) => {
    const deps = c.get("deps");
    const bearer = bearerToken(c.req.header("authorization"));
    const header = c.req.header("x-api-key");
    const apiKey = header && bearer?.split(".").length === 3 ? header : (bearer ?? header);
    if (!apiKey) throw new Unauthenticated("send the project's secret key as Authorization: Bearer lg_sk_… (or in X-API-Key)");
    const actor = await authenticateProject(deps, { apiKey, clientAddress: c.get("clientAddress") });
    // The service refuses a publishable key itself; asking here too keeps credentials ahead of
    // the body (docs/rest.md): a publishable key with a malformed body is 403, not 400.
    requireSecretKey(actor);
    const body = await jsonBody(c, RotateSecret.fields);
    const rotated = await rotateWebhookSecret(deps, actor, str(body, "webhook_id"));
    return c.json(
      {
        success: true as const,
        webhook_id: rotated.webhookId,
        new_secret: rotated.newSecret,
        transition_ends_at: rotated.transitionEndsAt.toISOString(),
      },
      200,
    );
  });
  return r;
}
