// docs/security.md, "Logs": fields named secret, otp, access_token, id_token and apiKey, and the
// Authorization, X-API-Key and X-Admin-Token headers, are redacted should one ever be logged by
// mistake. The logger's paths matched them one level down only (`*.secret`, `req.headers…`):
// `log.info({ secret })` or `log.warn({ headers })` wrote the credential in the clear.
import { describe, expect, it } from "vitest";
import { createLogger } from "../src/log.ts";

const CREDENTIAL = "cred-5a4b3c2d1e0f";

function logged(write: (log: ReturnType<typeof createLogger>) => void): string {
  const lines: string[] = [];
  write(createLogger("trace", { write: (line: string) => void lines.push(line) }));
  return lines.join("");
}

describe("the logger's redaction", () => {
  it.each(["secret", "otp", "access_token", "id_token", "apiKey"])("redacts a field named %s at the top of a line and one object down", (field) => {
    const out = logged((log) => {
      log.info({ [field]: CREDENTIAL }, "top");
      log.warn({ input: { [field]: CREDENTIAL } }, "nested");
    });
    expect(out).not.toContain(CREDENTIAL);
    expect(out.match(/\[redacted\]/g)).toHaveLength(2);
  });

  it("redacts the credential headers of a logged `headers`, `req.headers` or `err.headers`, whatever their case", () => {
    const out = logged((log) => {
      log.info({ headers: { authorization: `Bearer ${CREDENTIAL}`, "x-api-key": CREDENTIAL, "x-admin-token": CREDENTIAL, accept: "application/json" } }, "headers");
      log.info({ req: { headers: { authorization: `Bearer ${CREDENTIAL}` } } }, "req");
      const err = Object.assign(new Error("upstream refused"), { headers: { Authorization: `Basic ${CREDENTIAL}`, "X-API-Key": CREDENTIAL } });
      log.error({ err }, "err");
    });
    expect(out).not.toContain(CREDENTIAL);
    expect(out).toContain('"accept":"application/json"');
    expect(out).toContain("upstream refused");
  });
});
