// The device cookie on https is `__Host-lg_device` (docs/security.md, "Known places"): a cookie
// with that prefix can only be set by this host itself, over https, for the whole site, so
// someone who controls a sibling subdomain cannot plant a device id of their choosing in a
// user's browser (a `Domain=` cookie named `lg_device` could be, and a planted id signed into by
// its victim would then be a known place of the victim's identifier in the planter's browser
// too). Browsers that hold the unprefixed cookie of an earlier build keep their device: its id
// moves to the new name at their next sign-in.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const HOST_COOKIE = "__Host-lg_device";

async function signIn(h: Harness, from: string, email: string, cookie?: string) {
  const headers: Record<string, string> = cookie ? { cookie } : {};
  const started = await h.call("POST", "/auth/otp/start", { body: { email }, from, headers });
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const otp = await h.mailbox.otp(email);
  const res = await h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp }, from, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res;
}

/** Every Set-Cookie of a response, by name: its value and its attributes. */
function setCookies(res: { headers: Headers }): Map<string, { value: string; attributes: string }> {
  const out = new Map<string, { value: string; attributes: string }>();
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attributes] = line.split(";");
    const eq = pair.indexOf("=");
    out.set(pair.slice(0, eq).trim(), { value: pair.slice(eq + 1).trim(), attributes: attributes.join(";") });
  }
  return out;
}

describe.each(backends)("the device cookie of an https deployment on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: "https://id.example.com" } });
  });
  afterAll(() => h?.close());

  it("is __Host-lg_device: Secure, the whole site, no Domain", async () => {
    const set = setCookies(await signIn(h, "203.0.113.1", "host-prefix@example.com"));
    const device = set.get(HOST_COOKIE);
    expect(device?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(device!.attributes).toMatch(/;\s*Secure/i);
    expect(device!.attributes).toMatch(/Path=\/(;|$)/);
    expect(device!.attributes).toMatch(/HttpOnly/i);
    expect(device!.attributes).not.toMatch(/Domain=/i);
    expect(set.has("lg_device")).toBe(false);
  });

  it("a planted lg_device beside the browser's own device is ignored", async () => {
    const email = "planted@example.com";
    const own = setCookies(await signIn(h, "203.0.113.2", email)).get(HOST_COOKIE)!.value;
    const planted = "p".repeat(43);
    const again = setCookies(await signIn(h, "203.0.113.2", email, `lg_device=${planted}; ${HOST_COOKIE}=${own}`));
    expect(again.get(HOST_COOKIE)?.value).toBe(own);
  });

  it("a browser holding an earlier build's lg_device keeps that device under the new name, and the old cookie is cleared", async () => {
    const earlier = "e".repeat(43);
    const set = setCookies(await signIn(h, "203.0.113.3", "earlier-build@example.com", `lg_device=${earlier}`));
    expect(set.get(HOST_COOKIE)?.value).toBe(earlier);
    expect(set.get("lg_device")?.value).toBe("");
    expect(set.get("lg_device")!.attributes).toMatch(/Max-Age=0/i);
  });
});
