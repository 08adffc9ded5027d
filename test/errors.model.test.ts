// One error model (src/errors.ts): each error is declared once, with its status, message and
// meaning, and the REST status table, the OpenAPI document and the GraphQL error types all derive
// from that declaration. Each operation's error list is exported once by its service and both
// transports use it, so the two can no longer disagree.
import { isObjectType, isUnionType, type GraphQLUnionType } from "graphql";
import { describe, expect, it } from "vitest";
import * as E from "../src/errors.ts";
import { statusOf } from "../src/http/errors.ts";
import { openApiDocument } from "../src/http/openapi.ts";
import { schema } from "../src/graphql/schema/index.ts";

const declared = Object.keys(E.ERRORS) as E.ErrorName[];
const classes = Object.values(E).filter((v): v is typeof v & { code: E.ErrorName } => typeof v === "function" && "code" in v);

/** Errors a REST route answers whatever the operation: credentials, bodies, outages. */
const TRANSPORT_ERRORS = new Set(["Unauthenticated", "Forbidden", "InsufficientScope", "SecretKeyRequired", "ServiceUnavailable", "PayloadTooLarge", "UnsupportedMediaType"]);

/** The REST route and the GraphQL field of each operation that has both. */
const BOTH: Array<[route: string, field: string]> = [
  ["POST /auth/otp/start", "startSignIn"],
  ["POST /auth/otp/verify", "completeSignIn"],
  ["POST /auth/reauthenticate/start", "startReauthentication"],
  ["POST /auth/reauthenticate/verify", "completeReauthentication"],
  ["POST /auth/reauthenticate/passkey", "reauthenticateWithPasskey"],
  ["POST /users/link/request", "requestLink"],
  ["POST /users/link/verify", "verifyLink"],
  ["POST /users/link/remove", "removeLink"],
  ["POST /users/link/unmerge", "unmerge"],
  ["POST /auth/passkey/registration/options", "startPasskeyRegistration"],
  ["POST /auth/passkey/registration/verify", "finishPasskeyRegistration"],
  ["POST /auth/passkey/sign-in/verify", "finishPasskeySignIn"],
  ["POST /auth/passkey/rename", "renamePasskey"],
  ["POST /auth/passkey/remove", "removePasskey"],
  ["POST /api/v1/webhooks/rotate-secret", "rotateWebhookSecret"],
];

type Operation = { responses: Record<string, { content?: { "application/json"?: { schema?: { properties?: { error?: { enum?: string[] } } } } } }> };

function restErrors(route: string): string[] {
  const [method, path] = route.split(" ");
  const op = (openApiDocument().paths as Record<string, Record<string, Operation>>)[path][method.toLowerCase()];
  return Object.values(op.responses).flatMap((r) => r.content?.["application/json"]?.schema?.properties?.error?.enum ?? []);
}

function graphqlErrors(field: string): string[] {
  const union = schema.getMutationType()!.getFields()[field].type;
  const named = (union as { ofType?: unknown }).ofType ?? union;
  expect(isUnionType(named), `${field} returns a union`).toBe(true);
  return (named as GraphQLUnionType).getTypes().map((t) => t.name).filter((n) => n in E.ERRORS);
}

describe("the error model", () => {
  it("declares every error class once, and every declared error has its class", () => {
    expect(new Set(classes.map((c) => c.code))).toEqual(new Set(declared));
    for (const cls of classes) expect(new (cls as unknown as new (n?: number) => E.DomainError)(1).code).toBe(cls.code);
  });

  it("REST answers each error with its declared status", () => {
    for (const name of declared) expect([name, statusOf(name)]).toEqual([name, E.ERRORS[name].status]);
    expect(statusOf("PasskeyInvalid")).toBe(400);
  });

  it("GraphQL has a type for exactly the errors declared as results, described by their declared meaning", () => {
    const results = declared.filter((n) => E.ERRORS[n].graphql === "result");
    for (const name of declared) {
      const type = schema.getType(name);
      if (results.includes(name)) {
        expect(isObjectType(type), name).toBe(true);
        expect(type!.description).toBe(E.ERRORS[name].meaning);
      } else expect(type, name).toBeUndefined();
    }
  });

  it("the OpenAPI document describes each error by its declared meaning", () => {
    const text = JSON.stringify(openApiDocument());
    const listed = declared.filter((name) => text.includes(`\`${name}\`: `));
    expect(listed.length).toBeGreaterThan(20);
    for (const name of listed) expect(text).toContain(`\`${name}\`: ${JSON.stringify(E.ERRORS[name].meaning).slice(1, -1)}`);
  });

  it.each(BOTH)("%s and %s refuse with the same errors", (route, field) => {
    const rest = restErrors(route).filter((n) => !TRANSPORT_ERRORS.has(n));
    const graphql = graphqlErrors(field).filter((n) => !TRANSPORT_ERRORS.has(n));
    // InvalidRequest is every REST body's error; GraphQL lists it where the operation itself can
    expect(new Set(graphql.filter((n) => n !== "InvalidRequest"))).toEqual(new Set(rest.filter((n) => n !== "InvalidRequest")));
  });
});
