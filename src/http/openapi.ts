// The OpenAPI 3.1 document of the REST routes, generated from their own definitions: the same
// router factories src/app.ts mounts are mounted here once more, on a router that only
// collects their registrations. A route added to one of those routers is in the document.
import { OpenAPIHono } from "@hono/zod-openapi";
import { readFileSync } from "node:fs";
import type { AppEnv } from "./env.ts";
import { BODY_LIMIT } from "./body.ts";
import { authRoutes } from "./routes/auth.ts";
import { healthRoutes } from "./routes/health.ts";
import { externalRoutes } from "./routes/external.ts";
import { linkRoutes } from "./routes/link.ts";
import { passkeyRoutes } from "./routes/passkey.ts";
import { webhookRoutes } from "./routes/webhooks.ts";

export type OpenAPIDocument = ReturnType<OpenAPIHono["getOpenAPI31Document"]>;

const version = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

const DESCRIPTION = `The REST routes of linkgate, an identifier-linking and webhook gateway. GraphQL (\`/graphql\`) covers everything else.

**Credentials.** \`X-API-Key\` names the project: a publishable key (\`lg_pk_…\`) allows what a signed-in or signing-in user does; a secret key (\`lg_sk_…\`) allows that and the project's webhooks. A signed-in user's access token goes in \`Authorization: Bearer\`, together with the API key.

**Bodies.** JSON only (\`Content-Type: application/json\`, else 415 \`UnsupportedMediaType\`), at most ${BODY_LIMIT} bytes (else 413 \`PayloadTooLarge\`), an object with exactly the fields documented for the route: an unknown field, a value of the wrong type, a NUL character or an unpaired surrogate is 400 \`InvalidRequest\`.

**Errors.** Every error is \`{"error": "<Name>", "message": "<text for humans>"}\`; each response below lists the names its status can carry. 429 and 503 carry \`Retry-After\`.`;

const TAGS = [
  { name: "Sign-in", description: "passwordless sign-in with a six-digit code" },
  { name: "Re-authentication", description: "confirm it's the user before a sensitive change; the session stays the same" },
  { name: "Linking", description: "add, merge, remove and separate identifiers" },
  { name: "Passkeys", description: "WebAuthn registration, sign-in and management" },
  { name: "OpenID Connect", description: "userinfo, keys and discovery" },
  { name: "Webhooks", description: "signing secret rotation; everything else is GraphQL" },
  { name: "Health", description: "liveness and readiness probes" },
];

function collectRoutes() {
  const api = new OpenAPIHono<AppEnv>();
  // The migration count only matters to /readyz's answer, not to its description.
  for (const routes of [healthRoutes([]), authRoutes(), linkRoutes(), externalRoutes(), passkeyRoutes(), webhookRoutes()]) api.route("/", routes);
  const registry = api.openAPIRegistry;
  registry.registerComponent("securitySchemes", "ApiKey", {
    type: "apiKey",
    in: "header",
    name: "X-API-Key",
    description: "the project's API key: secret (`lg_sk_…`) or publishable (`lg_pk_…`)",
  });
  registry.registerComponent("securitySchemes", "AccessToken", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description: "a signed-in user's access token, from /auth/otp/verify, /auth/passkey/sign-in/verify or the OpenID Connect flow",
  });
  registry.registerComponent("securitySchemes", "SecretKeyBearer", {
    type: "http",
    scheme: "bearer",
    description: "the project's secret API key (`lg_sk_…`) as a bearer token; a publishable key is 403 `SecretKeyRequired`",
  });
  return api;
}

let cached: OpenAPIDocument | undefined;

/** The document; built once, the routes do not change while the process runs. */
export function openApiDocument(): OpenAPIDocument {
  cached ??= collectRoutes().getOpenAPI31Document({
    openapi: "3.1.0",
    info: { title: "linkgate REST API", version, description: DESCRIPTION },
    tags: TAGS,
  });
  return cached;
}
