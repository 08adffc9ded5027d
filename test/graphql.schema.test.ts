import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { generateOperations, generatedFile } from "../codegen.ts";
import { printedSchema, schemaFile } from "../src/graphql/print.ts";

describe("GraphQL schema files", () => {
  it("schema.graphql is printed from the code (run npm run schema:print)", () => {
    expect(readFileSync(schemaFile, "utf8")).toBe(printedSchema());
  });

  it("the typed test operations are generated from the current schema (run npm run codegen)", async () => {
    expect(readFileSync(generatedFile, "utf8")).toBe(await generateOperations());
  });

  it("uses the names and scalars docs/graphql.md documents", () => {
    const sdl = printedSchema();
    for (const name of ["startSignIn", "completeSignIn", "requestLink", "verifyLink", "removeLink", "unmerge", "createWebhook", "updateWebhook", "deleteWebhook", "rotateWebhookSecret", "sendTestWebhook", "viewer", "webhooks", "eventTypes", "createProject", "createApiKey", "revokeApiKey"]) {
      expect(sdl).toMatch(new RegExp(`\\b${name}\\b`));
    }
    for (const scalar of ["DateTime", "EmailAddress", "PhoneNumber", "URL", "JSON"]) expect(sdl).toContain(`scalar ${scalar}`);
    expect(sdl).toContain("interface Error");
  });
});
