import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("admin operations on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());
  const admin = () => ({ "x-admin-token": h.adminToken });

  it("createProject returns a key that works once and is stored only hashed", async () => {
    const r = await h.gql(`mutation { createProject(name: "acme") { __typename ... on CreateProjectPayload { apiKey apiKeyId project { id name } } } }`, {}, admin());
    const { apiKey, project } = r.body.data.createProject;
    expect(apiKey).toMatch(/^lg_/);
    const stored = await h.db.prisma.apiKey.findMany({ where: { projectId: project.id } });
    expect(JSON.stringify(stored)).not.toContain(apiKey);
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "x@acme.test" }, headers: { "x-api-key": apiKey } });
    expect(start.status).toBe(200);
  });

  it("createProject trims the name, then wants 1 to 200 characters (the CLI's rule too: test/cli.test.ts)", async () => {
    const create = (name: string) =>
      h.gql(`mutation($name: String!) { createProject(name: $name) { __typename ... on CreateProjectPayload { project { name } } ... on Error { message } } }`, { name }, admin());
    const padded = `  ${"x".repeat(200)}  `;
    expect((await create(padded)).body.data.createProject).toEqual({ __typename: "CreateProjectPayload", project: { name: "x".repeat(200) } });
    for (const name of ["   ", "x".repeat(201)]) {
      expect((await create(name)).body.data.createProject).toEqual({ __typename: "InvalidRequest", message: "name must be 1 to 200 characters" });
    }
    // printed by `projects list` and shown on the dashboard: held to the rule of every name shown to others
    for (const name of ["acme\u001b[2Jgone", "a\u0007b", "a\u009bb", "Acme \u202eemcA", "a\u2028b"]) {
      expect((await create(name)).body.data.createProject).toEqual({ __typename: "InvalidRequest", message: "name must not contain control or bidirectional override characters" });
    }
    expect((await create("\u200b\u3164")).body.data.createProject).toEqual({ __typename: "InvalidRequest", message: "name must hold a character that shows" });
  });

  it("createApiKey and revokeApiKey: a revoked key is refused at once", async () => {
    const r = await h.gql(`mutation($p: ID!) { createApiKey(projectId: $p) { __typename ... on NewApiKey { apiKey apiKeyId } } }`, { p: h.projectId }, admin());
    const { apiKey, apiKeyId } = r.body.data.createApiKey;
    expect((await h.call("POST", "/auth/otp/start", { body: { email: "k@example.com" }, headers: { "x-api-key": apiKey } })).status).toBe(200);
    const revoked = await h.gql(`mutation($id: ID!) { revokeApiKey(id: $id) { __typename } }`, { id: apiKeyId }, admin());
    expect(revoked.body.data.revokeApiKey.__typename).not.toBe("NotFound");
    const refused = await h.call("POST", "/auth/otp/start", { body: { email: "k@example.com" }, headers: { "x-api-key": apiKey } });
    expect(refused.status).toBe(401);
    expect(refused.body.error).toBe("Unauthenticated");
  });

  it("without the admin token the admin operations are FORBIDDEN; unknown ids are NotFound", async () => {
    const r = await h.gql(`mutation { createProject(name: "nope") { __typename } }`, {}, { "x-admin-token": "wrong-token-wrong-token" });
    expect(r.body.errors[0].extensions.code).toBe("FORBIDDEN");
    const missing = await h.gql(`mutation { createApiKey(projectId: "prj_nope") { __typename } }`, {}, admin());
    expect(missing.body.data.createApiKey.__typename).toBe("NotFound");
  });

  it("the bootstrap key is idempotent: a second start keeps one default project", async () => {
    expect(await h.db.prisma.project.count({ where: { name: "default" } })).toBe(1);
    const { bootstrapProject } = await import("../src/auth/projects.ts");
    await bootstrapProject(h.db.prisma, { secret: h.apiKey, publishable: h.publishableKey }, { secretKey: true });
    expect(await h.db.prisma.project.count({ where: { name: "default" } })).toBe(1);
    expect(await h.db.prisma.apiKey.count({ where: { projectId: h.projectId } })).toBeGreaterThanOrEqual(1);
  });
});
