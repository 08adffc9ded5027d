// Every body the app reads is at most 64 KiB (docs/security.md), however the client frames it:
// with a Content-Length that says more, with one that says less, or in chunks of no declared
// length that go on past the limit. Sent over a real socket to @hono/node-server, as production
// serves it: in-process requests (the harness's call) never reach the adapter's own body reads.
import http from "node:http";
import { describe, expect, it } from "vitest";
import { harnessOnSocket } from "./support/socket.ts";
import { backends } from "./support/db.ts";

const LIMIT = 64 * 1024;

type Answer = { status: number; body: any; connection?: string };

describe.each(backends)("request bodies on %s", (backend) => {
  const served = harnessOnSocket(backend);

  /**
   * POSTs `chunks` as they are: with `length`, a Content-Length header of that value; without,
   * chunked transfer encoding. The answer may come before the whole body is sent: the server
   * stops reading at the limit.
   */
  function post(path: string, chunks: string[], length?: number, contentType = "application/json"): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { "content-type": contentType, "x-api-key": served.h.apiKey };
      if (length !== undefined) headers["content-length"] = String(length);
      let answered = false;
      const req = http.request({ host: "127.0.0.1", port: served.socket.port, path, method: "POST", headers }, (res) => {
        answered = true;
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode!, body, connection: res.headers.connection });
        });
      });
      // Writing the rest of a refused body can fail once the server has answered and closed.
      req.on("error", (err) => answered || reject(err));
      for (const c of chunks) req.write(c);
      req.end();
    });
  }

  /** A JSON object of `size` bytes: `{"<field>":"xxx…"}`. */
  const padded = (field: string, size: number, extra = "") => {
    const head = `{${extra}"${field}":"`;
    return head + "x".repeat(size - head.length - 2) + '"}';
  };
  /** `text` in pieces of 8 KiB, as a streaming client sends it. */
  const pieces = (text: string) => text.match(/[\s\S]{1,8192}/g)!;

  /** A GraphQL request of `size` bytes (the padding in `extensions`, which GraphQL servers accept). */
  const paddedQuery = (size: number) => {
    const head = `{"query":"{ __typename }","extensions":{"pad":"`;
    return head + "x".repeat(size - head.length - 3) + '"}}';
  };
  const ROUTES = [
    { path: "/auth/otp/start", body: (size: number) => padded("email", size), small: JSON.stringify({ email: "framed@example.com" }) },
    { path: "/graphql", body: paddedQuery, small: JSON.stringify({ query: "{ __typename }" }) },
  ];

  it.each(ROUTES)("$path: a declared length over the limit is 413 PayloadTooLarge", async ({ path, body }) => {
    const big = body(LIMIT + 1);
    expect(big.length).toBe(LIMIT + 1);
    const r = await post(path, [big], big.length);
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ error: "PayloadTooLarge" });
    expect(r.connection).toBe("close"); // the unread rest would be taken for the next request
  });

  it.each(ROUTES)("$path: chunks of no declared length are cut off past the limit", async ({ path, body }) => {
    const r = await post(path, pieces(body(4 * LIMIT)));
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ error: "PayloadTooLarge" });
    expect(r.connection).toBe("close");
  });

  it.each(ROUTES)("$path: a body within the limit is read, declared or chunked", async ({ path, small }) => {
    expect((await post(path, [small], Buffer.byteLength(small))).status).toBe(200);
    expect((await post(path, pieces(small))).status).toBe(200);
  });

  it("a body of exactly the limit is read, one byte more is refused", async () => {
    const exact = paddedQuery(LIMIT);
    expect(exact.length).toBe(LIMIT);
    const ok = await post("/graphql", pieces(exact));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ data: { __typename: "Query" } });
    const over = await post("/graphql", pieces(paddedQuery(LIMIT + 1)));
    expect(over.status).toBe(413);
  });

  it("the OpenID Connect endpoints' forms are bounded too, answered as the protocol answers", async () => {
    const form = "grant_type=client_credentials&pad=" + "x".repeat(4 * LIMIT);
    const type = "application/x-www-form-urlencoded";
    // a client's endpoints: OAuth's error object (RFC 6749 5.2), which its libraries read
    for (const path of ["/oauth/token", "/oauth/revoke"]) {
      const r = await post(path, pieces(form), undefined, type);
      expect(r.status).toBe(413);
      expect(r.connection).toBe("close");
      expect(r.body).toEqual({ error: "invalid_request", error_description: `the body is larger than ${LIMIT} bytes` });
    }
    // a browser's: a page
    const page = await post("/oauth/authorize", [form], form.length, type);
    expect(page.status).toBe(413);
    expect(page.connection).toBe("close");
    expect(page.body).toContain("This sign-in cannot continue");
  });

  it("an identity provider's form_post callback is bounded too, declared or chunked", async () => {
    // No credentials are needed to post here, so this is the body a stranger can send anyone.
    const form = "state=x&code=y&pad=" + "x".repeat(4 * LIMIT);
    const type = "application/x-www-form-urlencoded";
    for (const r of [await post("/auth/external/callback", [form], form.length, type), await post("/auth/external/callback", pieces(form), undefined, type)]) {
      expect(r.status).toBe(413);
      expect(r.connection).toBe("close");
      // a browser's page, as every answer of the callback is, not the API's JSON
      expect(typeof r.body).toBe("string");
      expect(r.body).toContain("This sign-in cannot continue");
      expect(r.body).toContain("PayloadTooLarge");
    }
    // A callback of ordinary size is still read: an unknown state gets the expired page.
    const small = await post("/auth/external/callback", ["state=unknown&code=y"], 20, type);
    expect(small.status).toBe(400);
    expect(String(small.body)).toContain("expired");
  });
});
