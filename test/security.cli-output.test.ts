// What the admin CLI prints holds no receiver's credential: `webhooks list` showed a webhook's URL
// whole, and a receiver that takes a token in its query string (https://x.example/hook?token=…)
// had it printed to the terminal, and from there to tickets and CI logs (docs/cli.md, `webhooks list`).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { maskedUrl } from "../src/cli/output.ts";
import { openDatabase } from "../src/db/client.ts";
import { backends, migratedSnapshot, openTestDatabase, type Backend, type TestDatabase } from "./support/db.ts";
import { runCliHere } from "./support/command.ts";
import { newMasterKey, seedWebhook } from "./support/receiver.ts";

const TOKEN = "tok_9f8e7d6c5b4a39281706";
const SIG = "sig-0a1b2c3d4e5f";

describe("how a URL is shown", () => {
  it("query values, a fragment and a user or password are masked; scheme, host, port, path and parameter names stay", () => {
    expect(maskedUrl(`https://x.example/hook?token=${TOKEN}&source=lg`)).toBe("https://x.example/hook?token=***&source=***");
    expect(maskedUrl("https://x.example:8443/a/b")).toBe("https://x.example:8443/a/b");
    expect(maskedUrl(`https://x.example/h?${TOKEN}`)).toBe("https://x.example/h?***");
    expect(maskedUrl(`https://user:${TOKEN}@x.example/h?empty=#${SIG}`)).toBe("https://***@x.example/h?empty=#***");
    expect(maskedUrl("not a url")).toBe("(an unparseable URL)");
  });
});

describe.each(backends)("webhooks list on %s", (backend: Backend) => {
  let env: NodeJS.ProcessEnv;
  let cleanup: () => Promise<void>;
  let projectId: string;

  beforeAll(async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "linkgate-cli-secrets-"));
    let db: TestDatabase;
    if (backend === "pglite") {
      // the CLI opens a folder: the migrated snapshot, written into one
      db = await openDatabase({ dataDir, pgliteSnapshot: migratedSnapshot() });
    } else {
      db = await openTestDatabase("postgres");
    }
    const master = newMasterKey();
    const seeded = await seedWebhook(db, master, { url: `https://receiver.example/hooks?token=${TOKEN}&v=2` });
    projectId = seeded.projectId;
    await seedWebhook(db, master, { url: `https://other.example/in#${SIG}`, projectId });
    const url = db.url;
    const env0: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env0)) if (k === "DATABASE_URL" || k.startsWith("LINKGATE_")) delete env0[k];
    env = { ...env0, LINKGATE_DATA_DIR: dataDir, ...(url ? { DATABASE_URL: url } : {}) };
    if (backend === "pglite") {
      // PGlite is one process's database: the CLI opens the folder once this has let it go
      await db.close();
      cleanup = async () => rmSync(dataDir, { recursive: true, force: true });
    } else {
      cleanup = async () => {
        await db.close();
        rmSync(dataDir, { recursive: true, force: true });
      };
    }
  });
  afterAll(async () => {
    await cleanup?.();
  });

  it("shows no query value or fragment of a webhook's URL, as a table or as JSON", async () => {
    const table = await runCliHere(env, ["webhooks", "list", "--project", projectId]);
    expect(table.code, table.stderr).toBe(0);
    const asJson = await runCliHere(env, ["webhooks", "list", "--json"]);
    expect(asJson.code, asJson.stderr).toBe(0);
    for (const out of [table.stdout + table.stderr, asJson.stdout + asJson.stderr]) {
      expect(out).not.toContain(TOKEN);
      expect(out).not.toContain(SIG);
    }
    expect(table.stdout).toContain("https://receiver.example/hooks?token=***&v=***");
    expect(JSON.parse(asJson.stdout).map((w: { url: string }) => w.url)).toEqual(["https://receiver.example/hooks?token=***&v=***", "https://other.example/in#***"]);
  });
});
