// @linkgate/receiver refuses what it cannot verify safely, loudly (an outside review of the
// receiver package): an unknown scheme or a tolerance that is not a number behaved like the
// most permissive setting, the result carried the secret into logs, a malformed secret decoded
// to a shorter or different key, and a body of the wrong type failed with a cryptic error. The
// hand-written verifiers in docs/webhooks.md and docs/receiver.md are run here as printed.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inspect, promisify } from "node:util";
import { runInNewContext } from "node:vm";
import { afterAll, describe, expect, it } from "vitest";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { signatureHeaders } from "../src/webhooks/signing.ts";
import { verifyWebhook, WebhookVerificationError } from "../src/webhooks/receiver.ts";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("..", import.meta.url));
const work = mkdtempSync(path.join(tmpdir(), "linkgate-receiver-options-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const SECRET = generateWebhookSecret();
const OTHER = generateWebhookSecret();
const T = 1_795_300_000;
const now = () => T * 1000;
const body = JSON.stringify({ id: "evt_1", event_type: "user.created", created_at: "2026-11-21T10:00:00.000Z", project_id: "prj_1", data: {} });
const sign = (secret = SECRET, timestamp = T, b: string = body) =>
  signatureHeaders({ body: b, eventId: "evt_1", eventType: "user.created", attempt: 1, timestamp, secrets: { current: secret } });
/** What a replayer keeps of a captured delivery: the legacy header only, which has no timestamp. */
const legacyOnly = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([k]) => !k.startsWith("webhook-")));

/** Calls through `unknown` so the tests can pass what a JavaScript caller or a config file can. */
const verifyAny = verifyWebhook as unknown as (body: unknown, headers: unknown, secrets: unknown, options?: unknown) => ReturnType<typeof verifyWebhook>;

describe("options.scheme", () => {
  const BAD = ["Standard", "standard ", "", "strict", "LEGACY", 0, 1, false, true, null, {}, ["any"]];

  it.each(BAD.map((scheme) => [inspect(scheme), scheme]))("%s is refused with a TypeError naming the allowed values", (_, scheme) => {
    const replay = legacyOnly(sign(SECRET, T - 30 * 86_400));
    expect(() => verifyAny(body, replay, SECRET, { now, scheme })).toThrow(TypeError);
    expect(() => verifyAny(body, replay, SECRET, { now, scheme })).toThrow(/"standard", "legacy" or "any"/);
  });

  it("undefined means the default, standard: a month-old delivery replayed with only its legacy header is refused", () => {
    const replay = legacyOnly(sign(SECRET, T - 30 * 86_400));
    for (const options of [{ now }, { now, scheme: undefined }]) {
      expect(verifyWebhook(body, replay, SECRET, options)).toMatchObject({ ok: false, error: { code: "missing_signature" } });
      expect(verifyWebhook(body, sign(), SECRET, options)).toMatchObject({ ok: true, scheme: "standard" });
    }
    expect(verifyWebhook(body, replay, SECRET, { now, scheme: "legacy" })).toMatchObject({ ok: true, scheme: "legacy" });
  });

  it("options that are not an object are refused", () => {
    for (const options of [null, "standard", 5]) expect(() => verifyAny(body, sign(), SECRET, options)).toThrow(TypeError);
  });
});

describe("options.toleranceSeconds", () => {
  it.each([NaN, Infinity, -Infinity, -1, "300", null, 10n])("%s is refused with a TypeError, under every scheme", (toleranceSeconds) => {
    for (const scheme of ["standard", "legacy", "any"]) {
      expect(() => verifyAny(body, sign(SECRET, T - 86_400), SECRET, { now, scheme, toleranceSeconds })).toThrow(TypeError);
    }
  });

  it("a finite number of seconds ≥ 0 is the window; undefined is 300", () => {
    const at = (offset: number, toleranceSeconds?: number) => verifyWebhook(body, sign(SECRET, T + offset), SECRET, { now, toleranceSeconds }).ok;
    expect([at(300), at(301), at(-301)]).toEqual([true, false, false]);
    expect([at(0, 0), at(1, 0), at(2, 1.5)]).toEqual([true, false, false]);
    expect([at(86_400, 86_400), at(86_401, 86_400)]).toEqual([true, false]);
  });

  it("a clock that answers something other than a finite number is refused rather than passing every timestamp", () => {
    for (const clock of [() => NaN, () => Infinity, () => "1795300000000", () => undefined]) {
      expect(() => verifyAny(body, sign(SECRET, 1), SECRET, { now: clock })).toThrow(TypeError);
    }
    expect(() => verifyAny(body, sign(), SECRET, { now: 5 })).toThrow(TypeError);
  });
});

