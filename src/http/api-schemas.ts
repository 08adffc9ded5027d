// The pieces every REST route definition is made of: its credentials, its JSON body, its
// success body and the errors it can answer. src/http/openapi.ts assembles the routes' own
// definitions into the OpenAPI document; nothing here is written twice.
//
// Request bodies are described, not validated, by zod: src/http/body.ts (exact fields, 64 KiB,
// JSON only, storable strings) and the services decide, with the error names of src/errors.ts
// (IdentifierRequired, InvalidIdentifier, OTPInvalid…), which zod's validator cannot produce in
// the same order. The field list jsonBody() accepts is read from the same zod schema, so the
// document and the unknown-field rule cannot drift apart.
import { z, type RouteConfig } from "@hono/zod-openapi";
import { BODY_LIMIT } from "./body.ts";
import { ERRORS, type ErrorName } from "../errors.ts";
import { statusOf } from "./errors.ts";

/** Security requirements; the schemes are declared in src/http/openapi.ts. */
export const SECURITY = {
  apiKey: [{ ApiKey: [] }],
  /** both at once: the project's key and the user's token */
  user: [{ ApiKey: [], AccessToken: [] }],
  accessToken: [{ AccessToken: [] }],
  secretKeyBearer: [{ SecretKeyBearer: [] }],
};

/**
 * An error as a route lists it: its declared name, or its class (an operation's error list,
 * which the GraphQL field of the same operation uses too).
 */
export type ErrorRef = ErrorName | { readonly code: ErrorName };
const nameOf = (e: ErrorRef): ErrorName => (typeof e === "string" ? e : e.code);

/** Errors of src/http/body.ts, answered by every route that reads a JSON body. */
export const BODY_ERRORS: ErrorRef[] = ["InvalidRequest", "PayloadTooLarge", "UnsupportedMediaType"];
/** Errors of X-API-Key alone. */
export const PROJECT_ERRORS: ErrorRef[] = ["Unauthenticated", "ServiceUnavailable"];
/** Errors of the access token with X-API-Key. */
export const USER_ERRORS: ErrorRef[] = ["Unauthenticated", "Forbidden", "InsufficientScope", "ServiceUnavailable"];


const RETRY_AFTER = { description: "seconds to wait before trying again", schema: { type: "integer" as const, minimum: 1 } };
const HEADERS: Record<number, Record<string, { description: string; schema: { type: "integer" | "string"; minimum?: number } }>> = {
  401: { "WWW-Authenticate": { description: 'always `Bearer realm="linkgate"`', schema: { type: "string" } } },
  429: { "Retry-After": RETRY_AFTER },
  503: { "Retry-After": RETRY_AFTER },
};

/** The REST error body, `{"error","message"}`, with the names one status of one route can carry. */
function errorSchema(names: ErrorName[]) {
  return z.object({
    error: z.enum(names as [ErrorName, ...ErrorName[]]).openapi({ description: "the error's name; stable, for programs" }),
    message: z.string().openapi({ description: "what went wrong, for people; may change" }),
  });
}

type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 503;
type ErrorResponse = { description: string; headers?: (typeof HEADERS)[number]; content: { "application/json": { schema: ReturnType<typeof errorSchema> } } };

/** One documented response per status, its error names taken from the one status table. */
export function errorResponses(...groups: (readonly ErrorRef[])[]) {
  const byStatus = new Map<number, ErrorName[]>();
  for (const name of new Set(groups.flat().map(nameOf))) byStatus.set(statusOf(name), [...(byStatus.get(statusOf(name)) ?? []), name]);
  const out: Partial<Record<ErrorStatus, ErrorResponse>> = {};
  for (const [status, names] of [...byStatus].sort(([a], [b]) => a - b)) {
    out[status as ErrorStatus] = {
      description: names.map((n) => `\`${n}\`: ${ERRORS[n].meaning}`).join(" "),
      ...(HEADERS[status] ? { headers: HEADERS[status] } : {}),
      content: { "application/json": { schema: errorSchema(names) } },
    };
  }
  return out;
}

/** A JSON success response. */
export function ok<S extends z.ZodType>(schema: S, description: string) {
  return { 200: { description, content: { "application/json": { schema } } } };
}

export type JsonBody = {
  /** the named zod schema, registered as a component of the document */
  name: string;
  schema: z.ZodType;
  /** every top-level field the schema names: the only ones src/http/body.ts lets through */
  fields: string[];
  /** the route's `request` part: a reference, so no zod validator is installed for it */
  request: NonNullable<RouteConfig["request"]>;
};

