import { Hono } from "hono";
import { authenticateProject, bearerToken, requireSecretKey } from "../../auth/authenticate.ts";
import { rotateWebhookSecret } from "../../webhooks/service.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";

export function webhookRoutes() {
  const r = new Hono<AppEnv>();
  // Legacy clients send the project API key as a bearer token on this route.
  r.post("/api/v1/webhooks/rotate-secret", async (c) => {
    const deps = c.get("deps");
    const actor = await authenticateProject(deps, { apiKey: bearerToken(c.req.header("authorization")), clientAddress: c.get("clientAddress") });
    const { projectId } = requireSecretKey(actor);
    const body = await jsonBody(c, ["webhook_id"]);
    const rotated = await rotateWebhookSecret(deps, projectId, str(body, "webhook_id"));
    return c.json({
      success: true,
      webhook_id: rotated.webhookId,
      new_secret: rotated.newSecret,
      transition_ends_at: rotated.transitionEndsAt.toISOString(),
    });
  });
  return r;
}