describe("the result names the matching secret by its position", () => {
  it("secretIndex counts from 0 in the list given, empty entries included", () => {
    expect(verifyWebhook(body, sign(SECRET), SECRET, { now })).toMatchObject({ ok: true, secretIndex: 0 });
    expect(verifyWebhook(body, sign(SECRET), [OTHER, SECRET], { now })).toMatchObject({ ok: true, secretIndex: 1 });
    expect(verifyWebhook(body, sign(SECRET), [SECRET, OTHER], { now, scheme: "legacy" })).toMatchObject({ ok: true, secretIndex: 0 });
    expect(verifyWebhook(body, sign(SECRET), ["", OTHER, SECRET], { now })).toMatchObject({ ok: true, secretIndex: 2 });
  });

  it("neither JSON.stringify nor util.inspect of a result shows the secret; the deprecated secretUsed still reads it", () => {
    const r = verifyWebhook(body, sign(SECRET), [OTHER, SECRET], { now });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const key = SECRET.slice("whsec_".length);
    expect(JSON.stringify(r)).not.toContain(key);
    expect(inspect(r, { depth: 10 })).not.toContain(key);
    expect(Object.keys(r).sort()).toEqual(["envelope", "ok", "scheme", "secretIndex"]);
    expect(r.secretUsed).toBe(SECRET);
    expect(r.secretIndex).toBe(1);
  });
});

describe("secrets", () => {
  const MALFORMED: [string, string][] = [
    ["a character outside base64", "whsec_ab!!cd"],
    ["a character outside base64 inside a real secret", SECRET.slice(0, 20) + "!" + SECRET.slice(20)],
    ["a 1-byte key", "whsec_AB"],
    ["no padding", SECRET.replace(/=+$/, "")],
    ["base64url", "whsec_" + Buffer.from(Array.from({ length: 32 }, () => 0xfb)).toString("base64url")],
    ["a trailing newline", SECRET + "\n"],
    ["a space", SECRET.slice(0, 20) + " " + SECRET.slice(20)],
    ["data after the padding", SECRET + "AAAA"],
    ["non-zero padding bits", "whsec_" + Buffer.alloc(32).toString("base64").replace(/A=$/, "B=")],
    ["a 15-byte key", "whsec_" + Buffer.alloc(15, 7).toString("base64")],
    ["nothing after the prefix", "whsec_"],
  ];

  it.each(MALFORMED)("%s is refused with a TypeError that does not print the secret, under every scheme", (_, bad) => {
    for (const scheme of ["standard", "legacy", "any"] as const) {
      for (const secrets of [bad, [bad], [SECRET, bad], [bad, SECRET]]) {
        let thrown: unknown;
        try {
          verifyWebhook(body, sign(SECRET), secrets, { now, scheme });
        } catch (e) {
          thrown = e;
        }
        expect(thrown, `${scheme} ${JSON.stringify(secrets)}`).toBeInstanceOf(TypeError);
        expect((thrown as Error).message).not.toContain(bad.slice("whsec_".length) || "\u0000");
      }
    }
  });

  it("every secret the gateway generates passes, and so does a 16-byte key", () => {
    for (let i = 0; i < 500; i++) {
      const s = generateWebhookSecret();
      for (const scheme of ["standard", "legacy"] as const) expect(verifyWebhook(body, sign(s), s, { now, scheme }).ok).toBe(true);
    }
    const short = "whsec_" + Buffer.alloc(16, 9).toString("base64");
    expect(verifyWebhook(body, sign(short), short, { now }).ok).toBe(true);
  });

  it("the Standard Webhooks scheme takes a secret without whsec_, as its reference library does; the legacy key is the whole string, so it needs the prefix", () => {
    const bare = SECRET.slice("whsec_".length);
    expect(verifyWebhook(body, sign(SECRET), bare, { now }).ok).toBe(true);
    expect(() => verifyWebhook(body, sign(SECRET), bare, { now, scheme: "legacy" })).toThrow(/whsec_/);
    expect(() => verifyWebhook(body, sign(SECRET), bare, { now, scheme: "any" })).toThrow(/whsec_/);
  });

  it("empty and unset entries are skipped (a trailing comma, an old secret's variable unset after a rotation); at least one secret is needed", () => {
    expect(verifyAny(body, sign(SECRET), [SECRET, ""], { now })).toMatchObject({ ok: true, secretIndex: 0 });
    expect(verifyAny(body, sign(SECRET), [undefined, SECRET, null], { now })).toMatchObject({ ok: true, secretIndex: 1 });
    for (const none of [[], "", [""], [undefined], undefined, null]) {
      expect(() => verifyAny(body, sign(SECRET), none, { now })).toThrow(/at least one secret/);
    }
    for (const wrong of [42, [SECRET, 42], [SECRET, { secret: SECRET }], { secret: SECRET }]) {
      expect(() => verifyAny(body, sign(SECRET), wrong, { now })).toThrow(TypeError);
    }
  });
});