/** A request body described by a zod object (or a union of objects) under a component name. */
export function jsonBody(name: string, schema: z.ZodObject | z.ZodUnion<z.ZodObject[]>, opts: { required: boolean; description: string }): JsonBody {
  return {
    name,
    schema,
    fields: fieldsOf(schema),
    request: {
      body: {
        required: opts.required,
        description: opts.description,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${name}` } } },
      },
    },
  };
}

function fieldsOf(schema: z.ZodObject | z.ZodUnion<z.ZodObject[]>): string[] {
  const objects = schema instanceof z.ZodUnion ? schema.options : [schema];
  return [...new Set(objects.flatMap((o) => Object.keys(o.shape)))];
}

// Shared bodies.

/** The two halves of an identifier body: `{"email"}` or `{"phone"}`. */
export const IDENTIFIER_OBJECTS = [
  z.strictObject({ email: z.string().openapi({ description: "an e-mail address, compared case-insensitively", example: "ada@example.com" }) }),
  z.strictObject({ phone: z.string().openapi({ description: "a phone number in E.164: + and country code", example: "+15551234567" }) }),
] as const;

/** Exactly one of email or phone. */
export const identifierBody = (name: string, description: string) => jsonBody(name, z.union([...IDENTIFIER_OBJECTS]), { required: true, description });

export const otpBody = (name: string, description: string) =>
  jsonBody(
    name,
    z.strictObject({
      state_id: z.string().openapi({ description: "the state_id the start of this flow answered" }),
      otp: z.string().openapi({ description: "the six-digit code that was sent", example: "123456" }),
    }),
    { required: true, description },
  );

/** `{}` or no body at all. */
export const emptyBody = (name: string) =>
  jsonBody(name, z.strictObject({}), { required: false, description: "nothing: `{}` or no body (then no Content-Type is needed)" });

export const StateId = z.object({ state_id: z.string().openapi({ description: "names this code's state in the verify call" }) }).openapi("StateId");

export const TokenResponse = z
  .object({
    access_token: z.string().openapi({ description: "a JWT for this user; `sub` is the primary account, `aud` the project" }),
    id_token: z.string().openapi({ description: "an OpenID Connect ID token" }),
    token_type: z.literal("Bearer"),
    expires_in: z.number().int().openapi({ description: "seconds until the access token expires" }),
    account_id: z.string().openapi({ description: "the primary account signed into" }),
  })
  .openapi("TokenResponse");

export const Passkey = z
  .object({
    id: z.string(),
    name: z.string(),
    created_at: z.iso.datetime(),
    last_used_at: z.iso.datetime().nullable().openapi({ description: "null until it signs in once" }),
    device_type: z.string().openapi({ description: "`singleDevice` or `multiDevice` (synced)" }),
    backed_up: z.boolean(),
  })
  .openapi("Passkey");

const b64url = z.string().openapi({ description: "base64url" });
const credentialFields = {
  id: b64url,
  rawId: b64url,
  type: z.literal("public-key"),
  clientExtensionResults: z.record(z.string(), z.unknown()).optional(),
  authenticatorAttachment: z.string().optional(),
};

/** What navigator.credentials.create() gives, as JSON (PublicKeyCredential.toJSON()). */
export const RegistrationResponse = z
  .object({
    ...credentialFields,
    response: z.looseObject({ clientDataJSON: b64url, attestationObject: b64url, transports: z.array(z.string()).optional() }),
  })
  .openapi("RegistrationResponseJSON");

/** What navigator.credentials.get() gives, as JSON. */
export const AuthenticationResponse = z
  .object({
    ...credentialFields,
    response: z.looseObject({ clientDataJSON: b64url, authenticatorData: b64url, signature: b64url, userHandle: b64url.optional() }),
  })
  .openapi("AuthenticationResponseJSON");

const credentialDescriptor = z.looseObject({ id: b64url, type: z.literal("public-key"), transports: z.array(z.string()).optional() });

/** WebAuthn PublicKeyCredentialCreationOptionsJSON, for navigator.credentials.create(). */
export const CreationOptions = z
  .looseObject({
    challenge: b64url,
    rp: z.looseObject({ id: z.string().optional(), name: z.string() }),
    user: z.looseObject({ id: b64url, name: z.string(), displayName: z.string() }),
    pubKeyCredParams: z.array(z.looseObject({ type: z.literal("public-key"), alg: z.number().int() })),
    timeout: z.number().int().optional(),
    excludeCredentials: z.array(credentialDescriptor).optional(),
    authenticatorSelection: z.looseObject({}).optional(),
    attestation: z.string().optional(),
    extensions: z.looseObject({}).optional(),
  })
  .openapi("PublicKeyCredentialCreationOptionsJSON");

/** WebAuthn PublicKeyCredentialRequestOptionsJSON, for navigator.credentials.get(). */
export const RequestOptions = z
  .looseObject({
    challenge: b64url,
    rpId: z.string().optional(),
    timeout: z.number().int().optional(),
    allowCredentials: z.array(credentialDescriptor).optional(),
    userVerification: z.string().optional(),
    extensions: z.looseObject({}).optional(),
  })
  .openapi("PublicKeyCredentialRequestOptionsJSON");

/** Makes a router's request bodies components of the document its routes refer to. */
export function registerBodies(registry: { register(name: string, schema: z.ZodType): unknown }, bodies: JsonBody[]) {
  for (const b of bodies) registry.register(b.name, b.schema);
}
