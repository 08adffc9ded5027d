// docs/security.md, "Logs": unexpected errors are logged and answered with a masked message.
// graphql-yoga's own masking adds the fault's message and stack to the answer
// (`extensions.originalError`) whenever the process's NODE_ENV is `development`, a value
// linkgate accepts: any caller of a gateway started so read its internals (a SQL error naming
// tables and columns, file paths), where REST answers a bare 500 in every mode.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

describe.each(backends)("a GraphQL fault with NODE_ENV=development on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  it("is answered with the masked message only, no message or stack of the fault", async () => {
    const before = process.env.NODE_ENV;
    // a real fault: the table the query reads is gone (a schema that drifted)
    await h.db.prisma.$executeRawUnsafe(`ALTER TABLE "webhooks" RENAME TO "webhooks_moved"`);
    let text: string;
    try {
      process.env.NODE_ENV = "development";
      const res = await h.app.fetch(
        new Request("http://linkgate.test/graphql", {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": h.apiKey },
          body: JSON.stringify({ query: "{ webhooks { edges { node { id } } } }" }),
        }),
      );
      text = await res.text();
    } finally {
      process.env.NODE_ENV = before;
      await h.db.prisma.$executeRawUnsafe(`ALTER TABLE "webhooks_moved" RENAME TO "webhooks"`);
    }
    const body = JSON.parse(text);
    expect(body.errors).toEqual([expect.objectContaining({ message: "Unexpected error." })]);
    expect(body.errors[0].extensions).toEqual({ code: "INTERNAL_SERVER_ERROR" });
    expect(text).not.toMatch(/webhooks_moved|webhooks"? does not exist|stack|\.ts:\d+/);
  });
});