describe("the body", () => {
  it.each([
    ["a parsed object", JSON.parse(body)],
    ["a number", 42],
    ["undefined", undefined],
    ["null", null],
    ["an array of chunks", [Buffer.from(body)]],
    ["a Uint16Array", new Uint16Array(4)],
  ])("%s is refused with a TypeError that says to pass the raw body", (_, b) => {
    expect(() => verifyAny(b, sign(), SECRET, { now })).toThrow(TypeError);
    expect(() => verifyAny(b, sign(), SECRET, { now })).toThrow("pass the raw request body: string, Buffer, Uint8Array or ArrayBuffer");
  });

  it("an ArrayBuffer (what request.arrayBuffer() gives) verifies, as does a Uint8Array view into a larger buffer", async () => {
    const request = new Request("http://receiver.test/hooks", { method: "POST", body, headers: sign() });
    const r = verifyWebhook(await request.arrayBuffer(), request.headers, SECRET, { now });
    expect(r).toMatchObject({ ok: true, envelope: { id: "evt_1" } });
    const padded = Buffer.from(`xx${body}yy`);
    expect(verifyWebhook(new Uint8Array(padded.buffer, padded.byteOffset + 2, padded.length - 4), sign(), SECRET, { now }).ok).toBe(true);
    expect(verifyWebhook(new ArrayBuffer(0), sign(), SECRET, { now })).toMatchObject({ ok: false, error: { code: "invalid_signature" } });
  });

  it("headers that are not an object are refused with a TypeError", () => {
    for (const headers of [undefined, null, "webhook-id: evt_1"]) expect(() => verifyAny(body, headers, SECRET, { now })).toThrow(TypeError);
  });
});

describe("docs: the hand-written verifiers run as printed", () => {
  const docs = (name: string) => readFileSync(path.join(repo, "docs", name), "utf8");
  const vector = JSON.parse(readFileSync(path.join(repo, "packages/receiver/vectors/webhook-signatures.json"), "utf8")).cases[0] as {
    body: string;
    webhook_id: string;
    webhook_timestamp: string;
    current_secret: string;
    headers_outside_transition: Record<string, string>;
  };
  const vectorHeaders = { "webhook-id": vector.webhook_id, "webhook-timestamp": vector.webhook_timestamp, ...Object.fromEntries(Object.entries(vector.headers_outside_transition).map(([k, v]) => [k.toLowerCase(), v])) };

  it("docs/webhooks.md's node:crypto snippet answers false for a signature of 64 two-byte characters instead of throwing", async () => {
    const block = /The same checks in Node[\s\S]*?```js\n([\s\S]*?)^```$/m.exec(docs("webhooks.md"))?.[1];
    expect(block).toBeDefined();
    const file = path.join(work, "webhooks-snippet.mjs");
    writeFileSync(file, block!);
    const { legacyOk, standardOk } = (await import(pathToFileURL(file).href)) as Record<string, (body: Buffer, headers: Record<string, string>, secret: string) => boolean>;
    const raw = Buffer.from(vector.body, "utf8");
    expect(legacyOk(raw, vectorHeaders, vector.current_secret)).toBe(true);
    expect(standardOk(raw, vectorHeaders, vector.current_secret)).toBe(true);
    // The expected legacy value is 71 characters, the standard one 44: the same number of "é"
    // has equal string length but twice the bytes.
    const legacyForged = { ...vectorHeaders, "x-service-signature": "é".repeat(71) };
    const standardForged = { ...vectorHeaders, "webhook-signature": "v1," + "é".repeat(44) };
    expect(legacyOk(raw, legacyForged, vector.current_secret)).toBe(false);
    expect(standardOk(raw, standardForged, vector.current_secret)).toBe(false);
    expect(legacyOk(raw, { ...vectorHeaders, "x-service-signature": "é".repeat(64) }, vector.current_secret)).toBe(false);
  });

  it("docs/receiver.md's Python snippet answers False for a timestamp of non-ASCII digits, or a forged non-ASCII signature, instead of raising", async () => {
    const block = [...docs("receiver.md").matchAll(/^```python\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(block).toHaveLength(1);
    const driver = `
import json, sys
body = ${JSON.stringify(vector.body)}.encode("utf-8")
secret = ${JSON.stringify(vector.current_secret)}
headers = json.loads(${JSON.stringify(JSON.stringify(vectorHeaders))})
now = int(headers["webhook-timestamp"])
out = [verify_standard(body, headers, [secret], now=now)]
for ts in ["\\u00b2", "1\\u00b2", "\\u0661\\u0667\\u0669\\u0665", "\\uff11", "-1", ""]:
    out.append(verify_standard(body, {**headers, "webhook-timestamp": ts}, [secret], now=now))
# a forged signature of non-ASCII text (Flask and Django decode headers as latin-1)
out.append(verify_standard(body, {**headers, "webhook-signature": "v1," + "\\u00e9" * 44}, [secret], now=now))
out.append(verify_legacy(body, {**headers, "x-service-signature": "\\u00e9" * 71}, [secret]))
print(json.dumps(out))
`;
    const file = path.join(work, "receiver-snippet.py");
    writeFileSync(file, `${block[0]}\n${driver}`);
    const { stdout } = await run("python3", [file]);
    expect(JSON.parse(stdout)).toEqual([true, false, false, false, false, false, false, false, false]);
  });

  it("docs/receiver.md's express.json({ verify }) recipe answers 400 when the request had no JSON body to keep, and verifies one that had", async () => {
    const block = /If a global `express.json\(\)` has to run first[\s\S]*?```js\n([\s\S]*?)^```$/m.exec(docs("receiver.md"))?.[1];
    expect(block).toBeDefined();
    // A stand-in for Express that records the routes and middleware the recipe declares.
    const routes: Record<string, ((req: object, res: object) => void)[]> = {};
    const middleware: { verify?: (req: Record<string, unknown>, res: object, buf: Buffer) => void }[] = [];
    const express = Object.assign(
      () => ({
        use: (m: (typeof middleware)[number]) => void middleware.push(m),
        post: (p: string, ...handlers: ((req: object, res: object) => void)[]) => void (routes[p] = handlers),
        listen: () => {},
      }),
      { json: (options: { verify: (req: Record<string, unknown>, res: object, buf: Buffer) => void }) => options },
    );
    const script = block!
      .replace(/^import express from "express";$/m, "")
      .replace(/^import \{ verifyWebhook \} from "@linkgate\/receiver";$/m, "");
    expect(script).not.toMatch(/^import /m);
    runInNewContext(script, { express, verifyWebhook, Buffer, process: { env: { WEBHOOK_SECRETS: `${OTHER},${SECRET}` } }, handle: () => {} });

    const [handler] = Object.values(routes).flat();
    expect(handler).toBeTypeOf("function");
    const answer = (req: Record<string, unknown>) => {
      const res = { statusCode: 0, status: (s: number) => ((res.statusCode = s), res), json: () => res, sendStatus: (s: number) => ((res.statusCode = s), res), end: () => res };
      handler(req, res);
      return res.statusCode;
    };
    // A request whose content type express.json() does not read: verify never ran.
    expect(answer({ headers: { ...sign(), "content-type": "text/plain" }, body: {} })).toBe(400);
    const req: Record<string, unknown> = { headers: sign(SECRET, Math.floor(Date.now() / 1000)) };
    for (const m of middleware) m.verify?.(req, {}, Buffer.from(body));
    expect(answer(req)).toBe(200);
  });
});

describe("WebhookVerificationError", () => {
  it("is what a failed result carries", () => {
    const r = verifyWebhook(body, sign(OTHER), SECRET, { now });
    expect(!r.ok && r.error instanceof WebhookVerificationError && r.error.name === "WebhookVerificationError").toBe(true);
  });
});
